"""GAE, lambda and discounted returns in one-warp tiles with and without latest_first (from the repository root):
`PYTHONPATH=<kernels to time>:. python docs/bench/latest_first/flag_loads.py LABEL`."""
import sys, dataclasses, torch
sys.path.append("scripts")
import bench_kernels as B
import kernels
from kernels import LaunchConfig
LABEL = sys.argv[1]
print(LABEL, kernels.__file__, flush=True)
for est in ("gae", "lambda_returns", "discounted_returns"):
    for N, T in ((8192, 4096), (2048, 2048), (512, 8192)):
        args, kw = B.make_inputs(est, N, T, "tn", torch.float32, "cuda", 0)
        fn = getattr(kernels, est)
        refs = B.reference_outputs(est, args, kw, "tn", 64, 16384, "cuda")
        res = []
        for c in (LaunchConfig(16, 64, 1, True), LaunchConfig(32, 32, 1, True)):
            for lf in (False, True):
                cc = dataclasses.replace(c, latest_first=lf)
                out = fn(*args, **kw, config=cc)
                err = B.rel_err(out if isinstance(out, tuple) else (out,), refs[0], refs[1], "tn")
                us = B.time_us(lambda: fn(*args, **kw, config=cc), "cuda", 5, 20) if err < 1e-4 else float("nan")
                res.append(f"{B.config_label(cc)} {us:.1f}")
        print(LABEL, est, f"{N}x{T}", "  ".join(res), flush=True)
