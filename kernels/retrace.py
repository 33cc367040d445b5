"""Retrace(lambda) (Munos et al., 2016, "Safe and Efficient Off-Policy Reinforcement Learning"), fused.

``expected_next_q[t] = sum_a pi(a|s_{t+1}) Q(s_{t+1}, a)`` is computed by the caller, so no
per-action tensor reaches the kernel. With ``c_t = lam min(c_bar, exp(log_rhos_t))``::

    D_t     = r_t + gamma (1 - terminated_t) expected_next_q_t - Q_t
              + gamma (1 - done_t) c_{t+1} D_{t+1},        D_T = 0
    q_ret_t = Q_t + D_t

As a scan: ``alpha_t = r_t + gamma (1 - terminated_t) expected_next_q_t - Q_t`` and
``beta_t = gamma (1 - done_t) c_{t+1}`` (0 at t = T-1), reverse in time. The trace coefficient of
the next step is read from the next row of ``log_rhos``; registers stay bounded by the tile at any T.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from kernels import _async_walk, _explicit_layout, _scan, reference
from kernels._args import Batch, check_scalar
from kernels._launch import LaunchConfig, launch, scalars
from kernels._replay import replayable
from kernels._triton import gl, gluon, runs_triton, tl, triton

# Reverse walks hold each [T, N] tile's steps latest first (_launch.choose_config).
LATEST_FIRST = True
# Each step's successor is loaded too (a second tile one step later): smaller walk tiles
# (_launch.choose_config).
SUCCESSOR_ROWS = True
# Float32 [N, T] rows of 65-256 steps over many environments: two environments per one-warp program
# (_launch.choose_config).
PAIRED_ROWS = True
# Float32 [T, N] tiles of 33-256 steps 8 environments wide up to 8191 environments
# (_launch.choose_config).
NARROW_SHORT_TILES = True
# Float32 [T, N] sequences of 129-256 steps from 4096 to 8192 environments: 64 x 32 four-warp
# look-back tiles (_launch.choose_config).
SHORT_LOOK_BACK_TILES = True
# Float32 [T, N] sequences of 65536 steps and more over 16 environments: 512 x 16 four-warp look-back
# tiles in Triton's layout, not the other kernels' tiles in thread runs (_launch.choose_config).
ONE_COLUMN_TRITON_TILES = True
# [T, N] sequences held whole in explicit-layout tiles: eight warps along time instead of four, at these
# (float bytes, tile length, fewer environments than; None: any): float32 65-256 steps, 16-bit floats
# 129-256 (_launch.choose_config).
EIGHT_WARP_SHORT_TILES = ((4, 128, None), (4, 256, None), (2, 256, None))
# Float32 [T, N] sequences in rows not 16 elements apart held whole in explicit-layout tiles of two environments
# per thread, at these (most steps, from this many environments, warps) (_launch.choose_config).
UNALIGNED_WHOLE_TILES = ((128, 0, 8), (256, 0, 8))
# Float32 [T, N] sequences of more than 256 steps in rows not 16 elements apart take this look-back tile in
# thread runs from 512 environments, (block_t, block_n, warps, below this many) (_launch._unaligned_look_back_tile).
UNALIGNED_LOOK_BACK_TILE = (128, 32, 4, 4096)
# 16-bit [T, N] sequences of more than 256 steps in 16-aligned rows: walks fed through shared memory
# (_async_walk) on four warps, (steps, environments a program, stages, from, to environments): 64 x 64 in
# three stages while the programs take one per multiprocessor of the H200, in two up to two per
# multiprocessor, in three again from 265 to 396 programs, in two from 397 to 528 (_launch._async_walk_tile).
ASYNC_WALKS = ((64, 64, 3, 8192, 8448), (64, 64, 2, 8449, 16896), (64, 64, 3, 16897, 25344),
               (64, 64, 2, 25345, 33792))


@triton.jit
def _retrace_pairs(r, q, expected_next_q, rho_succ, terminated, done, mask, not_last, gamma, lam, c_bar,
                   MASKED: tl.constexpr = True):
    """``(alpha, beta)`` of a tile (module docstring) from ``rho_{t+1}``; the identity ``(0, 1)`` where masked
    (not ``MASKED``: ``mask`` is ignored, for tiles whose masked elements reach only masked outputs)."""
    alpha = r + gamma * tl.where(terminated, 0.0, expected_next_q) - q
    trace = tl.where(not_last & ~done, gamma * lam * tl.minimum(rho_succ, c_bar), 0.0)
    if not MASKED:
        return alpha, trace
    return tl.where(mask, alpha, 0.0), tl.where(mask, trace, 1.0)


@_scan.coefficient_kernel
def _retrace_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    q_ptr,
    s_q_t,
    s_q_n,
    eq_ptr,
    s_eq_t,
    s_eq_n,
    lr_ptr,
    s_lr_t,
    s_lr_n,
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
    c_bar_hi,
    c_bar_lo,
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
    c_bar = _scan.scalar(c_bar_hi, c_bar_lo, ACC)
    block, first, end, num_chunks = _scan.tile_schedule(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = _scan.tile_envs(block, N, BLOCK_N, ENV_RUNS_OF_FOUR)
    carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, True, LATEST_FIRST, TIME_THREADS)
        mask = (t[:, None] < T) & n_ok[None, :]
        not_last = (t[:, None] + 1 < T) & n_ok[None, :]
        r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
        q = _scan.load_tile(q_ptr, t, n, s_q_t, s_q_n, mask, ACC)
        expected_next_q = _scan.load_tile(eq_ptr, t, n, s_eq_t, s_eq_n, mask, ACC)
        log_rhos = _scan.load_tile(lr_ptr, t, n, s_lr_t, s_lr_n, mask, ACC)  # used only with SHUFFLE_TIME
        # Not from thread runs (TIME_THREADS 1 here): that would load log_rhos at t for this alone.
        log_rho_succ = _scan.successor_rows(
            log_rhos, lr_ptr, chunk, num_chunks, t, n, s_lr_t, s_lr_n, n_ok, T, ACC, BLOCK_T, SHUFFLE_TIME,
            LATEST_FIRST, 1,
        )
        # Runs of four measured slower for tiles in time order ([T, N] 277 -> 323 us); thread runs need
        # them: flags in the float tiles' layout, or it changes by shuffles.
        full_width: tl.constexpr = TIME_THREADS == 1
        terminated = _scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask, full_width, ENV_RUNS_OF_FOUR)
        done = terminated
        if HAS_TRUNC:
            done = done | _scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask, full_width, ENV_RUNS_OF_FOUR)
        alpha, beta = _retrace_pairs(r, q, expected_next_q, _scan.fast_exp(log_rho_succ), terminated, done, mask,
                                     not_last, gamma, lam, c_bar)
        d, carry = _scan.scan_chunk(
            alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True,
            LOOKBACK, NUM_STAGES, SHUFFLE_TIME, LATEST_FIRST, TIME_THREADS,
        )
        _scan.store_tile(out_ptr, q + d, t, n, s_out_t, s_out_n, mask)


@_explicit_layout.twin_of(_retrace_kernel)
@_explicit_layout.twin_kernel
def _retrace_explicit_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    q_ptr,
    s_q_t,
    s_q_n,
    eq_ptr,
    s_eq_t,
    s_eq_n,
    lr_ptr,
    s_lr_t,
    s_lr_n,
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
    c_bar_hi,
    c_bar_lo,
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
    """``_retrace_kernel``: a whole ``[T, N]`` sequence per explicit-layout tile (``_explicit_layout``)."""
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    c_bar = _scan.scalar(c_bar_hi, c_bar_lo, ACC)
    t, n, n_ok, mask = _explicit_layout.whole_sequence_tile(T, N, BLOCK_T, BLOCK_N, TIME_THREADS, True)
    not_last = (t[:, None] + 1 < T) & n_ok[None, :]
    r = _scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
    q = _scan.load_tile(q_ptr, t, n, s_q_t, s_q_n, mask, ACC)
    expected_next_q = _scan.load_tile(eq_ptr, t, n, s_eq_t, s_eq_n, mask, ACC)
    log_rho_succ = _scan.load_tile(lr_ptr, t + 1, n, s_lr_t, s_lr_n, not_last, ACC)
    terminated = _scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask)
    done = terminated
    if HAS_TRUNC:
        done = done | _scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
    alpha, beta = _retrace_pairs(r, q, expected_next_q, tl.exp(log_rho_succ), terminated, done, mask, not_last,
                                 gamma, lam, c_bar)
    d, _ = _explicit_layout.scan_tile(alpha, beta)
    _scan.store_tile(out_ptr, q + d, t, n, s_out_t, s_out_n, mask)


@gluon.jit
def _retrace_async_copies(r_s, q_s, eq_s, lr_s, term_s, trunc_s, r_ptr, s_r_t, s_r_n, q_ptr, s_q_t, s_q_n, eq_ptr,
                          s_eq_t, s_eq_n, lr_ptr, s_lr_t, s_lr_n, term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t,
                          s_trunc_n, chunk, n0, T, N, HAS_TRUNC: gl.constexpr, BLOCK_T: gl.constexpr,
                          NUM_STAGES: gl.constexpr):
    """Issue the copies of walk chunk ``chunk`` into its buffers (``r``, ``Q``, ``expected_next_q``,
    ``log_rhos`` one step later, the flags) as one group; an empty group past the last chunk."""
    if chunk < gl.cdiv(T, BLOCK_T):
        stage = chunk % NUM_STAGES
        top = T - 1 - chunk * BLOCK_T
        _async_walk.copy_chunk(r_s.index(stage), r_ptr, top, n0, T, N, s_r_t, s_r_n)
        _async_walk.copy_chunk(q_s.index(stage), q_ptr, top, n0, T, N, s_q_t, s_q_n)
        _async_walk.copy_chunk(eq_s.index(stage), eq_ptr, top, n0, T, N, s_eq_t, s_eq_n)
        _async_walk.copy_chunk(lr_s.index(stage), lr_ptr, top, n0, T, N, s_lr_t, s_lr_n, 1)
        _async_walk.copy_chunk(term_s.index(stage), term_ptr, top, n0, T, N, s_term_t, s_term_n)
        if HAS_TRUNC:
            _async_walk.copy_chunk(trunc_s.index(stage), trunc_ptr, top, n0, T, N, s_trunc_t, s_trunc_n)
    _async_walk.commit()


@_async_walk.twin_of(_retrace_kernel)
@_async_walk.twin_kernel
def _retrace_async_walk_kernel(
    r_ptr,
    s_r_t,
    s_r_n,
    q_ptr,
    s_q_t,
    s_q_n,
    eq_ptr,
    s_eq_t,
    s_eq_n,
    lr_ptr,
    s_lr_t,
    s_lr_n,
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
    c_bar_hi,
    c_bar_lo,
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
    """``_retrace_kernel`` as a walk fed through shared memory (``_async_walk``): each chunk's inputs are
    copied ``NUM_STAGES - 1`` chunks ahead, ``log_rhos`` as ``log rho_{t+1}`` in row ``t``'s place, then
    read in the walk's layout and scanned in each warp."""
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    c_bar = _scan.scalar(c_bar_hi, c_bar_lo, ACC)
    FLOATS: gl.constexpr = r_ptr.dtype.element_ty
    WALK: gl.constexpr = _async_walk.walk_layout(BLOCK_T, BLOCK_N, TIME_THREADS, gl.num_warps())
    r_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    q_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    eq_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    lr_s = _async_walk.ring(FLOATS, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    term_s = _async_walk.ring(gl.int8, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    if HAS_TRUNC:
        trunc_s = _async_walk.ring(gl.int8, NUM_STAGES, BLOCK_T, BLOCK_N, TIME_THREADS)
    else:
        trunc_s = term_s  # never copied into nor read
    n0 = gl.program_id(0) * BLOCK_N
    for ahead in gl.static_range(NUM_STAGES - 1):
        _retrace_async_copies(r_s, q_s, eq_s, lr_s, term_s, trunc_s, r_ptr, s_r_t, s_r_n, q_ptr, s_q_t, s_q_n, eq_ptr,
                              s_eq_t, s_eq_n, lr_ptr, s_lr_t, s_lr_n, term_ptr, s_term_t, s_term_n, trunc_ptr,
                              s_trunc_t, s_trunc_n, ahead, n0, T, N, HAS_TRUNC, BLOCK_T, NUM_STAGES)
    rows = gl.arange(0, BLOCK_T, layout=gl.SliceLayout(1, WALK))
    n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, WALK))
    n_ok = n < N
    carry = gl.zeros([BLOCK_N], ACC, layout=gl.SliceLayout(0, WALK))  # D_T = 0
    for chunk in range(0, gl.cdiv(T, BLOCK_T)):
        _async_walk.wait_for_chunk(NUM_STAGES)
        _retrace_async_copies(r_s, q_s, eq_s, lr_s, term_s, trunc_s, r_ptr, s_r_t, s_r_n, q_ptr, s_q_t, s_q_n, eq_ptr,
                              s_eq_t, s_eq_n, lr_ptr, s_lr_t, s_lr_n, term_ptr, s_term_t, s_term_n, trunc_ptr,
                              s_trunc_t, s_trunc_n, chunk + NUM_STAGES - 1, n0, T, N, HAS_TRUNC, BLOCK_T, NUM_STAGES)
        stage = chunk % NUM_STAGES
        r = r_s.index(stage).load(WALK).to(ACC)
        q = q_s.index(stage).load(WALK).to(ACC)
        expected_next_q = eq_s.index(stage).load(WALK).to(ACC)
        log_rho_succ = lr_s.index(stage).load(WALK).to(ACC)  # not copied at T - 1: not_last discards it
        terminated = term_s.index(stage).load(WALK) != 0
        done = terminated
        if HAS_TRUNC:
            done = done | (trunc_s.index(stage).load(WALK) != 0)
        t = T - 1 - chunk * BLOCK_T - rows
        mask = (t >= 0)[:, None] & n_ok[None, :]
        not_last = (t < T - 1)[:, None]
        # Rows before step 0 come last in a chunk, after every real row in scan order: left unmasked.
        alpha, beta = _retrace_pairs(r, q, expected_next_q, tl.exp(log_rho_succ), terminated, done, mask, not_last,
                                     gamma, lam, c_bar, False)
        d, carry = _async_walk.scan_chunk(alpha, beta, carry)
        _scan.store_tile(out_ptr, q + d, t, n, s_out_t, s_out_n, mask)


def validate(
    rewards,
    q_taken,
    expected_next_q,
    log_rhos,
    terminated,
    *,
    truncated=None,
    gamma=0.99,
    lam=1.0,
    c_bar=1.0,
    time_dim=0,
) -> tuple[Batch, dict]:
    """Check :func:`retrace`'s arguments; the validated batch and coefficients (the baselines share this)."""
    coefficients = {
        "gamma": check_scalar("gamma", gamma),
        "lam": check_scalar("lam", lam),
        "c_bar": check_scalar("c_bar", c_bar, high=math.inf),
    }
    b = Batch(
        time_dim,
        floats={"rewards": rewards, "q_taken": q_taken, "expected_next_q": expected_next_q, "log_rhos": log_rhos},
        flags={"terminated": terminated, "truncated": truncated},
        optional=("truncated",),
    )
    return b, coefficients


@replayable
def retrace(
    rewards: torch.Tensor,
    q_taken: torch.Tensor,
    expected_next_q: torch.Tensor,
    log_rhos: torch.Tensor,
    terminated: torch.Tensor,
    *,
    truncated: Optional[torch.Tensor] = None,
    gamma: float = 0.99,
    lam: float = 1.0,
    c_bar: float = 1.0,
    time_dim: int = 0,
    config: Optional[LaunchConfig] = None,
) -> torch.Tensor:
    """Retrace Q targets ``q_ret``; see the module docstring.

    ``q_taken[t] = Q(s_t, a_t)``; ``log_rhos[t] = log pi(a_t|s_t) - log mu(a_t|s_t)``;
    ``c_bar`` >= 0 clips the trace (a large value such as ``1e6`` disables it).
    """
    b, k = validate(
        rewards,
        q_taken,
        expected_next_q,
        log_rhos,
        terminated,
        truncated=truncated,
        gamma=gamma,
        lam=lam,
        c_bar=c_bar,
        time_dim=time_dim,
    )
    gamma, lam, c_bar = k["gamma"], k["lam"], k["c_bar"]
    if not runs_triton(b.device):
        tm = b.time_major
        q_ret = reference.retrace(
            tm("rewards"),
            tm("q_taken"),
            tm("expected_next_q"),
            tm("log_rhos"),
            tm("terminated"),
            truncated=tm("truncated"),
            gamma=gamma,
            lam=lam,
            c_bar=c_bar,
        )
        return b.from_time_major(q_ret)
    q_ret = b.output()
    if b.T > 0:
        launch(
            _retrace_kernel,
            b,
            config,
            (
                *b.series("rewards", rewards),
                *b.series("q_taken", rewards),
                *b.series("expected_next_q", rewards),
                *b.series("log_rhos", rewards),
                *b.series("terminated", rewards),
                *b.series("truncated", rewards),
                q_ret,
                *b.strides(q_ret),
            ),
            scalars(gamma, lam, c_bar),
            HAS_TRUNC=truncated is not None,
        )
    return q_ret
