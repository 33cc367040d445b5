"""Block-shape sweeps of the tenth session: sequence lengths and environment counts that are not
multiples of 16, two leads of the ninth session, and V-trace once its 128-step tiles take
``x_{t+1}`` by shuffles. Each cell's block shapes run on the same inputs in interleaved rounds in one
process, every output checked against the float64 reference first (``bench_kernels.checked_times``:
a wrong or failing candidate is recorded, never timed). Plans, in the order they ran, one per log:

* ``odd`` (`odd.log`): `[N, T]` cells whose T is not a multiple of 16 next to ones whose T is, and
  `[T, N]` cells of up to 256 steps whose N is not (against the neighbouring multiple of 16), with a
  few other block shapes for the odd ones;
* ``leads`` (`leads.log`): one-environment pipelined `[N, T]` walks for `linear_scan` (and lambda
  and discounted returns) below 4096 environments; block shapes for 128 x 4096 `[N, T]`;
* ``short`` (`short.log`): `[N, T]` block shapes where rl-triton's kernels were faster on the device
  (V-trace 128 steps, 128 environments x 4096 steps) and next to them, timed from a CUDA graph
  (``graph_us``: device time; do_bench counts the host's launch in cells this short);
* ``walks`` (`walks.log`): ``linear_scan``'s one-environment walks at more cells, rows not 16-aligned
  among them;
* ``vtrace`` (`vtrace.log`): V-trace's `[N, T]` tiles of up to 256 steps once its 128-step tiles
  take ``x_{t+1}`` by shuffles (timed from a CUDA graph);
* ``mid`` (`mid.log`): V-trace's `[N, T]` walks from 2048 to 8192 environments with the shuffles
  (4096 x 4096 was 12% slower with them in its old walks), and one-environment walks for every
  kernel where T is not a multiple of 16;
* ``last`` (`last.log`, `last_shuffle64.log`: with ``SHUFFLE64=1``, 64-step float32 rows exchange
  values by shuffles too): V-trace's 128-step rows against 64-step ones, GAE's 64-step rows, and
  16 warps for one-environment rows of 4096 steps (timed from a CUDA graph).

usage (from the repository root):
  PYTHONPATH=. python docs/bench/odd_lengths/sweep.py PLAN warm I K   # compile share I of K (run K at once)
  PYTHONPATH=. python docs/bench/odd_lengths/sweep.py PLAN time OUT.json
"""
import json
import os
import sys

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from kernels import _launch  # noqa: E402

PLAN, MODE = sys.argv[1], sys.argv[2]
FOUR = ("gae", "vtrace", "linear_scan", "eligibility_traces")


def plan_odd():
    jobs = []
    long_nt = {"gae": ["1024x1w8", "512x1w4+3stages", "256x1w2+3stages", "1024x1w4+lookback"],
               "vtrace": ["1024x1w8", "512x1w4+3stages", "256x1w2+3stages", "1024x1w4+lookback"],
               "linear_scan": ["1024x1w8", "512x1w4+3stages", "256x1w2+3stages", "128x2w2+3stages"],
               "eligibility_traces": ["1024x1w8", "512x1w4+3stages", "128x2w2+3stages", "1024x1w4+lookback"]}
    for est in FOUR:
        for N, T in [(4096, 1000), (4096, 1024), (4096, 1008), (8192, 4000), (8192, 4096)]:
            jobs += [(est, N, T, "nt", "f32", label) for label in ["default"] + (long_nt[est] if T % 16 else [])]
        for N, T in [(32768, 100), (32768, 128), (65536, 20), (65536, 32)]:
            extra = ["128x2w2", "128x1w1", "128x8w4"] if T == 100 else ["32x16w1", "32x64w2"] if T == 20 else []
            jobs += [(est, N, T, "nt", "f32", label) for label in ["default"] + extra]
        for N, T in [(1000, 128), (1024, 128), (4100, 128), (4096, 128), (30004, 16), (32768, 16), (8200, 256),
                     (8192, 256)]:
            extra = ["128x16w4", "128x4w4", "64x8w2"] if N % 16 and T == 128 else []
            jobs += [(est, N, T, "tn", "f32", label) for label in ["default"] + extra]
    for N, T in [(4096, 1000), (4096, 1024), (32768, 100), (32768, 128)]:
        jobs += [("gae", N, T, "nt", "bf16", "default")]
    return jobs


def plan_leads():
    jobs = []
    for N, T in [(2048, 2048), (2048, 8192), (3008, 4096), (1024, 4096)]:
        for est in ("linear_scan", "lambda_returns", "discounted_returns"):
            jobs += [(est, N, T, "nt", dname, label) for dname in ("f32", "bf16")
                     for label in ("default", "128x1w1+3stages", "128x1w1+4stages", "256x1w2+3stages")]
    for est in ("gae", "vtrace", "retrace", "lambda_returns", "linear_scan", "eligibility_traces"):
        jobs += [(est, 128, 4096, "nt", "f32", label)
                 for label in ("default", "4096x1w16", "4096x1w4", "2048x1w8+2stages", "1024x1w4+3stages",
                               "2048x1w8+lookback", "1024x1w8+lookback", "512x1w4+lookback")]
    return jobs


SHORT_NT = ("128x1w1", "128x1w2", "128x2w2", "128x2w4", "128x4w4", "64x1w1", "64x2w1", "64x4w1")
LONG_NT = ("4096x1w16", "4096x1w8", "4096x1w4", "2048x1w8+2stages", "2048x1w4+2stages", "1024x1w4+3stages",
           "1024x1w2+4stages", "2048x1w8+lookback", "1024x1w4+lookback")


def plan_short():
    jobs = []
    for N in (4096, 8192, 32768):
        for est in ("vtrace", "gae"):
            jobs += [(est, N, 128, "nt", "f32", label) for label in ("default",) + SHORT_NT]
    for N, T in [(128, 4096), (256, 4096), (128, 2048)]:
        for est in ("gae", "vtrace", "retrace", "lambda_returns", "linear_scan", "eligibility_traces"):
            labels = ("default",) + tuple(x for x in LONG_NT if int(x.split("x")[0]) <= T)
            jobs += [(est, N, T, "nt", "f32", label) for label in labels]
    return jobs


def plan_walks():
    jobs = []
    for N, T in [(2048, 2050), (1030, 4096), (3008, 4100), (2048, 512), (1024, 1024), (4095, 2048)]:
        jobs += [("linear_scan", N, T, "nt", "f32", label)
                 for label in ("default", "128x1w1+4stages", "128x2w2+3stages", "512x1w4+3stages", "128x1w1")]
    return jobs


def plan_vtrace():
    jobs = []
    for N, T in [(2048, 128), (4096, 128), (8192, 128), (32768, 128), (4096, 256), (16384, 256), (4096, 200)]:
        jobs += [("vtrace", N, T, "nt", "f32", label)
                 for label in ("default", "128x4w4", "128x2w2", "128x1w1", "64x2w1", "128x8w8")]
    for N, T in [(4096, 128), (32768, 128)]:
        jobs += [("vtrace", N, T, "nt", "bf16", label) for label in ("default", "128x4w4", "128x2w2", "128x1w1")]
    return jobs


def plan_mid():
    jobs = []
    for N, T in [(2048, 2048), (4096, 4096), (3008, 4096), (6000, 2048), (8192, 4096)]:
        for dname in ("f32", "bf16"):
            jobs += [("vtrace", N, T, "nt", dname, label)
                     for label in ("default", "128x1w1+3stages", "128x1w1+4stages", "128x2w2+4stages",
                                   "128x4w4+3stages", "256x1w2+3stages", "512x1w4+3stages", "256x2w4+3stages")]
    for N, T in [(4096, 1000), (2048, 2050)]:
        for est in ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "eligibility_traces",
                    "episodic_prefix_sum"):
            jobs += [(est, N, T, "nt", "f32", label)
                     for label in ("default", "128x1w1+4stages", "128x1w1+3stages", "256x1w2+4stages", "128x1w1")]
    return jobs


def plan_last():
    jobs = []
    for N in (2048, 4096, 8192, 32768):
        jobs += [("vtrace", N, 128, "nt", "f32", label)
                 for label in ("default", "64x1w1", "64x2w1", "64x4w1", "64x2w2", "64x4w2", "64x8w2")]
    for N in (4096, 32768):
        jobs += [("gae", N, 64, "nt", "f32", label) for label in ("default", "64x2w1", "64x4w2")]
    for N in (128, 256):
        for est in ("gae", "retrace", "vtrace"):
            jobs += [(est, N, 4096, "nt", "f32", label) for label in ("default", "4096x1w16")]
    return jobs


if os.environ.get("SHUFFLE64"):  # 64-step float32 [N, T] tiles exchange values by shuffles too
    _launch.SHUFFLE_BLOCK_TS[4] = (64, 128)

PLANS = {"odd": plan_odd, "leads": plan_leads, "short": plan_short, "walks": plan_walks, "vtrace": plan_vtrace,
         "mid": plan_mid, "last": plan_last}
JOBS = PLANS[PLAN]()
# Device time of calls replayed from a CUDA graph for the short cells (do_bench counts this host's launch there).
TIMER = (lambda fn: B.graph_us(fn, "cuda", 0.0)) if PLAN in ("short", "vtrace", "last") else None


def config(label):
    """``None`` (the estimator's own choice) for ``default``, else the block shape the label names."""
    return None if label == "default" else B.parse_config_label(label)


def warm(share, shares):
    seen = []
    for est, N, T, layout, dname, label in JOBS:
        # Triton specializes on sizes divisible by 16: warm the odd cells at odd sizes.
        c = config(label) or B.default_config(est, N, T, layout, B.DTYPES[dname])
        key = (est, layout, dname, c, N % 16 == 0, T % 16 == 0)
        if key in seen:
            continue
        seen.append(key)
        if len(seen) % shares != share:
            continue
        args, kw = B.make_inputs(est, min(N, 512) + N % 16, min(T, 512) + T % 16, layout, B.DTYPES[dname], "cuda", 0)
        try:
            getattr(kernels, est)(*args, **kw, config=c)
        except Exception as e:  # noqa: BLE001 - reported; the timing run reports it again
            print("FAIL", est, layout, dname, label, repr(e)[:300], flush=True)
    torch.cuda.synchronize()


def time_all(out_path):
    copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
    print(f"copy {copy:.0f} GB/s", flush=True)
    rows = []
    for cell in dict.fromkeys(job[:5] for job in JOBS):
        est, N, T, layout, dname = cell
        fn = getattr(kernels, est)
        calls = {job[5]: (lambda a, k, c=config(job[5]): fn(*a, **k, config=c)) for job in JOBS if job[:5] == cell}
        times = B.checked_times(calls, est, N, T, layout, dname, 2, 5, 20, timer=TIMER)
        nbytes = B.cell_bytes(est, N, T, B.DTYPES[dname])

        def fmt(v):
            nums = [x for x in v if isinstance(x, float)]
            s = "/".join(f"{x:.1f}" if isinstance(x, float) else str(x) for x in v)
            return s + (f" ({nbytes / (min(nums) * 1e3) / copy:.0%})" if nums else "")

        head = B.config_label(B.default_config(est, N, T, layout, B.DTYPES[dname]))
        print(f"{est} {N}x{T} {layout} {dname} [default {head}]: "
              + "  ".join(f"{k} {fmt(v)}" for k, v in times.items()), flush=True)
        rows.append(dict(estimator=est, N=N, T=T, layout=layout, dtype=dname, default=head, times=times,
                         bytes=nbytes, copy_gbs=copy))
        torch.cuda.empty_cache()
    json.dump(rows, open(out_path, "w"), indent=1)


if MODE == "warm":
    warm(int(sys.argv[3]), int(sys.argv[4]))
else:
    time_all(sys.argv[3])
