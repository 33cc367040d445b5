"""Time cells with the kernels first on PYTHONPATH: `python var8_bench.py LABEL`."""
import sys, torch
sys.path.append("scripts")
import bench_kernels as B
import kernels
LABEL = sys.argv[1]
ALL = ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "eligibility_traces",
       "episodic_prefix_sum", "linear_scan")
CELLS = [(e, 8192, 4096, "tn", "f32") for e in ("gae", "discounted_returns", "retrace", "eligibility_traces")]
CELLS += [("gae", 2048, 2048, "tn", "f32"), ("gae", 512, 8192, "tn", "f32"), ("gae", 16, 1048576, "nt", "f32")]
if LABEL.startswith("ba"):
    CELLS = [(e, 8192, 4096, "tn", "f32") for e in ALL]
    CELLS += [(e, n, t, "tn", "f32") for e in ("gae", "retrace", "eligibility_traces", "episodic_prefix_sum")
              for n, t in ((2048, 2048), (512, 8192))]
    CELLS += [(e, n, t, "nt", "f32") for e in ("eligibility_traces", "episodic_prefix_sum")
              for n, t in ((2048, 2048), (2048, 8192), (4096, 1024))]
    CELLS += [(e, 16, 1048576, "nt", "f32") for e in ("gae", "eligibility_traces", "vtrace")]
    CELLS += [("gae", 16, 1048576, "tn", "f32")]
if LABEL.startswith("win"):
    CELLS = [(e, 16, 1048576, l, "f32") for l in ("nt", "tn") for e in ("gae", "eligibility_traces", "vtrace", "retrace")]
    CELLS += [(e, 8192, 4096, "tn", "f32") for e in ("gae", "linear_scan")]
if LABEL.startswith("bf16"):
    CELLS = [(e, n, t, "tn", d) for n, t in ((8192, 4096), (512, 8192)) for e in ALL for d in ("f32", "bf16")]
print(LABEL, kernels.__file__, flush=True)
copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
print(LABEL, f"copy {copy:.0f} GB/s", flush=True)
for est, N, T, layout, dname in CELLS:
    dtype = B.DTYPES[dname]
    args, kw = B.make_inputs(est, N, T, layout, dtype, "cuda", 0)
    fn = getattr(kernels, est)
    nbytes = B.cell_bytes(est, N, T, dtype)
    refs = B.reference_outputs(est, args, kw, layout, 64, 16384, "cuda")
    try:
        out = fn(*args, **kw)
        torch.cuda.synchronize()
        err = B.rel_err(out if isinstance(out, tuple) else (out,), refs[0], refs[1], layout)
        us = B.time_us(lambda: fn(*args, **kw), "cuda", 5, 20)
        print(f"{LABEL} {est} {N}x{T} {layout} {dname}: {us:.1f} us {nbytes / (us * 1e-6) / 1e9 / copy:.0%} err {err:.1e}",
              flush=True)
    except Exception as e:
        print(f"{LABEL} {est} {N}x{T} {layout} {dname}: FAIL {repr(e)[:300]}", flush=True)
    del args, kw
    torch.cuda.empty_cache()
