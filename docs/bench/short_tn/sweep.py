"""Block shapes of short ``[T, N]`` problems (T <= 256, one chunk per program): the trainers'
layout (``scripts/ppo.py``: 128 steps x 4096 environments; ``scripts/impala.py``: 16-step unrolls),
whose rule is the first session's table (twelfth session). Every estimator, every candidate on the
same inputs, checked against the float64 reference first, device time of 20 calls replayed from
a CUDA graph, two rounds interleaved (from the repository root):

  PYTHONPATH=. python docs/bench/short_tn/sweep.py OUT.json [warm ESTIMATOR PART]

``warm ESTIMATOR PART`` only compiles that estimator's candidates on every other cell (PART 0 or
1; run these in parallel first, to fill Triton's cache). Candidates per T: single-chunk tiles of
4 to 256 environments on 1, 2 or 4 warps, 4 to 32 elements per thread, in Triton's layout or in
thread runs (``LaunchConfig.thread_runs``), and for reverse kernels each with its steps in time
order or latest first; and pipelined walks of shorter chunks in thread runs (the long-T rule's
shapes)."""
import itertools
import json
import sys
import time

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402

OUT = sys.argv[1]
WARM = sys.argv[2:3] == ["warm"]
ONLY, PART = (sys.argv[3], int(sys.argv[4])) if WARM else (None, None)
CELLS = [(4096, 128), (1024, 128), (16384, 128), (4096, 256), (4096, 64), (4096, 32),
         (4096, 16), (1024, 16), (32768, 16), (4096, 8), (32768, 8)]
WALKS = ("32x32w2+3stages", "32x64w4+4stages", "64x32w2+3stages", "32x16w1+3stages", "16x32w1+3stages")


def candidates(T: int, reverse: bool) -> list[str]:
    orders = ("", "+latest") if reverse else ("",)
    labels = []
    for bn, warps in itertools.product((4, 8, 16, 32, 64, 128, 256), (1, 2, 4)):
        if 4 <= T * bn // (32 * warps) <= 32:
            labels += [f"{T}x{bn}w{warps}{order}{runs}" for order in orders for runs in ("", "+runs")]
    labels += [f"{w}{order}+runs" for w in WALKS if int(w.split("x")[0]) < T for order in orders]
    return labels


rows = []
start = time.time()
for est, (i, (N, T)) in itertools.product(B.SPECS, enumerate(CELLS)):
    if ONLY and (est != ONLY or i % 2 != PART):
        continue
    fn = getattr(kernels, est)
    labels = ["default", *candidates(T, kernels._launch.kernel_traits(est)["latest_first"])]
    calls = {label: (lambda a, k, c=(None if label == "default" else B.parse_config_label(label)):
                     fn(*a, **k, config=c)) for label in labels}
    timer = (lambda f: 0.0) if WARM else (lambda f: B.graph_us(f, "cuda", 0.0))
    times = B.checked_times(calls, est, N, T, "tn", "f32", 1 if WARM else 2, 10, 50, timer=timer)
    default = B.config_label(B.default_config(est, N, T, "tn", B.DTYPES["f32"]))
    rows.append(dict(estimator=est, N=N, T=T, default=default, times=times))
    if not WARM:
        ok = {k: min(v) for k, v in times.items() if all(isinstance(x, float) for x in v)}
        bad = {k: v for k, v in times.items() if k not in ok}
        best = sorted(ok, key=ok.get)[:6]
        print(f"{est} {T}x{N} tn default={default} {ok.get('default', float('nan')):.2f}  best: "
              + "  ".join(f"{k} {ok[k]:.2f}" for k in best) + (f"  failed: {list(bad)[:4]}" if bad else ""),
              flush=True)
    json.dump(rows, open(OUT, "w"), indent=1)
print(f"done in {time.time() - start:.0f} s", flush=True)
