"""Block shapes of GAE's and V-trace's `[T, N]` thread-run walks now that their successors come from the
runs (twenty-first session): the kernels' own choice (``default``) against candidate tiles, each
checked against the float64 reference first, then device time from a CUDA graph (two rounds; the
input sets fill four times the L2), one process. ``_launch.successors_from_runs`` decides per
candidate, as in a launch. Cells N x T. PLAN ``walks`` (`sweep_walks.log`): walks at 8192 x 4096 and
16384 x 2048 (float32 and bf16) and 4096 x 4096 (float32); ``mid`` (`sweep_mid.log`): float32 from
2048 to 8000 environments, 1024 to 8192 steps, and V-trace's bf16 walks from 8192 environments;
``edges`` (`sweep_edges.log`): where the candidates that won in ``mid`` stop winning; ``check``
(`sweep_check.log`): cells outside those sweeps for the windows they found (walks 32 environments
wide on four warps around 4096 environments; V-trace's 32 x 32 walks just below 6400); ``below_8192``
(`sweep_below_8192.log`): the walks the kernels take from 8192 environments, at 6144-8176.

  PYTHONPATH=. python docs/bench/run_successor/sweep.py PLAN warm I K     # compile share I of K
  PYTHONPATH=. python docs/bench/run_successor/sweep.py PLAN time OUT.json
"""
import json
import sys

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402

WALKS = ["64x64w4+3stages", "64x64w4+4stages", "32x64w4+3stages", "32x64w4+4stages", "32x32w2+3stages",
         "32x32w2+4stages", "64x32w2+3stages", "64x32w4+3stages", "128x32w4+3stages", "128x64w4+3stages",
         "32x16w1+3stages", "64x16w2+3stages"]
NARROW = ["64x16w4+3stages", "128x16w4+3stages", "64x16w4+4stages", "32x16w2+3stages", "64x32w4+3stages",
          "128x8w2+3stages"]
MID = ["64x32w4+3stages", "64x32w4+4stages", "32x32w4+3stages", "128x32w4+3stages", "64x16w4+3stages"]
VTRACE_BF16 = ["64x32w4+3stages", "64x16w2+3stages", "32x32w2+3stages", "64x32w2+3stages"]


def labels(tiles):
    return ["default"] + [tile + "+latest+runs" for tile in tiles]


PLANS = {
    "walks": [(est, N, T, dname, label) for est in ("gae", "vtrace") for dname in ("f32", "bf16")
              for N, T in ((8192, 4096), (16384, 2048)) for label in labels(WALKS)]
    + [(est, 4096, 4096, "f32", label) for est in ("gae", "vtrace") for label in labels(NARROW)],
    "mid": [(est, N, T, "f32", label) for est in ("gae", "vtrace") for N in (2048, 3000, 4096, 6000, 8000)
            for T in (1024, 2048, 4096, 8192) for label in labels(MID)]
    + [("vtrace", N, T, "bf16", label) for N in (8192, 16384) for T in (1024, 2048, 4096, 8192)
       if N * T <= 2**26 for label in labels(VTRACE_BF16)],
    "edges": [("vtrace", N, 2048, "f32", label) for N in (6144, 6656, 7168, 7680, 8000, 8176)
              for label in labels(["32x32w2+3stages", "32x32w4+3stages", "64x32w4+3stages"])]
    + [(est, N, 2048, "f32", label) for est in ("gae", "vtrace") for N in (3072, 3584, 3840, 4096, 4352, 4608, 5120)
       for label in labels(["64x32w4+3stages"])]
    + [("vtrace", N, T, "bf16", label) for N, T in ((8192, 2048), (10240, 2048), (12288, 2048), (14336, 2048),
                                                     (12288, 4096)) for label in labels(["64x32w4+3stages"])],
    "check": [(est, N, T, "f32", label) for est in ("gae", "vtrace") for N in (3856, 4000, 4096, 4160, 4224, 4240)
              for T in (600, 1500, 3000) for label in labels(["64x32w4+3stages"])]
    + [(est, 4096, 2000, "f32", label) for est in ("retrace", "lambda_returns", "discounted_returns")
       for label in labels(["64x32w4+3stages"])]
    + [("vtrace", N, T, "f32", label) for N in (6352, 6384) for T in (1500, 3000)
       for label in labels(["32x32w4+3stages"])],
    "below_8192": [("gae", N, T, "f32", label) for N in (6144, 7168, 7680, 8000, 8176) for T in (1500, 3000)
                   for label in labels(["64x64w4+4stages", "32x64w4+4stages"])]
    + [(est, N, 2000, "f32", label) for est, tile in (("retrace", "32x32w2+3stages"),
                                                      ("lambda_returns", "64x64w4+3stages"),
                                                      ("discounted_returns", "64x64w4+3stages"))
       for N in (7680, 8000) for label in labels([tile])],
}


def config(label):
    return None if label == "default" else B.parse_config_label(label)


def warm(jobs: list, share: int, shares: int) -> None:
    for i, (est, N, T, dname, label) in enumerate(jobs):
        if i % shares == share and label != "default":
            args, kw = B.make_inputs(est, 256, 512, "tn", B.DTYPES[dname], "cuda", 0)  # the same specialization
            try:
                getattr(kernels, est)(*args, **kw, config=config(label))
            except Exception as e:  # noqa: BLE001 - reported; the timing run reports it again
                print("FAIL", est, dname, label, repr(e)[:200], flush=True)
    torch.cuda.synchronize()


def time_all(jobs: list, out_path: str) -> None:
    copy_gbs = B.copy_bandwidth("cuda", 2**30, 25, 200)
    print(f"copy {copy_gbs:.0f} GB/s", flush=True)
    rows = []
    cells = dict.fromkeys((est, N, T, dname) for est, N, T, dname, _ in jobs)
    for est, N, T, dname in cells:
        cell_labels = [label for e, n, t, d, label in jobs if (e, n, t, d) == (est, N, T, dname)]
        nbytes = B.cell_bytes(est, N, T, B.DTYPES[dname])
        sets = B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        times = B.block_shape_graph_times(est, {label: config(label) for label in cell_labels}, N, T, "tn", dname, sets)
        default = B.config_label(B.default_config(est, N, T, "tn", B.DTYPES[dname]))
        rows.append(dict(estimator=est, N=N, T=T, dtype=dname, bytes=nbytes, copy_gbs=copy_gbs, default=default,
                         times=times))
        for label, t in times.items():
            best = min(x for x in t if isinstance(x, float)) if any(isinstance(x, float) for x in t) else None
            pct = f"{nbytes / best / 1e3 / copy_gbs:5.0%}" if best else "  -  "
            print(f"{est} {N}x{T} {dname} {label:34s} {'/'.join(str(x)[:8] for x in t)} {pct}"
                  + (f"  (default: {default})" if label == "default" else ""), flush=True)
        json.dump(rows, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    if sys.argv[2] == "warm":
        warm(PLANS[sys.argv[1]], int(sys.argv[3]), int(sys.argv[4]))
    else:
        time_all(PLANS[sys.argv[1]], sys.argv[3])
