"""CleanRL-style baseline: an eager PyTorch loop over T with vector ops over N.

The pairs come from :mod:`kernels.baselines.pairs` (vectorized, a few passes); the recurrence is
then walked one step at a time, ``y[t] = alpha[t] + beta[t] * y_prev``, one ``addcmul`` launch per
step written straight into the output row. Runs on any device (CPU too) and is the default
credit-assignment path of the trainers where Triton is interpreted.
"""

from __future__ import annotations

import torch

from kernels.baselines import pairs as P

__all__ = list(P.BUILDERS)


def solve(p: P.Pairs) -> torch.Tensor:
    """``y_t = alpha_t + beta_t y_prev`` walked step by step; ``[T, N]`` contiguous, compute dtype."""
    alpha, beta = p.alpha, p.beta
    T = alpha.shape[0]
    y = torch.empty(alpha.shape, dtype=alpha.dtype, device=alpha.device)
    carry = torch.zeros_like(alpha[0]) if p.initial is None else p.initial.to(alpha.dtype)
    for t in range(T - 1, -1, -1) if p.reverse else range(T):
        torch.addcmul(alpha[t], beta[t], carry, out=y[t])
        carry = y[t]
    return y


def _run(op, b, scalars, config=None):
    if b.T == 0:
        return P.empty_outputs(op, b, scalars)
    p = P.build(op, P.views(b), b.compute_dtype, scalars)
    outs = tuple(b.from_time_major(o) for o in p.outputs(solve(p)))
    return outs if len(outs) > 1 else outs[0]


globals().update(P.make_estimators(_run))  # gae, vtrace, ... with the public signatures
