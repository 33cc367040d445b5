"""TD(lambda) returns (Sutton & Barto, 2018, ch. 12.1; terminated-vs-truncated as in torchrl), fused.

With ``V'_t = next_values[t]``, the value of the state after step t::

    G_t = r_t + gamma (1 - terminated_t) V'_t + gamma lam (1 - done_t) (G_{t+1} - V'_t),
    G_T = V'_{T-1}

A truncation keeps the one-step bootstrap but cuts the lambda trace. As a scan:
``alpha_t = r_t + gamma (1 - terminated_t) V'_t - gamma lam (1 - done_t) V'_t``,
``beta_t = gamma lam (1 - done_t)``, reverse in time, starting from ``G_T``.
"""

from __future__ import annotations

from typing import Optional

import torch

from kernels import _async_walk, _explicit_layout, _scan, reference
from kernels._args import Batch, check_scalar
from kernels._launch import LaunchConfig, launch, scalars
from kernels._replay import replayable
from kernels._triton import gl, gluon, runs_triton, tl, triton

# Long [N, T] walks over many environments run faster unpipelined (_launch.choose_config).
PIPELINED_WALKS = False
# Float32 [N, T] rows of 65-256 steps over many environments: two environments per one-warp program
# (_launch.choose_config).
PAIRED_ROWS = True
# Reverse walks hold each [T, N] tile's steps latest first (_launch.choose_config).
LATEST_FIRST = True
# 16-bit [T, N] walks in 64 x 32 tiles on four warps, four environments per thread (_launch.choose_config).
FOUR_ENV_WALKS = 4
# [T, N] sequences of 129-256 steps held whole in explicit-layout tiles (float32 below 4096
# environments, 16-bit floats at any): eight warps along time instead of four, at these (float
# bytes, tile length, fewer environments than) (_launch.choose_config).
EIGHT_WARP_SHORT_TILES = ((4, 256, 4096), (2, 256, None))
# Float32 [T, N] sequences of more than 256 steps in rows not 16 elements apart take this look-back tile in
# thread runs from 512 environments, (block_t, block_n, warps, below this many) (_launch._unaligned_look_back_tile).
UNALIGNED_LOOK_BACK_TILE = (128, 32, 4, 4096)
# 16-bit [T, N] sequences of more than 256 steps in 16-aligned rows: walks fed through shared memory
# (_async_walk) on four warps, (steps, environments a program, stages, from, to environments): 64 x 64 in
# four stages while the programs take one per multiprocessor of the H200, 64 x 128 in three while they
# take one, 64 x 64 in two up to three per multiprocessor, 64 x 128 in two up to two
# (_launch._async_walk_tile).
ASYNC_WALKS = ((64, 64, 4, 8192, 8448), (64, 128, 3, 9216, 16896), (64, 64, 2, 16897, 25344),
               (64, 128, 2, 25345, 33792))


@triton.jit
def _lambda_returns_pairs(r, v_after, terminated, done, mask, gamma, lam, MASKED: tl.constexpr = True):
    """``(alpha, beta)`` of a tile (module docstring); the identity ``(0, 1)`` where masked (not
    ``MASKED``: ``mask`` is ignored, for tiles whose masked elements reach only masked outputs)."""
    trace = tl.where(done, 0.0, gamma * lam)
    alpha = r + gamma * tl.where(terminated, 0.0, v_after) - trace * v_after
    if not MASKED:
        return alpha, trace
    return tl.where(mask, alpha, 0.0), tl.where(mask, trace, 1.0)


@_scan.coefficient_kernel
def _lambda_returns_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    nv_ptr,
    s_nv_t,
    s_nv_n,
    term_ptr,
    s_term_t,
    s_term_n,
    trunc_ptr,
    s_trunc_t,
    s_trunc_n,
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
    HAS_TRUNC: tl.constexpr,
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
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    block, first, end, num_chunks = _scan.tile_schedule(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = _scan.tile_envs(block, N, BLOCK_N, ENV_RUNS_OF_FOUR)
    carry = _scan.load_env(nv_ptr + _scan.wide(T - 1) * s_nv_t, n, s_nv_n, n_ok, ACC)  # G_T
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, True, LATEST_FIRST, TIME_THREADS)
        mask = (t[:, None] < T) & n_ok[None, :]
        r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
        v_after = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
        terminated = _scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask, ENVS_IN_RUNS=ENV_RUNS_OF_FOUR)
        done = terminated
        if HAS_TRUNC:
            done = done | _scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask, ENVS_IN_RUNS=ENV_RUNS_OF_FOUR)
        alpha, beta = _lambda_returns_pairs(r, v_after, terminated, done, mask, gamma, lam)
        g, carry = _scan.scan_chunk(
            alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True,
            LOOKBACK, NUM_STAGES, SHUFFLE_TIME, LATEST_FIRST, TIME_THREADS,
        )
        _scan.store_tile(out_ptr, g, t, n, s_out_t, s_out_n, mask)


@_explicit_layout.twin_of(_lambda_returns_kernel)
@_explicit_layout.twin_kernel
def _lambda_returns_explicit_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    nv_ptr,
    s_nv_t,
    s_nv_n,
    term_ptr,
    s_term_t,
    s_term_n,
    trunc_ptr,
    s_trunc_t,
    s_trunc_n,
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
    HAS_TRUNC: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
):
    """``_lambda_returns_kernel``: a whole ``[T, N]`` sequence per explicit-layout tile (``_explicit_layout``)."""
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    t, n, n_ok, mask = _explicit_layout.whole_sequence_tile(T, N, BLOCK_T, BLOCK_N, TIME_THREADS, True)
    g_end = _explicit_layout.load_step(nv_ptr, T - 1, s_nv_t, n, s_nv_n, n_ok, ACC)  # G_T
    r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
    v_after = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
    terminated = _scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask)
    done = terminated
    if HAS_TRUNC:
        done = done | _scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
    alpha, beta = _lambda_returns_pairs(r, v_after, terminated, done, mask, gamma, lam)
    g, b = _explicit_layout.scan_tile(alpha, beta)
    _scan.store_tile(out_ptr, g + b * g_end[None, :], t, n, s_out_t, s_out_n, mask)


@gluon.jit
def _lambda_returns_async_copies(r_s, nv_s, term_s, trunc_s, r_ptr, s_r_t, s_r_n, nv_ptr, s_nv_t, s_nv_n, term_ptr,
                                 s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, chunk, n0, T, N,
                                 HAS_TRUNC: gl.constexpr, BLOCK_T: gl.constexpr, NUM_STAGES: gl.constexpr):
    """Issue the copies of walk chunk ``chunk`` into its buffers (``r``, ``V'``, the flags) as one group;
    an empty group past the last chunk."""
    if chunk < gl.cdiv(T, BLOCK_T):
        stage = chunk % NUM_STAGES
        top = T - 1 - chunk * BLOCK_T
        _async_walk.copy_chunk(r_s.index(stage), r_ptr, top, n0, T, N, s_r_t, s_r_n)
        _async_walk.copy_chunk(nv_s.index(stage), nv_ptr, top, n0, T, N, s_nv_t, s_nv_n)
        _async_walk.copy_chunk(term_s.index(stage), term_ptr, top, n0, T, N, s_term_t, s_term_n)
        if HAS_TRUNC:
            _async_walk.copy_chunk(trunc_s.index(stage), trunc_ptr, top, n0, T, N, s_trunc_t, s_trunc_n)
    _async_walk.commit()


@_async_walk.twin_of(_lambda_returns_kernel)
@_async_walk.twin_kernel
def _lambda_returns_async_walk_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    nv_ptr,
    s_nv_t,
    s_nv_n,
    term_ptr,
    s_term_t,
    s_term_n,
    trunc_ptr,
    s_trunc_t,
    s_trunc_n,
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
    HAS_TRUNC: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
):
    """``_lambda_returns_kernel`` as a walk fed through shared memory (``_async_walk``): each chunk's
    inputs are copied ``NUM_STAGES - 1`` chunks ahead, then read in the walk's layout and scanned in
    each warp."""
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    FLOATS: gl.constexpr = r_ptr.dtype.element_ty
    WALK: gl.constexpr = _async_walk.walk_layout(BLOCK_T, BLOCK_N, TIME_THREADS, gl.num_warps())
    r_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    nv_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    term_s = _async_walk.ring(gl.int8, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    if HAS_TRUNC:
        trunc_s = _async_walk.ring(gl.int8, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    else:
        trunc_s = term_s  # never copied into nor read
    n0 = gl.program_id(0) * BLOCK_N
    for ahead in gl.static_range(NUM_STAGES - 1):
        _lambda_returns_async_copies(r_s, nv_s, term_s, trunc_s, r_ptr, s_r_t, s_r_n, nv_ptr, s_nv_t, s_nv_n, term_ptr,
                                     s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, ahead, n0, T, N, HAS_TRUNC,
                                     BLOCK_T, NUM_STAGES)
    rows = gl.arange(0, BLOCK_T, layout=gl.SliceLayout(1, WALK))
    n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, WALK))
    n_ok = n < N
    carry = _explicit_layout.load_step(nv_ptr, T - 1, s_nv_t, n, s_nv_n, n_ok, ACC)  # G_T
    for chunk in range(0, gl.cdiv(T, BLOCK_T)):
        _async_walk.wait_for_chunk(NUM_STAGES)
        _lambda_returns_async_copies(r_s, nv_s, term_s, trunc_s, r_ptr, s_r_t, s_r_n, nv_ptr, s_nv_t, s_nv_n, term_ptr,
                                     s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, chunk + NUM_STAGES - 1, n0,
                                     T, N, HAS_TRUNC, BLOCK_T, NUM_STAGES)
        stage = chunk % NUM_STAGES
        r = r_s.index(stage).load(WALK).to(ACC)
        v_after = nv_s.index(stage).load(WALK).to(ACC)
        terminated = term_s.index(stage).load(WALK) != 0
        done = terminated
        if HAS_TRUNC:
            done = done | (trunc_s.index(stage).load(WALK) != 0)
        t = T - 1 - chunk * BLOCK_T - rows
        mask = (t >= 0)[:, None] & n_ok[None, :]
        # Rows before step 0 come last in a chunk, after every real row in scan order: left unmasked.
        alpha, beta = _lambda_returns_pairs(r, v_after, terminated, done, mask, gamma, lam, False)
        g, carry = _async_walk.scan_chunk(alpha, beta, carry)
        _scan.store_tile(out_ptr, g, t, n, s_out_t, s_out_n, mask)


def validate(
    rewards, next_values, terminated, *, truncated=None, gamma=0.99, lam=0.95, time_dim=0
) -> tuple[Batch, dict]:
    """Check :func:`lambda_returns`'s arguments; the validated batch and coefficients (shared with the baselines)."""
    coefficients = {"gamma": check_scalar("gamma", gamma), "lam": check_scalar("lam", lam)}
    b = Batch(
        time_dim,
        floats={"rewards": rewards, "next_values": next_values},
        flags={"terminated": terminated, "truncated": truncated},
        optional=("truncated",),
    )
    return b, coefficients


@replayable
def lambda_returns(
    rewards: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    *,
    truncated: Optional[torch.Tensor] = None,
    gamma: float = 0.99,
    lam: float = 0.95,
    time_dim: int = 0,
    config: Optional[LaunchConfig] = None,
) -> torch.Tensor:
    """Lambda-returns ``G``; see the module docstring. ``next_values[t]`` is ``V(s_{t+1})``."""
    b, k = validate(rewards, next_values, terminated, truncated=truncated, gamma=gamma, lam=lam, time_dim=time_dim)
    gamma, lam = k["gamma"], k["lam"]
    if not runs_triton(b.device):
        tm = b.time_major
        g = reference.lambda_returns(
            tm("rewards"), tm("next_values"), tm("terminated"), truncated=tm("truncated"), gamma=gamma, lam=lam
        )
        return b.from_time_major(g)
    g = b.output()
    if b.T > 0:
        launch(
            _lambda_returns_kernel,
            b,
            config,
            (
                *b.series("rewards", rewards),
                *b.series("next_values", rewards),
                *b.series("terminated", rewards),
                *b.series("truncated", rewards),
                g,
                *b.strides(g),
            ),
            scalars(gamma, lam),
            HAS_TRUNC=truncated is not None,
        )
    return g
