"""Loss building blocks both trainers use: a mean over the valid rows, and the stop on a non-finite loss.

Next-step autoreset inserts a dummy transition after every episode end (its action is ignored, its
reward is 0); a ``valid`` mask of 0/1 floats keeps it out of every loss term and statistic.
"""

from __future__ import annotations

import torch

__all__ = ["NonFiniteLossError", "masked_mean"]


class NonFiniteLossError(RuntimeError):
    """The loss became NaN/inf; training stops, the last checkpoint is kept."""


def masked_mean(x: torch.Tensor, mask: torch.Tensor, denom: torch.Tensor) -> torch.Tensor:
    """``sum(x * mask) / denom``: the mean of ``x`` over the rows where ``mask`` is 1, with
    ``denom = mask.sum().clamp_min(1)`` computed once by the caller for all the terms of a minibatch."""
    return (x * mask).sum() / denom
