"""KL-adaptive learning rate: the step size that holds PPO's policy change per minibatch near a target.

After each minibatch step, from that minibatch's approximate KL divergence between the behaviour
policy and the policy being trained (measured in the step's forward pass, before its optimizer
step; ``approx_kl`` of PPO's loss, the ``k3`` estimator ``E[(r - 1) - log r]``):

    lr <- max(lr / KL_LR_FACTOR, KL_LR_MIN)   if KL > 2 * target
    lr <- min(lr * KL_LR_FACTOR, KL_LR_MAX)   if KL < target / 2
    lr unchanged                               otherwise

so the next minibatch steps with the new rate.  This is rl_games' adaptive schedule
(``lr_schedule: adaptive`` with ``kl_threshold``, its ``AdaptiveScheduler``; rl_games applies it
after every minibatch, and its EnvPool Atari configs use it with a threshold of 0.01 instead of a
fixed or annealed rate).  With a rate that follows the KL, large batches (few gradient steps per
env step) can take large steps while the policy moves little and are held back when it moves fast.

The rate is a tensor: each parameter group's ``lr`` (Adam takes one; a capturable Adam's is on the
device, :func:`rltrain.cuda_graph.capturable_adam`), updated in place with ``torch.where`` -- no
host synchronisation, so the rule runs inside a CUDA graph of the whole minibatch step
(``--graph-update``) and reads the KL that the replay computed.  :func:`tensor_learning_rate` gives a
float rate (a fresh optimizer, a checkpoint written without the rule) its tensor.
"""

from __future__ import annotations

import torch

__all__ = ["KL_LR_FACTOR", "KL_LR_MIN", "KL_LR_MAX", "kl_adapted_lr", "adapt_learning_rate",
           "tensor_learning_rate"]

KL_LR_FACTOR = 1.5
"""The factor the rate is divided or multiplied by (rl_games' ``AdaptiveScheduler``)."""
KL_LR_MIN = 1e-6
"""The lowest rate the rule goes to (rl_games' ``min_lr``)."""
KL_LR_MAX = 1e-2
"""The highest rate the rule goes to (rl_games' ``max_lr``)."""


def kl_adapted_lr(lr: torch.Tensor, kl: torch.Tensor, target: float) -> torch.Tensor:
    """The rate after a minibatch with approximate KL ``kl`` (module docstring), in ``lr``'s dtype
    and device; ``lr`` and ``kl`` are scalar tensors."""
    kl = kl.to(lr.device, lr.dtype)
    lower = (lr / KL_LR_FACTOR).clamp_min(KL_LR_MIN)
    higher = (lr * KL_LR_FACTOR).clamp_max(KL_LR_MAX)
    return torch.where(kl > 2.0 * target, lower, torch.where(kl < 0.5 * target, higher, lr))


@torch.no_grad()
def adapt_learning_rate(optimizer: torch.optim.Optimizer, approx_kl: torch.Tensor, target: float) -> None:
    """Set every parameter group's rate to :func:`kl_adapted_lr`, in place (the group's ``lr`` must be a
    tensor: :func:`tensor_learning_rate`).  ``approx_kl``: the minibatch's, every rank's under torchrun."""
    for group in optimizer.param_groups:
        lr = group["lr"]
        if not torch.is_tensor(lr):
            raise TypeError("the KL-adaptive learning rate updates a tensor learning rate in place; "
                            "call tensor_learning_rate(optimizer, device) first")
        lr.copy_(kl_adapted_lr(lr, approx_kl, target))


def tensor_learning_rate(optimizer: torch.optim.Optimizer, device: torch.device | str) -> None:
    """Make every parameter group's ``lr`` a float32 tensor on ``device`` with the same value, where it
    is a float or on another device (a checkpoint loads the ``lr`` it was saved with, on the CPU); a
    tensor already there is kept, so whatever holds it (a recorded CUDA graph) still sees it."""
    device = torch.device(device)
    for group in optimizer.param_groups:
        lr = group["lr"]
        if not (torch.is_tensor(lr) and _on(lr, device)):
            group["lr"] = torch.tensor(float(lr), dtype=torch.float32, device=device)


def _on(t: torch.Tensor, device: torch.device) -> bool:
    """Whether ``t`` is on ``device`` (a device without an index: any of its type)."""
    return t.device.type == device.type and (device.index is None or t.device.index == device.index)
