"""Thread-run walks and two-warp look-back tiles against the default block shapes, [T, N], eight cells; interleaved rounds.
usage (from the repository root): PYTHONPATH=. python docs/bench/thread_runs/sweep_shapes.py OUT.json MODE(warm|time) EST,EST,... [rounds]"""
import sys, json, torch
sys.path.append("scripts")
import bench_kernels as B
import kernels
from kernels._launch import estimator_config
OUT, MODE, ESTS = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 2
REV = ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "linear_scan")
def labels(est, N):
    lf = "+latest" if est in REV else ""
    out = [s + "+3stages" + lf + "+runs" for s in ("32x32w2", "64x32w2", "64x64w4", "32x16w2")]
    if N <= 8192:
        out += [s + "+lookback" + lf + "+runs" for s in ("64x64w4", "64x32w2", "32x32w2", "32x64w2")]
    return out
SHAPES = [(16384, 2048, "f32"), (4096, 4096, "f32"), (2048, 2048, "f32"), (1024, 4096, "f32"), (512, 8192, "f32"),
          (16384, 2048, "bf16"), (4096, 4096, "bf16"), (8192, 4096, "f32")]
CELLS = [(e, n, t, d) for n, t, d in SHAPES for e in ESTS]
copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20) if MODE == "time" else 0
print(f"copy {copy:.0f} GB/s", flush=True)
rows = []
for est, N, T, dname in CELLS:
    dtype = B.DTYPES[dname]
    args, kw = B.make_inputs(est, N, T, "tn", dtype, "cuda", 0)
    fn = getattr(kernels, est)
    cs = {"default": estimator_config(est, T, N, False, dtype.itemsize)}
    cs.update({l: B.parse_config_label(l) for l in labels(est, N)})
    if MODE == "warm":
        for c in cs.values():
            try:
                fn(*args, **kw, config=c)
            except Exception as e:
                print("FAIL", est, N, T, dname, B.config_label(c), repr(e)[:300], flush=True)
        torch.cuda.synchronize(); del args, kw; torch.cuda.empty_cache()
        continue
    refs = B.reference_outputs(est, args, kw, "tn", 64, 16384, "cuda")
    times = {k: [] for k in cs}
    for rnd in range(ROUNDS):
        for label, c in cs.items():
            try:
                out = fn(*args, **kw, config=c)
                torch.cuda.synchronize()
                err = B.rel_err(out if isinstance(out, tuple) else (out,), refs[0], refs[1], "tn")
                if err > (1e-4 if dname == "f32" else 2e-2):
                    times[label].append(f"WRONG {err:.1e}"); continue
                times[label].append(B.time_us(lambda: fn(*args, **kw, config=c), "cuda", 5, 20))
            except Exception as e:
                times[label].append(f"FAIL {repr(e)[:200]}")
    nbytes = B.cell_bytes(est, N, T, dtype)
    def fmt(v):
        nums = [x for x in v if isinstance(x, float)]
        s = "/".join(f"{x:.1f}" if isinstance(x, float) else x for x in v)
        return s + (f" ({nbytes / (min(nums) * 1e3) / copy:.0%})" if nums else "")
    print(f"{est} {N}x{T} {dname} [{B.config_label(cs['default'])}]: " + "  ".join(f"{k} {fmt(v)}" for k, v in times.items()), flush=True)
    rows.append(dict(estimator=est, N=N, T=T, layout="tn", dtype=dname, default=B.config_label(cs["default"]),
                     times=times, bytes=nbytes, copy_gbs=copy))
    del args, kw; torch.cuda.empty_cache()
json.dump(rows, open(OUT, "w"), indent=1)
