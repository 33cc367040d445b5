"""Full-call host time of GAE, V-trace and Retrace at 4096 x T (float32, [T, N]), T in {8, 128} in
alternating order, three rounds in one process: whether V-trace's slower full call at 4096 x 8 in
the quick grid (49.6 against 41.9 us at 4096 x 128) is the call or the host. The median of five runs
of ``scripts/probe_host_overhead.py``'s ``per_call_us`` (2000 back-to-back calls after its warm-up, one
device sync at the end; `host_order.log` came from the same loop written out here, whose warm-up ran
once per cell instead of once per run).

  PYTHONPATH=. python docs/bench/quick_grid_36/host_order.py
"""
import statistics
import sys

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from probe_host_overhead import per_call_us  # noqa: E402


def median_us(fn, runs=5):
    return statistics.median(per_call_us(fn, calls=2000) for _ in range(runs))


for round_ in range(3):
    for T in ((8, 128) if round_ % 2 == 0 else (128, 8)):
        for est in ("gae", "vtrace", "retrace"):
            args, kw = B.make_inputs(est, 4096, T, "tn", torch.float32, "cuda", 0)
            fn = getattr(kernels, est)
            print(f"round {round_} {est:8s} 4096x{T:<4d} {median_us(lambda: fn(*args, **kw)):6.1f} us", flush=True)
