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
from kernels.launch.heuristic import PROGRAMS_PER_MULTIPROCESSOR, DeviceInfo, heuristic_config, thread_run

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
# Environment-contiguous launches ``(block_t, block_n, num_warps, lookback, num_stages)`` in thread runs,
# tried before all others: look-back tiles of one column of a long sequence (1024 x 16 on 8 warps,
# 512 and 256 x 16 on 4), 128 x 16 on 4 warps as look-back tiles or holding a short sequence whole,
# and deep walks of square tiles (64 x 64 on 4 warps 4 stages, on 8 warps 3; 32 x 32 on 2 warps 3).
THREAD_RUN_LAUNCHES = ((128, 16, 4, True, 1), (512, 16, 4, True, 1), (1024, 16, 8, True, 1), (256, 16, 4, True, 1),
                       (64, 64, 4, False, 4), (64, 64, 8, False, 3), (32, 32, 2, False, 3), (128, 16, 4, False, 1))
# Then a grid of tiles, each on the warps that give a thread 4, 8, 16 or 32 elements.
ROW_GRID = tuple((bt, bn) for bt in (64, 128, 256, 512) for bn in (1, 2, 4, 8))
TIME_MAJOR_GRID = tuple((bt, bn) for bt in (16, 32, 64, 128) for bn in (16, 32, 64, 128))
ELEMENTS_PER_THREAD = (16, 32, 8, 4)


def candidates(N: int, T: int, time_contiguous: bool, itemsize: int, device: DeviceInfo) -> list[LaunchConfig]:
    """Launches worth timing for one problem, most promising first (a sweep may time only a prefix):
    the heuristic's, then for ``[T, N]`` tiles ``THREAD_RUN_LAUNCHES``, then the row launches (short
    rows first where there are enough rows to fill the rule's programs, else long ones) or
    ``TIME_MAJOR_LAUNCHES``, then the grid; each clipped to the problem, walked (a walk of 8 or more
    chunks pipelined 2 and 4 deep; none where it would leave half the multiprocessors idle) and as
    look-back tiles where walks leave any multiprocessor idle; ``[T, N]`` tiles in thread runs first,
    then without."""
    t_pow, n_pow = triton.next_power_of_2(T), triton.next_power_of_2(N)
    many_rows = N >= PROGRAMS_PER_MULTIPROCESSOR * device.multiprocessors
    rows = SHORT_ROW_LAUNCHES + LONG_ROW_LAUNCHES if many_rows else LONG_ROW_LAUNCHES + SHORT_ROW_LAUNCHES
    launches = rows if time_contiguous else TIME_MAJOR_LAUNCHES
    grid = ROW_GRID if time_contiguous else TIME_MAJOR_GRID
    launches += tuple((bt, bn, max(1, bt * bn // (32 * per_thread)))
                      for bt, bn in grid for per_thread in ELEMENTS_PER_THREAD)
    out = [heuristic_config(T, N, time_contiguous, itemsize, device)]

    def clipped(bt: int, bn: int, warps: int) -> tuple:
        bt, bn = min(bt, t_pow), min(bn, n_pow)
        warps = min(warps, max(1, bt * bn // 32))  # no more warps than a clipped tile fills
        runs = () if time_contiguous else (thread_run(bt, bn, warps, itemsize),)
        chunks, programs = triton.cdiv(T, bt), triton.cdiv(N, bn)
        walks = chunks <= 16 or programs >= device.multiprocessors // 2  # else a walk leaves the GPU idle
        looks_back = chunks > 1 and programs < 2 * device.multiprocessors
        return bt, bn, warps, tuple(dict.fromkeys(runs + (1,))), chunks, walks, looks_back

    for bt, bn, warps, lookback, stages in () if time_contiguous else THREAD_RUN_LAUNCHES:
        bt, bn, warps, runs, chunks, walks, looks_back = clipped(bt, bn, warps)
        if looks_back if lookback else walks:
            out.append(LaunchConfig(bt, bn, warps, lookback, 1 if lookback or chunks <= 2 else stages, runs[0]))
    for bt, bn, warps in launches:
        bt, bn, warps, runs, chunks, walks, looks_back = clipped(bt, bn, warps)
        if warps not in WARPS or bt * bn > MAX_TILE_ELEMENTS:
            continue
        for run in runs:
            for stages in ((1,) if chunks <= 2 else (2, 4) if chunks >= 8 else (2,)) if walks else ():
                out.append(LaunchConfig(bt, bn, warps, False, stages, run))
            if looks_back:
                out.append(LaunchConfig(bt, bn, warps, True, 1, run))
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
