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

from kernels import reference, scan
from kernels._args import Batch, check_scalar
from kernels._triton import runs_triton, tl, triton
from kernels.fast_path import replayable
from kernels.launch import LaunchConfig, launch, scalars

FAMILY = "returns"


@triton.jit
def lambda_returns_pairs(r, v_after, terminated, done, mask, gamma, lam):
    """``(alpha, beta)`` of a tile (module docstring); ``(0, 1)`` where masked."""
    trace = tl.where(done, 0.0, gamma * lam)
    alpha = r + gamma * tl.where(terminated, 0.0, v_after) - trace * v_after
    return tl.where(mask, alpha, 0.0), tl.where(mask, trace, 1.0)


@scan.coefficient_kernel
def _lambda_returns_kernel(r_ptr, s_r_t, s_r_n, nv_ptr, s_nv_t, s_nv_n, term_ptr, s_term_t, s_term_n, trunc_ptr,
                           s_trunc_t, s_trunc_n, out_ptr, s_out_t, s_out_n, ws, flags, T, N, gamma_hi, gamma_lo,
                           lam_hi, lam_lo, HAS_TRUNC: tl.constexpr, ACC: tl.constexpr, BLOCK_T: tl.constexpr,
                           BLOCK_N: tl.constexpr, LOOKBACK: tl.constexpr, NUM_STAGES: tl.constexpr,
                           LATEST_FIRST: tl.constexpr, RUN: tl.constexpr):
    gamma = scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = scan.scalar(lam_hi, lam_lo, ACC)
    block, first, end, num_chunks = scan.program_chunks(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = scan.envs(block, N, BLOCK_N)
    carry = scan.load_env(nv_ptr + scan.wide(T - 1) * s_nv_t, n, s_nv_n, n_ok, ACC)  # G_T
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = scan.chunk_times(chunk, num_chunks, BLOCK_T, True, LATEST_FIRST, RUN)
        mask = scan.tile_mask(t, T, n_ok)
        r = scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
        v_after = scan.load_tile(nv_ptr, t, n, s_nv_t, s_nv_n, mask, ACC)
        terminated = scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask)
        done = terminated
        if HAS_TRUNC:
            done = done | scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
        alpha, beta = lambda_returns_pairs(r, v_after, terminated, done, mask, gamma, lam)
        g, carry = scan.scan_chunk(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True,
                                   LATEST_FIRST, LOOKBACK, NUM_STAGES, RUN)
        scan.store_tile(out_ptr, g, t, n, s_out_t, s_out_n, mask)


def validate(rewards, next_values, terminated, *, truncated=None, gamma=0.99, lam=0.95, time_dim=0
             ) -> tuple[Batch, dict]:
    """Check :func:`lambda_returns`'s arguments; the validated batch and coefficients (shared with the baselines)."""
    coefficients = {"gamma": check_scalar("gamma", gamma), "lam": check_scalar("lam", lam)}
    b = Batch(time_dim, floats={"rewards": rewards, "next_values": next_values},
              flags={"terminated": terminated, "truncated": truncated}, optional=("truncated",))
    return b, coefficients


@replayable
def lambda_returns(rewards: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor, *,
                   truncated: Optional[torch.Tensor] = None, gamma: float = 0.99, lam: float = 0.95, time_dim: int = 0,
                   config: Optional[LaunchConfig] = None) -> torch.Tensor:
    """Lambda-returns ``G``; see the module docstring. ``next_values[t]`` is ``V(s_{t+1})``."""
    b, k = validate(rewards, next_values, terminated, truncated=truncated, gamma=gamma, lam=lam, time_dim=time_dim)
    if not runs_triton(b.device):
        tm = b.time_major
        g = reference.lambda_returns(tm("rewards"), tm("next_values"), tm("terminated"), truncated=tm("truncated"),
                                     **k)
        return b.from_time_major(g)
    g = b.output()
    if b.T > 0:
        launch(_lambda_returns_kernel, b, config, FAMILY,
               (*b.series("rewards", rewards), *b.series("next_values", rewards), *b.series("terminated", rewards),
                *b.series("truncated", rewards), g, *b.strides(g)),
               scalars(k["gamma"], k["lam"]), HAS_TRUNC=truncated is not None)
    return g
