"""How the benchmarks time a call: ``do_bench`` medians, back-to-back host calls, calls captured by
``kernels.capture``, device-only times replayed from a CUDA graph, CUDA events around one call (rl-triton's
method), a device-to-device copy's bandwidth, and how many input sets keep a cell's inputs out of the L2."""

from __future__ import annotations

import itertools
import math
import statistics
import time
from typing import Optional

import torch

import kernels
from kernels._triton import triton

L2_BYTES = 60 * 2**20


# --------------------------------------------------------------------------- #
# timing
# --------------------------------------------------------------------------- #
def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


SLOW_CALL_S = 0.05  # calls slower than this are timed over SLOW_CALLS calls, not do_bench's many


def time_us(fn, device, warmup_ms: float, rep_ms: float, slow_calls: int = 3) -> float:
    """Median device time of one call, in microseconds (do_bench; CUDA events over a few calls when
    one call takes more than ``SLOW_CALL_S``, e.g. the sequential kernel at T = 1M)."""
    if torch.device(device).type == "cuda":
        import triton.testing  # noqa: F401 - do_bench

        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        if time.perf_counter() - t0 > SLOW_CALL_S:
            times = []
            for _ in range(slow_calls):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            return 1e3 * statistics.median(times)
        return 1e3 * triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
    t0 = time.perf_counter()
    fn()
    min_calls = slow_calls if time.perf_counter() - t0 > SLOW_CALL_S else 5
    times = []
    start = time.perf_counter()
    while len(times) < min_calls or (time.perf_counter() - start < rep_ms / 1e3 and len(times) < 1000):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


def host_us(fn, device, calls: int) -> float:
    """Wall time per call of ``calls`` back-to-back calls (one sync at the end)."""
    fn()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync(device)
    return 1e6 * (time.perf_counter() - t0) / calls


def captured_us(fn, sets: list, device, calls: int) -> float:
    """``host_us`` of ``kernels.capture``'s calls: one captured call per input set, taken in turn (so
    each reads its inputs from DRAM), as a training loop calls the estimator on buffers it refills in
    place. On a GPU each call is one CUDA-graph launch; on the CPU it runs the estimator again."""
    captured = itertools.cycle([kernels.capture(fn, *args, **kwargs) for args, kwargs in sets])
    return host_us(lambda: next(captured)(), device, calls)


GRAPH_CALLS = 20  # calls captured in one CUDA graph for graph_us (at least; one per input set)
MAX_INPUT_SETS = 256


def input_set_count(nbytes: int, device, l2_fills: int = 3, most: int = MAX_INPUT_SETS) -> int:
    """How many input sets a cell of ``nbytes`` rotates through on a GPU: enough to fill the L2
    ``l2_fills`` times (at most ``most``), so that each timed call, and each call replayed from a
    CUDA graph (which has no L2 flush), reads inputs the L2 does not hold. One on the CPU."""
    if torch.device(device).type != "cuda":
        return 1
    return max(1, min(most, math.ceil(l2_fills * L2_BYTES / nbytes)))


def graph_us(fn, device, floor_us: float, calls: int = GRAPH_CALLS, replays: int = 10) -> Optional[float]:
    """Device-only time per call: ``calls`` calls captured in one CUDA graph, replayed (median of
    ``replays``, CUDA events). No host work between the kernels, so for short calls this is the
    device time that ``time_us`` (whose host launch can outlast do_bench's L2 flush) and
    ``host_us`` (host-bound) cannot show. ``None`` on the CPU, when capture fails (e.g. an impl
    that syncs), or when the result is below ``floor_us`` (the byte floor at the copy bandwidth:
    a replay that fast did not do the work).
    """
    if torch.device(device).type != "cuda":
        return None
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm allocator and caches off the capture
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        graph.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(replays):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(1e3 * start.elapsed_time(end) / calls)
        del graph
        us = statistics.median(times)
        return us if us >= floor_us else None
    except Exception:  # noqa: BLE001 - an impl that cannot be captured has no graph time
        torch.cuda.synchronize()
        return None


def copy_bandwidth(device, nbytes: int, warmup_ms: float, rep_ms: float) -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read + bytes written)."""
    n = nbytes // 4
    src = torch.rand(n, device=device)
    dst = torch.empty_like(src)
    us = time_us(lambda: dst.copy_(src), device, warmup_ms, rep_ms)
    del src, dst
    return 2 * n * 4 / (us * 1e-6) / 1e9


def event_us(fn, warmup=20, iters=100):
    """rl-triton's timing: CUDA events around one call between synchronizations."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(1e3 * start.elapsed_time(end))
    return statistics.median(times)
