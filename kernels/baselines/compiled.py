"""Baseline: a vectorized log-step (Hillis-Steele) scan in PyTorch, under ``torch.compile``.

``ceil(log2 T)`` levels; level ``k`` combines every step with the one ``d = 2^k`` before it in scan
order, ``(A_t, B_t) <- (A_t + B_t A_{t-d}, B_t B_{t-d})`` (``t+d`` for a reverse scan), each level
materialized as a whole ``[T, N]`` tensor: ``O(T log T)`` work and memory traffic, no loop over T.
The initial carry is folded into the first step in scan order. The whole call (pairs from
:mod:`kernels.baselines.pairs`, the scan, the post-step and the output layout/dtype) is one
``torch.compile`` graph with static shapes (``dynamic=False``): one compile per shape, layout,
dtype and scalar set, cached by dynamo (its recompile limit is raised so a benchmark grid does not
fall back to eager silently). If compiling fails (no C++ compiler on a CPU box, say), the same
function runs eagerly, after a one-time warning. ``COMPILE_KWARGS`` are passed to ``torch.compile``.
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import torch

from kernels.baselines import pairs as P

__all__ = list(P.BUILDERS)

COMPILE_KWARGS = dict(dynamic=False, fullgraph=True)
_RECOMPILE_LIMIT = 4096
_state = {"fn": None, "eager": False}


def logstep_scan(p: P.Pairs) -> torch.Tensor:
    """Hillis-Steele scan of the pairs; returns ``y`` ``[T, N]`` in the compute dtype."""
    A, B = p.alpha, p.beta
    T = A.shape[0]
    if p.initial is not None:  # y_prev of the first step in scan order is the initial carry
        if p.reverse:
            A = torch.cat([A[:-1], (A[-1] + B[-1] * p.initial)[None]])
        else:
            A = torch.cat([(A[0] + B[0] * p.initial)[None], A[1:]])
    d = 1
    while d < T:
        if p.reverse:
            A_next = torch.cat([torch.addcmul(A[:-d], B[:-d], A[d:]), A[-d:]])
            if 2 * d < T:
                B = torch.cat([B[:-d] * B[d:], B[-d:]])
        else:
            A_next = torch.cat([A[:d], torch.addcmul(A[d:], B[d:], A[:-d])])
            if 2 * d < T:
                B = torch.cat([B[:d], B[d:] * B[:-d]])
        A = A_next
        d *= 2
    return A


def _core(op, tm, scalars, cdt, out_dtype, time_dim, one_env):
    p = P.build(op, tm, cdt, scalars)
    y = logstep_scan(p)
    return tuple(P.to_caller(o, out_dtype, time_dim, one_env) for o in p.outputs(y))


def _raise_recompile_limits() -> None:
    cfg = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, max(getattr(cfg, name), _RECOMPILE_LIMIT))


def compiled_core():
    """The cached ``torch.compile`` of the whole call (created on first use)."""
    if _state["fn"] is None:
        _raise_recompile_limits()
        _state["fn"] = torch.compile(_core, **COMPILE_KWARGS)
    return _state["fn"]


def _run(op, b, scalars, config=None):
    if b.T == 0:
        return P.empty_outputs(op, b, scalars)
    args = (op, P.views(b), scalars, b.compute_dtype, b.out_dtype, b.time_dim, b.one_env)
    if not _state["eager"]:
        try:
            outs = compiled_core()(*args)
        except Exception as exc:  # noqa: BLE001 - any compiler failure falls back to eager
            try:
                outs = _core(*args)
            except Exception:
                raise exc from None  # the function itself is wrong: report the compile-time error
            _state["eager"] = True
            warnings.warn(
                f"torch.compile failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                "the 'compile' backend runs its log-step scan eagerly from now on",
                RuntimeWarning,
                stacklevel=3,
            )
    else:
        outs = _core(*args)
    return outs if len(outs) > 1 else outs[0]


def is_compiled() -> bool:
    """False once a compile failure switched this backend to eager."""
    return not _state["eager"]


globals().update(P.make_estimators(_run))  # gae, vtrace, ... with the public signatures


def _run_eager(op, b, scalars, config=None):
    if b.T == 0:
        return P.empty_outputs(op, b, scalars)
    outs = _core(op, P.views(b), scalars, b.compute_dtype, b.out_dtype, b.time_dim, b.one_env)
    return outs if len(outs) > 1 else outs[0]


#: The same log-step scan, never compiled (the benchmark's float64 check at very long T).
EAGER = SimpleNamespace(**P.make_estimators(_run_eager))
