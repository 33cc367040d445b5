"""Discounted returns with episode boundaries (Sutton & Barto, 2018, eq. 3.9), fused.

With ``V'_t = next_values[t]``::

    G_t = r_t + gamma (1 - done_t) G_{t+1} + gamma truncated_t (1 - terminated_t) V'_t
    G_T = bootstrap_value, or next_values[T-1] when only that is given, else 0

A truncated step bootstraps from the value after it; a terminated one from nothing. As a scan:
``alpha_t = r_t + gamma truncated_t (1 - terminated_t) V'_t``, ``beta_t = gamma (1 - done_t)``,
reverse in time, starting from ``G_T``.
"""

from __future__ import annotations

from typing import Optional

import torch

from kernels import _async_walk, _explicit_layout, _scan, reference
from kernels._args import Batch, check_scalar
from kernels._launch import LaunchConfig, launch, persistent_twin_of, scalars
from kernels._replay import replayable
from kernels._triton import gl, gluon, runs_triton, tl, triton

# Long [N, T] walks over many environments run faster unpipelined (_launch.choose_config).
PIPELINED_WALKS = False
# Float32 [N, T] rows of 65-256 steps over many environments: two environments per one-warp program
# (_launch.choose_config).
PAIRED_ROWS = True
# Reverse walks hold each [T, N] tile's steps latest first (_launch.choose_config).
LATEST_FIRST = True
# 16-bit [T, N] walks in 64 x 32 tiles on two warps, four environments per thread (_launch.choose_config).
FOUR_ENV_WALKS = 2
# Float32 [T, N] tiles of 33-256 steps 8 environments wide up to 8191 environments
# (_launch.choose_config).
NARROW_SHORT_TILES = True
# [T, N] sequences of 129-256 steps held whole in explicit-layout tiles: eight warps along time instead
# of four, at these (float bytes, tile length, fewer environments than; None: any) (_launch.choose_config).
EIGHT_WARP_SHORT_TILES = ((4, 256, None), (2, 256, None))
# Float32 [T, N] sequences of more than 256 steps in rows not 16 elements apart take this look-back tile in
# thread runs from 512 environments, (block_t, block_n, warps, below this many) (_launch._unaligned_look_back_tile).
UNALIGNED_LOOK_BACK_TILE = (256, 16, 4, 4096)
# Float32 [T, N] sequences of more than 256 steps in 16-aligned rows of 2^22 elements: look-back tiles walked
# by persistent programs (block_t, block_n, warps, programs per multiprocessor, from, below this many
# environments) (_launch._persistent_look_back_tile).
PERSISTENT_LOOK_BACK_TILE = (128, 32, 4, 2, 512, 3840)
# 16-bit [T, N] sequences of more than 256 steps in 16-aligned rows: walks fed through shared memory
# (_async_walk) on four warps, (steps, environments a program, stages, from, to environments): 128 x 64 in
# three stages while the programs take one per multiprocessor of the H200 (64 x 64 ran slower than the
# Triton walk there at every depth), 64 x 128 in three while they take one, 64 x 64 in two up to three per
# multiprocessor, 64 x 128 in two up to two (_launch._async_walk_tile).
ASYNC_WALKS = ((128, 64, 3, 8192, 8448), (64, 128, 3, 9216, 16896), (64, 64, 2, 16897, 25344),
               (64, 128, 2, 25345, 33792))


@triton.jit
def _discounted_returns_pairs(r, v_after, terminated, truncated, mask, gamma, HAS_TRUNC: tl.constexpr,
                              MASKED: tl.constexpr = True):
    """``(alpha, beta)`` of a tile (module docstring; ``v_after`` and ``truncated`` only with
    ``HAS_TRUNC``); the identity ``(0, 1)`` where masked (not ``MASKED``: ``mask`` is ignored, for
    tiles whose masked elements reach only masked outputs)."""
    done = terminated
    alpha = r
    if HAS_TRUNC:
        done = done | truncated
        alpha = alpha + tl.where(truncated & ~terminated, gamma * v_after, 0.0)
    beta = tl.where(done, 0.0, gamma)
    if not MASKED:
        return alpha, beta
    return tl.where(mask, alpha, 0.0), tl.where(mask, beta, 1.0)


@_scan.coefficient_kernel
def _discounted_returns_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
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
    out_ptr,
    s_out_t,
    s_out_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    HAS_TRUNC: tl.constexpr,
    HAS_NEXT: tl.constexpr,
    HAS_BOOT: tl.constexpr,
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
    block, first, end, num_chunks = _scan.tile_schedule(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = _scan.tile_envs(block, N, BLOCK_N, ENV_RUNS_OF_FOUR)
    if HAS_BOOT:
        carry = _scan.load_env(boot_ptr, n, s_boot, n_ok, ACC)
    elif HAS_NEXT:
        carry = _scan.load_env(nv_ptr + _scan.wide(T - 1) * s_nv_t, n, s_nv_n, n_ok, ACC)
    else:
        carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, True, LATEST_FIRST, TIME_THREADS)
        mask = (t[:, None] < T) & n_ok[None, :]
        r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
        terminated = _scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask, ENVS_IN_RUNS=ENV_RUNS_OF_FOUR)
        truncated = terminated
        v_after = r
        if HAS_TRUNC:
            truncated = _scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask, ENVS_IN_RUNS=ENV_RUNS_OF_FOUR)
            # the whole tile, though only truncated steps use it: a load masked by the flags waits for
            # them (H200, 8192 x 4096: 176 -> 148 us [N, T], 204 -> 186 us [T, N]; experiment log)
            v_after = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
        alpha, beta = _discounted_returns_pairs(r, v_after, terminated, truncated, mask, gamma, HAS_TRUNC)
        g, carry = _scan.scan_chunk(
            alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True,
            LOOKBACK, NUM_STAGES, SHUFFLE_TIME, LATEST_FIRST, TIME_THREADS,
        )
        _scan.store_tile(out_ptr, g, t, n, s_out_t, s_out_n, mask)


@triton.jit
def _discounted_returns_tile_inputs(r_ptr, s_r_t, s_r_n, term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t,
                                    s_trunc_n, nv_ptr, s_nv_t, s_nv_n, boot_ptr, s_boot, tile, tiles, n_blocks,
                                    num_chunks, T, N, HAS_TRUNC: tl.constexpr, HAS_NEXT: tl.constexpr,
                                    HAS_BOOT: tl.constexpr, ACC: tl.constexpr, BLOCK_T: tl.constexpr,
                                    BLOCK_N: tl.constexpr, TIME_THREADS: tl.constexpr):
    """Issue the loads of look-back tile ``tile`` (``_scan.persistent_tile``): ``(r, terminated,
    truncated, v_after, g_end)`` (``truncated`` and ``v_after`` only with ``HAS_TRUNC``), ``g_end``
    the walk's initial value ``G_T`` in its first chunk."""
    chunk, _, t, n, n_ok, mask = _scan.persistent_tile(tile, tiles, n_blocks, num_chunks, T, N, BLOCK_T, BLOCK_N,
                                                       TIME_THREADS)
    r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
    terminated = _scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask)
    if HAS_TRUNC:
        truncated = _scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
        v_after = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
    else:  # constants, which the loop does not carry
        truncated = tl.zeros_like(terminated)
        v_after = tl.zeros_like(r)
    first = n_ok & (tl.zeros_like(n) + chunk == 0)
    if HAS_BOOT:
        g_end = _scan.load_env(boot_ptr, n, s_boot, first, ACC)
    elif HAS_NEXT:
        g_end = _scan.load_env(nv_ptr + _scan.wide(T - 1) * s_nv_t, n, s_nv_n, first, ACC)
    else:
        g_end = tl.zeros([BLOCK_N], ACC)
    return r, terminated, truncated, v_after, g_end


@persistent_twin_of(_discounted_returns_kernel)
@_scan.coefficient_kernel
def _discounted_returns_persistent_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
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
    out_ptr,
    s_out_t,
    s_out_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    HAS_TRUNC: tl.constexpr,
    HAS_NEXT: tl.constexpr,
    HAS_BOOT: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
):
    """``_discounted_returns_kernel``'s look-back tiles walked by persistent programs, each loading its
    next tile while it scans, looks back for and stores the current one (as ``gae._gae_persistent_kernel``)."""
    tl.static_assert(LATEST_FIRST and TIME_THREADS > 1 and LOOKBACK > 0)
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    num_chunks, n_blocks, tiles, tile, step = _scan.persistent_walk(T, N, BLOCK_T, BLOCK_N)
    r, terminated, truncated, v_after, g_end = _discounted_returns_tile_inputs(
        r_ptr, s_r_t, s_r_n, term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, nv_ptr, s_nv_t, s_nv_n,
        boot_ptr, s_boot, tile, tiles, n_blocks, num_chunks, T, N, HAS_TRUNC, HAS_NEXT, HAS_BOOT, ACC, BLOCK_T,
        BLOCK_N, TIME_THREADS)
    for _ in tl.range(tile, tiles, step, num_stages=1):
        next_inputs = _discounted_returns_tile_inputs(
            r_ptr, s_r_t, s_r_n, term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, nv_ptr, s_nv_t,
            s_nv_n, boot_ptr, s_boot, tile + step, tiles, n_blocks, num_chunks, T, N, HAS_TRUNC, HAS_NEXT, HAS_BOOT,
            ACC, BLOCK_T, BLOCK_N, TIME_THREADS)
        chunk, block, t, n, _, mask = _scan.persistent_tile(tile, tiles, n_blocks, num_chunks, T, N, BLOCK_T,
                                                            BLOCK_N, TIME_THREADS)
        alpha, beta = _discounted_returns_pairs(r, v_after, terminated, truncated, mask, gamma, HAS_TRUNC)
        g, _ = _scan.scan_chunk(alpha, beta, g_end, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True, LOOKBACK,
                                1, 0, True, TIME_THREADS)
        _scan.store_tile(out_ptr, g, t, n, s_out_t, s_out_n, mask)
        r, terminated, truncated, v_after, g_end = next_inputs
        tile += step


@_explicit_layout.twin_of(_discounted_returns_kernel)
@_explicit_layout.twin_kernel
def _discounted_returns_explicit_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
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
    out_ptr,
    s_out_t,
    s_out_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    HAS_TRUNC: tl.constexpr,
    HAS_NEXT: tl.constexpr,
    HAS_BOOT: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
):
    """``_discounted_returns_kernel``: a whole ``[T, N]`` sequence per explicit-layout tile (``_explicit_layout``)."""
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    t, n, n_ok, mask = _explicit_layout.whole_sequence_tile(T, N, BLOCK_T, BLOCK_N, TIME_THREADS, True)
    if HAS_BOOT:
        g_end = _scan.load_env(boot_ptr, n, s_boot, n_ok, ACC)
    elif HAS_NEXT:
        g_end = _explicit_layout.load_step(nv_ptr, T - 1, s_nv_t, n, s_nv_n, n_ok, ACC)
    else:
        g_end = gl.zeros_like(n_ok).to(ACC)
    r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
    terminated = _scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask)
    truncated = terminated
    v_after = r
    if HAS_TRUNC:
        truncated = _scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
        v_after = _scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
    alpha, beta = _discounted_returns_pairs(r, v_after, terminated, truncated, mask, gamma, HAS_TRUNC)
    g, b = _explicit_layout.scan_tile(alpha, beta)
    _scan.store_tile(out_ptr, g + b * g_end[None, :], t, n, s_out_t, s_out_n, mask)


@gluon.jit
def _discounted_returns_async_copies(r_s, nv_s, term_s, trunc_s, r_ptr, s_r_t, s_r_n, nv_ptr, s_nv_t, s_nv_n, term_ptr,
                                     s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, chunk, n0, T, N,
                                     HAS_TRUNC: gl.constexpr, BLOCK_T: gl.constexpr, NUM_STAGES: gl.constexpr):
    """Issue the copies of walk chunk ``chunk`` into its buffers (``r``, ``V'`` with truncations, the
    flags) as one group; an empty group past the last chunk."""
    if chunk < gl.cdiv(T, BLOCK_T):
        stage = chunk % NUM_STAGES
        top = T - 1 - chunk * BLOCK_T
        _async_walk.copy_chunk(r_s.index(stage), r_ptr, top, n0, T, N, s_r_t, s_r_n)
        if HAS_TRUNC:
            _async_walk.copy_chunk(nv_s.index(stage), nv_ptr, top, n0, T, N, s_nv_t, s_nv_n)
        _async_walk.copy_chunk(term_s.index(stage), term_ptr, top, n0, T, N, s_term_t, s_term_n)
        if HAS_TRUNC:
            _async_walk.copy_chunk(trunc_s.index(stage), trunc_ptr, top, n0, T, N, s_trunc_t, s_trunc_n)
    _async_walk.commit()


@_async_walk.twin_of(_discounted_returns_kernel)
@_async_walk.twin_kernel
def _discounted_returns_async_walk_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
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
    out_ptr,
    s_out_t,
    s_out_n,
    ws,
    flags,
    T,
    N,
    gamma_hi,
    gamma_lo,
    HAS_TRUNC: tl.constexpr,
    HAS_NEXT: tl.constexpr,
    HAS_BOOT: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
):
    """``_discounted_returns_kernel`` as a walk fed through shared memory (``_async_walk``): each
    chunk's inputs are copied ``NUM_STAGES - 1`` chunks ahead, then read in the walk's layout and
    scanned in each warp."""
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    FLOATS: gl.constexpr = r_ptr.dtype.element_ty
    WALK: gl.constexpr = _async_walk.walk_layout(BLOCK_T, BLOCK_N, TIME_THREADS, gl.num_warps())
    r_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    if HAS_TRUNC:
        nv_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    else:  # never copied into nor read
        nv_s = r_s
    term_s = _async_walk.ring(gl.int8, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    if HAS_TRUNC:
        trunc_s = _async_walk.ring(gl.int8, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    else:
        trunc_s = term_s
    n0 = gl.program_id(0) * BLOCK_N
    for ahead in gl.static_range(NUM_STAGES - 1):
        _discounted_returns_async_copies(r_s, nv_s, term_s, trunc_s, r_ptr, s_r_t, s_r_n, nv_ptr, s_nv_t, s_nv_n, term_ptr,
                                         s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, ahead, n0, T, N,
                                         HAS_TRUNC, BLOCK_T, NUM_STAGES)
    rows = gl.arange(0, BLOCK_T, layout=gl.SliceLayout(1, WALK))
    n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, WALK))
    n_ok = n < N
    if HAS_BOOT:
        carry = _scan.load_env(boot_ptr, n, s_boot, n_ok, ACC)
    elif HAS_NEXT:
        carry = _explicit_layout.load_step(nv_ptr, T - 1, s_nv_t, n, s_nv_n, n_ok, ACC)
    else:
        carry = gl.zeros([BLOCK_N], ACC, layout=gl.SliceLayout(0, WALK))
    for chunk in range(0, gl.cdiv(T, BLOCK_T)):
        _async_walk.wait_for_chunk(NUM_STAGES)
        _discounted_returns_async_copies(r_s, nv_s, term_s, trunc_s, r_ptr, s_r_t, s_r_n, nv_ptr, s_nv_t, s_nv_n, term_ptr,
                                         s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n,
                                         chunk + NUM_STAGES - 1, n0, T, N, HAS_TRUNC, BLOCK_T, NUM_STAGES)
        stage = chunk % NUM_STAGES
        r = r_s.index(stage).load(WALK).to(ACC)
        terminated = term_s.index(stage).load(WALK) != 0
        truncated = terminated
        v_after = r
        if HAS_TRUNC:
            truncated = trunc_s.index(stage).load(WALK) != 0
            v_after = nv_s.index(stage).load(WALK).to(ACC)
        t = T - 1 - chunk * BLOCK_T - rows
        mask = (t >= 0)[:, None] & n_ok[None, :]
        # Rows before step 0 come last in a chunk, after every real row in scan order: left unmasked.
        alpha, beta = _discounted_returns_pairs(r, v_after, terminated, truncated, mask, gamma, HAS_TRUNC, False)
        g, carry = _async_walk.scan_chunk(alpha, beta, carry)
        _scan.store_tile(out_ptr, g, t, n, s_out_t, s_out_n, mask)


def validate(
    rewards, terminated, *, truncated=None, next_values=None, bootstrap_value=None, gamma=0.99, time_dim=0
) -> tuple[Batch, dict]:
    """Check :func:`discounted_returns`'s arguments; the validated batch and coefficients (shared with the baselines)."""
    coefficients = {"gamma": check_scalar("gamma", gamma)}
    if truncated is not None and next_values is None:
        raise ValueError("truncated needs next_values: a truncated step bootstraps from the value after it")
    b = Batch(
        time_dim,
        floats={"rewards": rewards, "next_values": next_values},
        flags={"terminated": terminated, "truncated": truncated},
        per_env={"bootstrap_value": bootstrap_value},
        optional=("truncated", "next_values", "bootstrap_value"),
    )
    return b, coefficients


@replayable
def discounted_returns(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    *,
    truncated: Optional[torch.Tensor] = None,
    next_values: Optional[torch.Tensor] = None,
    bootstrap_value: Optional[torch.Tensor] = None,
    gamma: float = 0.99,
    time_dim: int = 0,
    config: Optional[LaunchConfig] = None,
) -> torch.Tensor:
    """Discounted returns ``G``; see the module docstring. ``truncated`` needs ``next_values``."""
    b, k = validate(
        rewards,
        terminated,
        truncated=truncated,
        next_values=next_values,
        bootstrap_value=bootstrap_value,
        gamma=gamma,
        time_dim=time_dim,
    )
    gamma = k["gamma"]
    if not runs_triton(b.device):
        tm = b.time_major
        g = reference.discounted_returns(
            tm("rewards"),
            tm("terminated"),
            truncated=tm("truncated"),
            next_values=tm("next_values"),
            bootstrap_value=b.env_vector("bootstrap_value"),
            gamma=gamma,
        )
        return b.from_time_major(g)
    g = b.output()
    if b.T > 0:
        launch(
            _discounted_returns_kernel,
            b,
            config,
            (
                *b.series("rewards", rewards),
                *b.series("terminated", rewards),
                *b.series("truncated", rewards),
                *b.series("next_values", rewards),
                *b.per_env("bootstrap_value", rewards),
                g,
                *b.strides(g),
            ),
            scalars(gamma),
            HAS_TRUNC=truncated is not None,
            HAS_NEXT=next_values is not None,
            HAS_BOOT=bootstrap_value is not None,
        )
    return g
