"""Sweep the fused kernels' block shapes on the GPU and report the fastest per shape (JSON lines).

    python scripts/tune_kernels.py --shapes 8192x4096,512x8192 --estimators gae,vtrace,retrace \\
        --layouts tn,nt --jobs 12 --out tune.jsonl

Candidates depend on the layout: with environments contiguous (``tn``) wide tiles over
environments and time chunks of 2-1024 steps, each in Triton's layout and in thread runs
(``LaunchConfig.thread_runs``), their steps latest first for kernels with reverse walks (as the
kernels' own ``[T, N]`` tiles); with time contiguous (``nt``) long time chunks over few
environments; each with and without look-back and 1-8 warps, keeping 4-64 elements per thread, and
the walks without look-back at each pipeline depth of ``--stages`` (``LaunchConfig.num_stages``).
Every candidate is compiled first by ``--jobs`` worker processes in parallel (they fill Triton's
on-disk cache), then, in this process alone, checked against the float64 reference (first 64
environments, the benchmark's check) and timed with the benchmark's ``do_bench`` median. Inputs,
reference, error and timing are ``scripts/bench_kernels.py``'s, so a tuned figure is comparable with
the benchmark's. The winners feed ``kernels/_launch.py:choose_config``.

``--configs`` times a given list of block shapes instead (labels as the benchmark prints them,
``16x64w1+lookback``, ``32x16w2+3stages``), and ``--top 0`` records every timing, not only the
fastest eight: to compare a few candidate rules on many cells.
"""

from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_kernels as B  # noqa: E402

import kernels  # noqa: E402
from kernels import LaunchConfig  # noqa: E402
from kernels._launch import in_step_order, kernel_traits  # noqa: E402
from kernels._triton import triton  # noqa: E402

DEFAULT_SHAPES = "8192x4096,512x8192,2048x2048,16x1048576"
THREADS_PER_WARP = 32


def candidates(N: int, T: int, layout: str, sms: int = 132, stages: tuple = (1,),
               lookback: bool = True) -> list[LaunchConfig]:
    """Block shapes worth timing for one problem (see the module docstring); a walk over several
    chunks without look-back is tried with each pipeline depth in ``stages``, and only with at
    least two programs per multiprocessor (``sms``), or half as many when pipelined. ``[T, N]``
    (``tn``) tiles come in Triton's layout and in thread runs. ``lookback=False`` leaves the
    look-back tiles out."""
    if layout == "tn":
        block_ts, block_ns = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024), (8, 16, 32, 64, 128, 256, 512, 1024)
    else:
        block_ts, block_ns = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096), (1, 2, 4, 8, 16, 32, 64, 128)
    t_max, n_max = triton.next_power_of_2(T), triton.next_power_of_2(N)
    out = []
    for bt, bn, warps, tile_lookback in itertools.product(block_ts, block_ns, (1, 2, 4, 8), (False, True)):
        per_thread = bt * bn / (warps * THREADS_PER_WARP)
        # up to 64 per thread when every thread sits on its own environments (time stays in registers)
        most = 64 if layout == "tn" and bn >= 4 * THREADS_PER_WARP * warps else 32
        if bt > t_max or bn > max(16, n_max) or not 4 <= per_thread <= most:
            continue
        if tile_lookback and (bt >= T or not lookback):
            continue
        if tile_lookback or bt >= T:
            shapes = [LaunchConfig(bt, bn, warps, tile_lookback)]
        else:
            programs = triton.cdiv(N, bn)
            shapes = [LaunchConfig(bt, bn, warps, False, s) for s in stages
                      if programs >= (sms // 2 if s > 1 else 2 * sms)]
        out += shapes + ([replace(c, thread_runs=True) for c in shapes] if layout == "tn" else [])
    return out


def in_kernel_order(est: str, layout: str, configs: list[LaunchConfig]) -> list[LaunchConfig]:
    """``[T, N]`` candidates of kernels with reverse walks hold their steps latest first, as the
    kernels' own block shapes do (``_launch.in_step_order``)."""
    latest_first = kernel_traits(est)["latest_first"]
    return [in_step_order(c, layout == "nt", latest_first) for c in configs]


def _inputs(est, N, T, layout, dtype):
    return B.make_inputs(est, N, T, layout, B.DTYPES[dtype], "cuda", seed=0)


def _compile_worker(tasks):
    """Call every ``(est, N, T, layout, dtype, config)`` once so that its kernel is compiled and cached."""
    failures = []
    inputs = {}
    for est, N, T, layout, dtype, config in tasks:
        cell = (est, N, T, layout, dtype)
        if cell not in inputs:
            inputs.clear()
            torch.cuda.empty_cache()
            inputs[cell] = _inputs(*cell)
        args, kwargs = inputs[cell]
        try:
            getattr(kernels, est)(*args, **kwargs, config=config)
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - reported, and the candidate is skipped later
            failures.append((cell, vars(config), repr(exc)[:200]))
    return failures


def precompile(cells, jobs: int) -> list:
    tasks = [(*cell, config) for cell, configs in cells for config in configs]
    chunks = [tasks[i::jobs] for i in range(jobs)]
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        return [f for part in pool.map(_compile_worker, chunks) for f in part]


def tune_cell(cell, configs, copy_gbs: float, opts) -> dict:
    est, N, T, layout, dtype = cell
    args, kwargs = _inputs(*cell)
    refs, k, ref_kind = B.reference_outputs(est, args, kwargs, layout, 64, opts.ref_max_t, "cuda")
    fn = getattr(kernels, est)
    nbytes = B.cell_bytes(est, N, T, B.DTYPES[dtype])
    results = []
    for config in [None, *configs]:
        label = "default" if config is None else vars(config)
        try:
            out = fn(*args, **kwargs, config=config)
            torch.cuda.synchronize()
            err = B.rel_err(out, refs, k, layout)
            del out
            if not err <= B.TOL[dtype]:
                results.append(dict(config=label, status=f"WRONG {err:.1e}"))
                continue
            us = B.time_us(lambda: fn(*args, **kwargs, config=config), "cuda", opts.warmup_ms, opts.rep_ms)
            results.append(dict(config=label, us=us, frac_of_copy=nbytes / (us * 1e-6) / 1e9 / copy_gbs))
        except Exception as exc:  # noqa: BLE001 - one failing candidate must not end the sweep
            results.append(dict(config=label, status=repr(exc)[:200]))
    timed = sorted((r for r in results if "us" in r and r["config"] != "default"), key=lambda r: r["us"])
    default = next(r for r in results if r["config"] == "default")
    chosen = B.default_config(est, N, T, layout, B.DTYPES[dtype])
    return dict(estimator=est, N=N, T=T, layout=layout, dtype=dtype, bytes=nbytes, ref_kind=ref_kind,
                default=vars(chosen), default_us=default.get("us"), best=timed[0] if timed else None,
                top=timed[:opts.top] if opts.top else timed, failed=[r for r in results if "status" in r][:8],
                candidates=len(configs))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shapes", default=DEFAULT_SHAPES, help="comma-separated NxT")
    p.add_argument("--estimators", default="gae,vtrace,retrace")
    p.add_argument("--layouts", default="tn,nt")
    p.add_argument("--dtype", default="f32", choices=sorted(B.DTYPES))
    p.add_argument("--stages", default="1,2,3,4",
                   help="pipeline depths tried for walks without look-back (4: experiment log, \"Deep walks\")")
    p.add_argument("--no-lookback", action="store_true", help="leave the look-back tiles out")
    p.add_argument("--configs", default=None,
                   help="comma-separated block shapes to time instead of the generated candidates, "
                        "e.g. 16x64w1+lookback,32x16w2+3stages")
    p.add_argument("--top", type=int, default=8, help="ranked timings recorded per cell (0: all)")
    p.add_argument("--jobs", type=int, default=8, help="parallel compile processes")
    p.add_argument("--budget", type=float, default=300.0, help="seconds; no new cell starts after it")
    p.add_argument("--warmup-ms", type=float, default=5.0)
    p.add_argument("--rep-ms", type=float, default=20.0)
    p.add_argument("--ref-max-t", type=int, default=16384)
    p.add_argument("--out", default="tune.jsonl")
    return p.parse_args(argv)


def main(argv=None):
    opts = parse_args(argv)
    start = time.time()
    shapes = [tuple(int(x) for x in s.split("x")) for s in opts.shapes.split(",")]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    stages = tuple(int(s) for s in opts.stages.split(","))
    given = [B.parse_config_label(label) for label in opts.configs.split(",")] if opts.configs else None
    cells = [((est, N, T, layout, opts.dtype),
              given or in_kernel_order(est, layout, candidates(N, T, layout, sms, stages, not opts.no_lookback)))
             for N, T in shapes for layout in opts.layouts.split(",") for est in opts.estimators.split(",")]
    failures = precompile(cells, opts.jobs)
    print(f"compiled {sum(len(c) for _, c in cells)} candidates in {time.time() - start:.0f} s, "
          f"{len(failures)} failed", flush=True)
    copy_gbs = B.copy_bandwidth("cuda", 2 * 2**30, opts.warmup_ms, opts.rep_ms)
    print(f"copy bandwidth {copy_gbs:.0f} GB/s", flush=True)
    with open(opts.out, "w") as f:
        f.write(json.dumps(dict(copy_gbs=copy_gbs, device=torch.cuda.get_device_name(), torch=torch.__version__,
                                triton=triton.__version__, compile_failures=failures[:20])) + "\n")
        for cell, configs in cells:
            if time.time() - start > opts.budget:
                print("budget exhausted", flush=True)
                break
            rec = tune_cell(cell, configs, copy_gbs, opts)
            f.write(json.dumps(rec) + "\n")
            f.flush()
            best = rec["best"] or {}
            print(f"{cell[3]} {cell[1]:6d}x{cell[2]:<8d} {cell[0]:9s} default {rec['default_us'] or float('nan'):8.1f} us"
                  f" best {best.get('us', float('nan')):8.1f} us ({best.get('frac_of_copy', 0):4.0%} of copy)"
                  f" {best.get('config')}", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
