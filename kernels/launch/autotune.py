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

import itertools
import os
import time
from typing import Callable

from kernels._triton import triton
from kernels.launch.config import MAX_TILE_ELEMENTS, WARPS, LaunchConfig
from kernels.launch.heuristic import DeviceInfo, heuristic_config

ENABLED = os.environ.get("RLTRAIN_AUTOTUNE", "0") not in ("", "0")
ELEMENTS_PER_THREAD = (16, 32)
MAX_CANDIDATES = 40
_fastest: dict = {}  # (kernel, table key, device name) -> LaunchConfig


def candidates(N: int, T: int, time_contiguous: bool, itemsize: int, device: DeviceInfo) -> list[LaunchConfig]:
    """Launches worth timing for one problem: the heuristic's, and tiles along the contiguous axis of
    16 or 32 elements per thread, walked (pipelined when there are several chunks; not where a walk of
    many chunks would leave half the multiprocessors idle) or as look-back tiles where walks leave
    any idle."""
    t_pow, n_pow = triton.next_power_of_2(T), triton.next_power_of_2(N)
    if time_contiguous:
        block_ts, block_ns = (64, 128, 256, 512), (1, 2, 4, 8)
    else:
        block_ts, block_ns = (16, 32, 64, 128), (16, 32, 64, 128)
    out = [heuristic_config(T, N, time_contiguous, itemsize, device)]
    for bt, bn, per_thread in itertools.product(block_ts, block_ns, ELEMENTS_PER_THREAD):
        bt, bn = min(bt, max(t_pow, 1)), min(bn, n_pow)
        warps = max(1, bt * bn // (32 * per_thread))
        if warps not in WARPS or bt * bn > MAX_TILE_ELEMENTS:
            continue
        chunks, programs = triton.cdiv(T, bt), triton.cdiv(N, bn)
        if chunks <= 16 or programs >= device.multiprocessors // 2:  # else a walk leaves the GPU idle
            out.append(LaunchConfig(bt, bn, warps, False, 2 if chunks > 2 else 1))
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
