"""The tenth session's kernels and block shapes against the ninth session's: each estimator's own
block shape (``config=None``), one version per process, every output checked against the float64
reference first (from the repository root; a checkout of the kernels before first on PYTHONPATH for
"before"):

  PYTHONPATH=. python docs/bench/odd_lengths/before_after.py TAG

Cells: ``linear_scan``'s one-environment `[N, T]` walks below 4096 environments, and V-trace's
`[N, T]` tiles whose ``x_{t+1}`` now comes by warp shuffles (with their new block shapes). One line
per cell: do_bench median (us), or for sequences of up to 256 steps the device time of calls
replayed from a CUDA graph, and the fraction of the copy bandwidth measured in the same process."""
import sys

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402

TAG = sys.argv[1]
CELLS = [("linear_scan", n, t, "nt", "f32") for n, t in ((1024, 4096), (2048, 2048), (2048, 8192), (3008, 4096),
                                                         (2048, 2050), (4095, 2048))]
CELLS += [("vtrace", n, t, "nt", d) for d in ("f32", "bf16") for n, t in ((8192, 4096), (4096, 4096), (2048, 2048),
                                                                          (16384, 2048), (4096, 1000))]
CELLS += [("vtrace", n, t, "nt", d) for d in ("f32", "bf16") for n, t in ((2048, 128), (4096, 128), (8192, 128),
                                                                          (32768, 128), (4096, 256), (16384, 256),
                                                                          (4096, 200))]
copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
print(f"{TAG} copy {copy:.0f} GB/s", flush=True)
for est, N, T, layout, dname in CELLS:
    fn = getattr(kernels, est)
    timer = (lambda f: B.graph_us(f, "cuda", 0.0)) if T <= 256 else None
    times = B.checked_times({TAG: lambda a, k: fn(*a, **k)}, est, N, T, layout, dname, 1, 10, 50, timer=timer)[TAG]
    us = times[0]
    nbytes = B.cell_bytes(est, N, T, B.DTYPES[dname])
    print(f"{TAG} {est} {N}x{T} {layout} {dname} {'graph' if timer else 'do_bench'} "
          + (f"{us:.1f} us {nbytes / (us * 1e3) / copy:.0%}" if isinstance(us, float) else str(us)), flush=True)
    torch.cuda.empty_cache()
