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
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from kernels import _explicit_layout, _scan, reference
from kernels._args import Batch, check_bootstrap, check_scalar
from kernels._launch import LaunchConfig, launch, persistent_twin_of, scalars
from kernels._replay import replayable
from kernels._triton import runs_triton, tl, triton


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


@triton.jit
def _vtrace_pairs(r, v, rho, v_after, terminated, done, mask, gamma, lam, rho_bar, c_bar):
    """``(alpha, beta)`` of a tile (module docstring); the identity ``(0, 1)`` where masked."""
    delta = tl.minimum(rho, rho_bar) * (r + gamma * tl.where(terminated, 0.0, v_after) - v)
    return tl.where(mask, delta, 0.0), tl.where(mask, tl.where(done, 0.0, gamma * lam * tl.minimum(rho, c_bar)), 1.0)


@triton.jit
def _vtrace_pg_advantages(r, v, rho, v_succ, v_after, x_next, terminated, done, not_last, gamma, lam, pg_rho_bar):
    """The policy-gradient advantages of a tile, from ``x_{t+1} = vs_{t+1} - V_{t+1}`` (module docstring)."""
    q = tl.where(not_last & ~done, v_succ + lam * x_next, v_after)
    return tl.minimum(rho, pg_rho_bar) * (r + gamma * tl.where(terminated, 0.0, q) - v)


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
        x, x_next, carry = _scan.scan_chunk_with_next(
            alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, LOOKBACK, SHUFFLE_TIME, LATEST_FIRST,
            TIME_THREADS,
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
        x, x_next, _ = _scan.scan_chunk_with_next(alpha, beta, tl.zeros([BLOCK_N], ACC), chunk, block, T, N, ws,
                                                  flags, BLOCK_T, BLOCK_N, LOOKBACK, 0, True, TIME_THREADS)
        pg_adv = _vtrace_pg_advantages(r, v, rho, v_succ, v_after, x_next, terminated, done, not_last, gamma, lam,
                                       pg_rho_bar)
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
    x, x_next = _explicit_layout.scan_tile_with_next(alpha, beta)
    pg_adv = _vtrace_pg_advantages(r, v, rho, v_succ, v_after, x_next, terminated, done, not_last, gamma, lam,
                                   pg_rho_bar)
    _scan.store_tile(vs_ptr, v + x, t, n, s_vs_t, s_vs_n, mask)
    _scan.store_tile(pg_ptr, pg_adv, t, n, s_pg_t, s_pg_n, mask)


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
        launch(
            _vtrace_kernel,
            b,
            config,
            (
                *b.series("rewards", rewards),
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
            HAS_TRUNC=truncated is not None,
            HAS_NEXT=next_values is not None,
        )
    return vs, pg_adv
