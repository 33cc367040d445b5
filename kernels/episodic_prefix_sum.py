"""Per-episode running sums (episode returns, lengths, counts so far), fused.

Forward in time, with ``C_{-1} = initial`` (default 0)::

    boundary="ends_at":   C_t = x_t + (1 - done_{t-1}) C_{t-1}    (flags mark the last step)
    boundary="starts_at": C_t = x_t + (1 - start_t) C_{t-1}       (flags mark the first step)

As a scan: ``alpha_t = x_t``, ``beta_t`` the 0/1 "same episode as the previous step" flag.
"""

from __future__ import annotations

from typing import Optional

import torch

from kernels import _explicit_layout, _scan, reference
from kernels._args import Batch
from kernels._launch import LaunchConfig, launch
from kernels._replay import replayable
from kernels._triton import runs_triton, tl, triton

BOUNDARIES = ("ends_at", "starts_at")

# One float and one flag in, one float out per step: longer tiles to more environments (_launch.choose_config).
LIGHT_STEPS = True
# Float32 [T, N] look-back tiles in thread runs 64 steps long, not 32; from 4096 environments,
# four-warp walks of 128 steps instead (_launch.choose_config).
LONG_RUN_TILES = True
# Float32 [T, N] walks from 8192 environments: four chunks deep in 64-environment tiles (_launch.choose_config).
DEEP_WALKS = True
# Float32 [T, N] sequences of more than 256 steps in rows not 16 elements apart take this look-back tile in
# thread runs from 512 environments, (block_t, block_n, warps, below this many) (_launch._unaligned_look_back_tile).
UNALIGNED_LOOK_BACK_TILE = (512, 32, 8, 4096)


@triton.jit
def _episodic_prefix_sum_beta(new_episode, mask, ACC: tl.constexpr):
    """``beta_t``: 0 where step t starts an episode, else 1 (1 where masked)."""
    return tl.where(mask & new_episode, 0.0, 1.0).to(ACC)


@triton.jit
def _episodic_prefix_sum_kernel(
    x_ptr,
    s_x_t,
    s_x_n,
    flag_ptr,
    s_flag_t,
    s_flag_n,
    init_ptr,
    s_init,
    out_ptr,
    s_out_t,
    s_out_n,
    ws,
    flags,
    T,
    N,
    STARTS_AT: tl.constexpr,
    HAS_INIT: tl.constexpr,
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
    block, first, end, num_chunks = _scan.tile_schedule(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n, n_ok = _scan.tile_envs(block, N, BLOCK_N, ENV_RUNS_OF_FOUR)
    if HAS_INIT:
        carry = _scan.load_env(init_ptr, n, s_init, n_ok, ACC)
    else:
        carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=NUM_STAGES):
        t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, False, LATEST_FIRST, TIME_THREADS)
        mask = (t[:, None] < T) & n_ok[None, :]
        x = _scan.load_tile(x_ptr, t, n, s_x_t, s_x_n, mask, ACC)
        if STARTS_AT:
            new_episode = _scan.load_flags(flag_ptr, t, n, s_flag_t, s_flag_n, mask, ENVS_IN_RUNS=ENV_RUNS_OF_FOUR)
        else:
            new_episode = _scan.load_flags(flag_ptr, t - 1, n, s_flag_t, s_flag_n, mask & (t[:, None] >= 1),
                                           ENVS_IN_RUNS=ENV_RUNS_OF_FOUR)
        beta = _episodic_prefix_sum_beta(new_episode, mask, ACC)
        c, carry = _scan.scan_chunk(
            x, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, False,
            LOOKBACK, NUM_STAGES, SHUFFLE_TIME, LATEST_FIRST, TIME_THREADS,
        )
        _scan.store_tile(out_ptr, c, t, n, s_out_t, s_out_n, mask)


@_explicit_layout.twin_of(_episodic_prefix_sum_kernel)
@_explicit_layout.twin_kernel
def _episodic_prefix_sum_explicit_kernel(
    x_ptr,
    s_x_t,
    s_x_n,
    flag_ptr,
    s_flag_t,
    s_flag_n,
    init_ptr,
    s_init,
    out_ptr,
    s_out_t,
    s_out_n,
    ws,
    flags,
    T,
    N,
    STARTS_AT: tl.constexpr,
    HAS_INIT: tl.constexpr,
    ACC: tl.constexpr,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
):
    """``_episodic_prefix_sum_kernel``: a whole ``[T, N]`` sequence per explicit-layout tile (``_explicit_layout``)."""
    t, n, n_ok, mask = _explicit_layout.whole_sequence_tile(T, N, BLOCK_T, BLOCK_N, TIME_THREADS, False)
    x = _scan.load_tile(x_ptr, t, n, s_x_t, s_x_n, mask, ACC)
    if STARTS_AT:
        new_episode = _scan.load_flags(flag_ptr, t, n, s_flag_t, s_flag_n, mask)
    else:
        new_episode = _scan.load_flags(flag_ptr, t - 1, n, s_flag_t, s_flag_n, mask & (t[:, None] >= 1))
    c, b = _explicit_layout.scan_tile(x, _episodic_prefix_sum_beta(new_episode, mask, ACC))
    if HAS_INIT:
        c = c + b * _scan.load_env(init_ptr, n, s_init, n_ok, ACC)[None, :]
    _scan.store_tile(out_ptr, c, t, n, s_out_t, s_out_n, mask)


def validate(inputs, dones, *, initial=None, boundary="ends_at", time_dim=0) -> tuple[Batch, dict]:
    """Check :func:`episodic_prefix_sum`'s arguments; the validated batch and options (shared with the baselines)."""
    if boundary not in BOUNDARIES:
        raise ValueError(f"boundary must be one of {BOUNDARIES}, got {boundary!r}")
    b = Batch(
        time_dim, floats={"inputs": inputs}, flags={"dones": dones}, per_env={"initial": initial}, optional=("initial",)
    )
    return b, {"boundary": boundary}


@replayable
def episodic_prefix_sum(
    inputs: torch.Tensor,
    dones: torch.Tensor,
    *,
    initial: Optional[torch.Tensor] = None,
    boundary: str = "ends_at",
    time_dim: int = 0,
    config: Optional[LaunchConfig] = None,
) -> torch.Tensor:
    """Running sums ``C`` that restart at episode boundaries; see the module docstring."""
    b, _ = validate(inputs, dones, initial=initial, boundary=boundary, time_dim=time_dim)
    if not runs_triton(b.device):
        c = reference.episodic_prefix_sum(
            b.time_major("inputs"), b.time_major("dones"), initial=b.env_vector("initial"), boundary=boundary
        )
        return b.from_time_major(c)
    c = b.output()
    if b.T > 0:
        launch(
            _episodic_prefix_sum_kernel,
            b,
            config,
            (*b.series("inputs", inputs), *b.series("dones", inputs), *b.per_env("initial", inputs), c, *b.strides(c)),
            (),
            STARTS_AT=boundary == "starts_at",
            HAS_INIT=initial is not None,
        )
    return c
