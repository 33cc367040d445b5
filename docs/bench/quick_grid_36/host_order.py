"""Full-call host time of GAE, V-trace and Retrace at 4096 x T (float32, [T, N]), T in {8, 128} in
alternating order, three rounds in one process: whether V-trace's slower full call at 4096 x 8 in
the quick grid (49.6 against 41.9 us at 4096 x 128) is the call or the host. Back-to-back calls after a
warm-up, one device sync at the end, the median of five batches of 2000.

  PYTHONPATH=. python docs/bench/quick_grid_36/host_order.py
"""
import statistics
import sys
import time

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402


def per_call_us(fn, calls=2000, batches=5):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


for round_ in range(3):
    for T in ((8, 128) if round_ % 2 == 0 else (128, 8)):
        for est in ("gae", "vtrace", "retrace"):
            args, kw = B.make_inputs(est, 4096, T, "tn", torch.float32, "cuda", 0)
            fn = getattr(kernels, est)
            print(f"round {round_} {est:8s} 4096x{T:<4d} {per_call_us(lambda: fn(*args, **kw)):6.1f} us", flush=True)
