"""Running mean/std normalisation of observations and rewards, on tensors.

Batched replacements for Gymnasium's per-env ``NormalizeObservation`` /
``NormalizeReward`` wrappers: one call handles all ``N`` envs on the training
device.  Statistics are float64 and updated in place (safe inside
``torch.inference_mode``); ``state_dict``/``load_state_dict`` go into
checkpoints.
"""

from __future__ import annotations

from typing import Dict, Tuple

import torch

__all__ = ["RunningMeanStd", "ObsNormalizer", "RewardNormalizer", "merge_moments"]


def merge_moments(mean: torch.Tensor, var: torch.Tensor, count: torch.Tensor, b_mean: torch.Tensor,
                  b_var: torch.Tensor, b_count) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Mean, (population) variance and count of two sets of samples from each set's: Chan et al.'s
    parallel rule, ``n = n_a + n_b``, ``mean = mean_a + d n_b / n``, ``var = (var_a n_a + var_b n_b +
    d^2 n_a n_b / n) / n`` with ``d = mean_b - mean_a``.  A batch of count 0 leaves the first set's."""
    delta = b_mean - mean
    tot = count + b_count
    new_mean = mean + delta * b_count / tot
    m2 = var * count + b_var * b_count + delta.square() * count * b_count / tot
    return new_mean, m2 / tot, tot


class RunningMeanStd:
    """Parallel (Chan et al., :func:`merge_moments`) running mean/variance over a leading batch dim."""

    def __init__(self, shape: Tuple[int, ...] = (), device: torch.device | str = "cpu", epsilon: float = 1e-4):
        self.mean = torch.zeros(shape, dtype=torch.float64, device=device)
        self.var = torch.ones(shape, dtype=torch.float64, device=device)
        self.count = torch.full((), epsilon, dtype=torch.float64, device=device)

    def update(self, x: torch.Tensor) -> None:
        """Fold a batch ``x`` of shape ``[B, *shape]`` into the statistics."""
        x = x.to(torch.float64)
        mean, var, count = merge_moments(self.mean, self.var, self.count, x.mean(0), x.var(0, unbiased=False),
                                         x.shape[0])
        self.mean.copy_(mean)
        self.var.copy_(var)
        self.count.copy_(count)

    def state_dict(self) -> Dict[str, torch.Tensor]:
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count.clone()}

    def load_state_dict(self, state: Dict[str, torch.Tensor]) -> None:
        for k in ("mean", "var", "count"):
            getattr(self, k).copy_(state[k])


class ObsNormalizer:
    """``clip((obs - mean) / sqrt(var + eps), -clip, clip)`` with running stats."""

    def __init__(self, shape: Tuple[int, ...], device: torch.device | str, clip: float = 10.0, eps: float = 1e-8):
        self.rms = RunningMeanStd(shape, device)
        self.clip, self.eps = clip, eps

    def __call__(self, obs: torch.Tensor, update: bool = True) -> torch.Tensor:
        """Normalise a batch ``[N, *shape]``; first fold it into the stats if ``update``."""
        if update:
            self.rms.update(obs)
        out = (obs.to(torch.float64) - self.rms.mean) / torch.sqrt(self.rms.var + self.eps)
        return out.clamp_(-self.clip, self.clip).to(torch.float32)

    def state_dict(self) -> Dict[str, torch.Tensor]:
        return self.rms.state_dict()

    def load_state_dict(self, state: Dict[str, torch.Tensor]) -> None:
        self.rms.load_state_dict(state)


class RewardNormalizer:
    """Scale rewards by the running std of the discounted return (as
    Gymnasium's ``NormalizeReward``), then clip.  ``done`` resets the return."""

    def __init__(self, num_envs: int, device: torch.device | str, gamma: float = 0.99,
                 clip: float = 10.0, eps: float = 1e-8):
        self.rms = RunningMeanStd((), device)
        self.ret = torch.zeros(num_envs, dtype=torch.float64, device=device)
        self.gamma, self.clip, self.eps = gamma, clip, eps

    def __call__(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        """``reward``, ``done``: ``[N]``; ``done`` = the episode ended at this step."""
        self.ret.mul_(self.gamma).add_(reward.to(torch.float64))
        self.rms.update(self.ret)
        self.ret.masked_fill_(done.bool(), 0.0)
        out = reward.to(torch.float64) / torch.sqrt(self.rms.var + self.eps)
        return out.clamp_(-self.clip, self.clip).to(torch.float32)

    def state_dict(self) -> Dict[str, torch.Tensor]:
        return {**self.rms.state_dict(), "ret": self.ret.clone()}

    def load_state_dict(self, state: Dict[str, torch.Tensor]) -> None:
        self.rms.load_state_dict(state)
        self.ret.copy_(state["ret"])
