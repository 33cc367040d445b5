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

from kernels import reference, scan
from kernels._args import Batch, check_scalar
from kernels._triton import runs_triton, tl, triton
from kernels.fast_path import replayable
from kernels.launch import LaunchConfig, launch, scalars

FAMILY = "retrace"


@triton.jit
def retrace_pairs(r, q, expected_next_q, rho_next, terminated, done, mask, not_last, gamma, lam, c_bar):
    """``(alpha, beta)`` of a tile from ``rho_{t+1}`` (module docstring); ``(0, 1)`` where masked."""
    alpha = r + gamma * tl.where(terminated, 0.0, expected_next_q) - q
    trace = tl.where(not_last & ~done, gamma * lam * tl.minimum(rho_next, c_bar), 0.0)
    return tl.where(mask, alpha, 0.0), tl.where(mask, trace, 1.0)


@scan.coefficient_kernel
def _retrace_kernel(r_ptr, s_r_t, s_r_n, q_ptr, s_q_t, s_q_n, eq_ptr, s_eq_t, s_eq_n, lr_ptr, s_lr_t, s_lr_n,
                    term_ptr, s_term_t, s_term_n, trunc_ptr, s_trunc_t, s_trunc_n, out_ptr, s_out_t, s_out_n, ws,
                    flags, T, N, gamma_hi, gamma_lo, lam_hi, lam_lo, c_bar_hi, c_bar_lo, HAS_TRUNC: tl.constexpr,
                    ACC: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, LOOKBACK: tl.constexpr,
                    NUM_STAGES: tl.constexpr, LATEST_FIRST: tl.constexpr, RUN: tl.constexpr):
    gamma = scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = scan.scalar(lam_hi, lam_lo, ACC)
    c_bar = scan.scalar(c_bar_hi, c_bar_lo, ACC)
    block, first, end, num_chunks = scan.program_chunks(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = scan.envs(block, N, BLOCK_N)
    carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = scan.chunk_times(chunk, num_chunks, BLOCK_T, True, LATEST_FIRST, RUN)
        mask = scan.tile_mask(t, T, n_ok)
        not_last = scan.tile_mask(t + 1, T, n_ok)
        r = scan.load_tile(r_ptr, t, n, s_r_t, s_r_n, mask, ACC)
        q = scan.load_tile(q_ptr, t, n, s_q_t, s_q_n, mask, ACC)
        expected_next_q = scan.load_tile(eq_ptr, t, n, s_eq_t, s_eq_n, mask, ACC)
        rho_next = scan.fast_exp(scan.load_tile(lr_ptr, t + 1, n, s_lr_t, s_lr_n, not_last, ACC))
        terminated = scan.load_flags(term_ptr, t, n, s_term_t, s_term_n, mask)
        done = terminated
        if HAS_TRUNC:
            done = done | scan.load_flags(trunc_ptr, t, n, s_trunc_t, s_trunc_n, mask)
        alpha, beta = retrace_pairs(r, q, expected_next_q, rho_next, terminated, done, mask, not_last, gamma, lam,
                                    c_bar)
        d, carry = scan.scan_chunk(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True,
                                   LATEST_FIRST, LOOKBACK, NUM_STAGES, RUN)
        scan.store_tile(out_ptr, q + d, t, n, s_out_t, s_out_n, mask)


def validate(rewards, q_taken, expected_next_q, log_rhos, terminated, *, truncated=None, gamma=0.99, lam=1.0, c_bar=1.0,
             time_dim=0) -> tuple[Batch, dict]:
    """Check :func:`retrace`'s arguments; the validated batch and coefficients (the baselines share this)."""
    coefficients = {"gamma": check_scalar("gamma", gamma), "lam": check_scalar("lam", lam),
                    "c_bar": check_scalar("c_bar", c_bar, high=math.inf)}
    b = Batch(time_dim, floats={"rewards": rewards, "q_taken": q_taken, "expected_next_q": expected_next_q,
                                "log_rhos": log_rhos},
              flags={"terminated": terminated, "truncated": truncated}, optional=("truncated",))
    return b, coefficients


@replayable
def retrace(rewards: torch.Tensor, q_taken: torch.Tensor, expected_next_q: torch.Tensor, log_rhos: torch.Tensor,
            terminated: torch.Tensor, *, truncated: Optional[torch.Tensor] = None, gamma: float = 0.99,
            lam: float = 1.0, c_bar: float = 1.0, time_dim: int = 0, config: Optional[LaunchConfig] = None
            ) -> torch.Tensor:
    """Retrace Q targets ``q_ret``; see the module docstring.

    ``q_taken[t] = Q(s_t, a_t)``; ``log_rhos[t] = log pi(a_t|s_t) - log mu(a_t|s_t)``;
    ``c_bar`` >= 0 clips the trace (a large value such as ``1e6`` disables it).
    """
    b, k = validate(rewards, q_taken, expected_next_q, log_rhos, terminated, truncated=truncated, gamma=gamma, lam=lam,
                    c_bar=c_bar, time_dim=time_dim)
    if not runs_triton(b.device):
        tm = b.time_major
        q_ret = reference.retrace(tm("rewards"), tm("q_taken"), tm("expected_next_q"), tm("log_rhos"),
                                  tm("terminated"), truncated=tm("truncated"), **k)
        return b.from_time_major(q_ret)
    q_ret = b.output()
    if b.T > 0:
        launch(_retrace_kernel, b, config, FAMILY,
               (*b.series("rewards", rewards), *b.series("q_taken", rewards), *b.series("expected_next_q", rewards),
                *b.series("log_rhos", rewards), *b.series("terminated", rewards), *b.series("truncated", rewards),
                q_ret, *b.strides(q_ret)),
               scalars(k["gamma"], k["lam"], k["c_bar"]), HAS_TRUNC=truncated is not None)
    return q_ret
