"""Thread-run tiles and walks against the default block shapes, [T, N]; interleaved rounds, every
output checked against the float64 reference first. Three plans, one per log of this folder:

* ``tiles`` (`sweep_tiles.log`): the default block shape with and without thread runs, and eight
  thread-run look-back shapes, on four f32 cells and 8192 x 4096 bf16;
* ``walks`` (`sweep_walks.log`): pipelined walks with and without thread runs, and the one-warp
  16 x 64 look-back tile with thread runs in both row orders, 8192 x 4096 f32 and bf16;
* ``shapes`` (`sweep_shapes.log`): four thread-run walks and four two-warp thread-run look-back
  tiles on eight cells.

usage (from the repository root):
  PYTHONPATH=. python docs/bench/thread_runs/sweep.py PLAN OUT.json MODE(warm|time) EST,EST,... [rounds]
``warm`` only compiles (one process per estimator in parallel fills the compile cache); ``time``
times in one process."""
import sys, json, dataclasses, torch
sys.path.append("scripts")
import bench_kernels as B
import kernels
from kernels._launch import estimator_config
from kernels import LaunchConfig
PLAN, OUT, MODE, ESTS = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
ROUNDS = int(sys.argv[5]) if len(sys.argv) > 5 else 2
REV = ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "linear_scan")


def tiles(est, N, T, dname):
    base = estimator_config(est, T, N, False, B.DTYPES[dname].itemsize)
    lf = est in REV
    cs = {"default": base, "default+runs": dataclasses.replace(base, thread_runs=True, latest_first=lf or base.latest_first)}
    shapes = [LaunchConfig(16, 64, 1, True), LaunchConfig(32, 32, 1, True), LaunchConfig(32, 64, 1, True),
              LaunchConfig(16, 128, 1, True), LaunchConfig(32, 64, 2, True), LaunchConfig(64, 64, 2, True),
              LaunchConfig(64, 32, 1, True), LaunchConfig(32, 128, 2, True)]
    if est == "vtrace":
        shapes += [LaunchConfig(16, 32, 2, True), LaunchConfig(32, 16, 2, False, 3), LaunchConfig(32, 32, 2, False, 3)]
    if (N, T) != (8192, 4096) and dname == "f32":
        shapes = shapes[:4]
    for c in shapes:
        c = dataclasses.replace(c, thread_runs=True, latest_first=lf)
        cs.setdefault(B.config_label(c), c)
    return cs


def walks(est, N, T, dname):
    lf = "+latest" if est in REV else ""
    labels = ["16x64w1+lookback" + lf + "+runs"] + (["16x64w1+lookback+runs"] if est in REV else [])
    labels += [s + "+3stages" + lf + "+runs" for s in ("32x32w2", "32x16w2", "64x32w2", "32x64w2", "16x32w1", "32x32w1", "64x64w4")]
    labels += ["32x32w2+3stages" + lf, "32x16w2+3stages" + lf]
    return {"default": estimator_config(est, T, N, False, B.DTYPES[dname].itemsize),
            **{label: B.parse_config_label(label) for label in labels}}


def shapes(est, N, T, dname):
    lf = "+latest" if est in REV else ""
    labels = [s + "+3stages" + lf + "+runs" for s in ("32x32w2", "64x32w2", "64x64w4", "32x16w2")]
    if N <= 8192:
        labels += [s + "+lookback" + lf + "+runs" for s in ("64x64w4", "64x32w2", "32x32w2", "32x64w2")]
    return {"default": estimator_config(est, T, N, False, B.DTYPES[dname].itemsize),
            **{label: B.parse_config_label(label) for label in labels}}


PLANS = {
    "tiles": (tiles, [(n, t, "f32") for n, t in [(8192, 4096), (2048, 2048), (512, 8192), (4096, 4096)]]
              + [(8192, 4096, "bf16")]),
    "walks": (walks, [(8192, 4096, "f32"), (8192, 4096, "bf16")]),
    "shapes": (shapes, [(16384, 2048, "f32"), (4096, 4096, "f32"), (2048, 2048, "f32"), (1024, 4096, "f32"),
                        (512, 8192, "f32"), (16384, 2048, "bf16"), (4096, 4096, "bf16"), (8192, 4096, "f32")]),
}
configs_for, SHAPES = PLANS[PLAN]
CELLS = [(e, n, t, d) for n, t, d in SHAPES for e in ESTS]
copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20) if MODE == "time" else 0
print(f"copy {copy:.0f} GB/s", flush=True)
rows = []
for est, N, T, dname in CELLS:
    dtype = B.DTYPES[dname]
    args, kw = B.make_inputs(est, N, T, "tn", dtype, "cuda", 0)
    fn = getattr(kernels, est)
    cs = configs_for(est, N, T, dname)
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
