"""Policy and value heads: features ``[B, D]`` -> distribution / value.

* :class:`CategoricalHead` -- discrete actions (logits).
* :class:`GaussianHead`    -- continuous actions: diagonal Gaussian with a
  state-independent learned log-std (CleanRL's ``ppo_continuous_action``).
* :class:`ValueHead`       -- scalar state value ``[B]``.
* :class:`QHead`           -- action values ``Q(s, .)`` ``[B, A]`` (Retrace / ACER critics).

Policy heads return a ``torch.distributions`` object whose ``log_prob`` and
``entropy`` are already summed over action dimensions (shape ``[B]``).
:func:`sample_action` draws from such a distribution as a function of explicit
noise (:func:`draw_noise`): no host synchronisation, no data-dependent
shapes, no random numbers inside, so the draw can be recorded in a CUDA graph
and replayed with fresh noise.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn
from torch.distributions import Categorical, Distribution, Independent, Normal

from agents.layers import layer_init

__all__ = ["CategoricalHead", "GaussianHead", "ValueHead", "QHead", "sample_action", "draw_noise"]


def sample_action(dist: Distribution, noise: Optional[torch.Tensor] = None) -> torch.Tensor:
    """One action per row from a policy head's distribution, as a function of explicit noise.

    Categorical: Gumbel-max, ``argmax(logits - log(-log U))`` with ``U ~ Uniform[0, 1)`` ``[B, A]``:
    the argmax is distributed as ``softmax(logits)``.  Diagonal Gaussian: ``mean + std * E`` with
    ``E ~ Normal(0, 1)`` ``[B, A]``.  ``noise`` is ``U`` or ``E`` (:func:`draw_noise`); ``None`` draws
    it here from the default generator, exactly as :func:`draw_noise` would.  Given the noise the draw
    is deterministic and synchronisation-free, so it can be recorded in a CUDA graph."""
    if isinstance(dist, Categorical):
        logits = dist.logits
        u = torch.rand_like(logits) if noise is None else noise
        return (logits - torch.log(-torch.log(u))).argmax(-1)
    if isinstance(dist, Independent) and isinstance(dist.base_dist, Normal):
        normal = dist.base_dist
        eps = torch.randn_like(normal.loc) if noise is None else noise
        return normal.loc + normal.scale * eps
    raise TypeError(f"no sampler for {type(dist).__name__}")


def draw_noise(out: torch.Tensor, discrete: bool, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Fill ``out`` ``[B, A]`` with the noise :func:`sample_action` takes: uniform for a categorical
    policy, standard normal for a Gaussian one."""
    if discrete:
        return torch.rand(out.shape, generator=generator, out=out)
    return torch.randn(out.shape, generator=generator, out=out)


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
