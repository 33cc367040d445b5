"""Accumulating eligibility traces with episode resets (Sutton & Barto, 2018, ch. 12.2), fused.

Forward in time::

    z_t = x_t + gamma lam (1 - done_{t-1}) z_{t-1},    z_{-1} = initial (default 0), done_{-1} = 0

As a scan: ``alpha_t = x_t``, ``beta_t = gamma lam (1 - done_{t-1})``, forward in time; the previous
step's flag is read from the previous row of ``dones``.
"""

from __future__ import annotations

from typing import Optional

import torch

from kernels import reference, scan
from kernels._args import Batch, check_scalar
from kernels._triton import runs_triton, tl, triton
from kernels.fast_path import replayable
from kernels.launch import LaunchConfig, launch, scalars

FAMILY = "forward"


@triton.jit
def eligibility_traces_beta(done_before, mask, decay):
    """``beta_t = gamma lam (1 - done_{t-1})`` of a tile; 1 where masked."""
    return tl.where(mask, tl.where(done_before, 0.0, decay), 1.0)


@scan.coefficient_kernel
def _eligibility_traces_kernel(x_ptr, s_x_t, s_x_n, done_ptr, s_done_t, s_done_n, init_ptr, s_init, out_ptr, s_out_t,
                               s_out_n, ws, flags, T, N, gamma_hi, gamma_lo, lam_hi, lam_lo, HAS_INIT: tl.constexpr,
                               ACC: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, LOOKBACK: tl.constexpr,
                               NUM_STAGES: tl.constexpr, LATEST_FIRST: tl.constexpr, RUN: tl.constexpr):
    decay = scan.scalar(gamma_hi, gamma_lo, ACC) * scan.scalar(lam_hi, lam_lo, ACC)
    block, first, end, num_chunks = scan.program_chunks(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = scan.envs(block, N, BLOCK_N)
    if HAS_INIT:
        carry = scan.load_env(init_ptr, n, s_init, n_ok, ACC)
    else:
        carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = scan.chunk_times(chunk, num_chunks, BLOCK_T, False, LATEST_FIRST, RUN)
        mask = scan.tile_mask(t, T, n_ok)
        x = scan.load_tile(x_ptr, t, n, s_x_t, s_x_n, mask, ACC)
        done_before = scan.load_flags(done_ptr, t - 1, n, s_done_t, s_done_n, scan.tile_mask(t - 1, T, n_ok))
        beta = eligibility_traces_beta(done_before, mask, decay)
        z, carry = scan.scan_chunk(x, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, False,
                                   LATEST_FIRST, LOOKBACK, NUM_STAGES, RUN)
        scan.store_tile(out_ptr, z, t, n, s_out_t, s_out_n, mask)


def validate(inputs, dones, *, gamma=0.99, lam=0.95, initial=None, time_dim=0) -> tuple[Batch, dict]:
    """Check :func:`eligibility_traces`'s arguments; the validated batch and coefficients (shared with the baselines)."""
    coefficients = {"gamma": check_scalar("gamma", gamma), "lam": check_scalar("lam", lam)}
    b = Batch(time_dim, floats={"inputs": inputs}, flags={"dones": dones}, per_env={"initial": initial},
              optional=("initial",))
    return b, coefficients


@replayable
def eligibility_traces(inputs: torch.Tensor, dones: torch.Tensor, *, gamma: float = 0.99, lam: float = 0.95,
                       initial: Optional[torch.Tensor] = None, time_dim: int = 0,
                       config: Optional[LaunchConfig] = None) -> torch.Tensor:
    """Traces ``z``; see the module docstring. ``initial`` is ``z_{-1}``, ``[N]``."""
    b, k = validate(inputs, dones, gamma=gamma, lam=lam, initial=initial, time_dim=time_dim)
    if not runs_triton(b.device):
        z = reference.eligibility_traces(b.time_major("inputs"), b.time_major("dones"), initial=b.env_vector("initial"),
                                         **k)
        return b.from_time_major(z)
    z = b.output()
    if b.T > 0:
        launch(_eligibility_traces_kernel, b, config, FAMILY,
               (*b.series("inputs", inputs), *b.series("dones", inputs), *b.per_env("initial", inputs), z,
                *b.strides(z)),
               scalars(k["gamma"], k["lam"]), HAS_INIT=initial is not None)
    return z
