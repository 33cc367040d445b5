"""Thread quarters (eleventh session): the kernels before (a checkout first on PYTHONPATH) and
after, each version in its own process, every output checked against the float64 reference first
(from the repository root):

  PYTHONPATH=. python docs/bench/quarters/sweep.py TAG PLAN OUT.json [warm]

PLAN ``main``: every estimator's `[N, T]` cells whose tiles are 128 float32 steps in one warp
(short rows: device time of calls replayed from a CUDA graph; long walks: do_bench), default block
shapes. PLAN ``rival``: GAE and V-trace short rows against rl-triton (put first on PYTHONPATH) on the
same inputs, with and without truncations (``docs/bench/rl_triton/compare.py`` prepares them). PLAN
``bf16``: every estimator's bf16 `[N, T]` walks (256-step tiles, in pairs of steps after).
``warm``: one call per cell, to compile, nothing timed."""
import json
import sys

import torch

sys.path.append("scripts")
sys.path.append("docs/bench/rl_triton")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402

TAG, PLAN, OUT = sys.argv[1:4]
WARM = sys.argv[4:] == ["warm"]
DEVICE = "cuda"
ALL = ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "linear_scan", "eligibility_traces",
       "episodic_prefix_sum")
SHORT = ((2048, 128), (4096, 128), (8192, 128), (16384, 128), (32768, 128), (4096, 256), (16384, 256))
LONG = ((8192, 4096), (4096, 4096), (2048, 2048), (16384, 2048))
LIGHT = ("eligibility_traces", "episodic_prefix_sum")  # their float32 walks take 256-step tiles
if PLAN == "main":
    CELLS = [(e, n, t, None) for e in ALL for n, t in SHORT]
    CELLS += [(e, n, t, None) for e in ALL if e not in LIGHT for n, t in LONG]
    CELLS += [(e, 8192, 4096, None) for e in LIGHT]
elif PLAN == "bf16":
    CELLS = [(e, n, t, None) for e in ALL for n, t in ((8192, 4096), (4096, 4096), (16384, 2048), (2048, 2048))]
else:
    CELLS = [(e, n, t, tr) for e in ("gae", "vtrace") for tr in (False, True)
             for n, t in ((2048, 128), (4096, 128), (8192, 128), (32768, 128), (4096, 256), (128, 4096))]

copy = B.copy_bandwidth(DEVICE, 2 * 2**30, 5, 20)
print(f"{TAG} {PLAN} copy {copy:.0f} GB/s", flush=True)
rows = []
for est, N, T, truncations in CELLS:
    ours = getattr(kernels, est)
    calls = {TAG: lambda a, k, ours=ours: ours(*a, **k)}
    prepare = None
    if truncations is not None:
        import compare  # rl-triton's adapters

        prepare = compare.prepare(est, truncations)
        calls["rl_triton"] = compare.rival_call(est)
        if est == "gae":  # rl-triton's GAE returns no returns
            calls[TAG] = lambda a, k, ours=ours: ours(*a, **k)[0]
    short = T <= 256 or N <= 128
    timer = (lambda f: B.graph_us(f, DEVICE, 0.0)) if short else None
    if WARM:
        timer = lambda f: 0.0  # noqa: E731
    dname = "bf16" if PLAN == "bf16" else "f32"
    times = B.checked_times(calls, est, N, T, "nt", dname, 1, 10, 50, DEVICE, prepare=prepare,
                             timer=timer)
    us = times[TAG][0]
    nbytes = B.cell_bytes(est, N, T, B.DTYPES[dname])
    row = dict(tag=TAG, estimator=est, N=N, T=T, truncations=truncations, timer="graph" if short else "do_bench",
               times=times, copy_gbs=copy, fraction=nbytes / (us * 1e3) / copy if isinstance(us, float) and us else None)
    rows.append(row)
    if not WARM:
        print(f"{TAG} {est} {N}x{T} {'' if truncations is None else ('trunc ' if truncations else 'no-trunc ')}"
              f"{row['timer']} " + " ".join(f"{k}={v[0]:.2f}" if isinstance(v[0], float) else f"{k}={v[0]}"
                                          for k, v in times.items())
              + (f" ({row['fraction']:.0%})" if row["fraction"] else ""), flush=True)
    torch.cuda.empty_cache()
json.dump(rows, open(OUT, "w"), indent=1)
