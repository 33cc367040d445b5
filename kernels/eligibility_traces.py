"""Accumulating eligibility traces with episode resets (Sutton & Barto, 2018, ch. 12.2), fused.

Forward in time::

    z_t = x_t + gamma lam (1 - done_{t-1}) z_{t-1},    z_{-1} = initial (default 0), done_{-1} = 0

As a scan: ``alpha_t = x_t``, ``beta_t = gamma lam (1 - done_{t-1})``, forward in time; the previous
step's flag is read from the previous row of ``dones``.
"""

from __future__ import annotations

from typing import Optional

import torch

from kernels import _explicit_layout, _scan, reference
from kernels._args import Batch, check_scalar
from kernels._launch import LaunchConfig, launch, scalars
from kernels._replay import replayable
from kernels._triton import runs_triton, tl, triton

# One float and one flag in, one float out per step: longer tiles to more environments (_launch.choose_config).
LIGHT_STEPS = True
# Float32 [T, N] look-back tiles in thread runs 64 steps long, not 32; from 4096 environments,
# four-warp walks of 128 steps instead (_launch.choose_config).
LONG_RUN_TILES = True
# Float32 [T, N] walks from 8192 environments: four chunks deep in 64-environment tiles (_launch.choose_config).
DEEP_WALKS = True
# Float32 [T, N] sequences of more than 256 steps in rows not 16 elements apart take this look-back tile in
# thread runs from 512 environments, (block_t, block_n, warps, below this many) (_launch._unaligned_look_back_tile).
UNALIGNED_LOOK_BACK_TILE = (512, 32, 8, 4096)


@triton.jit
def _eligibility_traces_beta(done_before, mask, decay):
    """``beta_t = gamma lam (1 - done_{t-1})`` of a tile; 1 where masked."""
    return tl.where(mask, tl.where(done_before, 0.0, decay), 1.0)


@_scan.coefficient_kernel
def _eligibility_traces_kernel(
    x_ptr,
    s_x_t,
    s_x_n,
    done_ptr,
    s_done_t,
    s_done_n,
    init_ptr,
    s_init,
    out_ptr,
    s_out_t,
    s_out_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    lam_hi,
    lam_lo,
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
    decay = _scan.scalar(gamma_hi, gamma_lo, ACC) * _scan.scalar(lam_hi, lam_lo, ACC)
    block, first, end, num_chunks = _scan.tile_schedule(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = _scan.tile_envs(block, N, BLOCK_N, ENV_RUNS_OF_FOUR)
    if HAS_INIT:
        carry = _scan.load_env(init_ptr, n, s_init, n_ok, ACC)
    else:
        carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, False, LATEST_FIRST, TIME_THREADS)
        mask = (t[:, None] < T) & n_ok[None, :]
        x = _scan.load_tile(x_ptr, t, n, s_x_t, s_x_n, mask, ACC)
        done_before = _scan.load_flags(done_ptr, t - 1, n, s_done_t, s_done_n, mask & (t[:, None] >= 1),
                                       ENVS_IN_RUNS=ENV_RUNS_OF_FOUR)
        beta = _eligibility_traces_beta(done_before, mask, decay)
        z, carry = _scan.scan_chunk(
            x, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, False,
            LOOKBACK, NUM_STAGES, SHUFFLE_TIME, LATEST_FIRST, TIME_THREADS,
        )
        _scan.store_tile(out_ptr, z, t, n, s_out_t, s_out_n, mask)


@_explicit_layout.twin_of(_eligibility_traces_kernel)
@_explicit_layout.twin_kernel
def _eligibility_traces_explicit_kernel(
    x_ptr,
    s_x_t,
    s_x_n,
    done_ptr,
    s_done_t,
    s_done_n,
    init_ptr,
    s_init,
    out_ptr,
    s_out_t,
    s_out_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    lam_hi,
    lam_lo,
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
    """``_eligibility_traces_kernel``: a whole ``[T, N]`` sequence per explicit-layout tile (``_explicit_layout``)."""
    decay = _scan.scalar(gamma_hi, gamma_lo, ACC) * _scan.scalar(lam_hi, lam_lo, ACC)
    t, n, n_ok, mask = _explicit_layout.whole_sequence_tile(T, N, BLOCK_T, BLOCK_N, TIME_THREADS, False)
    x = _scan.load_tile(x_ptr, t, n, s_x_t, s_x_n, mask, ACC)
    done_before = _scan.load_flags(done_ptr, t - 1, n, s_done_t, s_done_n, mask & (t[:, None] >= 1))
    z, b = _explicit_layout.scan_tile(x, _eligibility_traces_beta(done_before, mask, decay))
    if HAS_INIT:
        z = z + b * _scan.load_env(init_ptr, n, s_init, n_ok, ACC)[None, :]
    _scan.store_tile(out_ptr, z, t, n, s_out_t, s_out_n, mask)


def validate(inputs, dones, *, gamma=0.99, lam=0.95, initial=None, time_dim=0) -> tuple[Batch, dict]:
    """Check :func:`eligibility_traces`'s arguments; the validated batch and coefficients (shared with the baselines)."""
    coefficients = {"gamma": check_scalar("gamma", gamma), "lam": check_scalar("lam", lam)}
    b = Batch(
        time_dim, floats={"inputs": inputs}, flags={"dones": dones}, per_env={"initial": initial}, optional=("initial",)
    )
    return b, coefficients


@replayable
def eligibility_traces(
    inputs: torch.Tensor,
    dones: torch.Tensor,
    *,
    gamma: float = 0.99,
    lam: float = 0.95,
    initial: Optional[torch.Tensor] = None,
    time_dim: int = 0,
    config: Optional[LaunchConfig] = None,
) -> torch.Tensor:
    """Traces ``z``; see the module docstring. ``initial`` is ``z_{-1}``, ``[N]``."""
    b, k = validate(inputs, dones, gamma=gamma, lam=lam, initial=initial, time_dim=time_dim)
    gamma, lam = k["gamma"], k["lam"]
    if not runs_triton(b.device):
        z = reference.eligibility_traces(
            b.time_major("inputs"), b.time_major("dones"), gamma=gamma, lam=lam, initial=b.env_vector("initial")
        )
        return b.from_time_major(z)
    z = b.output()
    if b.T > 0:
        launch(
            _eligibility_traces_kernel,
            b,
            config,
            (*b.series("inputs", inputs), *b.series("dones", inputs), *b.per_env("initial", inputs), z, *b.strides(z)),
            scalars(gamma, lam),
            HAS_INIT=initial is not None,
        )
    return z
