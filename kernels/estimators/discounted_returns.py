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

from kernels import reference, scan
from kernels._args import Batch, check_scalar
from kernels._triton import runs_triton, tl, triton
from kernels.fast_path import replayable
from kernels.launch import LaunchConfig, launch, scalars

FAMILY = "returns"


@triton.jit
def discounted_returns_pairs(r, v_after, terminated, truncated, mask, gamma, HAS_TRUNC: tl.constexpr):
    """``(alpha, beta)`` of a tile (module docstring; ``v_after`` and ``truncated`` only with
    ``HAS_TRUNC``); ``(0, 1)`` where masked."""
    done = terminated
    alpha = r
    if HAS_TRUNC:
        done = done | truncated
        alpha = alpha + tl.where(truncated & ~terminated, gamma * v_after, 0.0)
    beta = tl.where(done, 0.0, gamma)
    return tl.where(mask, alpha, 0.0), tl.where(mask, beta, 1.0)


@scan.coefficient_kernel
def _discounted_returns_kernel(r_ptr, s_r_t, s_r_n, term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n,
                               nv_ptr, s_nv_t, s_nv_n, boot_ptr, s_boot, out_ptr, s_out_t, s_out_n, ws, flags, T, N,
                               gamma_hi, gamma_lo, HAS_TRUNC: tl.constexpr, HAS_NEXT: tl.constexpr,
                               HAS_BOOT: tl.constexpr, ACC: tl.constexpr, BLOCK_T: tl.constexpr,
                               BLOCK_N: tl.constexpr, LOOKBACK: tl.constexpr, NUM_STAGES: tl.constexpr,
                               LATEST_FIRST: tl.constexpr, RUN: tl.constexpr):
    gamma = scan.scalar(gamma_hi, gamma_lo, ACC)
    block, first, end, num_chunks = scan.program_chunks(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = scan.envs(block, N, BLOCK_N)
    if HAS_BOOT:
        carry = scan.load_env(boot_ptr, n, s_boot, n_ok, ACC)
    elif HAS_NEXT:
        carry = scan.load_env(nv_ptr + scan.wide(T - 1) * s_nv_t, n, s_nv_n, n_ok, ACC)
    else:
        carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = scan.chunk_times(chunk, num_chunks, BLOCK_T, True, LATEST_FIRST, RUN)
        mask = scan.tile_mask(t, T, n_ok)
        r = scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
        terminated = scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask)
        truncated = terminated
        v_after = r
        if HAS_TRUNC:
            truncated = scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
            # the whole tile, though only truncated steps use it: a load masked by the flags waits for them
            v_after = scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
        alpha, beta = discounted_returns_pairs(r, v_after, terminated, truncated, mask, gamma, HAS_TRUNC)
        g, carry = scan.scan_chunk(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True,
                                   LATEST_FIRST, LOOKBACK, NUM_STAGES, RUN)
        scan.store_tile(out_ptr, g, t, n, s_out_t, s_out_n, mask)


def validate(rewards, terminated, *, truncated=None, next_values=None, bootstrap_value=None, gamma=0.99, time_dim=0
             ) -> tuple[Batch, dict]:
    """Check :func:`discounted_returns`'s arguments; the validated batch and coefficients (shared with the baselines)."""
    coefficients = {"gamma": check_scalar("gamma", gamma)}
    if truncated is not None and next_values is None:
        raise ValueError("truncated needs next_values: a truncated step bootstraps from the value after it")
    b = Batch(time_dim, floats={"rewards": rewards, "next_values": next_values},
              flags={"terminated": terminated, "truncated": truncated}, per_env={"bootstrap_value": bootstrap_value},
              optional=("truncated", "next_values", "bootstrap_value"))
    return b, coefficients


@replayable
def discounted_returns(rewards: torch.Tensor, terminated: torch.Tensor, *, truncated: Optional[torch.Tensor] = None,
                       next_values: Optional[torch.Tensor] = None, bootstrap_value: Optional[torch.Tensor] = None,
                       gamma: float = 0.99, time_dim: int = 0, config: Optional[LaunchConfig] = None) -> torch.Tensor:
    """Discounted returns ``G``; see the module docstring. ``truncated`` needs ``next_values``."""
    b, k = validate(rewards, terminated, truncated=truncated, next_values=next_values, bootstrap_value=bootstrap_value,
                    gamma=gamma, time_dim=time_dim)
    if not runs_triton(b.device):
        tm = b.time_major
        g = reference.discounted_returns(tm("rewards"), tm("terminated"), truncated=tm("truncated"),
                                         next_values=tm("next_values"), bootstrap_value=b.env_vector("bootstrap_value"),
                                         **k)
        return b.from_time_major(g)
    g = b.output()
    if b.T > 0:
        launch(_discounted_returns_kernel, b, config, FAMILY,
               (*b.series("rewards", rewards), *b.series("terminated", rewards), *b.series("truncated", rewards),
                *b.series("next_values", rewards), *b.per_env("bootstrap_value", rewards), g, *b.strides(g)),
               scalars(k["gamma"]), HAS_TRUNC=truncated is not None, HAS_NEXT=next_values is not None,
               HAS_BOOT=bootstrap_value is not None)
    return g
