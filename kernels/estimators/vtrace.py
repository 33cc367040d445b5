"""V-trace (Espeholt et al., 2018, IMPALA), with the lambda of rlax, fused.

With ``rho_t = exp(log_rhos_t)`` and ``V'_t`` as in GAE::

    c_t         = lam min(c_bar, rho_t)
    delta_t     = min(rho_bar, rho_t) (r_t + gamma (1 - terminated_t) V'_t - V_t)
    vs_t - V_t  = delta_t + gamma (1 - done_t) c_t (vs_{t+1} - V_{t+1}),   zero past the end
    q_t         = lam vs_{t+1} + (1 - lam) V_{t+1}   if t < T-1 and not done_t, else V'_t
    pg_adv_t    = min(pg_rho_bar, rho_t) (r_t + gamma (1 - terminated_t) q_t - V_t)

As a scan over ``x_t = vs_t - V_t``: ``alpha_t = delta_t``, ``beta_t = gamma (1 - done_t) c_t``,
reverse in time. ``pg_adv`` needs ``x_{t+1}``, which the engine's scan yields in the same pass
(``scan_chunk_with_next``). Where ``rho_bar = c_bar = pg_rho_bar`` (the defaults, as in rlax) and
there are no ``next_values``, ``pg_adv_t = delta_t + beta_t x_{t+1} = x_t`` exactly (:func:`pg_is_x`),
and the kernel stores ``x`` as ``pg_adv`` (``PG_IS_X``).

``pg_advantages=False`` (or ``value_targets=False``) skips that output: the kernel is compiled without
its store (``STORE_PG``, ``STORE_VS``; without ``pg_adv`` also without the exclusive scan that only it
needs) and the call returns the other tensor alone.
"""

from __future__ import annotations

import math
from typing import Optional

import torch

from kernels import reference, scan
from kernels._args import Batch, check_bootstrap, check_outputs, check_scalar, selected
from kernels._triton import runs_triton, tl, triton
from kernels.fast_path import replayable
from kernels.launch import LaunchConfig, launch, scalars

FAMILY = "vtrace"
OUTPUTS = ("value_targets", "pg_advantages")  # the outputs in order, each a keyword that can skip it


@triton.jit
def vtrace_pairs(r, v, rho, v_after, terminated, done, mask, gamma, lam, rho_bar, c_bar):
    """``(alpha, beta)`` of a tile (module docstring); ``(0, 1)`` where masked."""
    delta = tl.minimum(rho, rho_bar) * (r + gamma * tl.where(terminated, 0.0, v_after) - v)
    trace = tl.where(done, 0.0, gamma * lam * tl.minimum(rho, c_bar))
    return tl.where(mask, delta, 0.0), tl.where(mask, trace, 1.0)


@triton.jit
def vtrace_pg_advantages(r, v, rho, v_next, v_after, x_next, terminated, done, not_last, gamma, lam, pg_rho_bar):
    """The policy-gradient advantages of a tile from ``x_{t+1} = vs_{t+1} - V_{t+1}``."""
    q = tl.where(not_last & ~done, v_next + lam * x_next, v_after)
    return tl.minimum(rho, pg_rho_bar) * (r + gamma * tl.where(terminated, 0.0, q) - v)


@scan.coefficient_kernel
def _vtrace_kernel(r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, lr_ptr, s_lr_t, s_lr_n, term_ptr, s_term_t, s_term_n,
                   trunc_ptr, s_trunc_t, s_trunc_n, nv_ptr, s_nv_t, s_nv_n, boot_ptr, s_boot, vs_ptr, s_vs_t, s_vs_n,
                   pg_ptr, s_pg_t, s_pg_n, ws, flags, T, N, gamma_hi, gamma_lo, lam_hi, lam_lo, rho_bar_hi,
                   rho_bar_lo, c_bar_hi, c_bar_lo, pg_hi, pg_lo, HAS_TRUNC: tl.constexpr, HAS_NEXT: tl.constexpr,
                   PG_IS_X: tl.constexpr, STORE_VS: tl.constexpr, STORE_PG: tl.constexpr, ACC: tl.constexpr,
                   BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, LOOKBACK: tl.constexpr, NUM_STAGES: tl.constexpr,
                   LATEST_FIRST: tl.constexpr, RUN: tl.constexpr):
    gamma = scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = scan.scalar(lam_hi, lam_lo, ACC)
    rho_bar = scan.scalar(rho_bar_hi, rho_bar_lo, ACC)
    c_bar = scan.scalar(c_bar_hi, c_bar_lo, ACC)
    pg_rho_bar = scan.scalar(pg_hi, pg_lo, ACC)
    block, first, end, num_chunks = scan.program_chunks(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = scan.envs(block, N, BLOCK_N)
    if not HAS_NEXT:
        bootstrap = scan.load_env(boot_ptr, n, s_boot, n_ok, ACC)
    carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = scan.chunk_times(chunk, num_chunks, BLOCK_T, True, LATEST_FIRST, RUN)
        mask = scan.tile_mask(t, T, n_ok)
        not_last = scan.tile_mask(t + 1, T, n_ok)
        r = scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
        v = scan.load_tile(v_ptr, t, n, s_v_t, s_v_n, mask, ACC)
        rho = scan.fast_exp(scan.load_tile(lr_ptr, t, n, s_lr_t, s_lr_n, mask, ACC))
        terminated = scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask)
        done = terminated
        if HAS_TRUNC:
            done = done | scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
        v_next = scan.load_tile(v_ptr, t + 1, n, s_v_t, s_v_n, not_last, ACC)
        if HAS_NEXT:
            v_after = scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
        else:
            v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :], v_next)
        alpha, beta = vtrace_pairs(r, v, rho, v_after, terminated, done, mask, gamma, lam, rho_bar, c_bar)
        if PG_IS_X or not STORE_PG:
            x, carry = scan.scan_chunk(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True,
                                       LATEST_FIRST, LOOKBACK, NUM_STAGES, RUN)
            pg_adv = x
        else:
            x, x_next, carry = scan.scan_chunk_with_next(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T,
                                                         BLOCK_N, LATEST_FIRST, LOOKBACK, RUN)
            pg_adv = vtrace_pg_advantages(r, v, rho, v_next, v_after, x_next, terminated, done, not_last, gamma, lam,
                                          pg_rho_bar)
        if STORE_VS:
            scan.store_tile(vs_ptr, v + x, t, n, s_vs_t, s_vs_n, mask)
        if STORE_PG:
            scan.store_tile(pg_ptr, pg_adv, t, n, s_pg_t, s_pg_n, mask)


def validate(rewards, values, log_rhos, terminated, bootstrap_value, *, truncated=None, next_values=None, gamma=0.99,
             lam=1.0, rho_bar=1.0, c_bar=1.0, pg_rho_bar=1.0, time_dim=0, value_targets=True, pg_advantages=True
             ) -> tuple[Batch, dict]:
    """Check :func:`vtrace`'s arguments; the validated batch and options, the coefficients and the
    output switches (the baselines share this)."""
    coefficients = {"gamma": check_scalar("gamma", gamma), "lam": check_scalar("lam", lam),
                    "rho_bar": check_scalar("rho_bar", rho_bar, high=math.inf),
                    "c_bar": check_scalar("c_bar", c_bar, high=math.inf),
                    "pg_rho_bar": check_scalar("pg_rho_bar", pg_rho_bar, high=math.inf),
                    **check_outputs(value_targets=value_targets, pg_advantages=pg_advantages)}
    b = Batch(time_dim, floats={"rewards": rewards, "values": values, "log_rhos": log_rhos, "next_values": next_values},
              flags={"terminated": terminated, "truncated": truncated}, per_env={"bootstrap_value": bootstrap_value},
              optional=("truncated", "next_values", "bootstrap_value"))
    check_bootstrap(bootstrap_value, next_values)
    return b, coefficients


def pg_is_x(has_next_values: bool, rho_bar: float, c_bar: float, pg_rho_bar: float) -> bool:
    """Whether ``pg_adv = vs - V`` exactly: the three clipping thresholds equal and ``V'_t = V_{t+1}``
    before the last step, which holds without ``next_values`` only."""
    return not has_next_values and rho_bar == c_bar == pg_rho_bar


@replayable
def vtrace(rewards: torch.Tensor, values: torch.Tensor, log_rhos: torch.Tensor, terminated: torch.Tensor,
           bootstrap_value: torch.Tensor, *, truncated: Optional[torch.Tensor] = None,
           next_values: Optional[torch.Tensor] = None, gamma: float = 0.99, lam: float = 1.0, rho_bar: float = 1.0,
           c_bar: float = 1.0, pg_rho_bar: float = 1.0, time_dim: int = 0, value_targets: bool = True,
           pg_advantages: bool = True, config: Optional[LaunchConfig] = None):
    """Value targets and policy-gradient advantages ``(vs, pg_adv)``; see the module docstring.

    ``log_rhos`` are ``log pi(a_t|s_t) - log mu(a_t|s_t)`` (target over behaviour policy).
    ``rho_bar``, ``c_bar`` and ``pg_rho_bar`` are clipping thresholds (finite, >= 0; a large value
    such as ``1e6`` disables one). ``pg_advantages=False``: ``vs`` alone, ``pg_adv`` neither computed
    nor allocated; ``value_targets=False``: ``pg_adv`` alone.
    """
    b, k = validate(rewards, values, log_rhos, terminated, bootstrap_value, truncated=truncated,
                    next_values=next_values, gamma=gamma, lam=lam, rho_bar=rho_bar, c_bar=c_bar, pg_rho_bar=pg_rho_bar,
                    time_dim=time_dim, value_targets=value_targets, pg_advantages=pg_advantages)
    if not runs_triton(b.device):
        tm = b.time_major
        return b.from_reference(reference.vtrace(tm("rewards"), tm("values"), tm("log_rhos"), tm("terminated"),
                                                 b.env_vector("bootstrap_value"), truncated=tm("truncated"),
                                                 next_values=tm("next_values"), **k))
    vs, pg_adv = b.output(value_targets), b.output(pg_advantages)
    if b.T > 0:
        launch(_vtrace_kernel, b, config, FAMILY,
               (*b.series("rewards", rewards), *b.series("values", rewards), *b.series("log_rhos", rewards),
                *b.series("terminated", rewards), *b.series("truncated", rewards), *b.series("next_values", rewards),
                *b.per_env("bootstrap_value", rewards), *b.output_series(vs, rewards),
                *b.output_series(pg_adv, rewards)),
               scalars(k["gamma"], k["lam"], k["rho_bar"], k["c_bar"], k["pg_rho_bar"]),
               HAS_TRUNC=truncated is not None, HAS_NEXT=next_values is not None,
               PG_IS_X=pg_is_x(next_values is not None, k["rho_bar"], k["c_bar"], k["pg_rho_bar"]),
               STORE_VS=value_targets, STORE_PG=pg_advantages)
    return selected(vs, pg_adv)
