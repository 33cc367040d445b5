"""Sweep the fused kernels' launches on this GPU and write its tuned table (kernels/launch/tuned/<device>.json).

    python scripts/tune_kernels.py                                   # the default sweep, ~10 min on an H100
    python scripts/tune_kernels.py --families gae,vtrace --dtypes float32 --merge
    python scripts/tune_kernels.py --quick --out /tmp/tuned.json      # a tiny sweep under TRITON_INTERPRET=1 (CI)

For every key of the table (estimator family, layout, dtype, shape bucket: ``kernels.launch.tuned``)
the family's representative estimator is run on one shape of the bucket with each candidate launch
(``kernels.launch.autotune.candidates``: the heuristic's own launch, ``[T, N]`` tiles in thread runs
first, then tiles around the contiguous axis, with and without look-back, pipelined walks). Each candidate is first checked against the float64 reference (the
benchmark's check: ``rltrain.bench.cells.checked_times``), then timed with the benchmark's ``do_bench``
median; a wrong or failing candidate is never timed. The fastest per key is written with its time
and the heuristic's, beside the device name, the versions and the date. ``--merge`` keeps the
entries of an existing table that this sweep does not measure, and times the launch it holds for
each key it does beside the candidates. Shapes are swept one after another (``DEFAULT_SHAPES``
order), so a ``--time-budget`` cut drops the last.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Optional

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout too

import kernels  # noqa: E402
from kernels._triton import INTERPRET, triton  # noqa: E402
from kernels.launch import LaunchConfig, tuned  # noqa: E402
from kernels.launch.autotune import candidates  # noqa: E402
from kernels.launch.heuristic import DeviceInfo, device_info  # noqa: E402
from rltrain.bench.cells import DTYPES, checked_times  # noqa: E402
from rltrain.bench.kernel_grid import QUICK_SHAPES as GRID_QUICK_SHAPES  # noqa: E402
from rltrain.bench.rl_triton import SHAPES as RL_TRITON_SHAPES  # noqa: E402

# The estimator that stands for each family in the sweep.
REPRESENTATIVES = {"gae": "gae", "vtrace": "vtrace", "retrace": "retrace", "returns": "lambda_returns",
                   "forward": "eligibility_traces"}
# N x T, swept shape by shape in this order, so that a time budget cuts the last: first the shapes
# whose launches matter most (one column of a long sequence, the trainers' 4096 x 128, the largest
# problem, the long sequences of few environments), then the rest of the benchmark's quick grid and of the
# rl-triton comparison's shapes.
FIRST_SHAPES = ((16, 1048576), (4096, 128), (8192, 4096), (128, 4096), (128, 2048), (128, 8192), (256, 4096),
                (32768, 8))
DEFAULT_SHAPES = tuple(dict.fromkeys(FIRST_SHAPES + tuple(GRID_QUICK_SHAPES) + ((256, 2048), (256, 8192))
                                     + tuple(RL_TRITON_SHAPES)))
QUICK_SHAPES = ((12, 40),)


def sweep_key(est: str, N: int, T: int, layout: str, dtype_name: str, opts, device: DeviceInfo,
              held: Optional[LaunchConfig] = None) -> dict:
    """The fastest correct candidate of one cell, with its time and the heuristic's; ``held``, the
    launch the table being merged into holds for the cell, is timed beside them, so a new sweep
    never replaces it with a slower one."""
    dtype = DTYPES[dtype_name]
    time_contiguous = layout == "nt" or N == 1
    configs = candidates(N, T, time_contiguous, dtype.itemsize, device)[: opts.max_candidates]
    configs = list(dict.fromkeys(configs + ([held] if held else [])))
    heuristic = configs[0]
    fn = getattr(kernels, est)

    def calling(config):
        return lambda args, kw: fn(*args, **kw, config=config)

    calls = {c.label: calling(c) for c in configs}
    times = checked_times(calls, est, N, T, layout, dtype_name, 1, opts.warmup_ms, opts.rep_ms, device=opts.device,
                            check_envs=opts.check_envs)
    timed = {label: t[0] for label, t in times.items() if isinstance(t[0], float)}
    if not timed:
        raise RuntimeError(f"{est} {N}x{T} {layout} {dtype_name}: no candidate gave the reference's answer: {times}")
    best = min(timed, key=timed.get)
    config = next(c for c in configs if c.label == best)
    return {"config": config.as_dict(), "us": round(timed[best], 3),
            "heuristic_us": round(timed[heuristic.label], 3) if heuristic.label in timed else None,
            "shape": f"{N}x{T}", "candidates": len(configs)}


def run(opts) -> dict:
    device = device_info(torch.device(opts.device))
    out = Path(opts.out or tuned.TABLES / f"{tuned.device_slug(device.name)}.json")
    table = {"device": device.name, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
             "torch": torch.__version__, "triton": getattr(triton, "__version__", "none"),
             "cuda": torch.version.cuda, "interpret": INTERPRET, "argv": sys.argv[1:], "entries": {}}
    if opts.merge and out.is_file():
        table["entries"] = json.loads(out.read_text())["entries"]
    started = time.perf_counter()
    cells = list(itertools.product(opts.shapes, opts.layouts, opts.families, opts.dtypes))  # shape by shape
    for i, ((N, T), layout, family, dtype_name) in enumerate(cells):
        if opts.time_budget and time.perf_counter() - started > opts.time_budget:
            print(f"time budget: {len(cells) - i} cells not swept", flush=True)
            break
        key = tuned.key(family, layout == "nt" or N == 1, str(DTYPES[dtype_name]).removeprefix("torch."), T, N)
        held = table["entries"].get(key)
        entry = sweep_key(REPRESENTATIVES[family], N, T, layout, dtype_name, opts, device,
                          LaunchConfig(**held["config"]) if held else None)
        table["entries"][key] = entry
        print(f"[{time.perf_counter() - started:6.0f}s] {key}: {LaunchConfig(**entry['config']).label} "
              f"{entry['us']} us (heuristic {entry['heuristic_us']} us)", flush=True)
    tuned.check_table(table, str(out))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(table, indent=1, sort_keys=False) + "\n")
    print(f"{len(table['entries'])} entries in {out}", flush=True)
    return table


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--families", default=None, help=f"default: {','.join(tuned.FAMILIES)} (--quick: gae)")
    p.add_argument("--layouts", default="tn,nt")
    p.add_argument("--dtypes", default=None, help="f32, bf16 or f32,bf16 (the default; --quick: f32)")
    p.add_argument("--shapes", default="", help="NxT,... swept in this order (default: DEFAULT_SHAPES)")
    p.add_argument("--out", default=None, help="table file (default: kernels/launch/tuned/<device slug>.json)")
    p.add_argument("--merge", action="store_true", help="keep the existing table's entries this sweep does not measure")
    p.add_argument("--quick", action="store_true", help="a tiny sweep (the interpreter in CI)")
    p.add_argument("--max-candidates", type=int, default=40)
    p.add_argument("--warmup-ms", type=float, default=5.0)
    p.add_argument("--rep-ms", type=float, default=20.0)
    p.add_argument("--check-envs", type=int, default=64)
    p.add_argument("--time-budget", type=float, default=None, help="seconds; no new cell starts after it")
    opts = p.parse_args(argv)
    opts.families = opts.families or ("gae" if opts.quick else ",".join(tuned.FAMILIES))
    opts.dtypes = opts.dtypes or ("f32" if opts.quick else "f32,bf16")
    opts.families = [f for f in opts.families.split(",") if f]
    opts.layouts = [x for x in opts.layouts.split(",") if x]
    opts.dtypes = [d for d in opts.dtypes.split(",") if d]
    for name, values, allowed in (("family", opts.families, tuned.FAMILIES), ("layout", opts.layouts, tuned.LAYOUTS),
                                  ("dtype", opts.dtypes, tuple(DTYPES))):
        bad = [v for v in values if v not in allowed]
        if bad:
            p.error(f"unknown {name} {bad}; choose from {allowed}")
    opts.shapes = ([tuple(int(v) for v in s.lower().split("x")) for s in opts.shapes.split(",")] if opts.shapes
                   else list(QUICK_SHAPES if opts.quick else DEFAULT_SHAPES))
    if opts.quick:
        opts.max_candidates = min(opts.max_candidates, 3)
        opts.warmup_ms, opts.rep_ms = 0.0, 1.0
    opts.device = "cuda" if torch.cuda.is_available() else "cpu"
    if opts.device == "cpu" and not INTERPRET:
        p.error("no GPU: the sweep runs the Triton kernels, on CUDA or under TRITON_INTERPRET=1 (--quick)")
    return opts


def main(argv=None) -> dict:
    return run(parse_args(argv))


if __name__ == "__main__":
    main()
