import sys, torch
sys.path.insert(0, "scripts")
import bench_kernels as B, kernels
print("kernels", kernels.__file__)
copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
for est, N, T, lay in [("gae", 8192, 4096, "tn"), ("gae", 8192, 4096, "nt"), ("vtrace", 8192, 4096, "tn"), ("retrace", 8192, 4096, "tn"),
                       ("lambda_returns", 8192, 4096, "tn"), ("eligibility_traces", 8192, 4096, "tn"), ("gae", 512, 8192, "tn"), ("gae", 4096, 128, "tn")]:
    args, kw = B.make_inputs(est, N, T, lay, torch.float32, "cuda", seed=0)
    fn = getattr(kernels, est)
    refs, k, _ = B.reference_outputs(est, args, kw, lay, 64, 16384, "cuda")
    out = fn(*args, **kw); err = B.rel_err(out if isinstance(out, tuple) else (out,), refs, k, lay)
    us = B.time_us(lambda: fn(*args, **kw), "cuda", 10, 50)
    g = B.graph_us(lambda: fn(*args, **kw), "cuda", 0.0) if N * T <= 2**20 else None
    print(est, N, T, lay, "err %.1e" % err, "%.1f us" % us, "graph", g, "%.0f%%" % (100 * B.cell_bytes(est, N, T, torch.float32) / (us * 1e-6) / 1e9 / copy), flush=True)
    del args, kw, out; torch.cuda.empty_cache()
