"""V-trace's policy-gradient advantages as ``vs - V`` where the clipping thresholds are equal (fortieth
session, ``kernels.vtrace.pg_is_x``): cells N x T of every regime, the kernels' own block shape, whichever
``kernels`` package is first on the path, so that two versions compare process against process. Each
cell is checked against the float64 reference first, then timed: device time per call of calls replayed
from a CUDA graph, each call reading its own input set (four times the L2), two rounds.

Forms: ``equal``, the benchmark's call (default thresholds 1.0, truncations, no ``next_values``: the
kernels store ``x`` as ``pg_adv``); ``clipped``, ``pg_rho_bar = 0.9`` (the kernels compute the
policy-gradient terms from ``x_{t+1}``, as before).

PLAN ``heldout``: the equal form on 32 cells (``[T, N]`` float32 and bf16, ``[N, T]`` float32, the quick
grid's shapes among them) and the clipped form on 6; ``rules``: the equal form on those 32 cells and 18
more in the regimes where GAE's block-shape rule and V-trace's differ, in V-trace's block shape and in
GAE's, one process; ``heldout2``: the rule as kept (the form that stores ``vs - V`` for 16-bit floats and
``[N, T]`` rows, 64 x 64 async walks to 8448 environments) on 21 cells outside those, and 3 controls
(float32 ``[T, N]``, and the other form in bf16: both unchanged); ``nt_forms``: float32 ``[N, T]`` rows
not 16 elements apart beside rows that are, both forms, one process (the form is the only change);
``tiles``: the equal form's bf16 walks from 8192
environments in other tiles (``../run_successor/sweep.py``'s labels) against the kernels' own.

  PYTHONPATH=<kernels' checkout>:. python docs/bench/vtrace_pg/cells.py PLAN TAG OUT.json [warm I K]
"""
import json
import sys
import time

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402

# (N, T, dtype, layout, form)
TN_F32 = ((8192, 4096), (16384, 2048), (32768, 1024), (512, 8192), (16, 1048576), (2048, 2048), (4096, 4096),
          (4096, 128), (4096, 8), (32768, 8), (32768, 16), (4000, 1000), (64, 300), (2048, 8192), (6000, 2000),
          (128, 4096), (12, 120000))
TN_BF16 = ((8192, 4096), (16384, 2048), (32768, 1024), (512, 8192), (2048, 2048), (4096, 128), (20000, 1000),
           (10240, 2048))
NT_F32 = ((8192, 4096), (4096, 128), (32768, 8), (512, 8192), (2048, 2048), (128, 4096), (16384, 256))
CLIPPED = ((8192, 4096, "bf16", "tn"), (16384, 2048, "bf16", "tn"), (8448, 1500, "bf16", "tn"),
           (8192, 4096, "f32", "tn"), (4096, 128, "f32", "tn"), (512, 8192, "f32", "tn"))
EXTRA = ((4096, 100, "f32", "tn"), (8192, 200, "f32", "tn"), (2048, 256, "f32", "tn"), (16384, 64, "f32", "tn"),
         (4100, 1000, "f32", "tn"), (1000, 700, "f32", "tn"), (8000, 3000, "f32", "tn"), (256, 4096, "f32", "nt"),
         (4096, 200, "f32", "nt"), (64, 65536, "f32", "nt"), (8192, 1024, "f32", "nt"), (8448, 1500, "bf16", "tn"),
         (4096, 4096, "bf16", "tn"), (12288, 2048, "bf16", "tn"), (25000, 1000, "bf16", "tn"),
         (1024, 4096, "bf16", "tn"), (8192, 256, "bf16", "tn"), (16, 1048576, "bf16", "tn"))
HELDOUT_BF16 = ((8192, 3000), (8320, 1500), (8448, 700), (8192, 5000), (9472, 2500), (13312, 1000), (29696, 1500),
                (19456, 1800), (1000, 3000), (2304, 2500), (4000, 600), (4096, 200), (8192, 100), (3000, 3000))
HELDOUT_NT = ((3000, 2000, "f32"), (1000, 5000, "f32"), (6000, 300, "f32"), (300, 3000, "f32"), (20, 50000, "f32"),
              (4096, 1024, "bf16"), (1000, 3000, "bf16"))
CONTROLS = ((3000, 4096, "f32", "tn", "equal"), (4096, 128, "f32", "tn", "equal"), (8192, 3000, "bf16", "tn", "clipped"))
NT_FORMS = ((1000, 5000), (1000, 4992), (500, 7000), (500, 7008), (4000, 1000), (4000, 1008), (2000, 3000),
            (2000, 3008), (6000, 300), (6000, 304), (1500, 6000), (1500, 6004))
TILES = ("64x64w4+4stages+latest+async", "64x64w4+2stages+latest+async", "64x64w4+3stages+latest+async",
         "128x64w4+3stages+latest+async", "64x128w4+2stages+latest+async", "64x64w8+3stages+latest+envs4+async",
         "64x32w4+3stages+latest+runs")
PLANS = {
    "heldout": [(N, T, "f32", "tn", "equal") for N, T in TN_F32] + [(N, T, "bf16", "tn", "equal") for N, T in TN_BF16]
    + [(N, T, "f32", "nt", "equal") for N, T in NT_F32] + [(*cell, "clipped") for cell in CLIPPED],
    "heldout2": [(N, T, "bf16", "tn", "equal") for N, T in HELDOUT_BF16]
    + [(N, T, dname, "nt", "equal") for N, T, dname in HELDOUT_NT] + list(CONTROLS),
    "nt_forms": [(N, T, "f32", "nt", form) for N, T in NT_FORMS for form in ("equal", "clipped")],
    "rules": [(N, T, dname, layout, "equal") for N, T, dname, layout, form in
              [(N, T, "f32", "tn", 0) for N, T in TN_F32] + [(N, T, "bf16", "tn", 0) for N, T in TN_BF16]
              + [(N, T, "f32", "nt", 0) for N, T in NT_F32] + [(*cell, 0) for cell in EXTRA]],
    "tiles": [(N, T, "bf16", label) for N, T in ((8192, 4096), (16384, 2048), (32768, 1024), (10240, 2048))
              for label in ("default",) + TILES],
}
FORMS = {"equal": None, "clipped": lambda args, kw: (args, dict(kw, pg_rho_bar=0.9))}


def gae_rule(N: int, T: int, dname: str, layout: str):
    """The block shape GAE's rule gives this cell (``_launch.estimator_config("gae", ...)``)."""
    from kernels import _launch

    return _launch.estimator_config("gae", T, N, layout == "nt", B.DTYPES[dname].itemsize,
                                    aligned_rows=_launch.rows_are_aligned(T if layout == "nt" else N))


def default_label(N: int, T: int, dname: str, layout: str, form: str) -> str:
    """The block shape the call of ``form`` takes (the starting kernels know no forms: their one rule)."""
    from kernels import _launch

    if form == "equal" or "form" not in _launch.estimator_config.__code__.co_varnames:
        return B.config_label(B.default_config("vtrace", N, T, layout, B.DTYPES[dname]))
    return B.config_label(_launch.estimator_config("vtrace", T, N, layout == "nt", B.DTYPES[dname].itemsize,
                                                   aligned_rows=_launch.rows_are_aligned(T if layout == "nt" else N),
                                                   form="pg_from_x_next"))


def heldout(plan: str, tag: str, out: str, warm: bool, shard: int = 0, shards: int = 1) -> None:
    """Each cell of ``plan``: the kernels' own block shape (``default``) and, in PLAN ``rules``, GAE's
    (``gae_rule``), interleaved in one process."""
    copy_gbs = 0.0 if warm else B.copy_bandwidth("cuda", 2**30, 25, 200)
    rows, start = [], time.time()
    for i, (N, T, dname, layout, form) in enumerate(PLANS[plan]):
        if i % shards != shard:
            continue
        nbytes = B.cell_bytes("vtrace", N, T, B.DTYPES[dname])
        sets = 1 if warm else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        timer = (lambda f: 0.0) if warm else (lambda f: B.graph_us(f, "cuda", 0.0, calls=max(B.GRAPH_CALLS, sets)))
        calls = {"default": lambda a, kw: kernels.vtrace(*a, **kw)}
        labels = {"default": default_label(N, T, dname, layout, form)}
        if plan == "rules":
            config = gae_rule(N, T, dname, layout)
            calls["gae_rule"] = lambda a, kw, c=config: kernels.vtrace(*a, **kw, config=c)
            labels["gae_rule"] = B.config_label(config)
        times = B.checked_times(calls, "vtrace", N, T, layout, dname, 1 if warm else 2, 10, 50, prepare=FORMS[form],
                                timer=timer, input_sets=sets)
        rows.append(dict(tag=tag, N=N, T=T, dtype=dname, layout=layout, form=form, sets=sets, bytes=nbytes,
                         copy_gbs=copy_gbs, default=labels["default"], labels=labels,
                         times=times if plan == "rules" else times["default"]))
        if not warm:
            for label, t in times.items():
                best = min((x for x in t if isinstance(x, float)), default=None)
                pct = f"{nbytes / best / 1e3 / copy_gbs:.0%}" if best else "-"
                print(f"{tag} vtrace {N}x{T} {dname} {layout} {form} {label} [{labels[label]}] "
                      + "/".join(f"{x:.2f}" if isinstance(x, float) else str(x)[:60] for x in t) + f" {pct}",
                      flush=True)
            json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    plan, tag, out = sys.argv[1:4]
    if plan in ("heldout", "heldout2", "nt_forms", "rules"):
        heldout(plan, tag, out, sys.argv[4:5] == ["warm"], *(int(a) for a in sys.argv[5:7]))
    else:
        sys.path.append("docs/bench/run_successor")
        import sweep  # noqa: E402

        jobs = [("vtrace", N, T, dname, label) for N, T, dname, label in PLANS[plan]]
        if sys.argv[4:5] == ["warm"]:
            sweep.warm(jobs, int(sys.argv[5]), int(sys.argv[6]))
        else:
            sweep.time_all(jobs, out)
