"""Benchmark the fused credit-assignment kernels against the baselines.

For every estimator x shape x layout (x dtype), each implementation ("triton" = the fused kernels,
"sequential" = the same kernels with block_t=1, "compile" = log-step scan under torch.compile,
"loop" = eager loop over T) is first checked against the float64 reference (relative error
||out - ref|| / ||ref||, on the first ``--check-envs`` environments; a wrong implementation is
recorded "WRONG" and not timed), then timed with ``triton.testing.do_bench`` (median, L2 flushed
before every call by do_bench, plus rotation among several input sets when one set is under 3x
the L2 size: as many as make 3x the L2, up to ``MAX_INPUT_SETS``, so that the device-only
CUDA-graph time of a small cell, which has no flush, reads its inputs from DRAM too). Bytes model:
each input read once + each output written once; achieved GB/s is compared with a
device-to-device copy measured in the same run.

GPU::

    python scripts/bench_kernels.py --quick                 # 9 shapes, all estimators, ~6 min on an H200
    python scripts/bench_kernels.py --quick --out docs/results/kernels_quick_grid.json   # the published grid
    python scripts/bench_kernels.py --estimators gae,vtrace --time-budget 540
    python scripts/bench_kernels.py --shapes 4096x128,512x8192 --impls triton,sequential
    git worktree add /tmp/before 3bbb8bb      # an earlier checkout's kernels, timed in this process:
    python scripts/bench_kernels.py --quick --impls triton --before-root /tmp/before   # speedup_vs_before

CPU (CI, tiny grid)::

    python scripts/bench_kernels.py --cpu --out /tmp/bench/kernels.json

Recompute the ratios of a finished run and rewrite its files (anywhere)::

    python scripts/bench_kernels.py --render docs/results/kernels_quick_grid.json

Outputs: the ``--out`` JSON file (default runs/bench/kernels.json: ``meta`` with device, driver, versions
and date, and one row per cell and implementation), a CSV of the rows next to it (same name, ``.csv``)
and the plots ``<name>_speedup_<estimator>.png`` (``scripts/plot_bench.py``). The Markdown tables of a
results file: ``scripts/results_tables.py``.

Shapes are written ``NxT`` (environments x time steps) everywhere.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rltrain.bench.cells import DTYPES, ESTIMATORS  # noqa: E402
from rltrain.bench.kernel_grid import IMPLS, QUICK_BUDGET_S, import_before, render, run  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="all estimators on 9 representative shapes (~6 min on an H200)")
    p.add_argument("--cpu", action="store_true", help="PyTorch path on the CPU, tiny grid (CI)")
    p.add_argument("--estimators", default=",".join(ESTIMATORS))
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--shapes", default="", help="NxT,... (environments x steps), overrides the grid")
    p.add_argument("--layout", default="auto", choices=["auto", "tn", "nt", "both"],
                   help="auto: tn everywhere, plus nt for gae/vtrace")
    p.add_argument("--dtype", default="f32", help="f32, bf16 or f32,bf16")
    p.add_argument("--out", default=str(ROOT / "runs" / "bench" / "kernels.json"),
                   help="results file (.json); the CSV and the plots are written next to it")
    p.add_argument("--time-budget", type=float, default=None,
                   help=f"seconds; no new cell starts after it (--quick default: {QUICK_BUDGET_S:.0f})")
    p.add_argument("--warmup-ms", type=float, default=None)
    p.add_argument("--rep-ms", type=float, default=None)
    p.add_argument("--check-envs", type=int, default=64, help="environments compared with the reference")
    p.add_argument("--ref-max-t", type=int, default=16384,
                   help="longest T checked by the Python-loop reference (beyond: float64 log-step scan)")
    p.add_argument("--host-max-us", type=float, default=200.0, help="measure host_us when device time is below")
    p.add_argument("--graph-max-us", type=float, default=1000.0,
                   help="measure graph_us when device time is below (higher than --host-max-us, so that the "
                        "baselines' host-bound do_bench times still get a device-only time)")
    p.add_argument("--host-calls", type=int, default=200)
    p.add_argument("--copy-bytes", type=int, default=None)
    p.add_argument("--no-copy", action="store_true")
    p.add_argument("--no-plots", dest="plots", action="store_false",
                   help="skip the PNGs (make them later: python scripts/plot_bench.py OUT.json)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--before-root", default=None,
                   help="another checkout (e.g. a git worktree of an earlier commit) whose kernels run as impl "
                        "'before' in this process; adds 'before' to --impls")
    p.add_argument("--quiet", dest="verbose", action="store_false")
    opts = p.parse_args(argv)
    if Path(opts.out).suffix != ".json":
        p.error(f"--out must name a .json file, got {opts.out!r}")
    opts.estimators = [e for e in opts.estimators.split(",") if e]
    opts.impls = [i for i in opts.impls.split(",") if i and (i != "before" or opts.before_root)]
    if opts.before_root:
        import_before(Path(opts.before_root))
        opts.impls += [] if "before" in opts.impls else ["before"]
    opts.dtypes = [d for d in opts.dtype.split(",") if d]
    for name, vals, allowed in (("estimator", opts.estimators, ESTIMATORS), ("impl", opts.impls, IMPLS + ("before",)),
                                ("dtype", opts.dtypes, tuple(DTYPES))):
        bad = [v for v in vals if v not in allowed]
        if bad:
            p.error(f"unknown {name} {bad}; choose from {allowed}")
    if opts.cpu or not torch.cuda.is_available():
        if not opts.cpu:
            print("no CUDA device: running the CPU mode")
        opts.cpu, opts.device = True, "cpu"
    else:
        opts.device = "cuda"
    gpu = not opts.cpu
    opts.warmup_ms = opts.warmup_ms if opts.warmup_ms is not None else (25.0 if gpu else 1.0)
    opts.rep_ms = opts.rep_ms if opts.rep_ms is not None else (100.0 if gpu else 20.0)
    opts.copy_bytes = opts.copy_bytes or (2 * 2**30 if gpu else 64 * 2**20)
    if opts.cpu:
        opts.host_calls = min(opts.host_calls, 20)
    if opts.time_budget is None and opts.quick:
        opts.time_budget = QUICK_BUDGET_S
    return opts


def main(argv=None) -> dict:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--render"]:
        if len(argv) != 2:
            raise SystemExit("usage: bench_kernels.py --render RESULTS.json")
        return render(Path(argv[1]))
    return run(parse_args(argv))


if __name__ == "__main__":
    main()
