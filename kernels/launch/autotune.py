"""The launches worth timing for a problem, and the opt-in autotuning of a call: ``RLTRAIN_AUTOTUNE=1``.

``candidates`` is the set that ``scripts/tune_kernels.py`` sweeps. With ``RLTRAIN_AUTOTUNE=1`` set
before import, the first call of each (kernel, tuned-table key, device) times the chosen launch
(the device's table entry or the heuristic's) and these candidates on its own inputs, keeps the
fastest for the key, and later calls launch it; on a GPU each is the median of
``triton.testing.do_bench``, on the CPU (the interpreter) the wall time of one launch. A candidate
computes the whole output, so the launches being timed only overwrite it; the call's own launch
follows, and is the only one a replay plan records (``kernels.fast_path.unrecorded``).
"""

from __future__ import annotations

import os
import time
from typing import Callable

from kernels._triton import triton
from kernels.launch.config import MAX_TILE_ELEMENTS, WARPS, LaunchConfig
from kernels.launch.heuristic import PROGRAMS_PER_MULTIPROCESSOR, DeviceInfo, heuristic_config

ENABLED = os.environ.get("RLTRAIN_AUTOTUNE", "0") not in ("", "0")
MAX_CANDIDATES = 40
_fastest: dict = {}  # (kernel, table key, device name) -> LaunchConfig

# Launches ``(block_t, block_n, num_warps)`` that carry the strategies worth trying first, each clipped
# to the problem. Time-contiguous rows: one environment's row walked whole on 8-16 warps, or cut into
# look-back tiles of 1024-2048 steps; rows of 128-512 steps of one or two environments on 1-4 warps,
# each thread one or two 16-byte vectors. Environment-contiguous tiles: a short sequence held whole
# (128 x 16 on 4 or 8 warps), square tiles walked deep (64 x 64, 32 x 32), long tiles of one column
# of few environments (256-1024 x 16).
LONG_ROW_LAUNCHES = ((4096, 1, 16), (4096, 1, 8), (2048, 1, 8), (2048, 1, 4), (1024, 1, 2))
SHORT_ROW_LAUNCHES = ((128, 2, 2), (256, 2, 2), (512, 1, 4), (256, 1, 1), (128, 1, 1))
TIME_MAJOR_LAUNCHES = ((128, 16, 4), (128, 16, 8), (64, 64, 4), (64, 64, 8), (32, 32, 2), (64, 32, 4), (32, 64, 4),
                       (1024, 16, 8), (512, 16, 4), (256, 16, 4), (16, 64, 1), (32, 32, 1))
# Then a grid of tiles, each on the warps that give a thread 4, 8, 16 or 32 elements.
ROW_GRID = tuple((bt, bn) for bt in (64, 128, 256, 512) for bn in (1, 2, 4, 8))
TIME_MAJOR_GRID = tuple((bt, bn) for bt in (16, 32, 64, 128) for bn in (16, 32, 64, 128))
ELEMENTS_PER_THREAD = (16, 32, 8, 4)


def candidates(N: int, T: int, time_contiguous: bool, itemsize: int, device: DeviceInfo) -> list[LaunchConfig]:
    """Launches worth timing for one problem, most promising first (a sweep may time only a prefix):
    the heuristic's, the row launches (short rows first where there are enough rows to fill the
    rule's programs, else long ones) or ``TIME_MAJOR_LAUNCHES``, then the grid; each clipped to the
    problem, walked (a walk of 8 or more chunks pipelined 2 and 4 deep; none where it would leave half
    the multiprocessors idle) and as look-back tiles where walks leave any multiprocessor idle."""
    t_pow, n_pow = triton.next_power_of_2(T), triton.next_power_of_2(N)
    many_rows = N >= PROGRAMS_PER_MULTIPROCESSOR * device.multiprocessors
    rows = SHORT_ROW_LAUNCHES + LONG_ROW_LAUNCHES if many_rows else LONG_ROW_LAUNCHES + SHORT_ROW_LAUNCHES
    launches = rows if time_contiguous else TIME_MAJOR_LAUNCHES
    grid = ROW_GRID if time_contiguous else TIME_MAJOR_GRID
    launches += tuple((bt, bn, max(1, bt * bn // (32 * per_thread)))
                      for bt, bn in grid for per_thread in ELEMENTS_PER_THREAD)
    out = [heuristic_config(T, N, time_contiguous, itemsize, device)]
    for bt, bn, warps in launches:
        bt, bn = min(bt, t_pow), min(bn, n_pow)
        warps = min(warps, max(1, bt * bn // 32))  # no more warps than a clipped tile fills
        if warps not in WARPS or bt * bn > MAX_TILE_ELEMENTS:
            continue
        chunks, programs = triton.cdiv(T, bt), triton.cdiv(N, bn)
        if chunks <= 16 or programs >= device.multiprocessors // 2:  # else a walk leaves the GPU idle
            for stages in (1,) if chunks <= 2 else (2, 4) if chunks >= 8 else (2,):
                out.append(LaunchConfig(bt, bn, warps, False, stages))
        if chunks > 1 and programs < 2 * device.multiprocessors:
            out.append(LaunchConfig(bt, bn, warps, True, 1))
    return list(dict.fromkeys(out))


def _seconds(run: Callable[[], None], on_gpu: bool) -> float:
    if on_gpu:
        import triton.testing

        return triton.testing.do_bench(run, warmup=5, rep=20, return_mode="median")
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def fastest(key: tuple, chosen: LaunchConfig, options: Callable[[], list[LaunchConfig]],
            run: Callable[[LaunchConfig], None], on_gpu: bool) -> LaunchConfig:
    """The fastest of ``chosen`` and ``options()[:MAX_CANDIDATES]`` by ``run(config)``, timed once per ``key``."""
    if key not in _fastest:
        timed = list(dict.fromkeys([chosen, *options()[:MAX_CANDIDATES]]))
        _fastest[key] = min(timed, key=lambda config: _seconds(lambda: run(config), on_gpu))
    return _fastest[key]
