"""The generic first-order linear recurrence, fused.

Forward: ``y_t = alpha_t + beta_t y_{t-1}``, ``y_{-1} = initial`` (default 0).
Reverse: ``y_t = alpha_t + beta_t y_{t+1}``, ``y_T = initial``.

Every estimator in this package is this recurrence with ``(alpha, beta)`` built on chip from the raw
rollout; this entry point takes ``alpha`` and ``beta`` as given.
"""

from __future__ import annotations

from typing import Optional

import torch

from kernels import _explicit_layout, _scan, reference
from kernels._args import Batch
from kernels._launch import LaunchConfig, launch
from kernels._replay import replayable
from kernels._triton import runs_triton, tl, triton

# Long [N, T] walks over many environments run faster unpipelined (_launch.choose_config).
PIPELINED_WALKS = False
# Reverse walks hold each [T, N] tile's steps latest first (_launch.choose_config).
LATEST_FIRST = True
# Float32 [T, N] look-back tiles in thread runs 64 steps long, not 32; from 4096 environments,
# four-warp walks of 128 steps instead (_launch.choose_config).
LONG_RUN_TILES = True
# Float32 [N, T] walks from 1024 to 4095 environments: one environment per one-warp program, four
# chunks deep (_launch.choose_config).
ONE_ENV_WALKS = True
# Float32 [T, N] sequences of more than 256 steps in rows not 16 elements apart take this look-back tile in
# thread runs from 512 environments, (block_t, block_n, warps, below this many) (_launch._unaligned_look_back_tile).
UNALIGNED_LOOK_BACK_TILE = (128, 16, 4, 1024)


@triton.jit
def _linear_scan_beta(b, mask):
    """``beta`` of a tile; 1 where masked."""
    return tl.where(mask, b, 1.0)


@triton.jit
def _linear_scan_kernel(
    a_ptr,
    s_a_t,
    s_a_n,
    b_ptr,
    s_b_t,
    s_b_n,
    init_ptr,
    s_init,
    out_ptr,
    s_out_t,
    s_out_n,
    ws,
    flags,
    T,
    N,
    REVERSE: tl.constexpr,
    HAS_INIT: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
    ENV_RUNS_OF_FOUR: tl.constexpr,
):
    block, first, end, num_chunks = _scan.tile_schedule(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = _scan.tile_envs(block, N, BLOCK_N, ENV_RUNS_OF_FOUR)
    if HAS_INIT:
        carry = _scan.load_env(init_ptr, n, s_init, n_ok, ACC)
    else:
        carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, REVERSE, LATEST_FIRST, TIME_THREADS)
        mask = (t[:, None] < T) & n_ok[None, :]
        alpha = _scan.load_tile(a_ptr, t, n, s_a_t, s_a_n, mask, ACC)
        beta = _linear_scan_beta(_scan.load_tile(b_ptr, t, n, s_b_t, s_b_n, mask, ACC), mask)
        y, carry = _scan.scan_chunk(
            alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, REVERSE,
            LOOKBACK, NUM_STAGES, SHUFFLE_TIME, LATEST_FIRST, TIME_THREADS,
            True,  # THREAD_STEPS_FIRST: forward scans of tiles in quarters too (``_scan._scan_maps``)
        )
        _scan.store_tile(out_ptr, y, t, n, s_out_t, s_out_n, mask)


@_explicit_layout.twin_of(_linear_scan_kernel)
@_explicit_layout.twin_kernel
def _linear_scan_explicit_kernel(
    a_ptr,
    s_a_t,
    s_a_n,
    b_ptr,
    s_b_t,
    s_b_n,
    init_ptr,
    s_init,
    out_ptr,
    s_out_t,
    s_out_n,
    ws,
    flags,
    T,
    N,
    REVERSE: tl.constexpr,
    HAS_INIT: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
):
    """``_linear_scan_kernel``: a whole ``[T, N]`` sequence per explicit-layout tile (``_explicit_layout``)."""
    t, n, n_ok, mask = _explicit_layout.whole_sequence_tile(T, N, BLOCK_T, BLOCK_N, TIME_THREADS, REVERSE)
    alpha = _scan.load_tile(a_ptr, t, n, s_a_t, s_a_n, mask, ACC)
    beta = _linear_scan_beta(_scan.load_tile(b_ptr, t, n, s_b_t, s_b_n, mask, ACC), mask)
    y, b = _explicit_layout.scan_tile(alpha, beta)
    if HAS_INIT:
        y = y + b * _scan.load_env(init_ptr, n, s_init, n_ok, ACC)[None, :]
    _scan.store_tile(out_ptr, y, t, n, s_out_t, s_out_n, mask)


def validate(alpha, beta, *, reverse=False, initial=None, time_dim=0) -> tuple[Batch, dict]:
    """Check :func:`linear_scan`'s arguments; the validated batch and options (shared with the baselines)."""
    if not isinstance(reverse, bool):
        raise TypeError(f"reverse must be a bool, got {type(reverse).__name__}")
    b = Batch(time_dim, floats={"alpha": alpha, "beta": beta}, per_env={"initial": initial}, optional=("initial",))
    return b, {"reverse": reverse}


@replayable
def linear_scan(
    alpha: torch.Tensor,
    beta: torch.Tensor,
    *,
    reverse: bool = False,
    initial: Optional[torch.Tensor] = None,
    time_dim: int = 0,
    config: Optional[LaunchConfig] = None,
) -> torch.Tensor:
    """Solve ``y_t = alpha_t + beta_t y_prev`` along time; see the module docstring."""
    b, _ = validate(alpha, beta, reverse=reverse, initial=initial, time_dim=time_dim)
    if not runs_triton(b.device):
        y = reference.linear_scan(
            b.time_major("alpha"), b.time_major("beta"), reverse=reverse, initial=b.env_vector("initial")
        )
        return b.from_time_major(y)
    y = b.output()
    if b.T > 0:
        launch(
            _linear_scan_kernel,
            b,
            config,
            (*b.series("alpha", alpha), *b.series("beta", alpha), *b.per_env("initial", alpha), y, *b.strides(y)),
            (),
            REVERSE=reverse,
            HAS_INIT=initial is not None,
        )
    return y
