"""Default block shapes, one version per process, every output checked against the float64 reference
first (from the repository root; the version before first on PYTHONPATH):

  PYTHONPATH=. python docs/bench/thread_runs/before_after.py PLAN TAG

``walks`` (`before_after.log`): from 8192 environments, f32 and bf16, do_bench times.
``lookback`` (`lookback_before_after.log`): below 8192 environments, f32, do_bench and device-only
times (20 calls replayed from a CUDA graph). One line per cell."""
import sys, torch
sys.path.append("scripts")
import bench_kernels as B
import kernels
from kernels._launch import estimator_config
PLAN, TAG = sys.argv[1], sys.argv[2]
ESTS = ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "linear_scan", "eligibility_traces",
        "episodic_prefix_sum")
SHAPES = {"walks": ((8192, 4096, "f32"), (16384, 2048, "f32"), (8192, 4096, "bf16"), (16384, 2048, "bf16")),
          "lookback": ((4096, 4096, "f32"), (2048, 2048, "f32"), (1024, 4096, "f32"), (512, 8192, "f32"),
                       (2048, 8192, "f32"))}[PLAN]
CELLS = [(e, n, t, d) for n, t, d in SHAPES for e in ESTS]
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
    c = estimator_config(est, T, N, False, dtype.itemsize)
    label = f"{c.block_t}x{c.block_n}w{c.num_warps}{'+lb' if c.lookback else ''}+s{c.num_stages}{'+runs' if getattr(c, 'thread_runs', False) else ''}"
    if PLAN == "walks":
        times = f"{us:.1f} us {nbytes / (us * 1e3) / copy:.0%}"
    else:
        dev = B.graph_us(lambda: fn(*args, **kw), "cuda", nbytes / (copy * 1e3))
        times = f"{us:.1f} us {dev:.1f} dev {nbytes / (dev * 1e3) / copy:.0%}"
    print(f"{TAG} {est} {N}x{T} {dname} {times} [{label}] err {err:.1e}", flush=True)
    del args, kw; torch.cuda.empty_cache()
