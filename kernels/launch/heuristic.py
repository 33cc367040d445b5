"""The default launch of a problem, from its shape and the device's properties.

A short rule, no device constants: a 4-warp program holds a tile of about ``TILE_ELEMENTS``
elements (16 per thread) shaped so that its loads are 16-byte vectors along the contiguous axis;
programs are made narrower until there are ``PROGRAMS_PER_MULTIPROCESSOR`` per multiprocessor of
the device, and where even then they would leave multiprocessors idle, tiles become programs of
their own (look-back). Walks of several chunks are pipelined. Long time-contiguous rows of fewer
environments than that (``row_config``) are walked whole, one environment per program on up to 16
warps, or, where those programs would leave a quarter of the multiprocessors idle, cut into
look-back tiles of one environment. ``[T, N]`` tiles (environments contiguous) hold their steps
in thread runs (``thread_run``), and where there are many look-back tiles per multiprocessor they
grow longer, up to ``LONGEST_RUN_TILE`` times the tile. A tuned table of the device
(``kernels.launch.tuned``) overrides this where a sweep measured something faster.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

import torch

from kernels._triton import triton
from kernels.launch.config import LaunchConfig

TILE_ELEMENTS = 2048  # a 4-warp program's tile: 16 elements per thread
PROGRAMS_PER_MULTIPROCESSOR = 2
LOOKBACK_FROM_CHUNKS = 4  # a column of fewer chunks is walked by one program even on an idle GPU
LONGEST_ROW_TILE = 256  # steps of a time-contiguous tile of several environments
LONGEST_ROW = 4096  # steps of a time-contiguous row one program holds whole
PIPELINE_STAGES = 2
MANY_TILES_PER_MULTIPROCESSOR = 8  # look-back tiles in thread runs grow longer above this many
LONGEST_RUN_TILE = 4  # ... up to this many times the tile (16 steps of a 16-byte vector per thread)


class DeviceInfo(NamedTuple):
    """What the launch rule and the tuned tables need to know of a device."""

    name: str
    multiprocessors: int


@lru_cache(maxsize=None)
def _cuda_info(index: int) -> DeviceInfo:
    props = torch.cuda.get_device_properties(index)
    return DeviceInfo(props.name, props.multi_processor_count)


def device_info(device: torch.device) -> DeviceInfo:
    """The properties of ``device`` (``torch.cuda.get_device_properties``); a CPU, where the
    interpreter runs programs one after another, counts as one multiprocessor."""
    if device.type != "cuda":
        return DeviceInfo(device.type, 1)
    return _cuda_info(device.index if device.index is not None else torch.cuda.current_device())


def heuristic_config(T: int, N: int, time_contiguous: bool, itemsize: int, device: DeviceInfo) -> LaunchConfig:
    """The rule's launch for a ``[T, N]`` problem (``time_contiguous``: time is the stride-1 axis, as
    in ``[N, T]`` storage) of ``itemsize``-byte floats on ``device`` (module docstring)."""
    vector = max(1, 16 // itemsize)  # elements of one 16-byte load
    tile = TILE_ELEMENTS // max(1, itemsize // 4)  # float64 tiles hold half as many
    t_pow, n_pow = triton.next_power_of_2(max(T, 1)), triton.next_power_of_2(max(N, 1))
    target = PROGRAMS_PER_MULTIPROCESSOR * device.multiprocessors
    if time_contiguous and T > LONGEST_ROW_TILE and N < target:
        return row_config(T, N, vector, tile, device)
    if time_contiguous:
        block_t = min(t_pow, LONGEST_ROW_TILE)
        block_n = min(n_pow, max(1, tile // block_t))
        narrowest = 1
    else:
        block_n = min(n_pow, 16 * vector)  # 16 lanes of 16-byte vectors along environments
        block_t = min(t_pow, max(1, tile // block_n), LONGEST_ROW_TILE)
        narrowest = min(n_pow, 4 * vector)  # 64-byte rows at least
    while block_n > narrowest and triton.cdiv(N, block_n) < target:
        block_n //= 2
        if not time_contiguous:
            block_t = min(t_pow, block_t * 2, LONGEST_ROW_TILE)
    num_chunks = triton.cdiv(T, block_t)
    lookback = triton.cdiv(N, block_n) < device.multiprocessors and num_chunks >= LOOKBACK_FROM_CHUNKS
    if lookback:  # shorter tiles, more programs
        block_t = max(16, min(block_t, tile // block_n))
    num_warps = min(8, max(1, block_t * block_n // (32 * 16)))
    stages = 1 if lookback or num_chunks < 3 else PIPELINE_STAGES
    if time_contiguous:
        return LaunchConfig(block_t, block_n, num_warps, lookback, stages)
    many_tiles = MANY_TILES_PER_MULTIPROCESSOR * device.multiprocessors
    while (lookback and block_t * block_n < LONGEST_RUN_TILE * tile and block_t < t_pow
           and triton.cdiv(T, block_t) * triton.cdiv(N, block_n) > many_tiles):
        block_t *= 2
    run = thread_run(block_t, block_n, num_warps, itemsize)
    return LaunchConfig(block_t, block_n, num_warps, lookback, stages, run)


def thread_run(block_t: int, block_n: int, num_warps: int, itemsize: int) -> int:
    """``LaunchConfig.run`` of a ``[T, N]`` tile (environments contiguous): the steps each thread
    holds in the blocked layout Triton gives it. A thread holds a 16-byte vector of environments (or
    the tile's share of them); lanes lie along environments first, then along time, and so do
    warps; the threads along time hold the rest of the rows in turn (``kernels.scan.run_position``)."""
    per_thread = max(1, min(16 // itemsize, block_n, block_t * block_n // (32 * num_warps)))
    lanes_n = min(32, block_n // per_thread)
    warps_n = max(1, min(num_warps, block_n // (per_thread * lanes_n)))
    return block_t // min(block_t, 32 // lanes_n * (num_warps // warps_n))


def row_config(T: int, N: int, vector: int, tile: int, device: DeviceInfo) -> LaunchConfig:
    """The launch of ``N`` time-contiguous rows of ``T`` steps, fewer rows than the rule's programs:
    one environment per program. Where the rows fill three quarters of the multiprocessors, each is
    walked whole in chunks of up to ``LONGEST_ROW`` steps, two 16-byte vectors per thread (up to 16
    warps), so a program's loads of a chunk are all in flight at once; fewer rows are cut into
    look-back tiles of ``tile`` steps on 4 warps, so the sequence still spreads over the device."""
    t_pow = triton.next_power_of_2(T)
    if 4 * N < 3 * device.multiprocessors and T > tile:
        return LaunchConfig(tile, 1, min(8, max(1, tile // (32 * 16))), True, 1)
    block_t = min(t_pow, LONGEST_ROW)
    return LaunchConfig(block_t, 1, min(16, max(1, block_t // (64 * vector))), False, 1)
