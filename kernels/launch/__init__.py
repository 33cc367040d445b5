"""Launch choices as data, and the launch of one estimator's kernel.

``choose_config`` gives a problem's launch: the device's tuned table where it has the problem's key
(``tuned``), else the heuristic (``heuristic``); ``RLTRAIN_AUTOTUNE=1`` times it against the sweep's
candidates once per key (``autotune``). ``launch`` runs an estimator's kernel with it:
the look-back workspace, the sizes, the coefficients and the engine's constexprs.
"""

from __future__ import annotations

from typing import Optional

import torch

from kernels import fast_path
from kernels._args import Batch
from kernels._triton import tl, triton
from kernels.launch import autotune, tuned
from kernels.launch.config import LaunchConfig, scalars
from kernels.launch.heuristic import DeviceInfo, device_info, heuristic_config

__all__ = ["LaunchConfig", "choose_config", "launch", "scalars", "lookback_window", "time_is_contiguous"]

# Look-back tiles at most this many environments wide walk back a window of predecessors at a time
# (their flags in one polled vector, their aggregates in one tile load); wider ones one at a time.
WINDOWED_LOOKBACK_MAX_N = 16
LOOKBACK_WINDOW = 8
ONE_COLUMN_LOOKBACK_WINDOW = 32  # a single column of many tiles: every walk crosses tiles in flight
ONE_COLUMN_WINDOW_FROM_TILES = 32


def choose_config(family: str, T: int, N: int, time_contiguous: bool, dtype: torch.dtype,
                  device: DeviceInfo) -> LaunchConfig:
    """The launch of a ``[T, N]`` problem of ``family`` (``tuned.FAMILIES``) on ``device``."""
    dtype_name = str(dtype).removeprefix("torch.")
    found = tuned.tuned_config(device.name, family, time_contiguous, dtype_name, T, N)
    return found or heuristic_config(T, N, time_contiguous, dtype.itemsize, device)


def time_is_contiguous(stride_t: int) -> bool:
    """Whether a series' time axis is its stride-1 axis (``[N, T]`` storage, or one environment)."""
    return stride_t == 1


def lookback_window(block_n: int, n_blocks: int, num_chunks: int) -> int:
    """The kernels' ``LOOKBACK`` of a look-back launch: predecessors polled per step of a walk back."""
    if block_n > WINDOWED_LOOKBACK_MAX_N:
        return 1
    if n_blocks == 1 and num_chunks >= ONE_COLUMN_WINDOW_FROM_TILES:
        return ONE_COLUMN_LOOKBACK_WINDOW
    return LOOKBACK_WINDOW


def launch(kernel, batch: Batch, config: Optional[LaunchConfig], family: str, tensors: tuple, coefficients: tuple,
           **constexprs) -> None:
    """Launch an estimator's kernel on a validated batch with ``T > 0``.

    ``tensors`` are its series and per-environment arguments, ``tensors[:3]`` the first input's
    ``(tensor, stride_t, stride_n)`` (which says whether time is contiguous); ``coefficients`` the
    halves of ``scalars``; ``constexprs`` the estimator's own. ``config=None`` takes ``choose_config``
    (with ``RLTRAIN_AUTOTUNE=1``, the fastest launch timed on the first call of its key: ``autotune``).
    """
    if config is None:
        config = _chosen(kernel, batch, family, tensors, coefficients, constexprs)
    _launch_in(config, kernel, batch, tensors, coefficients, dict(constexprs))


def _chosen(kernel, batch: Batch, family: str, tensors: tuple, coefficients: tuple, constexprs: dict) -> LaunchConfig:
    """``choose_config``'s launch, or with ``RLTRAIN_AUTOTUNE=1`` the fastest of it and the candidates."""
    T, N, device = batch.T, batch.N, device_info(batch.device)
    time_contiguous = time_is_contiguous(tensors[1])
    config = choose_config(family, T, N, time_contiguous, batch.out_dtype, device)
    if not autotune.ENABLED:
        return config
    dtype_name = str(batch.out_dtype).removeprefix("torch.")
    key = (kernel, tuned.key(family, time_contiguous, dtype_name, T, N), device.name)
    with fast_path.unrecorded():
        return autotune.fastest(key, config,
                                lambda: autotune.candidates(N, T, time_contiguous, batch.out_dtype.itemsize, device),
                                lambda c: _launch_in(c, kernel, batch, tensors, coefficients, dict(constexprs)),
                                batch.device.type == "cuda")


def _launch_in(config: LaunchConfig, kernel, batch: Batch, tensors: tuple, coefficients: tuple,
               constexprs: dict) -> None:
    T, N = batch.T, batch.N
    time_contiguous = time_is_contiguous(tensors[1])
    num_chunks, n_blocks = triton.cdiv(T, config.block_t), triton.cdiv(N, config.block_n)
    lookback = config.lookback and num_chunks > 1
    scratch = ()
    if lookback:
        flags = torch.zeros(num_chunks * n_blocks, dtype=torch.int32, device=batch.device)
        ws = torch.empty(3 * num_chunks * N, dtype=batch.compute_dtype, device=batch.device)
        scratch = (flags, ws)
        programs = num_chunks * n_blocks
    else:
        flags = ws = tensors[0]
        programs = n_blocks
    constexprs.update(ACC=tl.float64 if batch.compute_dtype == torch.float64 else tl.float32,
                      BLOCK_T=config.block_t, BLOCK_N=config.block_n,
                      LOOKBACK=lookback_window(config.block_n, n_blocks, num_chunks) if lookback else 0,
                      NUM_STAGES=1 if lookback else config.num_stages, LATEST_FIRST=not time_contiguous,
                      RUN=config.run)
    fast_path.launch(kernel, programs, batch.device, (*tensors, ws, flags, T, N, *coefficients), constexprs,
                     config.num_warps, scratch)
