"""Policy and value heads: features ``[B, D]`` -> distribution / value.

* :class:`CategoricalHead` -- discrete actions (logits).
* :class:`GaussianHead`    -- continuous actions: diagonal Gaussian with a
  state-independent learned log-std (CleanRL's ``ppo_continuous_action``).
* :class:`ValueHead`       -- scalar state value ``[B]``.
* :class:`QHead`           -- action values ``Q(s, .)`` ``[B, A]`` (Retrace / ACER critics).

Policy heads return a ``torch.distributions`` object whose ``log_prob`` and
``entropy`` are already summed over action dimensions (shape ``[B]``).
"""

from __future__ import annotations

import torch
import torch.nn as nn
from torch.distributions import Categorical, Distribution, Independent, Normal

from agents.layers import layer_init

__all__ = ["CategoricalHead", "GaussianHead", "ValueHead", "QHead"]


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
