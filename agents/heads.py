"""Policy and value heads: features ``[B, D]`` -> distribution / value.

* :class:`CategoricalHead` -- discrete actions (logits).
* :class:`GaussianHead`    -- continuous actions: diagonal Gaussian with a
  state-independent learned log-std (CleanRL's ``ppo_continuous_action``).
* :class:`ValueHead`       -- scalar state value ``[B]``.
* :class:`QHead`           -- action values ``Q(s, .)`` ``[B, A]`` (Retrace / ACER critics).

Policy heads return a ``torch.distributions`` object whose ``log_prob`` and
``entropy`` are already summed over action dimensions (shape ``[B]``).
:func:`sample_action` draws from such a distribution with device-side
random numbers only (no host synchronisation, no data-dependent shapes), so
the draw can be recorded in a CUDA graph and replayed.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.distributions import Categorical, Distribution, Independent, Normal

from agents.layers import layer_init

__all__ = ["CategoricalHead", "GaussianHead", "ValueHead", "QHead", "sample_action"]


def sample_action(dist: Distribution) -> torch.Tensor:
    """One action per row from a policy head's distribution, graph-safe.

    Categorical: Gumbel-max, ``argmax(logits - log(-log U))`` with ``U ~ Uniform[0, 1)`` from
    ``torch.rand_like``: the argmax is distributed as ``softmax(logits)``.  Diagonal Gaussian:
    ``mean + std * randn``.  Both draw one block of random numbers from the device's generator, so a
    graph replay and an eager call from the same generator state give the same actions."""
    if isinstance(dist, Categorical):
        logits = dist.logits
        gumbel = -torch.log(-torch.log(torch.rand_like(logits)))
        return (logits + gumbel).argmax(-1)
    if isinstance(dist, Independent) and isinstance(dist.base_dist, Normal):
        normal = dist.base_dist
        return normal.loc + normal.scale * torch.randn_like(normal.loc)
    raise TypeError(f"no graph-safe sampler for {type(dist).__name__}")


class CategoricalHead(nn.Module):
    def __init__(self, in_dim: int, num_actions: int, std: float = 0.01):
        super().__init__()
        self.logits = layer_init(nn.Linear(in_dim, num_actions), std=std)

    def forward(self, h: torch.Tensor) -> Distribution:
        return Categorical(logits=self.logits(h), validate_args=False)


class GaussianHead(nn.Module):
    def __init__(self, in_dim: int, action_dim: int, std: float = 0.01, init_log_std: float = 0.0):
        super().__init__()
        self.mean = layer_init(nn.Linear(in_dim, action_dim), std=std)
        self.log_std = nn.Parameter(torch.full((action_dim,), init_log_std))

    def forward(self, h: torch.Tensor) -> Distribution:
        mean = self.mean(h)
        return Independent(Normal(mean, self.log_std.exp().expand_as(mean), validate_args=False), 1,
                           validate_args=False)


class ValueHead(nn.Module):
    def __init__(self, in_dim: int, std: float = 1.0):
        super().__init__()
        self.v = layer_init(nn.Linear(in_dim, 1), std=std)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.v(h).squeeze(-1)


class QHead(nn.Module):
    """Action values ``Q(s, a)`` for every discrete action: ``[B, num_actions]``."""

    def __init__(self, in_dim: int, num_actions: int, std: float = 1.0):
        super().__init__()
        self.q = layer_init(nn.Linear(in_dim, num_actions), std=std)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.q(h)
