"""Generalized Advantage Estimation (Schulman et al., 2016), fused.

With ``V'_t`` the value of the state after step t (``next_values[t]`` when given, else ``V_{t+1}``
and ``bootstrap_value`` at t = T-1)::

    delta_t = r_t + gamma (1 - terminated_t) V'_t - V_t
    A_t     = delta_t + gamma lam (1 - done_t) A_{t+1},   A_T = 0
    ret_t   = A_t + V_t

A truncated step still bootstraps from ``V'_t`` (the time limit is not a terminal state) but stops
the advantage trace, like a terminated one. As a scan: ``alpha_t = delta_t``,
``beta_t = gamma lam (1 - done_t)``, reverse in time.

``returns=False`` (or ``advantages=False``) skips that output: the kernel is compiled without its
store (``STORE_RET``, ``STORE_ADV``), so a float32 call with bool flags and no truncations moves 13
bytes per element instead of 17, and the call returns the other tensor alone.
"""

from __future__ import annotations

from typing import Optional

import torch

from kernels import reference, scan
from kernels._args import Batch, check_bootstrap, check_outputs, check_scalar, selected
from kernels._triton import runs_triton, tl, triton
from kernels.fast_path import replayable
from kernels.launch import LaunchConfig, launch, scalars

FAMILY = "gae"
OUTPUTS = ("advantages", "returns")  # the outputs in order, each a keyword that can skip it


@triton.jit
def gae_pairs(r, v, v_after, terminated, done, mask, gamma, lam, ACC: tl.constexpr):
    """``(alpha, beta)`` of a tile: ``delta_t`` and ``gamma lam (1 - done_t)``; ``(0, 1)`` where masked."""
    delta = r + gamma * tl.where(terminated, 0.0, v_after) - v
    alpha = tl.where(mask, delta, 0.0)
    beta = tl.where(mask & ~done, gamma * lam, tl.where(mask, 0.0, 1.0)).to(ACC)
    return alpha, beta


@scan.coefficient_kernel
def _gae_kernel(r_ptr, s_r_t, s_r_n, v_ptr, s_v_t, s_v_n, term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t,
                s_trunc_n, nv_ptr, s_nv_t, s_nv_n, boot_ptr, s_boot, adv_ptr, s_adv_t, s_adv_n, ret_ptr, s_ret_t,
                s_ret_n, ws, flags, T, N, gamma_hi, gamma_lo, lam_hi, lam_lo, HAS_TRUNC: tl.constexpr,
                HAS_NEXT: tl.constexpr, STORE_ADV: tl.constexpr, STORE_RET: tl.constexpr, ACC: tl.constexpr,
                BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, LOOKBACK: tl.constexpr, NUM_STAGES: tl.constexpr,
                LATEST_FIRST: tl.constexpr, RUN: tl.constexpr):
    gamma = scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = scan.scalar(lam_hi, lam_lo, ACC)
    block, first, end, num_chunks = scan.program_chunks(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = scan.envs(block, N, BLOCK_N)
    if not HAS_NEXT:
        bootstrap = scan.load_env(boot_ptr, n, s_boot, n_ok, ACC)
    carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = scan.chunk_times(chunk, num_chunks, BLOCK_T, True, LATEST_FIRST, RUN)
        mask = scan.tile_mask(t, T, n_ok)
        r = scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
        v = scan.load_tile(v_ptr, t, n, s_v_t, s_v_n, mask, ACC)
        terminated = scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask)
        done = terminated
        if HAS_TRUNC:
            done = done | scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
        if HAS_NEXT:
            v_after = scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
        else:
            v_next = scan.load_tile(v_ptr, t + 1, n, s_v_t, s_v_n, scan.tile_mask(t + 1, T, n_ok), ACC)
            v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :], v_next)
        alpha, beta = gae_pairs(r, v, v_after, terminated, done, mask, gamma, lam, ACC)
        adv, carry = scan.scan_chunk(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True,
                                     LATEST_FIRST, LOOKBACK, NUM_STAGES, RUN)
        if STORE_ADV:
            scan.store_tile(adv_ptr, adv, t, n, s_adv_t, s_adv_n, mask)
        if STORE_RET:
            scan.store_tile(ret_ptr, adv + v, t, n, s_ret_t, s_ret_n, mask)


def validate(rewards, values, terminated, bootstrap_value, *, truncated=None, next_values=None, gamma=0.99, lam=0.95,
             time_dim=0, advantages=True, returns=True) -> tuple[Batch, dict]:
    """Check :func:`gae`'s arguments; the validated batch and options, the coefficients and the output
    switches (the baselines share this)."""
    coefficients = {"gamma": check_scalar("gamma", gamma), "lam": check_scalar("lam", lam),
                    **check_outputs(advantages=advantages, returns=returns)}
    b = Batch(time_dim, floats={"rewards": rewards, "values": values, "next_values": next_values},
              flags={"terminated": terminated, "truncated": truncated}, per_env={"bootstrap_value": bootstrap_value},
              optional=("truncated", "next_values", "bootstrap_value"))
    check_bootstrap(bootstrap_value, next_values)
    return b, coefficients


@replayable
def gae(rewards: torch.Tensor, values: torch.Tensor, terminated: torch.Tensor, bootstrap_value: torch.Tensor, *,
        truncated: Optional[torch.Tensor] = None, next_values: Optional[torch.Tensor] = None, gamma: float = 0.99,
        lam: float = 0.95, time_dim: int = 0, advantages: bool = True, returns: bool = True,
        config: Optional[LaunchConfig] = None):
    """Advantages and returns ``(adv, ret)`` by GAE; see the module docstring for the math.

    ``rewards``, ``values``, ``terminated`` (and ``truncated``, ``next_values``) are ``[T, N]``
    (``time_dim=1``: ``[N, T]``; 1-D: one environment); ``bootstrap_value`` is ``V(s_T)``, ``[N]``.
    ``returns=False``: the advantages alone, the returns neither stored nor allocated;
    ``advantages=False``: the returns alone. ``config`` overrides the kernel's launch (for benchmarks).
    """
    b, k = validate(rewards, values, terminated, bootstrap_value, truncated=truncated, next_values=next_values,
                    gamma=gamma, lam=lam, time_dim=time_dim, advantages=advantages, returns=returns)
    if not runs_triton(b.device):
        tm = b.time_major
        return b.from_reference(reference.gae(tm("rewards"), tm("values"), tm("terminated"),
                                              b.env_vector("bootstrap_value"), truncated=tm("truncated"),
                                              next_values=tm("next_values"), **k))
    adv, ret = b.output(advantages), b.output(returns)
    if b.T > 0:
        launch(_gae_kernel, b, config, FAMILY,
               (*b.series("rewards", rewards), *b.series("values", rewards), *b.series("terminated", rewards),
                *b.series("truncated", rewards), *b.series("next_values", rewards),
                *b.per_env("bootstrap_value", rewards), *b.output_series(adv, rewards),
                *b.output_series(ret, rewards)),
               scalars(k["gamma"], k["lam"]), HAS_TRUNC=truncated is not None, HAS_NEXT=next_values is not None,
               STORE_ADV=advantages, STORE_RET=returns)
    return selected(adv, ret)
