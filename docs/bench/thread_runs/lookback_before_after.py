"""Default block shapes below 8192 environments, float32, one version per process (from the repository root; the
version before on PYTHONPATH first): PYTHONPATH=. python docs/bench/thread_runs/lookback_before_after.py TAG.
Prints do_bench and CUDA-graph (device-only) times per cell."""
import sys, torch
sys.path.append("scripts")
import bench_kernels as B
import kernels
from kernels._launch import estimator_config
TAG = sys.argv[1]
ESTS = ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "linear_scan", "eligibility_traces",
        "episodic_prefix_sum")
CELLS = [(e, n, t, "f32") for n, t in ((4096, 4096), (2048, 2048), (1024, 4096), (512, 8192), (2048, 8192))
         for e in ESTS]
copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
for est, N, T, dname in CELLS:
    dtype = B.DTYPES[dname]
    args, kw = B.make_inputs(est, N, T, "tn", dtype, "cuda", 0)
    fn = getattr(kernels, est)
    refs = B.reference_outputs(est, args, kw, "tn", 64, 16384, "cuda")
    out = fn(*args, **kw)
    torch.cuda.synchronize()
    err = B.rel_err(out if isinstance(out, tuple) else (out,), refs[0], refs[1], "tn")
    assert err < (1e-4 if dname == "f32" else 2e-2), (est, N, T, dname, err)
    nbytes = B.cell_bytes(est, N, T, dtype)
    us = B.time_us(lambda: fn(*args, **kw), "cuda", 10, 50)
    dev = B.graph_us(lambda: fn(*args, **kw), "cuda", nbytes / (copy * 1e3))
    c = estimator_config(est, T, N, False, dtype.itemsize)
    label = f"{c.block_t}x{c.block_n}w{c.num_warps}{'+lb' if c.lookback else ''}+s{c.num_stages}{'+runs' if getattr(c, 'thread_runs', False) else ''}"
    print(f"{TAG} {est} {N}x{T} {dname} {us:.1f} us {dev:.1f} dev {nbytes / (dev * 1e3) / copy:.0%} [{label}] err {err:.1e}", flush=True)
    del args, kw; torch.cuda.empty_cache()
