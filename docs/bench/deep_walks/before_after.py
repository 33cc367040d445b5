"""The ninth session's block-shape rules against the eighth session's: each estimator's own block
shape (``config=None``), one version per process, every output checked against the float64 reference
first (from the repository root; a checkout of the kernels before first on PYTHONPATH for "before"):

  PYTHONPATH=. python docs/bench/deep_walks/before_after.py TAG

Cells: deep walks from 8192 environments (GAE, light kernels), four-warp walks from 4096
(``LONG_RUN_TILES`` kernels, f32 and bf16), one-environment `[N, T]` walks of the light kernels,
and environment counts that are not multiples of 16 (look-back tiles instead of walks). One line per
cell: do_bench median (us) and the fraction of the copy bandwidth measured in the same process."""
import sys

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402

TAG = sys.argv[1]
ALL = ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "linear_scan", "eligibility_traces",
       "episodic_prefix_sum")
LIGHT = ("eligibility_traces", "episodic_prefix_sum")
CELLS = [(e, n, t, "tn", "f32") for n, t in ((8192, 4096), (16384, 2048), (32768, 1024)) for e in ("gae",) + LIGHT]
CELLS += [(e, n, t, "tn", d) for d in ("f32", "bf16") for n, t in ((4096, 4096), (4096, 2048), (6000, 1000))
          for e in ("linear_scan",) + LIGHT]
CELLS += [(e, n, t, "nt", "f32") for n, t in ((2048, 2048), (2048, 8192), (4096, 4096), (8192, 4096)) for e in LIGHT]
CELLS += [(e, 8200, 2048, "tn", "f32") for e in ALL] + [(e, 8200, 2048, "tn", "bf16") for e in ("gae", "linear_scan")]
copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
print(f"{TAG} copy {copy:.0f} GB/s", flush=True)
for est, N, T, layout, dname in CELLS:
    us, err, nbytes = B.checked_default_time(est, N, T, layout, dname, 10, 50)
    print(f"{TAG} {est} {N}x{T} {layout} {dname} {us:.1f} us {nbytes / (us * 1e3) / copy:.0%} err {err:.1e}",
          flush=True)
    torch.cuda.empty_cache()
