"""The default block shapes of the kernels first on PYTHONPATH (from the repository root):
`PYTHONPATH=<kernels to time>:. python docs/bench/latest_first/before_after.py LABEL`."""
import sys, torch
sys.path.append("scripts")
import bench_kernels as B
import kernels
LABEL = sys.argv[1]
REV = ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "linear_scan")
CELLS = [(e, n, t, "tn", "f32") for n, t in ((8192, 4096), (2048, 2048), (512, 8192), (4096, 128), (16, 1048576))
         for e in REV]
CELLS += [(e, 8192, 4096, "tn", "bf16") for e in REV]
CELLS += [(e, 8192, 4096, "nt", "f32") for e in ("gae", "vtrace")]
print(LABEL, kernels.__file__, flush=True)
copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
for est, N, T, layout, dname in CELLS:
    dtype = B.DTYPES[dname]
    args, kw = B.make_inputs(est, N, T, layout, dtype, "cuda", 0)
    fn = getattr(kernels, est)
    refs = B.reference_outputs(est, args, kw, layout, 64, 16384, "cuda")
    out = fn(*args, **kw)
    torch.cuda.synchronize()
    err = B.rel_err(out if isinstance(out, tuple) else (out,), refs[0], refs[1], layout)
    us = B.time_us(lambda: fn(*args, **kw), "cuda", 5, 20)
    frac = B.cell_bytes(est, N, T, dtype) / (us * 1e-6) / 1e9 / copy
    print(f"{LABEL} {est} {N}x{T} {layout} {dname}: {us:.1f} us {frac:.0%} err {err:.1e}", flush=True)
    del args, kw
    torch.cuda.empty_cache()
