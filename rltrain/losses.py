"""Loss building blocks both trainers use: a mean over the valid rows (of one process or of every rank), and
the stop on a non-finite loss.

Next-step autoreset inserts a dummy transition after every episode end (its action is ignored, its
reward is 0); a ``valid`` mask of 0/1 floats keeps it out of every loss term and statistic.
"""

from __future__ import annotations

from typing import Tuple

import torch

__all__ = ["NonFiniteLossError", "masked_mean", "minibatch_moments", "explained_variance"]


class NonFiniteLossError(RuntimeError):
    """The loss became NaN/inf; training stops, the last checkpoint is kept."""


def masked_mean(x: torch.Tensor, mask: torch.Tensor, denom: torch.Tensor) -> torch.Tensor:
    """``sum(x * mask) / denom``: the mean of ``x`` over the rows where ``mask`` is 1, with
    ``denom = mask.sum().clamp_min(1)`` computed once by the caller for all the terms of a minibatch."""
    return (x * mask).sum() / denom


def minibatch_moments(x: torch.Tensor, mask: torch.Tensor, ctx=None) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(mean, std, denominator)`` of ``x`` over a minibatch's valid rows: the advantage normalisation
    ``(x - mean) / (std + eps)`` and the ``denom`` of :func:`masked_mean` for its loss terms.

    One process: this minibatch, ``denom = mask.sum().clamp_min(1)``, the population std in two passes.
    With other ranks in ``ctx`` (:class:`rltrain.distributed.DistContext`): the minibatch of every rank
    (its rows on all ranks), in one all-reduce; ``denom`` is then the global count over the world size, so
    that DDP's mean of the ranks' gradients is the gradient of the global masked mean
    (:class:`rltrain.distributed.MaskedMoments`)."""
    if ctx is not None and ctx.has_peers:
        return ctx.masked_moments(x, mask).loss_terms(x.dtype).unbind()
    denom = mask.sum().clamp_min(1.0)
    mean = masked_mean(x, mask, denom)
    return mean, masked_mean((x - mean).square(), mask, denom).sqrt(), denom


def explained_variance(y: torch.Tensor, pred: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``1 - Var(y - pred) / Var(y)`` over the rows where ``mask`` (0/1 floats) is 1, with unbiased
    variances (as ``torch.var``); NaN with fewer than two such rows.  Masked sums, no boolean indexing:
    the shapes stay fixed, so a ``torch.compile``'d loss computes it inside its graph."""
    n = mask.sum()

    def variance(x: torch.Tensor) -> torch.Tensor:
        mean = (x * mask).sum() / n
        return ((x - mean).square() * mask).sum() / (n - 1)

    return torch.where(n > 1, 1 - variance(y - pred) / variance(y), torch.full_like(n, float("nan")))
