"""Value normalisation: the critic learns its targets in units of their running mean and std.

PPO's value targets are the GAE returns ``G``; their scale depends on the game and on how good the
policy is, and it moves while the agent learns.  With a :class:`ValueNormalizer` in the agent
(``make_agent(norm_value=True)``, PPO's ``--norm-value``) the critic's head ``h(s)`` learns
``(G - mu) / sigma``, where ``mu`` and ``sigma^2`` are the running mean and variance of every
return seen so far, and the agent's value is ``V(s) = sigma h(s) + mu`` wherever a value is read
(rollout, bootstrap, GAE, the critic's recomputed values).

The targets' normalisation is PopArt's (van Hasselt et al. 2016, "Learning values across many
orders of magnitude"), without PopArt's rescaling of the head's weights when the statistics move
(the head's output in old units is not preserved), as rl_games' ``normalize_value`` does (its
EnvPool Atari configs turn it on).  rl_games folds the rollout's values into the statistics as well
as the returns and clamps normalised values to [-5, 5]; here the statistics are those of the
returns alone, unclamped.

The statistics are buffers of the module (float64), so they travel with the agent's ``state_dict``
(checkpoints, ``--resume``), with a copy of its parameters and buffers, and into a CUDA graph of a
policy step: they are updated in place (:meth:`ValueNormalizer.update`), once per iteration before
the update, so a recorded graph reads the current ones at each replay.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn

from envs.normalize import merge_moments

__all__ = ["ValueNormalizer"]


class ValueNormalizer(nn.Module):
    """Running mean ``mu``, variance ``var`` and sample count of the value targets;
    ``sigma = sqrt(var + eps)``.  Starts at ``mu = 0``, ``var = 1`` with a count of ``epsilon``
    (as :class:`envs.RunningMeanStd`): the first batch sets the statistics almost alone."""

    def __init__(self, epsilon: float = 1e-4, eps: float = 1e-8):
        super().__init__()
        self.register_buffer("mean", torch.zeros((), dtype=torch.float64))
        self.register_buffer("var", torch.ones((), dtype=torch.float64))
        self.register_buffer("count", torch.full((), epsilon, dtype=torch.float64))
        self.eps = eps

    def std(self) -> torch.Tensor:
        """``sigma = sqrt(var + eps)`` (float64, on the buffers' device)."""
        return torch.sqrt(self.var + self.eps)

    def normalize(self, value: torch.Tensor) -> torch.Tensor:
        """``(value - mu) / sigma``, in ``value``'s dtype."""
        return (value - self.mean.to(value.dtype)) / self.std().to(value.dtype)

    def denormalize(self, head: torch.Tensor) -> torch.Tensor:
        """``sigma * head + mu``, in ``head``'s dtype: the value of a normalised critic output."""
        return head * self.std().to(head.dtype) + self.mean.to(head.dtype)

    @torch.no_grad()
    def update(self, targets: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Fold the targets where ``mask`` (bool or 0/1; None: all) is set into the statistics, in
        place: their masked mean and population variance merged by Chan's rule
        (:func:`envs.normalize.merge_moments`).  No host synchronisation."""
        x = targets.detach().reshape(-1).to(torch.float64)
        m = torch.ones_like(x) if mask is None else mask.detach().reshape(-1).to(torch.float64)
        count = m.sum()
        mean = (x * m).sum() / count.clamp_min(1.0)
        var = ((x - mean).square() * m).sum() / count.clamp_min(1.0)
        self.merge(mean, var, count)

    @torch.no_grad()
    def merge(self, mean: torch.Tensor, var: torch.Tensor, count: torch.Tensor) -> None:
        """Fold a batch given by its mean, population variance and count (e.g. of every rank's rows,
        :meth:`rltrain.distributed.DistContext.masked_moments`) into the statistics, in place."""
        new_mean, new_var, new_count = merge_moments(self.mean, self.var, self.count, mean.to(torch.float64),
                                                     var.to(torch.float64), count.to(torch.float64))
        self.mean.copy_(new_mean)
        self.var.copy_(new_var)
        self.count.copy_(new_count)

    def extra_repr(self) -> str:
        return f"eps={self.eps}"
