"""Default block shapes against the same with latest_first, interleaved, two rounds (from the repository root):
`PYTHONPATH=. python docs/bench/latest_first/sweep.py OUT.json`."""
import sys, json, dataclasses, torch
sys.path.append("scripts")
import bench_kernels as B
import kernels
from kernels._launch import estimator_config
from kernels import LaunchConfig
OUT = sys.argv[1]
REV = ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "linear_scan")
SHAPES = [(8192, 4096), (4096, 4096), (2048, 2048), (1024, 4096), (512, 8192), (4096, 128), (32768, 16), (16, 1048576)]
CELLS = [(e, n, t, "tn", "f32") for n, t in SHAPES for e in REV]
CELLS += [(e, 8192, 4096, "tn", "bf16") for e in REV] + [(e, 512, 8192, "tn", "bf16") for e in REV]
copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
print(f"copy {copy:.0f} GB/s", flush=True)
rows = []
for est, N, T, layout, dname in CELLS:
    dtype = B.DTYPES[dname]
    args, kw = B.make_inputs(est, N, T, layout, dtype, "cuda", 0)
    fn = getattr(kernels, est)
    nbytes = B.cell_bytes(est, N, T, dtype)
    refs = B.reference_outputs(est, args, kw, layout, 64, 16384, "cuda")
    base = estimator_config(est, T, N, False, dtype.itemsize)
    configs = {"default": base, "default+latest": dataclasses.replace(base, latest_first=True)}
    if (N, T) in ((8192, 4096), (2048, 2048), (512, 8192)) and dname == "f32":
        for c in (LaunchConfig(32, 32, 1, True), LaunchConfig(16, 64, 1, True), LaunchConfig(16, 32, 2, True)):
            configs[B.config_label(c)] = c
            configs[B.config_label(c) + "+latest"] = dataclasses.replace(c, latest_first=True)
    times = {k: [] for k in configs}
    for rnd in range(2):
        for label, c in configs.items():
            try:
                out = fn(*args, **kw, config=c)
                torch.cuda.synchronize()
                err = B.rel_err(out if isinstance(out, tuple) else (out,), refs[0], refs[1], layout)
                if err > (1e-4 if dname == "f32" else 2e-2):
                    times[label].append(f"WRONG {err:.1e}"); continue
                times[label].append(B.time_us(lambda: fn(*args, **kw, config=c), "cuda", 5, 20))
            except Exception as e:
                times[label].append(f"FAIL {repr(e)[:200]}")
    line = f"{est} {N}x{T} {layout} {dname} [{B.config_label(base)}]: " + "  ".join(
        f"{k} " + "/".join(f"{x:.1f}" if isinstance(x, float) else x for x in v) for k, v in times.items())
    print(line, flush=True)
    rows.append(dict(estimator=est, N=N, T=T, layout=layout, dtype=dname, default=B.config_label(base), times=times,
                     bytes=nbytes, copy_gbs=copy))
    del args, kw
    torch.cuda.empty_cache()
json.dump(rows, open(OUT, "w"), indent=1)
