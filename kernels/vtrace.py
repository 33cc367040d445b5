"""V-trace (Espeholt et al., 2018, IMPALA), with the lambda of rlax, fused.

With ``rho_t = exp(log_rhos_t)`` and ``V'_t`` as in GAE::

    c_t         = lam min(c_bar, rho_t)
    delta_t     = min(rho_bar, rho_t) (r_t + gamma (1 - terminated_t) V'_t - V_t)
    vs_t - V_t  = delta_t + gamma (1 - done_t) c_t (vs_{t+1} - V_{t+1}),   zero past the end
    q_t         = lam vs_{t+1} + (1 - lam) V_{t+1}   if t < T-1 and not done_t, else V'_t
    pg_adv_t    = min(pg_rho_bar, rho_t) (r_t + gamma (1 - terminated_t) q_t - V_t)

As a scan over ``x_t = vs_t - V_t``: ``alpha_t = delta_t``, ``beta_t = gamma (1 - done_t) c_t``,
reverse in time. ``pg_adv`` needs ``x_{t+1}``, the scan's exclusive value, which the engine
produces in the same pass (``scan_chunk_with_next``), so nothing is re-read.

Where ``rho_bar = c_bar = pg_rho_bar`` (the defaults, as in rlax) and ``V'_t = V_{t+1}`` before the last
step (no ``next_values``), ``pg_adv_t = x_t``: for ``t < T-1`` not done,
``pg_adv_t = min(rho_bar, rho_t) (r_t + gamma V_{t+1} - V_t) + gamma lam min(c_bar, rho_t) x_{t+1}
= delta_t + beta_t x_{t+1}``; where done, or at ``T-1`` (``x_T = 0``), both are ``delta_t``. The kernels
then scan two values and store ``x`` as ``pg_adv`` (``PG_IS_X``) where :func:`stores_x_as_pg` says so.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from kernels import _async_walk, _explicit_layout, _scan, reference
from kernels._args import Batch, check_bootstrap, check_scalar
from kernels._launch import LaunchConfig, launch, persistent_twin_of, scalars, time_is_contiguous
from kernels._replay import replayable
from kernels._triton import gl, gluon, runs_triton, tl, triton


# The kernel scans four values per step (x and x_{t+1}), except in tiles whose time lies in one warp,
# where x_{t+1} comes by shuffles: smaller tiles, and [N, T] rows of 128 steps (_launch.choose_config).
WIDE_SCAN = True

# Reverse walks hold each [T, N] tile's steps latest first (_launch.choose_config).
LATEST_FIRST = True
# Each step's successor is loaded too (a second tile one step later, or in thread-run tiles one row per
# thread where _launch.successors_from_runs says so): smaller walk tiles
# (_launch.choose_config).
SUCCESSOR_ROWS = True
# Float32 [N, T] rows of 65-256 steps over many environments: two environments per one-warp program
# (_launch.choose_config).
PAIRED_ROWS = True
# Float32 [N, T] rows of 2049-4096 steps from 128 to 511 environments, one per program: 16 warps
# instead of 8 (_launch.choose_config).
SIXTEEN_WARP_ROWS = True
# [T, N] sequences of 65-256 steps held whole in explicit-layout tiles: eight warps along time instead of
# four, at these (float bytes, tile length, fewer environments than; None: any) (_launch.choose_config).
EIGHT_WARP_SHORT_TILES = ((4, 128, None), (4, 256, None), (2, 128, None), (2, 256, None))
# Float32 [T, N] sequences in rows not 16 elements apart held whole in explicit-layout tiles of two environments
# per thread, at these (most steps, from this many environments, warps) (_launch.choose_config).
UNALIGNED_WHOLE_TILES = ((256, 4096, 8),)
# Float32 [T, N] sequences of more than 256 steps in rows not 16 elements apart take this look-back tile in
# thread runs from 512 environments, (block_t, block_n, warps, below this many) (_launch._unaligned_look_back_tile).
UNALIGNED_LOOK_BACK_TILE = (128, 16, 4, 1024)
# Float32 [T, N] sequences of more than 256 steps in 16-aligned rows of 2^22 elements: look-back tiles walked
# by persistent programs (block_t, block_n, warps, programs per multiprocessor, from, below this many
# environments) (_launch._persistent_look_back_tile).
PERSISTENT_LOOK_BACK_TILE = (64, 32, 4, 2, 2048, 3584)
# 16-bit [T, N] sequences of more than 256 steps in 16-aligned rows: walks fed through shared memory
# (_async_walk), four environments per thread on eight warps, two stages (_launch.AsyncWalkRange: steps,
# environments a program, stages, from, to environments, warps, four per thread): 128 x 64 while its
# programs fill one wave of the H200's multiprocessors (one a multiprocessor), 64 x 128 from 8449 to 16896
# (one wave) and from 25345 to 33792 (up to two). Between them (128 x 64 gained 1.00-1.18x) its form with
# next_values ran 0.88x the Triton walk's speed: left to the Triton walk.
ASYNC_WALKS = ((128, 64, 2, 8192, 8448, 8, True), (64, 128, 2, 8449, 16896, 8, True),
               (64, 128, 2, 25345, 33792, 8, True))
# The form that stores x as pg_adv (PG_IS_X: stores_x_as_pg) walks 16-bit [T, N] sequences from 8192 to 8448
# environments in 64 x 64 tiles of 16-byte vectors on four warps, four stages deep (GAE's tile: 1.26-1.31x the
# other form's walks there, where its own 128 x 64 ran 0.80-0.91x); elsewhere in the other form's tiles.
PG_IS_X_ASYNC_WALKS = ((64, 64, 4, 8192, 8448),) + ASYNC_WALKS[1:]
# Block-shape traits of the kernel's two forms (_launch.kernel_traits); a call with the default arguments
# launches the first wherever stores_x_as_pg says so.
FORMS = {"pg_is_x": dict(async_walks=PG_IS_X_ASYNC_WALKS), "pg_from_x_next": {}}
DEFAULT_FORM = "pg_is_x"


@triton.jit
def _vtrace_pairs(r, v, rho, v_after, terminated, done, mask, gamma, lam, rho_bar, c_bar, MASKED: tl.constexpr = True):
    """``(alpha, beta)`` of a tile (module docstring); the identity ``(0, 1)`` where masked (not ``MASKED``:
    ``mask`` is ignored, for tiles whose masked elements reach only masked outputs)."""
    delta = tl.minimum(rho, rho_bar) * (r + gamma * tl.where(terminated, 0.0, v_after) - v)
    trace = tl.where(done, 0.0, gamma * lam * tl.minimum(rho, c_bar))
    if not MASKED:
        return delta, trace
    return tl.where(mask, delta, 0.0), tl.where(mask, trace, 1.0)


@triton.jit
def _vtrace_pg_advantages(r, v, rho, v_succ, v_after, x_next, terminated, done, not_last, gamma, lam, pg_rho_bar):
    """The policy-gradient advantages of a tile, from ``x_{t+1} = vs_{t+1} - V_{t+1}`` (module docstring)."""
    q = tl.where(not_last & ~done, v_succ + lam * x_next, v_after)
    return tl.minimum(rho, pg_rho_bar) * (r + gamma * tl.where(terminated, 0.0, q) - v)


@triton.jit
def _vtrace_pg_terms(r, v, rho, v_succ, v_after, terminated, done, not_last, gamma, lam, pg_rho_bar):
    """``(P, Q)`` with ``pg_adv_t = P_t + Q_t x_{t+1}`` (:func:`_vtrace_pg_advantages` before the scan):
    ``P = min(pg_rho_bar, rho) (r + gamma (1 - terminated) q0 - V)``, ``q0`` the successor value
    ``V_{t+1}`` or ``V'_t`` as ``q_t`` takes it, ``Q = min(pg_rho_bar, rho) gamma (1 - terminated) lam``
    where ``q_t`` takes ``x_{t+1}``, else 0."""
    takes_next = not_last & ~done
    clipped = tl.minimum(rho, pg_rho_bar)
    fixed = clipped * (r + gamma * tl.where(terminated, 0.0, tl.where(takes_next, v_succ, v_after)) - v)
    return fixed, tl.where(takes_next, clipped * gamma * lam, 0.0)


@_scan.coefficient_kernel
def _vtrace_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    v_ptr,
    s_v_t,
    s_v_n,
    lr_ptr,
    s_lr_t,
    s_lr_n,
    term_ptr,
    s_term_t,
    s_term_n,
    trunc_ptr,
    s_trunc_t,
    s_trunc_n,
    nv_ptr,
    s_nv_t,
    s_nv_n,
    boot_ptr,
    s_boot,
    vs_ptr,
    s_vs_t,
    s_vs_n,
    pg_ptr,
    s_pg_t,
    s_pg_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    lam_hi,
    lam_lo,
    rho_bar_hi,
    rho_bar_lo,
    c_bar_hi,
    c_bar_lo,
    pg_hi,
    pg_lo,
    HAS_TRUNC: tl.constexpr,
    HAS_NEXT: tl.constexpr,
    PG_IS_X: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
    ENV_RUNS_OF_FOUR: tl.constexpr,
    RUN_SUCCESSORS: tl.constexpr,
):
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    rho_bar = _scan.scalar(rho_bar_hi, rho_bar_lo, ACC)
    c_bar = _scan.scalar(c_bar_hi, c_bar_lo, ACC)
    pg_rho_bar = _scan.scalar(pg_hi, pg_lo, ACC)
    block, first, end, num_chunks = _scan.tile_schedule(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = _scan.tile_envs(block, N, BLOCK_N, ENV_RUNS_OF_FOUR)
    if not HAS_NEXT:
        bootstrap = _scan.load_env(boot_ptr, n, s_boot, n_ok, ACC)
    carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, True, LATEST_FIRST, TIME_THREADS)
        mask = (t[:, None] < T) & n_ok[None, :]
        not_last = (t[:, None] + 1 < T) & n_ok[None, :]
        r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
        v = _scan.load_tile(v_ptr, t, n, s_v_t, s_v_n, mask, ACC)
        rho = _scan.fast_exp(_scan.load_tile(lr_ptr, t, n, s_lr_t, s_lr_n, mask, ACC))
        terminated = _scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask, ENVS_IN_RUNS=ENV_RUNS_OF_FOUR)
        done = terminated
        if HAS_TRUNC:
            done = done | _scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask, ENVS_IN_RUNS=ENV_RUNS_OF_FOUR)
        v_succ = _scan.successor_rows(
            v, v_ptr, chunk, num_chunks, t, n, s_v_t, s_v_n, n_ok, T, ACC, BLOCK_T, SHUFFLE_TIME, LATEST_FIRST,
            TIME_THREADS if RUN_SUCCESSORS else 1,
        )
        if HAS_NEXT:
            v_after = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
        else:
            v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :], v_succ)
        alpha, beta = _vtrace_pairs(r, v, rho, v_after, terminated, done, mask, gamma, lam, rho_bar, c_bar)
        if PG_IS_X:
            x, carry = _scan.scan_chunk(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True,
                                        LOOKBACK, NUM_STAGES, SHUFFLE_TIME, LATEST_FIRST, TIME_THREADS)
            pg_adv = x
        else:
            x, x_next, carry = _scan.scan_chunk_with_next(
                alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, LOOKBACK, SHUFFLE_TIME,
                LATEST_FIRST, TIME_THREADS,
            )
            pg_adv = _vtrace_pg_advantages(r, v, rho, v_succ, v_after, x_next, terminated, done, not_last, gamma, lam,
                                           pg_rho_bar)
        _scan.store_tile(vs_ptr, v + x, t, n, s_vs_t, s_vs_n, mask)
        _scan.store_tile(pg_ptr, pg_adv, t, n, s_pg_t, s_pg_n, mask)


@triton.jit
def _vtrace_tile_inputs(r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, lr_ptr, s_lr_t, s_lr_n, term_ptr, s_term_t,
                        s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, nv_ptr, s_nv_t, s_nv_n, boot_ptr, s_boot, tile,
                        tiles, n_blocks, num_chunks, T, N, HAS_TRUNC: tl.constexpr, HAS_NEXT: tl.constexpr,
                        ACC: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, TIME_THREADS: tl.constexpr):
    """Issue the loads of look-back tile ``tile`` (``_scan.persistent_tile``): ``(r, v, log_rhos,
    terminated, done, after, next_values, bootstrap)``, ``after`` the loaded successors of the runs'
    first steps (``_scan.first_step_successors``), ``next_values`` the tile of them (zeros without),
    ``bootstrap`` the bootstrap values in the walk's first chunk (zeros with ``next_values``)."""
    chunk, _, t, n, n_ok, mask = _scan.persistent_tile(tile, tiles, n_blocks, num_chunks, T, N, BLOCK_T, BLOCK_N,
                                                       TIME_THREADS)
    r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
    v = _scan.load_tile(v_ptr, t, n, s_v_t, s_v_n, mask, ACC)
    log_rhos = _scan.load_tile(lr_ptr, t, n, s_lr_t, s_lr_n, mask, ACC)
    terminated = _scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask)
    done = terminated
    if HAS_TRUNC:
        done = done | _scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
    after = _scan.first_step_successors(v_ptr, t, n, s_v_t, s_v_n, n_ok, T, ACC, TIME_THREADS)
    if HAS_NEXT:
        next_values = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
        bootstrap = tl.zeros([BLOCK_N], ACC)
    else:
        next_values = tl.zeros_like(r)
        bootstrap = _scan.load_env(boot_ptr, n, s_boot, n_ok & (tl.zeros_like(n) + chunk == 0), ACC)
    return r, v, log_rhos, terminated, done, after, next_values, bootstrap


@persistent_twin_of(_vtrace_kernel)
@_scan.coefficient_kernel
def _vtrace_persistent_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    v_ptr,
    s_v_t,
    s_v_n,
    lr_ptr,
    s_lr_t,
    s_lr_n,
    term_ptr,
    s_term_t,
    s_term_n,
    trunc_ptr,
    s_trunc_t,
    s_trunc_n,
    nv_ptr,
    s_nv_t,
    s_nv_n,
    boot_ptr,
    s_boot,
    vs_ptr,
    s_vs_t,
    s_vs_n,
    pg_ptr,
    s_pg_t,
    s_pg_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    lam_hi,
    lam_lo,
    rho_bar_hi,
    rho_bar_lo,
    c_bar_hi,
    c_bar_lo,
    pg_hi,
    pg_lo,
    HAS_TRUNC: tl.constexpr,
    HAS_NEXT: tl.constexpr,
    PG_IS_X: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
    RUN_SUCCESSORS: tl.constexpr,
):
    """``_vtrace_kernel``'s look-back tiles walked by persistent programs, each loading its next tile
    while it scans, looks back for and stores the current one (as ``gae._gae_persistent_kernel``)."""
    tl.static_assert(LATEST_FIRST and TIME_THREADS > 1 and LOOKBACK > 0)
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    rho_bar = _scan.scalar(rho_bar_hi, rho_bar_lo, ACC)
    c_bar = _scan.scalar(c_bar_hi, c_bar_lo, ACC)
    pg_rho_bar = _scan.scalar(pg_hi, pg_lo, ACC)
    num_chunks, n_blocks, tiles, tile, step = _scan.persistent_walk(T, N, BLOCK_T, BLOCK_N)
    r, v, log_rhos, terminated, done, after, next_values, bootstrap = _vtrace_tile_inputs(
        r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, lr_ptr, s_lr_t, s_lr_n, term_ptr, s_term_t, s_term_n, trunc_ptr,
        s_trunc_t, s_trunc_n, nv_ptr, s_nv_t, s_nv_n, boot_ptr, s_boot, tile, tiles, n_blocks, num_chunks, T, N,
        HAS_TRUNC, HAS_NEXT, ACC, BLOCK_T, BLOCK_N, TIME_THREADS)
    for _ in tl.range(tile, tiles, step, num_stages=1):
        next_inputs = _vtrace_tile_inputs(
            r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, lr_ptr, s_lr_t, s_lr_n, term_ptr, s_term_t, s_term_n,
            trunc_ptr, s_trunc_t, s_trunc_n, nv_ptr, s_nv_t, s_nv_n, boot_ptr, s_boot, tile + step, tiles, n_blocks,
            num_chunks, T, N, HAS_TRUNC, HAS_NEXT, ACC, BLOCK_T, BLOCK_N, TIME_THREADS)
        chunk, block, t, n, n_ok, mask = _scan.persistent_tile(tile, tiles, n_blocks, num_chunks, T, N, BLOCK_T,
                                                               BLOCK_N, TIME_THREADS)
        not_last = (t[:, None] + 1 < T) & n_ok[None, :]
        rho = _scan.fast_exp(log_rhos)
        v_succ = _scan.successors_from_loaded(v, after, TIME_THREADS)
        if HAS_NEXT:
            v_after = next_values
        else:
            v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :], v_succ)
        alpha, beta = _vtrace_pairs(r, v, rho, v_after, terminated, done, mask, gamma, lam, rho_bar, c_bar)
        if PG_IS_X:
            x, _ = _scan.scan_chunk(alpha, beta, tl.zeros([BLOCK_N], ACC), chunk, block, T, N, ws, flags, BLOCK_T,
                                    BLOCK_N, True, LOOKBACK, 1, 0, True, TIME_THREADS)
            pg_adv = x
        else:
            x, x_next, _ = _scan.scan_chunk_with_next(alpha, beta, tl.zeros([BLOCK_N], ACC), chunk, block, T, N, ws,
                                                      flags, BLOCK_T, BLOCK_N, LOOKBACK, 0, True, TIME_THREADS)
            pg_adv = _vtrace_pg_advantages(r, v, rho, v_succ, v_after, x_next, terminated, done, not_last, gamma,
                                           lam, pg_rho_bar)
        _scan.store_tile(vs_ptr, v + x, t, n, s_vs_t, s_vs_n, mask)
        _scan.store_tile(pg_ptr, pg_adv, t, n, s_pg_t, s_pg_n, mask)
        r, v, log_rhos, terminated, done, after, next_values, bootstrap = next_inputs
        tile += step


@_explicit_layout.twin_of(_vtrace_kernel)
@_explicit_layout.twin_kernel
def _vtrace_explicit_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    v_ptr,
    s_v_t,
    s_v_n,
    lr_ptr,
    s_lr_t,
    s_lr_n,
    term_ptr,
    s_term_t,
    s_term_n,
    trunc_ptr,
    s_trunc_t,
    s_trunc_n,
    nv_ptr,
    s_nv_t,
    s_nv_n,
    boot_ptr,
    s_boot,
    vs_ptr,
    s_vs_t,
    s_vs_n,
    pg_ptr,
    s_pg_t,
    s_pg_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    lam_hi,
    lam_lo,
    rho_bar_hi,
    rho_bar_lo,
    c_bar_hi,
    c_bar_lo,
    pg_hi,
    pg_lo,
    HAS_TRUNC: tl.constexpr,
    HAS_NEXT: tl.constexpr,
    PG_IS_X: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
):
    """``_vtrace_kernel``: a whole ``[T, N]`` sequence per explicit-layout tile (``_explicit_layout``)."""
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    rho_bar = _scan.scalar(rho_bar_hi, rho_bar_lo, ACC)
    c_bar = _scan.scalar(c_bar_hi, c_bar_lo, ACC)
    pg_rho_bar = _scan.scalar(pg_hi, pg_lo, ACC)
    t, n, n_ok, mask = _explicit_layout.whole_sequence_tile(T, N, BLOCK_T, BLOCK_N, TIME_THREADS, True)
    not_last = (t[:, None] + 1 < T) & n_ok[None, :]
    r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
    v = _scan.load_tile(v_ptr, t, n, s_v_t, s_v_n, mask, ACC)
    rho = tl.exp(_scan.load_tile(lr_ptr, t, n, s_lr_t, s_lr_n, mask, ACC))
    terminated = _scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask)
    done = terminated
    if HAS_TRUNC:
        done = done | _scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
    v_succ = _explicit_layout.successor_tile(v, v_ptr, t, n, T, N, s_v_t, s_v_n, BLOCK_T, BLOCK_N, TIME_THREADS, ACC)
    if HAS_NEXT:
        v_after = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
    else:
        bootstrap = _scan.load_env(boot_ptr, n, s_boot, n_ok, ACC)
        v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :], v_succ)
    alpha, beta = _vtrace_pairs(r, v, rho, v_after, terminated, done, mask, gamma, lam, rho_bar, c_bar)
    if PG_IS_X:
        x, _ = _explicit_layout.scan_tile(alpha, beta)
        pg_adv = x
    else:
        x, x_next = _explicit_layout.scan_tile_with_next(alpha, beta)
        pg_adv = _vtrace_pg_advantages(r, v, rho, v_succ, v_after, x_next, terminated, done, not_last, gamma, lam,
                                       pg_rho_bar)
    _scan.store_tile(vs_ptr, v + x, t, n, s_vs_t, s_vs_n, mask)
    _scan.store_tile(pg_ptr, pg_adv, t, n, s_pg_t, s_pg_n, mask)


@gluon.jit
def _vtrace_async_copies(r_s, v_s, lr_s, term_s, trunc_s, nv_s, r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, lr_ptr,
                         s_lr_t, s_lr_n, term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, nv_ptr, s_nv_t,
                         s_nv_n, chunk, n0, T, N, HAS_TRUNC: gl.constexpr, HAS_NEXT: gl.constexpr,
                         BLOCK_T: gl.constexpr, NUM_STAGES: gl.constexpr):
    """Issue the copies of walk chunk ``chunk`` into its buffers (``r``, ``V``, ``log_rhos``, the flags,
    ``next_values``) as one group; an empty group past the last chunk."""
    if chunk < gl.cdiv(T, BLOCK_T):
        stage = chunk % NUM_STAGES
        top = T - 1 - chunk * BLOCK_T
        _async_walk.copy_chunk(r_s.index(stage), r_ptr, top, n0, T, N, s_r_t, s_r_n)
        _async_walk.copy_chunk(v_s.index(stage), v_ptr, top, n0, T, N, s_v_t, s_v_n)
        _async_walk.copy_chunk(lr_s.index(stage), lr_ptr, top, n0, T, N, s_lr_t, s_lr_n)
        _async_walk.copy_chunk(term_s.index(stage), term_ptr, top, n0, T, N, s_term_t, s_term_n)
        if HAS_TRUNC:
            _async_walk.copy_chunk(trunc_s.index(stage), trunc_ptr, top, n0, T, N, s_trunc_t, s_trunc_n)
        if HAS_NEXT:
            _async_walk.copy_chunk(nv_s.index(stage), nv_ptr, top, n0, T, N, s_nv_t, s_nv_n)
    _async_walk.commit()


@gluon.jit
def _vtrace_async_chunk(r_s, v_s, lr_s, term_s, trunc_s, nv_s, stage, t, v_before, bootstrap, T,
                        HAS_TRUNC: gl.constexpr, HAS_NEXT: gl.constexpr, ACC: gl.constexpr, WALK: gl.constexpr):
    """A chunk's ``(r, V, rho, V_{t+1}, V'_t, terminated, done)`` read from its buffers in the walk's layout,
    ``V_{t+1}`` from ``V``'s rows (:func:`_async_walk.successor_rows`) and ``v_before``, the step after the
    chunk's first (the previous chunk's last row)."""
    r = r_s.index(stage).load(WALK).to(ACC)
    v = v_s.index(stage).load(WALK).to(ACC)
    v_succ = _async_walk.successor_rows(v, v_before)
    rho = _scan.fast_exp(lr_s.index(stage).load(WALK).to(ACC))
    terminated = term_s.index(stage).load(WALK) != 0
    done = terminated
    if HAS_TRUNC:
        done = done | (trunc_s.index(stage).load(WALK) != 0)
    if HAS_NEXT:
        v_after = nv_s.index(stage).load(WALK).to(ACC)
    else:
        v_after = gl.where((t == T - 1)[:, None], bootstrap[None, :], v_succ)
    return r, v, rho, v_succ, v_after, terminated, done


@_async_walk.twin_of(_vtrace_kernel)
@_async_walk.twin_kernel
def _vtrace_async_walk_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    v_ptr,
    s_v_t,
    s_v_n,
    lr_ptr,
    s_lr_t,
    s_lr_n,
    term_ptr,
    s_term_t,
    s_term_n,
    trunc_ptr,
    s_trunc_t,
    s_trunc_n,
    nv_ptr,
    s_nv_t,
    s_nv_n,
    boot_ptr,
    s_boot,
    vs_ptr,
    s_vs_t,
    s_vs_n,
    pg_ptr,
    s_pg_t,
    s_pg_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    lam_hi,
    lam_lo,
    rho_bar_hi,
    rho_bar_lo,
    c_bar_hi,
    c_bar_lo,
    pg_hi,
    pg_lo,
    HAS_TRUNC: tl.constexpr,
    HAS_NEXT: tl.constexpr,
    PG_IS_X: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
):
    """``_vtrace_kernel`` as a walk fed through shared memory (``_async_walk``): each chunk's inputs are
    copied ``NUM_STAGES - 1`` chunks ahead, then read in the walk's layout and scanned in each warp;
    ``x_{t+1}`` is the row before ``x``'s in the same tile (the carry for the first). Unless ``PG_IS_X``,
    only ``(alpha, beta)`` stay in registers through the scan: the policy-gradient advantages come from
    the chunk read again after it (:func:`_async_walk.read_again`): the rule's tiles then take about 170
    registers, where holding the chunk's values through the scan spilled (255)."""
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    rho_bar = _scan.scalar(rho_bar_hi, rho_bar_lo, ACC)
    c_bar = _scan.scalar(c_bar_hi, c_bar_lo, ACC)
    pg_rho_bar = _scan.scalar(pg_hi, pg_lo, ACC)
    FLOATS: gl.constexpr = r_ptr.dtype.element_ty
    WALK: gl.constexpr = _async_walk.walk_layout(BLOCK_T, BLOCK_N, TIME_THREADS, gl.num_warps())
    r_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    v_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    lr_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    term_s = _async_walk.ring(gl.int8, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    if HAS_TRUNC:
        trunc_s = _async_walk.ring(gl.int8, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    else:
        trunc_s = term_s  # never copied into nor read
    if HAS_NEXT:
        nv_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    else:
        nv_s = v_s  # never copied into nor read
    n0 = gl.program_id(0) * BLOCK_N
    for ahead in gl.static_range(NUM_STAGES - 1):
        _vtrace_async_copies(r_s, v_s, lr_s, term_s, trunc_s, nv_s, r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, lr_ptr,
                             s_lr_t, s_lr_n, term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, nv_ptr,
                             s_nv_t, s_nv_n, ahead, n0, T, N, HAS_TRUNC, HAS_NEXT, BLOCK_T, NUM_STAGES)
    rows = gl.arange(0, BLOCK_T, layout=gl.SliceLayout(1, WALK))
    n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, WALK))
    n_ok = n < N
    if HAS_NEXT:
        bootstrap = gl.zeros([BLOCK_N], ACC, layout=gl.SliceLayout(0, WALK))  # never read
    else:
        bootstrap = _scan.load_env(boot_ptr, n, s_boot, n_ok, ACC)
    carry = gl.zeros([BLOCK_N], ACC, layout=gl.SliceLayout(0, WALK))  # x_T = 0
    v_before = gl.zeros([BLOCK_N], ACC, layout=gl.SliceLayout(0, WALK))  # V_T: never read
    for chunk in range(0, gl.cdiv(T, BLOCK_T)):
        _async_walk.wait_for_chunk(NUM_STAGES)
        _vtrace_async_copies(r_s, v_s, lr_s, term_s, trunc_s, nv_s, r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, lr_ptr,
                             s_lr_t, s_lr_n, term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, nv_ptr,
                             s_nv_t, s_nv_n, chunk + NUM_STAGES - 1, n0, T, N, HAS_TRUNC, HAS_NEXT, BLOCK_T,
                             NUM_STAGES)
        stage = chunk % NUM_STAGES
        t = T - 1 - chunk * BLOCK_T - rows
        mask = (t >= 0)[:, None] & n_ok[None, :]
        not_last = (t < T - 1)[:, None]
        r, v, rho, v_succ, v_after, terminated, done = _vtrace_async_chunk(
            r_s, v_s, lr_s, term_s, trunc_s, nv_s, stage, t, v_before, bootstrap, T, HAS_TRUNC, HAS_NEXT, ACC, WALK)
        # Rows before step 0 come last in a chunk, after every real row in scan order: left unmasked.
        alpha, beta = _vtrace_pairs(r, v, rho, v_after, terminated, done, mask, gamma, lam, rho_bar, c_bar, False)
        x_before = carry
        x, carry = _async_walk.scan_chunk(alpha, beta, carry)
        # Each branch stores both outputs: one store of pg_adv after the branch took the other form's build to
        # 128 registers and 0.91x (experiment log, "V-trace's policy-gradient advantages as vs - V").
        if PG_IS_X:
            _scan.store_tile(vs_ptr, v + x, t, n, s_vs_t, s_vs_n, mask)
            _scan.store_tile(pg_ptr, x, t, n, s_pg_t, s_pg_n, mask)
        else:
            x_next = _async_walk.successor_rows(x, x_before)
            _async_walk.read_again()
            r, v, rho, v_succ, v_after, terminated, done = _vtrace_async_chunk(
                r_s, v_s, lr_s, term_s, trunc_s, nv_s, stage, t, v_before, bootstrap, T, HAS_TRUNC, HAS_NEXT, ACC,
                WALK)
            pg_fixed, pg_per_next = _vtrace_pg_terms(r, v, rho, v_succ, v_after, terminated, done, not_last, gamma,
                                                     lam, pg_rho_bar)
            _scan.store_tile(vs_ptr, v + x, t, n, s_vs_t, s_vs_n, mask)
            _scan.store_tile(pg_ptr, pg_fixed + pg_per_next * x_next, t, n, s_pg_t, s_pg_n, mask)
        v_before = _async_walk.last_row(v)


def validate(
    rewards,
    values,
    log_rhos,
    terminated,
    bootstrap_value,
    *,
    truncated=None,
    next_values=None,
    gamma=0.99,
    lam=1.0,
    rho_bar=1.0,
    c_bar=1.0,
    pg_rho_bar=1.0,
    time_dim=0,
) -> tuple[Batch, dict]:
    """Check :func:`vtrace`'s arguments; the validated batch and coefficients (the baselines share this)."""
    coefficients = {
        "gamma": check_scalar("gamma", gamma),
        "lam": check_scalar("lam", lam),
        "rho_bar": check_scalar("rho_bar", rho_bar, high=math.inf),
        "c_bar": check_scalar("c_bar", c_bar, high=math.inf),
        "pg_rho_bar": check_scalar("pg_rho_bar", pg_rho_bar, high=math.inf),
    }
    b = Batch(
        time_dim,
        floats={"rewards": rewards, "values": values, "log_rhos": log_rhos, "next_values": next_values},
        flags={"terminated": terminated, "truncated": truncated},
        per_env={"bootstrap_value": bootstrap_value},
        optional=("truncated", "next_values", "bootstrap_value"),
    )
    check_bootstrap(bootstrap_value, next_values)
    return b, coefficients


@replayable
def vtrace(
    rewards: torch.Tensor,
    values: torch.Tensor,
    log_rhos: torch.Tensor,
    terminated: torch.Tensor,
    bootstrap_value: torch.Tensor,
    *,
    truncated: Optional[torch.Tensor] = None,
    next_values: Optional[torch.Tensor] = None,
    gamma: float = 0.99,
    lam: float = 1.0,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    pg_rho_bar: float = 1.0,
    time_dim: int = 0,
    config: Optional[LaunchConfig] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Value targets and policy-gradient advantages ``(vs, pg_adv)``; see the module docstring.

    ``log_rhos`` are ``log pi(a_t|s_t) - log mu(a_t|s_t)`` (target over behaviour policy).
    ``rho_bar``, ``c_bar`` and ``pg_rho_bar`` are clipping thresholds (finite, >= 0; a large value
    such as ``1e6`` disables one).
    """
    b, k = validate(
        rewards,
        values,
        log_rhos,
        terminated,
        bootstrap_value,
        truncated=truncated,
        next_values=next_values,
        gamma=gamma,
        lam=lam,
        rho_bar=rho_bar,
        c_bar=c_bar,
        pg_rho_bar=pg_rho_bar,
        time_dim=time_dim,
    )
    gamma, lam, rho_bar, c_bar, pg_rho_bar = k["gamma"], k["lam"], k["rho_bar"], k["c_bar"], k["pg_rho_bar"]
    if not runs_triton(b.device):
        tm = b.time_major
        vs, pg_adv = reference.vtrace(
            tm("rewards"),
            tm("values"),
            tm("log_rhos"),
            tm("terminated"),
            b.env_vector("bootstrap_value"),
            truncated=tm("truncated"),
            next_values=tm("next_values"),
            gamma=gamma,
            lam=lam,
            rho_bar=rho_bar,
            c_bar=c_bar,
            pg_rho_bar=pg_rho_bar,
        )
        return b.from_time_major(vs), b.from_time_major(pg_adv)
    vs, pg_adv = b.output(), b.output()
    if b.T > 0:
        first = b.series("rewards", rewards)
        x_as_pg = stores_x_as_pg(pg_is_x(next_values is not None, rho_bar, c_bar, pg_rho_bar), b.out_dtype.itemsize,
                                 time_is_contiguous(first[1], b.N))
        launch(
            _vtrace_kernel,
            b,
            config,
            (
                *first,
                *b.series("values", rewards),
                *b.series("log_rhos", rewards),
                *b.series("terminated", rewards),
                *b.series("truncated", rewards),
                *b.series("next_values", rewards),
                *b.per_env("bootstrap_value", rewards),
                vs,
                *b.strides(vs),
                pg_adv,
                *b.strides(pg_adv),
            ),
            scalars(gamma, lam, rho_bar, c_bar, pg_rho_bar),
            form="pg_is_x" if x_as_pg else "pg_from_x_next",
            HAS_TRUNC=truncated is not None,
            HAS_NEXT=next_values is not None,
            PG_IS_X=x_as_pg,
        )
    return vs, pg_adv


def pg_is_x(has_next_values: bool, rho_bar: float, c_bar: float, pg_rho_bar: float) -> bool:
    """Whether ``pg_adv = vs - V`` exactly (module docstring): the three clipping thresholds equal and
    ``V'_t = V_{t+1}`` before the last step, which holds without ``next_values`` only (given ones may
    differ from the next row's values)."""
    return not has_next_values and rho_bar == c_bar == pg_rho_bar


def stores_x_as_pg(exact: bool, itemsize: int, time_contiguous: bool) -> bool:
    """Whether a call launches the kernels' form that stores ``x`` as ``pg_adv`` (``PG_IS_X``) where
    :func:`pg_is_x` holds (``exact``): for 16-bit floats (1.02-1.43x the other form on 15 bf16 ``[T, N]``
    cells, 1.05-1.40x on 14 held out, H200) and ``[N, T]`` rows (1.00-1.46x on 11 float32 cells; 0.93-1.58x on
    19 more, three of them 1-7% slower), not float32 ``[T, N]`` sequences, whose tiles were tuned for the other
    form and ran this one 0.69-1.06x (experiment log, "V-trace's policy-gradient advantages as vs - V")."""
    return exact and (itemsize == 2 or time_contiguous)
