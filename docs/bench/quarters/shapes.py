"""Block shapes around the cells where rl-triton stayed ahead after the thread quarters (eleventh
session): few environments with long rows (128 x 4096: one program per environment, or look-back
tiles, among them 128-step tiles in quarters) and V-trace's short rows from 8192 environments (one
to four environments per program). Every shape and rl-triton (first on PYTHONPATH) on the same
inputs, checked against the float64 reference first, device time of calls replayed from a CUDA
graph, two rounds interleaved (from the repository root):

  PYTHONPATH=<rl-triton>/src:. python docs/bench/quarters/shapes.py PLAN OUT.json [warm]

PLAN ``rival``: the cells above; ``rows``: every estimator's short `[N, T]` rows (128 and 256 steps,
1024 to 32768 environments) in one to four environments per program on one, two or four warps,
without rl-triton; ``few``: GAE and V-trace with 128 and 256 environments of 2048-4096 steps, one
chunk per environment against walks of shorter chunks, pipelined, and rl-triton; ``few_latest_first``:
the same cells in tiles of 1024 steps and more, their steps latest first (reverse scans run forward,
as rl-triton's, and the loads lose their vectors)."""
import json
import sys
from dataclasses import replace

sys.path.append("scripts")
sys.path.append("docs/bench/rl_triton")
import bench_kernels as B  # noqa: E402
import compare  # noqa: E402
import kernels  # noqa: E402
from kernels import LaunchConfig  # noqa: E402

PLAN, OUT = sys.argv[1:3]
WARM = sys.argv[3:] == ["warm"]
LONG_ROWS = {"default": None, "4096x1 16w": LaunchConfig(4096, 1, 16), "2048x1 4w lb": LaunchConfig(2048, 1, 4, True),
             "1024x1 2w lb": LaunchConfig(1024, 1, 2, True), "1024x1 4w lb": LaunchConfig(1024, 1, 4, True),
             "512x1 2w lb": LaunchConfig(512, 1, 2, True), "256x1 1w lb": LaunchConfig(256, 1, 1, True),
             "128x1 1w lb": LaunchConfig(128, 1, 1, True)}
SHORT_ROWS = {"default": None, "128x2 2w": LaunchConfig(128, 2, 2), "128x4 4w": LaunchConfig(128, 4, 4),
              "128x2 1w": LaunchConfig(128, 2, 1)}
CELLS = [(e, 128, 4096, tr, LONG_ROWS) for e in ("gae", "vtrace") for tr in (False, True)]
CELLS += [(e, n, 128, tr, SHORT_ROWS) for e in ("vtrace", "gae") for n in (8192, 32768) for tr in (False, True)]
ROWS = {"default": None, "128x1 1w": LaunchConfig(128, 1, 1), "128x2 1w": LaunchConfig(128, 2, 1),
        "128x4 1w": LaunchConfig(128, 4, 1), "128x2 2w": LaunchConfig(128, 2, 2), "128x4 4w": LaunchConfig(128, 4, 4)}
if PLAN == "rows":
    CELLS = [(e, n, t, None, ROWS) for e in compare.B.SPECS for n, t in ((1024, 128), (2048, 128), (4096, 128),
                                                                         (8192, 128), (16384, 128), (32768, 128),
                                                                         (4096, 256), (16384, 256))]
FEW = {"default": None, "4096x1 16w": LaunchConfig(4096, 1, 16), "2048x1 8w": LaunchConfig(2048, 1, 8),
       "2048x1 8w s2": LaunchConfig(2048, 1, 8, num_stages=2), "1024x1 4w s3": LaunchConfig(1024, 1, 4, num_stages=3),
       "1024x1 8w s3": LaunchConfig(1024, 1, 8, num_stages=3), "512x1 4w s3": LaunchConfig(512, 1, 4, num_stages=3),
       "512x1 2w s3": LaunchConfig(512, 1, 2, num_stages=3), "256x1 2w s4": LaunchConfig(256, 1, 2, num_stages=4),
       "128x1 1w s4": LaunchConfig(128, 1, 1, num_stages=4)}
FEW_LATEST_FIRST = {"default": None, "4096x1 8w": LaunchConfig(4096, 1, 8)}
FEW_LATEST_FIRST.update({f"{label} lf": replace(c, latest_first=True) for label, c in FEW.items() if c is not None
                         and c.block_t >= 1024} | {"4096x1 8w lf": LaunchConfig(4096, 1, 8, latest_first=True)})
if PLAN in ("few", "few_latest_first"):
    CELLS = [(e, n, t, False, FEW if PLAN == "few" else FEW_LATEST_FIRST) for e in ("gae", "vtrace")
             for n, t in ((128, 4096), (256, 4096), (128, 2048))]
rows = []
for est, N, T, truncations, shapes in CELLS:
    fn = getattr(kernels, est)
    rival_gae = est == "gae" and truncations is not None
    pick = (lambda out: out[0]) if rival_gae else (lambda out: out)  # rl-triton's GAE returns no returns
    calls = {label: (lambda a, k, c=c: pick(fn(*a, **k, config=c))) for label, c in shapes.items()}
    if truncations is not None:
        calls["rl_triton"] = compare.rival_call(est)
    timer = (lambda f: 0.0) if WARM else (lambda f: B.graph_us(f, "cuda", 0.0))
    times = B.checked_times(calls, est, N, T, "nt", "f32", 1 if WARM else 2, 10, 50,
                            prepare=None if truncations is None else compare.prepare(est, truncations), timer=timer)
    rows.append(dict(estimator=est, N=N, T=T, truncations=truncations, times=times))
    if not WARM:
        kind = "" if truncations is None else ("trunc " if truncations else "no-trunc ")
        print(f"{est} {N}x{T} {kind}" + "  ".join(
            f"{k}=" + "/".join(f"{x:.2f}" if isinstance(x, float) else str(x)[:60] for x in v) for k, v in times.items()),
            flush=True)
json.dump(rows, open(OUT, "w"), indent=1)
