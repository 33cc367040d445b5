"""Generalized Advantage Estimation (Schulman et al., 2016), fused.

With ``V'_t`` the value of the state after step t (``next_values[t]`` when given, else ``V_{t+1}``
and ``bootstrap_value`` at t = T-1)::

    delta_t = r_t + gamma (1 - terminated_t) V'_t - V_t
    A_t     = delta_t + gamma lam (1 - done_t) A_{t+1},   A_T = 0
    ret_t   = A_t + V_t

A truncated step still bootstraps from ``V'_t`` (the time limit is not a terminal state) but stops
the advantage trace, like a terminated one. As a scan: ``alpha_t = delta_t``,
``beta_t = gamma lam (1 - done_t)``, reverse in time.
"""

from __future__ import annotations

from typing import Optional

import torch

from kernels import _async_walk, _explicit_layout, _scan, reference
from kernels._args import Batch, check_bootstrap, check_scalar
from kernels._launch import LaunchConfig, launch, persistent_twin_of, scalars
from kernels._replay import replayable
from kernels._triton import gl, gluon, runs_triton, tl, triton

# Reverse walks hold each [T, N] tile's steps latest first (_launch.choose_config).
LATEST_FIRST = True
# Each step's successor is loaded too (a second tile one step later, or in thread-run tiles one row per
# thread where _launch.successors_from_runs says so): smaller walk tiles
# (_launch.choose_config), except where DEEP_WALKS decides.
SUCCESSOR_ROWS = True
# Float32 [T, N] walks from 8192 environments: four chunks deep in 64-environment tiles (_launch.choose_config).
DEEP_WALKS = True
# Float32 [N, T] rows of 65-256 steps over many environments: two environments per one-warp program
# (_launch.choose_config).
PAIRED_ROWS = True
# Float32 [N, T] rows of 2049-4096 steps from 128 to 511 environments, one per program: 16 warps
# instead of 8 (_launch.choose_config).
SIXTEEN_WARP_ROWS = True
# [T, N] sequences of 129-256 steps held whole in explicit-layout tiles (16- and 32-bit floats):
# eight warps along time instead of four, at these (float bytes, tile length, fewer environments than)
# (_launch.choose_config).
EIGHT_WARP_SHORT_TILES = ((4, 256, None), (2, 256, None))
# Float32 [T, N] sequences in rows not 16 elements apart held whole in explicit-layout tiles of two environments
# per thread, at these (most steps, from this many environments, warps) (_launch.choose_config).
UNALIGNED_WHOLE_TILES = ((90, 4096, 4), (256, 0, 8))
# Float32 [T, N] sequences of more than 256 steps in 16-aligned rows of 2^22 elements: look-back tiles walked
# by persistent programs (block_t, block_n, warps, programs per multiprocessor, from, below this many
# environments) (_launch._persistent_look_back_tile).
PERSISTENT_LOOK_BACK_TILE = (128, 32, 4, 2, 512, 3840)
# 16-bit [T, N] sequences of more than 256 steps in 16-aligned rows: walks fed through shared memory
# (_async_walk) on four warps, (steps, environments a program, stages, from, to environments): 64 x 64 in
# four stages while the programs take one per multiprocessor of the H200 (at most 132), 64 x 128 in three
# from 72 to 99 programs, 64 x 64 in two from 199 to 396 programs, 64 x 128 in three again from 199 to
# 264 (_launch._async_walk_tile).
ASYNC_WALKS = ((64, 64, 4, 8192, 8448), (64, 128, 3, 9216, 12672), (64, 64, 2, 12673, 25344),
               (64, 128, 3, 25345, 33792))


@triton.jit
def _gae_pairs(r, v, v_after, terminated, done, mask, gamma, lam, ACC: tl.constexpr, MASKED: tl.constexpr = True):
    """``(alpha, beta)`` of a tile: ``delta_t`` and ``gamma lam (1 - done_t)``; the identity ``(0, 1)``
    where masked (not ``MASKED``: ``mask`` is ignored, for tiles whose masked elements reach only
    masked outputs)."""
    delta = r + gamma * tl.where(terminated, 0.0, v_after) - v
    if not MASKED:
        return delta, tl.where(done, 0.0, gamma * lam).to(ACC)
    alpha = tl.where(mask, delta, 0.0)
    beta = tl.where(mask & ~done, gamma * lam, tl.where(mask, 0.0, 1.0)).to(ACC)
    return alpha, beta


@_scan.coefficient_kernel
def _gae_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    v_ptr,
    s_v_t,
    s_v_n,
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
    adv_ptr,
    s_adv_t,
    s_adv_n,
    ret_ptr,
    s_ret_t,
    s_ret_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    lam_hi,
    lam_lo,
    HAS_TRUNC: tl.constexpr,
    HAS_NEXT: tl.constexpr,
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
    block, first, end, num_chunks = _scan.tile_schedule(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = _scan.tile_envs(block, N, BLOCK_N, ENV_RUNS_OF_FOUR)
    if not HAS_NEXT:
        bootstrap = _scan.load_env(boot_ptr, n, s_boot, n_ok, ACC)
    carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, True, LATEST_FIRST, TIME_THREADS)
        mask = (t[:, None] < T) & n_ok[None, :]
        r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
        v = _scan.load_tile(v_ptr, t, n, s_v_t, s_v_n, mask, ACC)
        terminated = _scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask, ENVS_IN_RUNS=ENV_RUNS_OF_FOUR)
        done = terminated
        if HAS_TRUNC:
            done = done | _scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask, ENVS_IN_RUNS=ENV_RUNS_OF_FOUR)
        if HAS_NEXT:
            v_after = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
        else:
            v_succ = _scan.successor_rows(
                v, v_ptr, chunk, num_chunks, t, n, s_v_t, s_v_n, n_ok, T, ACC, BLOCK_T, SHUFFLE_TIME, LATEST_FIRST,
                TIME_THREADS if RUN_SUCCESSORS else 1,
            )
            v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :], v_succ)
        alpha, beta = _gae_pairs(r, v, v_after, terminated, done, mask, gamma, lam, ACC)
        adv, carry = _scan.scan_chunk(
            alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True,
            LOOKBACK, NUM_STAGES, SHUFFLE_TIME, LATEST_FIRST, TIME_THREADS,
        )
        _scan.store_tile(adv_ptr, adv, t, n, s_adv_t, s_adv_n, mask)
        _scan.store_tile(ret_ptr, adv + v, t, n, s_ret_t, s_ret_n, mask)


@triton.jit
def _gae_tile_inputs(r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t,
                     s_trunc_n, nv_ptr, s_nv_t, s_nv_n, boot_ptr, s_boot, tile, tiles, n_blocks, num_chunks, T, N,
                     HAS_TRUNC: tl.constexpr, HAS_NEXT: tl.constexpr, ACC: tl.constexpr, BLOCK_T: tl.constexpr,
                     BLOCK_N: tl.constexpr, TIME_THREADS: tl.constexpr):
    """Issue the loads of look-back tile ``tile`` (nothing from ``tile >= tiles`` on), held latest first
    in thread runs: ``(r, v, terminated, done, after, bootstrap)``, ``after`` the ``next_values`` tile
    or the loaded successors of the runs' first steps (``_scan.first_step_successors``), ``bootstrap``
    the bootstrap values in the walk's first chunk."""
    chunk, _, t, n, n_ok, mask = _scan.persistent_tile(tile, tiles, n_blocks, num_chunks, T, N, BLOCK_T, BLOCK_N,
                                                       TIME_THREADS)
    r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
    v = _scan.load_tile(v_ptr, t, n, s_v_t, s_v_n, mask, ACC)
    terminated = _scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask)
    done = terminated
    if HAS_TRUNC:
        done = done | _scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
    if HAS_NEXT:
        after = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
        bootstrap = tl.zeros([BLOCK_N], ACC)
    else:
        after = _scan.first_step_successors(v_ptr, t, n, s_v_t, s_v_n, n_ok, T, ACC, TIME_THREADS)
        bootstrap = _scan.load_env(boot_ptr, n, s_boot, n_ok & (tl.zeros_like(n) + chunk == 0), ACC)
    return r, v, terminated, done, after, bootstrap


@persistent_twin_of(_gae_kernel)
@_scan.coefficient_kernel
def _gae_persistent_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    v_ptr,
    s_v_t,
    s_v_n,
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
    adv_ptr,
    s_adv_t,
    s_adv_n,
    ret_ptr,
    s_ret_t,
    s_ret_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    lam_hi,
    lam_lo,
    HAS_TRUNC: tl.constexpr,
    HAS_NEXT: tl.constexpr,
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
    """``_gae_kernel``'s look-back tiles walked by persistent programs (``LaunchConfig.persistent``):
    program ``p`` of ``G`` takes the tiles ``p, p + G, ...`` in walking order, and issues the loads of
    its next tile before it scans the current one, looks back for its carry and stores it, so the
    next tile's loads are in flight meanwhile (a load stalls a thread only where its value is first
    used). A tile waits only on tiles of smaller number, which resident programs reach first: the
    launch is cooperative (``_launch``)."""
    tl.static_assert(LATEST_FIRST and TIME_THREADS > 1 and LOOKBACK > 0)
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    num_chunks, n_blocks, tiles, tile, step = _scan.persistent_walk(T, N, BLOCK_T, BLOCK_N)
    r, v, terminated, done, after, bootstrap = _gae_tile_inputs(
        r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n,
        nv_ptr, s_nv_t, s_nv_n, boot_ptr, s_boot, tile, tiles, n_blocks, num_chunks, T, N, HAS_TRUNC, HAS_NEXT, ACC,
        BLOCK_T, BLOCK_N, TIME_THREADS)
    for _ in tl.range(tile, tiles, step, num_stages=1):
        next_inputs = _gae_tile_inputs(
            r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n,
            nv_ptr, s_nv_t, s_nv_n, boot_ptr, s_boot, tile + step, tiles, n_blocks, num_chunks, T, N, HAS_TRUNC,
            HAS_NEXT, ACC, BLOCK_T, BLOCK_N, TIME_THREADS)
        chunk, block, t, n, _, mask = _scan.persistent_tile(tile, tiles, n_blocks, num_chunks, T, N, BLOCK_T,
                                                            BLOCK_N, TIME_THREADS)
        if HAS_NEXT:
            v_after = after
        else:
            v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :],
                               _scan.successors_from_loaded(v, after, TIME_THREADS))
        alpha, beta = _gae_pairs(r, v, v_after, terminated, done, mask, gamma, lam, ACC)
        adv, _ = _scan.scan_chunk(alpha, beta, tl.zeros([BLOCK_N], ACC), chunk, block, T, N, ws, flags, BLOCK_T,
                                  BLOCK_N, True, LOOKBACK, 1, 0, True, TIME_THREADS)
        _scan.store_tile(adv_ptr, adv, t, n, s_adv_t, s_adv_n, mask)
        _scan.store_tile(ret_ptr, adv + v, t, n, s_ret_t, s_ret_n, mask)
        r, v, terminated, done, after, bootstrap = next_inputs
        tile += step


@_explicit_layout.twin_of(_gae_kernel)
@_explicit_layout.twin_kernel
def _gae_explicit_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    v_ptr,
    s_v_t,
    s_v_n,
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
    adv_ptr,
    s_adv_t,
    s_adv_n,
    ret_ptr,
    s_ret_t,
    s_ret_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    lam_hi,
    lam_lo,
    HAS_TRUNC: tl.constexpr,
    HAS_NEXT: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
):
    """``_gae_kernel``: a whole ``[T, N]`` sequence per explicit-layout tile (``_explicit_layout``)."""
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    t, n, n_ok, mask = _explicit_layout.whole_sequence_tile(T, N, BLOCK_T, BLOCK_N, TIME_THREADS, True)
    r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
    v = _scan.load_tile(v_ptr, t, n, s_v_t, s_v_n, mask, ACC)
    terminated = _scan.load_flags_full_width(term_ptr, t, n, s_term_t, s_term_n, mask)
    done = terminated
    if HAS_TRUNC:
        done = done | _scan.load_flags_full_width(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
    if HAS_NEXT:
        v_after = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
    else:
        bootstrap = _scan.load_env(boot_ptr, n, s_boot, n_ok, ACC)
        v_succ = _explicit_layout.successor_tile(v, v_ptr, t, n, T, N, s_v_t, s_v_n, BLOCK_T, BLOCK_N, TIME_THREADS,
                                                 ACC)
        v_after = gl.where(t[:, None] == T - 1, bootstrap[None, :], v_succ)
    alpha, beta = _gae_pairs(r, v, v_after, terminated, done, mask, gamma, lam, ACC)
    adv, _ = _explicit_layout.scan_tile(alpha, beta)
    _scan.store_tile(adv_ptr, adv, t, n, s_adv_t, s_adv_n, mask)
    _scan.store_tile(ret_ptr, adv + v, t, n, s_ret_t, s_ret_n, mask)


@gluon.jit
def _gae_async_copies(r_s, v_s, after_s, term_s, trunc_s, r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, term_ptr, s_term_t,
                      s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, nv_ptr, s_nv_t, s_nv_n, chunk, n0, T, N,
                      HAS_TRUNC: gl.constexpr, HAS_NEXT: gl.constexpr, BLOCK_T: gl.constexpr,
                      NUM_STAGES: gl.constexpr):
    """Issue the copies of walk chunk ``chunk`` into its buffers (``r``, ``v``, ``v'``: ``next_values``
    or ``v`` one step later, the flags) as one group; an empty group past the last chunk."""
    if chunk < gl.cdiv(T, BLOCK_T):
        stage = chunk % NUM_STAGES
        top = T - 1 - chunk * BLOCK_T
        _async_walk.copy_chunk(r_s.index(stage), r_ptr, top, n0, T, N, s_r_t, s_r_n)
        _async_walk.copy_chunk(v_s.index(stage), v_ptr, top, n0, T, N, s_v_t, s_v_n)
        if HAS_NEXT:
            _async_walk.copy_chunk(after_s.index(stage), nv_ptr, top, n0, T, N, s_nv_t, s_nv_n)
        else:
            _async_walk.copy_chunk(after_s.index(stage), v_ptr, top, n0, T, N, s_v_t, s_v_n, 1)
        _async_walk.copy_chunk(term_s.index(stage), term_ptr, top, n0, T, N, s_term_t, s_term_n)
        if HAS_TRUNC:
            _async_walk.copy_chunk(trunc_s.index(stage), trunc_ptr, top, n0, T, N, s_trunc_t, s_trunc_n)
    _async_walk.commit()


@_async_walk.twin_of(_gae_kernel)
@_async_walk.twin_kernel
def _gae_async_walk_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    v_ptr,
    s_v_t,
    s_v_n,
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
    adv_ptr,
    s_adv_t,
    s_adv_n,
    ret_ptr,
    s_ret_t,
    s_ret_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    lam_hi,
    lam_lo,
    HAS_TRUNC: tl.constexpr,
    HAS_NEXT: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
):
    """``_gae_kernel`` as a walk fed through shared memory (``_async_walk``): each chunk's inputs are
    copied ``NUM_STAGES - 1`` chunks ahead, then read in the walk's layout and scanned in each warp."""
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    FLOATS: gl.constexpr = r_ptr.dtype.element_ty
    WALK: gl.constexpr = _async_walk.walk_layout(BLOCK_T, BLOCK_N, TIME_THREADS, gl.num_warps())
    r_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    v_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    after_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    term_s = _async_walk.ring(gl.int8, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    trunc_s = _async_walk.ring(gl.int8, NUM_STAGES if HAS_TRUNC else 1, BLOCK_T, BLOCK_N, TIME_THREADS)
    n0 = gl.program_id(0) * BLOCK_N
    for ahead in gl.static_range(NUM_STAGES - 1):
        _gae_async_copies(r_s, v_s, after_s, term_s, trunc_s, r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, term_ptr,
                          s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, nv_ptr, s_nv_t, s_nv_n, ahead, n0, T,
                          N, HAS_TRUNC, HAS_NEXT, BLOCK_T, NUM_STAGES)
    rows = gl.arange(0, BLOCK_T, layout=gl.SliceLayout(1, WALK))
    n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, WALK))
    n_ok = n < N
    if not HAS_NEXT:
        bootstrap = _scan.load_env(boot_ptr, n, s_boot, n_ok, ACC)
    carry = gl.zeros([BLOCK_N], ACC, layout=gl.SliceLayout(0, WALK))
    for chunk in range(0, gl.cdiv(T, BLOCK_T)):
        _async_walk.wait_for_chunk(NUM_STAGES)
        _gae_async_copies(r_s, v_s, after_s, term_s, trunc_s, r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, term_ptr,
                          s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, nv_ptr, s_nv_t, s_nv_n,
                          chunk + NUM_STAGES - 1, n0, T, N, HAS_TRUNC, HAS_NEXT, BLOCK_T, NUM_STAGES)
        stage = chunk % NUM_STAGES
        r = r_s.index(stage).load(WALK).to(ACC)
        v = v_s.index(stage).load(WALK).to(ACC)
        v_after = after_s.index(stage).load(WALK).to(ACC)
        terminated = term_s.index(stage).load(WALK) != 0
        done = terminated
        if HAS_TRUNC:
            done = done | (trunc_s.index(stage).load(WALK) != 0)
        t = T - 1 - chunk * BLOCK_T - rows
        if not HAS_NEXT:
            v_after = gl.where((t == T - 1)[:, None], bootstrap[None, :], v_after)
        mask = (t >= 0)[:, None] & n_ok[None, :]
        # Rows before step 0 come last in a chunk, after every real row in scan order: left unmasked.
        alpha, beta = _gae_pairs(r, v, v_after, terminated, done, mask, gamma, lam, ACC, False)
        adv, carry = _async_walk.scan_chunk(alpha, beta, carry)
        _scan.store_tile(adv_ptr, adv, t, n, s_adv_t, s_adv_n, mask)
        _scan.store_tile(ret_ptr, adv + v, t, n, s_ret_t, s_ret_n, mask)


def validate(
    rewards, values, terminated, bootstrap_value, *, truncated=None, next_values=None, gamma=0.99, lam=0.95, time_dim=0
) -> tuple[Batch, dict]:
    """Check :func:`gae`'s arguments; the validated batch and coefficients (the baselines share this)."""
    coefficients = {"gamma": check_scalar("gamma", gamma), "lam": check_scalar("lam", lam)}
    b = Batch(
        time_dim,
        floats={"rewards": rewards, "values": values, "next_values": next_values},
        flags={"terminated": terminated, "truncated": truncated},
        per_env={"bootstrap_value": bootstrap_value},
        optional=("truncated", "next_values", "bootstrap_value"),
    )
    check_bootstrap(bootstrap_value, next_values)
    return b, coefficients


@replayable
def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminated: torch.Tensor,
    bootstrap_value: torch.Tensor,
    *,
    truncated: Optional[torch.Tensor] = None,
    next_values: Optional[torch.Tensor] = None,
    gamma: float = 0.99,
    lam: float = 0.95,
    time_dim: int = 0,
    config: Optional[LaunchConfig] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns ``(adv, ret)`` by GAE; see the module docstring for the math.

    ``rewards``, ``values``, ``terminated`` (and ``truncated``, ``next_values``) are ``[T, N]``
    (``time_dim=1``: ``[N, T]``; 1-D: one environment); ``bootstrap_value`` is ``V(s_T)``, ``[N]``.
    ``config`` overrides the kernel's block shape (for benchmarks).
    """
    b, k = validate(
        rewards,
        values,
        terminated,
        bootstrap_value,
        truncated=truncated,
        next_values=next_values,
        gamma=gamma,
        lam=lam,
        time_dim=time_dim,
    )
    gamma, lam = k["gamma"], k["lam"]
    if not runs_triton(b.device):
        tm = b.time_major
        adv, ret = reference.gae(
            tm("rewards"),
            tm("values"),
            tm("terminated"),
            b.env_vector("bootstrap_value"),
            truncated=tm("truncated"),
            next_values=tm("next_values"),
            gamma=gamma,
            lam=lam,
        )
        return b.from_time_major(adv), b.from_time_major(ret)
    adv, ret = b.output(), b.output()
    if b.T > 0:
        launch(
            _gae_kernel,
            b,
            config,
            (
                *b.series("rewards", rewards),
                *b.series("values", rewards),
                *b.series("terminated", rewards),
                *b.series("truncated", rewards),
                *b.series("next_values", rewards),
                *b.per_env("bootstrap_value", rewards),
                adv,
                *b.strides(adv),
                ret,
                *b.strides(ret),
            ),
            scalars(gamma, lam),
            HAS_TRUNC=truncated is not None,
            HAS_NEXT=next_values is not None,
        )
    return adv, ret
