"""V-trace's form that stores ``x = vs - V`` as ``pg_adv`` (``PG_IS_X``) for float32 ``[T, N]`` sequences, in
block shapes of its own (a plan for a session with a GPU; written in the forty-first session, not yet run).

Float32 ``[T, N]`` calls keep the other form (``kernels.vtrace.stores_x_as_pg``): in V-trace's tiles the
new form ran 0.69-1.06x, in GAE's 0.44-1.37x (fortieth session, ``../vtrace_pg/rules.log``). The form scans
two values, as GAE's kernel does; its builds are lighter (``regs.log``). PLAN ``sweep`` times it in V-trace's
tiles (``x:own``), GAE's (``x:gae``) and candidate tiles (``x:<label>``) against the call as it is
(``other``), one process, each call checked against the float64 reference first, device time per call
from CUDA graphs (inputs rotated through four times the L2), two rounds. PLAN ``heldout``: cells chosen
before the sweep ran, none of them in it, for the rule the sweep gives, one process per version.

  PYTHONPATH=. python docs/bench/vtrace_f32_form/cells.py sweep warm I K          # compile share I of K
  PYTHONPATH=. python docs/bench/vtrace_f32_form/cells.py sweep time OUT.json
  PYTHONPATH=<kernels' checkout>:. python docs/bench/vtrace_f32_form/cells.py heldout TAG OUT.json
"""
import importlib
import json
import sys
import time
from contextlib import contextmanager

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from kernels import _launch  # noqa: E402

V = importlib.import_module("kernels.vtrace")  # the module (the package's attribute vtrace is the function)

WALKS = ("64x32w4+3stages", "32x32w4+3stages", "64x32w2+3stages", "32x32w2+3stages", "64x64w8+3stages")
LOOK_BACK = ("128x16w4+lookback", "256x16w4+lookback", "32x32w2+lookback", "64x32w4+lookback",
             "128x32w4+lookback")
PERSISTENT = ("128x32w4+lookback+2persistent", "64x32w4+lookback+2persistent")
ONE_COLUMN = ("1024x16w8+lookback", "512x16w4+lookback", "256x16w4+lookback")

# (N, T): every float32 [T, N] regime below 8192 environments, and the walks from 8192 as controls
SWEEP = {
    "one_column": ((16, 1048576), (16, 262144), (12, 120000), (8, 524288)),
    "few": ((64, 65536), (128, 4096), (128, 32768), (256, 16384), (500, 2000)),
    "persistent": ((512, 8192), (1024, 4096), (2048, 2048), (2048, 8192), (3072, 2048), (3584, 2048)),
    "mid": ((1000, 700), (1000, 4096), (1536, 4096), (2048, 512), (4100, 1000), (5000, 3000)),
    "walks": ((4000, 1000), (4096, 4096), (4096, 1024), (6000, 2000), (6352, 2000), (7000, 2000), (7680, 2000),
              (8000, 3000)),
    "controls": ((8192, 4096), (16384, 2048)),
}
CANDIDATES = {"one_column": ONE_COLUMN, "few": LOOK_BACK[:2], "persistent": PERSISTENT + LOOK_BACK[3:],
              "mid": LOOK_BACK + WALKS[:1], "walks": WALKS + LOOK_BACK[2:3], "controls": WALKS[:1] + WALKS[4:]}
# Chosen before the sweep ran; none is a sweep cell. The last three are controls the rule must leave alone.
HELDOUT = ((24, 400000), (100, 50000), (300, 20000), (700, 6000), (1500, 3000), (2500, 2500), (3200, 1500),
           (4500, 2500), (5500, 1000), (6800, 1500), (7500, 3000), (2000, 600), (9000, 2000), (12288, 1000),
           (4096, 128))


@contextmanager
def stored_x_for_every_layout():
    """Calls inside launch the ``PG_IS_X`` form wherever it is exact (float32 ``[T, N]`` too)."""
    rule = V.stores_x_as_pg
    V.stores_x_as_pg = lambda exact, itemsize, time_contiguous: exact
    try:
        yield
    finally:
        V.stores_x_as_pg = rule


def tile(label: str, N: int, T: int):
    """``label``'s block shape for the cell: ``own`` V-trace's, ``gae`` GAE's, else a label's thread-run tile."""
    aligned = _launch.rows_are_aligned(N)
    if label == "own":
        return _launch.estimator_config("vtrace", T, N, False, 4, aligned_rows=aligned, form="pg_from_x_next")
    if label == "gae":
        return _launch.estimator_config("gae", T, N, False, 4, aligned_rows=aligned)
    return B.parse_config_label(label.replace("+lookback", "+lookback+latest+runs", 1) if "lookback" in label
                                else label + "+latest+runs")


def calls_of(N: int, T: int, labels) -> tuple[dict, dict]:
    """``other``: the call as it is; with ``labels`` (the sweep) also ``x:own``, ``x:gae`` and ``x:<label>``:
    the form that stores ``x``, in that tile (a tile already taken is left out)."""
    calls, shapes = {"other": lambda a, kw: kernels.vtrace(*a, **kw)}, {}
    for label in ("own", "gae") + tuple(labels) if labels else ():
        config = tile(label, N, T)
        if config in shapes.values():
            continue
        shapes[f"x:{label}"] = config

        def call(a, kw, config=config):
            with stored_x_for_every_layout():
                return kernels.vtrace(*a, **kw, config=config)

        calls[f"x:{label}"] = call
    return calls, shapes


def sweep_jobs():
    return [(N, T, CANDIDATES[regime]) for regime, cells in SWEEP.items() for N, T in cells]


def warm(share: int, shares: int) -> None:
    for i, (N, T, labels) in enumerate(sweep_jobs()):
        if i % shares == share:
            calls, _ = calls_of(N, T, labels)
            args, kw = B.make_inputs("vtrace", N, min(T, 4096), "tn", torch.float32, "cuda", 0)
            for label, call in calls.items():
                try:
                    call(args, kw)
                except Exception as e:  # noqa: BLE001 - reported; the timing run reports it again
                    print("FAIL", N, T, label, repr(e)[:200], flush=True)
    torch.cuda.synchronize()


def time_cells(jobs, tag: str, out: str) -> None:
    copy_gbs = B.copy_bandwidth("cuda", 2**30, 25, 200)
    print(f"copy {copy_gbs:.0f} GB/s", flush=True)
    rows, start = [], time.time()
    for N, T, labels in jobs:
        calls, shapes = calls_of(N, T, labels)
        nbytes = B.cell_bytes("vtrace", N, T, torch.float32)
        sets = B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        times = B.checked_times(calls, "vtrace", N, T, "tn", "f32", 2, 10, 50,
                                timer=lambda f: B.graph_us(f, "cuda", 0.0, calls=max(B.GRAPH_CALLS, sets)),
                                input_sets=sets)
        shapes = {label: B.config_label(c) for label, c in shapes.items()}
        shapes["other"] = B.config_label(B.default_config("vtrace", N, T, "tn", torch.float32))
        rows.append(dict(tag=tag, N=N, T=T, bytes=nbytes, sets=sets, copy_gbs=copy_gbs, shapes=shapes, times=times))
        for label, t in times.items():
            best = min((x for x in t if isinstance(x, float)), default=None)
            pct = f"{nbytes / best / 1e3 / copy_gbs:4.0%}" if best else "  - "
            print(f"{tag} vtrace {N}x{T} f32 tn {label:34s} [{shapes[label]}] "
                  + "/".join(f"{x:.2f}" if isinstance(x, float) else str(x)[:60] for x in t) + f" {pct}", flush=True)
        json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    plan, what = sys.argv[1:3]
    if plan == "sweep" and what == "warm":
        warm(int(sys.argv[3]), int(sys.argv[4]))
    elif plan == "sweep":
        time_cells(sweep_jobs(), "sweep", sys.argv[3])
    else:
        time_cells([(N, T, ()) for N, T in HELDOUT], what, sys.argv[3])
