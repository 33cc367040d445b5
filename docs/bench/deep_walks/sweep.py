"""Deeper pipelines for `[T, N]` walks (ninth session): block shapes and pipeline depths against the
default, interleaved rounds in one process, every output checked against the float64 reference first
(64 environments; a wrong or failing candidate is reported as such, never timed). Plans, one per log:

* ``shapes`` (`sweep_shapes.log`): every estimator at 8192 x 4096 and 16384 x 2048 (f32, bf16): the
  default with 3 (``before``), 4 and 5 stages and six thread-run shapes four chunks deep; 4096 x 4096
  and 32768 x 1024 (f32): walks four and six chunks deep; `[N, T]` walks with 4 and 6 stages;
* ``grid`` (`sweep_grid.log`): GAE, eligibility traces and episodic sums, f32, from 8192 to 32768
  environments and 512 to 8192 steps: the three best shapes of ``shapes``; the 16-bit defaults with
  4 stages;
* ``short`` (`sweep_short.log`): every estimator at 512 and 1024 steps from 8192 environments: walks
  against look-back tiles;
* ``explore`` (`explore.log`): narrow `[T, N]` walks four chunks deep at 4096 x 4096 and 2048 x 2048,
  `[N, T]` walks and look-back tiles of one environment there, and more shapes at 512 steps from 8192
  environments (against ``default``, the new block shape);
* ``narrow`` (`narrow.log`): `linear_scan`, the light kernels and V-trace in narrow `[T, N]` walks
  four and six chunks deep from 1024 to 8191 environments; `[N, T]` walks of one environment;
* ``check`` (`check.log`): environment counts that are not multiples of 16 (walks against look-back
  tiles), and 16-bit floats in the narrow shapes;
* ``after`` (`after.log`): the estimators' own block shape (``config=None``) against ``before``, the
  eighth session's, on the ``grid`` cells.

``before`` is the block shape the eighth session chose (``choose_config`` without ``deep_walks``),
which was the default when the first three plans ran.

usage (from the repository root):
  PYTHONPATH=. python docs/bench/deep_walks/sweep.py PLAN warm I K   # compile share I of K (run K at once)
  PYTHONPATH=. python docs/bench/deep_walks/sweep.py PLAN time OUT.json
"""
import dataclasses
import json
import sys

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from kernels._launch import choose_config, kernel_traits  # noqa: E402

PLAN, MODE = sys.argv[1], sys.argv[2]
EST = ["gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "linear_scan", "eligibility_traces",
       "episodic_prefix_sum"]
FORWARD_ONLY = ("eligibility_traces", "episodic_prefix_sum")


def runs(est):
    return ("" if est in FORWARD_ONLY else "+latest") + "+runs"


def before(est, N, T, layout, dname):
    traits = {**kernel_traits(est), "deep_walks": False}
    return choose_config(T, N, layout == "nt", itemsize=B.DTYPES[dname].itemsize, **traits)


def plan_shapes():
    jobs = []
    for N, T in [(8192, 4096), (16384, 2048)]:
        for dname in ("f32", "bf16"):
            for est in EST:
                labels = ["before", "before@4", "before@5"]
                labels += [s + "+4stages" + runs(est)
                           for s in ("32x32w2", "32x64w4", "64x32w4", "64x64w4", "128x64w8", "16x32w2")]
                jobs += [(est, N, T, "tn", dname, label) for label in labels]
    for N, T in [(4096, 4096), (32768, 1024)]:
        for est in EST:
            labels = ["before"] + [s + "+4stages" + runs(est) for s in ("32x32w2", "64x32w2", "64x64w4", "32x64w4", "16x32w2")]
            labels += ["64x32w2+6stages" + runs(est), "32x32w2+6stages" + runs(est)]
            jobs += [(est, N, T, "tn", "f32", label) for label in labels]
    for N, T in [(2048, 2048), (4096, 4096), (8192, 4096)]:
        for est in ("gae", "vtrace", "retrace", "lambda_returns", "eligibility_traces", "linear_scan"):
            jobs += [(est, N, T, "nt", "f32", label) for label in ("before", "before@4", "before@6")]
    return jobs


GRID = [(n, t) for n in (8192, 16384, 32768) for t in (512, 1024, 2048, 4096, 8192) if n * t <= 2**27]


def plan_grid():
    jobs = []
    for N, T in GRID:
        jobs += [("gae", N, T, "tn", "f32", label)
                 for label in ("before", "64x64w4+4stages+latest+runs", "32x64w4+4stages+latest+runs")]
        for est in FORWARD_ONLY:
            jobs += [(est, N, T, "tn", "f32", label)
                     for label in ("before", "64x64w4+4stages+runs", "32x64w4+4stages+runs", "64x32w4+4stages+runs")]
    for N, T in [(8192, 4096), (16384, 2048), (32768, 1024), (8192, 8192)]:
        for est in ("gae", "eligibility_traces"):
            jobs += [(est, N, T, "tn", "bf16", label) for label in ("before", "before@4")]
    return jobs


def plan_short():
    jobs = []
    for N in (8192, 16384, 32768):
        for T in (512, 1024):
            for est in EST:
                order = "" if est in FORWARD_ONLY else "+latest"
                labels = ["before", "64x64w4+4stages" + runs(est), "32x64w4+4stages" + runs(est),
                          "32x32w2+lookback" + runs(est), "64x32w2+lookback" + runs(est), "16x64w1+lookback" + order,
                          "32x32w1+lookback" + order, "32x32w2+4stages" + runs(est)]
                jobs += [(est, N, T, "tn", "f32", label) for label in labels]
    return jobs


def plan_explore():
    jobs = []
    six = ("gae", "vtrace", "retrace", "lambda_returns", "linear_scan", "eligibility_traces")
    for N, T in [(4096, 4096), (2048, 2048)]:
        for est in six:
            labels = ["before"] + [s + "+4stages" + runs(est) for s in
                                   ("64x16w2", "32x16w1", "64x16w1", "64x8w1", "128x16w2", "128x8w1", "128x16w4")]
            jobs += [(est, N, T, "tn", "f32", label) for label in labels]
        for est in six:
            labels = ["before", "128x1w1+3stages", "256x1w2+3stages", "512x1w4+3stages", "256x2w4+3stages",
                      "512x1w4+lookback", "1024x1w4+lookback", "256x1w2+lookback"]
            jobs += [(est, N, T, "nt", "f32", label) for label in labels]
    for N in (8192, 16384, 32768):
        for est in ("gae", "lambda_returns", "linear_scan", "eligibility_traces"):
            labels = ["default"] + [s + "+4stages" + runs(est) for s in
                                    ("16x64w2", "32x64w4", "32x64w2", "16x64w4", "32x32w1", "32x128w4", "32x128w8")]
            jobs += [(est, N, 512, "tn", "f32", label) for label in labels]
    return jobs


def plan_narrow():
    jobs = []
    for N, T in [(1024, 4096), (2048, 2048), (2048, 8192), (4096, 1024), (4096, 2048), (4096, 4096), (6000, 1000),
                 (8191, 4096)]:
        for est in ("linear_scan", "eligibility_traces", "episodic_prefix_sum", "vtrace"):
            labels = ["before"] + [s + runs(est) for s in
                                   ("128x16w4+4stages", "256x16w4+4stages", "128x16w4+6stages", "128x8w2+4stages",
                                    "256x8w4+4stages", "128x32w4+4stages", "64x16w1+4stages", "128x16w8+4stages")]
            jobs += [(est, N, T, "tn", "f32", label) for label in labels]
    for N, T in [(2048, 2048), (2048, 8192), (4096, 1024), (4096, 4096), (8192, 4096)]:
        for est in FORWARD_ONLY:
            jobs += [(est, N, T, "nt", "f32", label) for label in ("before", "256x1w2+3stages", "256x1w2+4stages")]
        for est in ("linear_scan", "lambda_returns", "discounted_returns"):
            jobs += [(est, N, T, "nt", "f32", label) for label in ("before", "128x1w1+3stages", "128x1w1")]
    return jobs


def plan_check():
    jobs = []
    for N in (8193, 8200, 4100, 5000):
        for est in ("gae", "vtrace", "retrace", "lambda_returns", "linear_scan", "eligibility_traces"):
            order = "" if est in FORWARD_ONLY else "+latest"
            labels = ["default", "32x32w2+lookback" + runs(est), "16x64w1+lookback" + order, "32x32w1+lookback" + order,
                      "128x16w4+4stages" + runs(est), "128x32w4+4stages" + runs(est)]
            jobs += [(est, N, 2048, "tn", "f32", label) for label in labels]
    for N, T in [(2048, 2048), (4096, 4096), (8192, 4096)]:
        for est in FORWARD_ONLY:
            jobs += [(est, N, T, "nt", "bf16", label) for label in ("before", "256x1w2+3stages", "512x1w4+3stages")]
    for N, T in [(4096, 4096), (4096, 2048), (6000, 1000)]:
        for est in ("linear_scan", "eligibility_traces", "episodic_prefix_sum"):
            jobs += [(est, N, T, "tn", "bf16", label)
                     for label in ("before", "128x16w4+4stages" + runs(est), "128x32w4+4stages" + runs(est))]
    return jobs


def plan_after():
    return [(est, N, T, "tn", "f32", label) for N, T in GRID for est in ("gae",) + FORWARD_ONLY
            for label in ("default", "before")]


JOBS = {"shapes": plan_shapes, "grid": plan_grid, "short": plan_short, "explore": plan_explore,
        "narrow": plan_narrow, "check": plan_check,
        "after": plan_after}[PLAN]()


def config(est, N, T, layout, dname, label):
    """``None`` (the estimator's own choice) for ``default``; ``before[@stages]``; or a config label."""
    if label == "default":
        return None
    if label.startswith("before"):
        c = before(est, N, T, layout, dname)
        return dataclasses.replace(c, num_stages=int(label.split("@")[1])) if "@" in label else c
    return B.parse_config_label(label)


def warm(share, shares):
    seen = []
    for est, N, T, layout, dname, label in JOBS:
        c = config(est, N, T, layout, dname, label)
        if c is None or (est, layout, dname, c) in seen:
            continue
        seen.append((est, layout, dname, c))
        if len(seen) % shares != share:
            continue
        args, kw = B.make_inputs(est, 256, 512, layout, B.DTYPES[dname], "cuda", 0)  # same specialization
        try:
            getattr(kernels, est)(*args, **kw, config=c)
        except Exception as e:  # noqa: BLE001 - reported; the timing run reports it again
            print("FAIL", est, layout, dname, B.config_label(c), repr(e)[:300], flush=True)
    torch.cuda.synchronize()


def time_all(out_path):
    copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
    print(f"copy {copy:.0f} GB/s", flush=True)
    cells = list(dict.fromkeys(job[:5] for job in JOBS))
    rows = []
    for est, N, T, layout, dname in cells:
        labels = [job[5] for job in JOBS if job[:5] == (est, N, T, layout, dname)]
        dtype = B.DTYPES[dname]
        args, kw = B.make_inputs(est, N, T, layout, dtype, "cuda", 0)
        fn = getattr(kernels, est)
        refs = B.reference_outputs(est, args, kw, layout, 64, 16384, "cuda")
        nbytes = B.cell_bytes(est, N, T, dtype)
        times = {label: [] for label in labels}
        for _ in range(2):
            for label in labels:
                c = config(est, N, T, layout, dname, label)
                try:
                    out = fn(*args, **kw, config=c)
                    torch.cuda.synchronize()
                    err = B.rel_err(out if isinstance(out, tuple) else (out,), refs[0], refs[1], layout)
                    if err > (1e-4 if dname == "f32" else 2e-2):
                        times[label].append(f"WRONG {err:.1e}")
                        continue
                    times[label].append(B.time_us(lambda: fn(*args, **kw, config=c), "cuda", 5, 20))
                except Exception as e:  # noqa: BLE001 - e.g. a shape over the shared memory
                    times[label].append(f"FAIL {repr(e)[:120]}")

        def fmt(v):
            nums = [x for x in v if isinstance(x, float)]
            s = "/".join(f"{x:.1f}" if isinstance(x, float) else x for x in v)
            return s + (f" ({nbytes / (min(nums) * 1e3) / copy:.0%})" if nums else "")

        timed = [(min(x for x in v if isinstance(x, float)), k) for k, v in times.items()
                 if any(isinstance(x, float) for x in v)]
        best = min(timed, default=(0.0, "-"))
        head = B.config_label(before(est, N, T, layout, dname))
        print(f"{est} {N}x{T} {layout} {dname} [before {head}] best {best[1]} {best[0]:.1f}: "
              + "  ".join(f"{k} {fmt(v)}" for k, v in times.items()), flush=True)
        rows.append(dict(estimator=est, N=N, T=T, layout=layout, dtype=dname, before=head, times=times,
                         bytes=nbytes, copy_gbs=copy))
        del args, kw
        torch.cuda.empty_cache()
    json.dump(rows, open(out_path, "w"), indent=1)


if MODE == "warm":
    warm(int(sys.argv[3]), int(sys.argv[4]))
else:
    time_all(sys.argv[3])
