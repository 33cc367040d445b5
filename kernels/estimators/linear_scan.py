"""The generic first-order linear recurrence, fused.

Forward: ``y_t = alpha_t + beta_t y_{t-1}``, ``y_{-1} = initial`` (default 0).
Reverse: ``y_t = alpha_t + beta_t y_{t+1}``, ``y_T = initial``.

Every estimator in this package is this recurrence with ``(alpha, beta)`` built on chip from the raw
rollout; this entry point takes ``alpha`` and ``beta`` as given.
"""

from __future__ import annotations

from typing import Optional

import torch

from kernels import reference, scan
from kernels._args import Batch
from kernels._triton import runs_triton, tl, triton
from kernels.fast_path import replayable
from kernels.launch import LaunchConfig, launch

FAMILY = "forward"


@triton.jit
def _linear_scan_kernel(a_ptr, s_a_t, s_a_n, b_ptr, s_b_t, s_b_n, init_ptr, s_init, out_ptr, s_out_t, s_out_n, ws,
                        flags, T, N, REVERSE: tl.constexpr, HAS_INIT: tl.constexpr, ACC: tl.constexpr,
                        BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, LOOKBACK: tl.constexpr,
                        NUM_STAGES: tl.constexpr, LATEST_FIRST: tl.constexpr, RUN: tl.constexpr):
    block, first, end, num_chunks = scan.program_chunks(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = scan.envs(block, N, BLOCK_N)
    if HAS_INIT:
        carry = scan.load_env(init_ptr, n, s_init, n_ok, ACC)
    else:
        carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = scan.chunk_times(chunk, num_chunks, BLOCK_T, REVERSE, LATEST_FIRST, RUN)
        mask = scan.tile_mask(t, T, n_ok)
        alpha = scan.load_tile(a_ptr, t, n, s_a_t, s_a_n, mask, ACC)
        beta = tl.where(mask, scan.load_tile(b_ptr, t, n, s_b_t, s_b_n, mask, ACC), 1.0)
        y, carry = scan.scan_chunk(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, REVERSE,
                                   LATEST_FIRST, LOOKBACK, NUM_STAGES, RUN)
        scan.store_tile(out_ptr, y, t, n, s_out_t, s_out_n, mask)


def validate(alpha, beta, *, reverse=False, initial=None, time_dim=0) -> tuple[Batch, dict]:
    """Check :func:`linear_scan`'s arguments; the validated batch and options (shared with the baselines)."""
    if not isinstance(reverse, bool):
        raise TypeError(f"reverse must be a bool, got {type(reverse).__name__}")
    b = Batch(time_dim, floats={"alpha": alpha, "beta": beta}, per_env={"initial": initial}, optional=("initial",))
    return b, {"reverse": reverse}


@replayable
def linear_scan(alpha: torch.Tensor, beta: torch.Tensor, *, reverse: bool = False,
                initial: Optional[torch.Tensor] = None, time_dim: int = 0,
                config: Optional[LaunchConfig] = None) -> torch.Tensor:
    """Solve ``y_t = alpha_t + beta_t y_prev`` along time; see the module docstring."""
    b, _ = validate(alpha, beta, reverse=reverse, initial=initial, time_dim=time_dim)
    if not runs_triton(b.device):
        y = reference.linear_scan(b.time_major("alpha"), b.time_major("beta"), reverse=reverse,
                                  initial=b.env_vector("initial"))
        return b.from_time_major(y)
    y = b.output()
    if b.T > 0:
        launch(_linear_scan_kernel, b, config, FAMILY,
               (*b.series("alpha", alpha), *b.series("beta", alpha), *b.per_env("initial", alpha), y, *b.strides(y)),
               (), REVERSE=reverse, HAS_INIT=initial is not None)
    return y
