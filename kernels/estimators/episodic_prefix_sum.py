"""Per-episode running sums (episode returns, lengths, counts so far), fused.

Forward in time, with ``C_{-1} = initial`` (default 0)::

    boundary="ends_at":   C_t = x_t + (1 - done_{t-1}) C_{t-1}    (flags mark the last step)
    boundary="starts_at": C_t = x_t + (1 - start_t) C_{t-1}       (flags mark the first step)

As a scan: ``alpha_t = x_t``, ``beta_t`` the 0/1 "same episode as the previous step" flag.
"""

from __future__ import annotations

from typing import Optional

import torch

from kernels import reference, scan
from kernels._args import Batch
from kernels._triton import runs_triton, tl, triton
from kernels.fast_path import replayable
from kernels.launch import LaunchConfig, launch

FAMILY = "forward"
BOUNDARIES = ("ends_at", "starts_at")


@triton.jit
def episodic_prefix_sum_beta(new_episode, mask, ACC: tl.constexpr):
    """``beta_t``: 0 where a new episode starts at step t, else 1 (also where masked)."""
    return tl.where(mask & new_episode, 0.0, 1.0).to(ACC)


@triton.jit
def _episodic_prefix_sum_kernel(x_ptr, s_x_t, s_x_n, flag_ptr, s_flag_t, s_flag_n, init_ptr, s_init, out_ptr, s_out_t,
                                s_out_n, ws, flags, T, N, STARTS_AT: tl.constexpr, HAS_INIT: tl.constexpr,
                                ACC: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, LOOKBACK: tl.constexpr,
                                NUM_STAGES: tl.constexpr, LATEST_FIRST: tl.constexpr, RUN: tl.constexpr):
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
        if STARTS_AT:
            new_episode = scan.load_flags(flag_ptr, t, n, s_flag_t, s_flag_n, mask)
        else:
            new_episode = scan.load_flags(flag_ptr, t - 1, n, s_flag_t, s_flag_n, scan.tile_mask(t - 1, T, n_ok))
        beta = episodic_prefix_sum_beta(new_episode, mask, ACC)
        c, carry = scan.scan_chunk(x, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, False,
                                   LATEST_FIRST, LOOKBACK, NUM_STAGES, RUN)
        scan.store_tile(out_ptr, c, t, n, s_out_t, s_out_n, mask)


def validate(inputs, dones, *, initial=None, boundary="ends_at", time_dim=0) -> tuple[Batch, dict]:
    """Check :func:`episodic_prefix_sum`'s arguments; the validated batch and options (shared with the baselines)."""
    if boundary not in BOUNDARIES:
        raise ValueError(f"boundary must be one of {BOUNDARIES}, got {boundary!r}")
    b = Batch(time_dim, floats={"inputs": inputs}, flags={"dones": dones}, per_env={"initial": initial},
              optional=("initial",))
    return b, {"boundary": boundary}


@replayable
def episodic_prefix_sum(inputs: torch.Tensor, dones: torch.Tensor, *, initial: Optional[torch.Tensor] = None,
                        boundary: str = "ends_at", time_dim: int = 0,
                        config: Optional[LaunchConfig] = None) -> torch.Tensor:
    """Running sums ``C`` that restart at episode boundaries; see the module docstring."""
    b, _ = validate(inputs, dones, initial=initial, boundary=boundary, time_dim=time_dim)
    if not runs_triton(b.device):
        c = reference.episodic_prefix_sum(b.time_major("inputs"), b.time_major("dones"), initial=b.env_vector("initial"),
                                          boundary=boundary)
        return b.from_time_major(c)
    c = b.output()
    if b.T > 0:
        launch(_episodic_prefix_sum_kernel, b, config, FAMILY,
               (*b.series("inputs", inputs), *b.series("dones", inputs), *b.per_env("initial", inputs), c,
                *b.strides(c)),
               (), STARTS_AT=boundary == "starts_at", HAS_INIT=initial is not None)
    return c
