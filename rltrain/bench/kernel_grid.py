"""The kernels grid (``scripts/bench_kernels.py``): every estimator x shape x layout (x dtype) and
implementation, checked against the float64 reference, then timed; the rows with their bandwidth and
ratios, the results files (JSON, CSV, plots) and the summary printed at the end. The method is the
script's docstring."""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
import re
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Optional

import torch

from kernels._triton import runs_triton
from kernels.backends import get_backend
from kernels.estimators import MODULES
from kernels.launch import LaunchConfig, choose_config
from kernels.launch.heuristic import device_info
from rltrain.bench.cells import DTYPES, INPUT_SET_SEED_STEP, TOL, cell_bytes, cell_inputs, reference_outputs, rel_err
from rltrain.bench.plots import plot_all
from rltrain.bench.timing import (GRAPH_CALLS, captured_us, copy_bandwidth, graph_us, host_us, input_set_count, sync,
                                  time_us)
from rltrain.machine import git_commit, machine_info, recorded_args

ROOT = Path(__file__).resolve().parents[2]
IMPLS = ("triton", "sequential", "compile", "loop")  # "before" too, with --before-root
BASELINES = ("sequential", "compile", "loop", "before")
BEFORE_MODULE = "kernels_before"  # the kernels of --before-root, imported under this name
NT_ESTIMATORS = ("gae", "vtrace")  # layout "auto": [N, T] too, to compare with [N, T] libraries
GRID_N = (16, 128, 512, 2048, 4096, 8192, 16384, 32768)
GRID_T = (8, 16, 32, 64, 128, 512, 1024, 2048, 8192)
LONG_T = ((16, 65536), (16, 262144), (16, 1048576))
# --quick, in run order (most representative first): N x T
QUICK_SHAPES = ((4096, 128), (4096, 16), (512, 8192), (128, 4096), (8192, 4096), (4096, 8), (32768, 8), (32768, 16),
                (16, 1048576))
QUICK_NT_SHAPES = ((4096, 128), (8192, 4096))
CPU_SHAPES = ((16, 8), (64, 32))
MAX_CELL_BYTES = 4 * 2**30
QUICK_BUDGET_S = 420.0  # --quick starts no cell after this (H200: the whole grid took 354 s)
LOOP_MAX_T = 2048


# --------------------------------------------------------------------------- #
# the run
# --------------------------------------------------------------------------- #
def impl_fn(impl: str, est: str):
    if impl == "before":
        return getattr(sys.modules[BEFORE_MODULE], est)
    return getattr(get_backend(impl), est)


def import_before(root: Path):
    """The ``kernels`` package of another checkout (``--before-root``, e.g. a git worktree of an
    earlier commit) imported in this process as ``kernels_before``, beside this checkout's.

    Its modules import each other as ``kernels.*``, so while it loads, this checkout's ``kernels``
    modules step out of ``sys.modules`` and ``root`` leads ``sys.path``; afterwards every module it
    loaded is renamed ``kernels_before.*`` and this checkout's come back. Those whose names no module
    of this checkout has also keep their own names, so that its lazy imports still find them."""
    root = Path(root).resolve()
    if not (root / "kernels" / "__init__.py").is_file():
        raise SystemExit(f"--before-root: no kernels package under {root}")
    ours = {name: sys.modules.pop(name) for name in list(sys.modules) if name == "kernels" or name.startswith("kernels.")}
    sys.path.insert(0, str(root))
    try:
        import kernels as before  # noqa: F401 - the other checkout's, under this checkout's name while it loads
    finally:
        sys.path.remove(str(root))
        loaded = {name: sys.modules.pop(name) for name in list(sys.modules)
                  if name == "kernels" or name.startswith("kernels.")}
        for name, module in loaded.items():
            sys.modules[BEFORE_MODULE + name[len("kernels"):]] = module
            if not _in_this_checkout(name):
                sys.modules[name] = module
        sys.modules.update(ours)
    return sys.modules[BEFORE_MODULE]


def _in_this_checkout(name: str) -> bool:
    """Whether module ``kernels.<...>`` is one of this checkout's (loaded or not)."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def default_config(est, N, T, layout, dtype, device="cuda"):
    """The launch ``kernels.<est>`` chooses for this cell (``kernels.launch.choose_config``; the inputs
    are contiguous, so time is the stride-1 axis in ``[N, T]`` storage and for one environment)."""
    return choose_config(MODULES[est].FAMILY, T, N, layout == "nt" or N == 1, dtype, device_info(torch.device(device)))


def launch_config(impl, est, N, T, layout, dtype, device) -> str:
    if impl == "triton":
        c = default_config(est, N, T, layout, dtype, device)
    elif impl == "sequential":
        from kernels.baselines.sequential import _num_sms, sequential_config

        c = sequential_config(N, _num_sms(torch.device(device)))
    else:
        return ""
    return config_label(c)


LABEL_FORM = "<block_t>x<block_n>w<warps>[+lookback][+<stages>stages][+run<run>]"


def config_label(c: LaunchConfig) -> str:
    """A launch as ``LABEL_FORM`` (``parse_config_label`` reads it back)."""
    return c.label


def parse_config_label(label: str) -> LaunchConfig:
    """The :class:`LaunchConfig` that ``config_label`` wrote as ``label``, e.g. ``16x64w1+lookback``."""
    match = re.fullmatch(r"(\d+)x(\d+)w(\d+)(\+lookback)?(?:\+(\d+)stages)?(?:\+run(\d+))?", label.strip())
    if match is None:
        raise ValueError(f"config label {label!r} is not {LABEL_FORM}")
    block_t, block_n, warps, lookback, stages, run = match.groups()
    return LaunchConfig(int(block_t), int(block_n), int(warps), lookback is not None, int(stages or 1), int(run or 1))


def run_cell(est, N, T, layout, dtype_name, impls, opts, copy_gbs) -> list[dict]:
    device = opts.device
    dtype = DTYPES[dtype_name]
    base = dict(estimator=est, N=N, T=T, layout=layout, dtype=dtype_name)
    rows = []
    nbytes = cell_bytes(est, N, T, dtype)
    if nbytes > MAX_CELL_BYTES:
        return [dict(base, impl=i, status="skipped", note=f"{nbytes / 2**30:.1f} GiB > 4 GiB") for i in impls]
    try:
        sets = [cell_inputs(est, N, T, layout, dtype_name, device, opts.seed + INPUT_SET_SEED_STEP * i)
                for i in range(input_set_count(nbytes, device))]
        sync(device)
        refs, k, ref_kind = reference_outputs(est, *sets[0], layout, opts.check_envs, opts.ref_max_t, device)
    except Exception as exc:  # noqa: BLE001
        msg = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        return [dict(base, impl=i, status="error", error=f"inputs/reference: {msg}") for i in impls]
    in_bytes = sum(t.numel() * t.element_size() for t in itertools.chain(sets[0][0], sets[0][1].values())
                   if isinstance(t, torch.Tensor))
    for impl in impls:
        row = dict(base, impl=impl, config=launch_config(impl, est, N, T, layout, dtype, device))
        rows.append(row)
        if impl == "loop" and T > LOOP_MAX_T:
            row.update(status="skipped", note=f"loop: T > {LOOP_MAX_T}")
            continue
        if impl == "triton" and not runs_triton(torch.device(device)):
            row["note"] = "CPU without TRITON_INTERPRET: the public API's PyTorch path (float64 reference)"
        if impl == "before" and BEFORE_MODULE not in sys.modules:
            row.update(status="skipped", note="before: no --before-root")
            continue
        if impl == "sequential" and not runs_triton(torch.device(device)):
            row.update(status="skipped", note="sequential needs CUDA or TRITON_INTERPRET=1")
            continue
        try:
            fn = impl_fn(impl, est)
            args, kwargs = sets[0]
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            sync(device)
            row["first_call_s"] = round(time.perf_counter() - t0, 4)
            out = out if isinstance(out, tuple) else (out,)
            err = rel_err(out, refs, k, layout)
            out_bytes = sum(o.numel() * o.element_size() for o in out)
            del out
            row.update(rel_err=err, ref_kind=ref_kind, check_envs=k, bytes=in_bytes + out_bytes)
            if impl == "compile":
                from kernels.baselines import compiled

                if not compiled.is_compiled():
                    row["note"] = "torch.compile failed: eager log-step scan"
            if not err <= TOL[dtype_name]:
                row["status"] = "WRONG"
                continue
            cycle = itertools.cycle(sets)

            def call():
                a, kw = next(cycle)
                return fn(*a, **kw)

            us = time_us(call, device, opts.warmup_ms, opts.rep_ms)
            row.update(status="ok", device_us=us, n_input_sets=len(sets))
            if us <= opts.host_max_us:
                row["host_us"] = host_us(call, device, opts.host_calls)
                if impl == "triton":
                    row["captured_us"] = captured_us(fn, sets, device, opts.host_calls)
            if us <= opts.graph_max_us:
                floor_us = row["bytes"] / (copy_gbs * 1e9) * 1e6 if copy_gbs else 0.0
                row["graph_us"] = graph_us(call, device, floor_us, calls=max(GRAPH_CALLS, len(sets)))
            add_bandwidth(row, copy_gbs)
        except Exception as exc:  # noqa: BLE001 - one failing impl must not kill the run
            row.update(status="error", error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300])
            if opts.verbose:
                traceback.print_exc()
            if isinstance(exc, torch.cuda.OutOfMemoryError):
                torch.cuda.empty_cache()
    del sets
    add_ratios(rows)
    if torch.device(device).type == "cuda" and nbytes > 2**30:
        torch.cuda.empty_cache()
    return rows


def add_bandwidth(row: dict, copy_gbs: Optional[float]) -> None:
    """A timed row's achieved bandwidth, ``bytes`` (inputs read once, outputs written once) per
    second: ``gbps`` from its do_bench time and, with the copy bandwidth, ``frac_of_copy``; and
    ``graph_frac_of_copy`` from its CUDA-graph time where it has one, the kernel's own share of the
    copy at shapes where do_bench also counts host time."""
    if not row.get("device_us") or not row.get("bytes"):
        return
    row["gbps"] = row["bytes"] / (row["device_us"] * 1e-6) / 1e9
    if copy_gbs:
        row["frac_of_copy"] = row["gbps"] / copy_gbs
        if row.get("graph_us"):
            row["graph_frac_of_copy"] = row["bytes"] / (row["graph_us"] * 1e-6) / 1e9 / copy_gbs


def add_ratios(rows: list[dict]) -> None:
    """Speedups over each baseline within each cell: ``speedup_vs_<b>`` from the do_bench times and,
    where both impls have one, ``graph_speedup_vs_<b>`` from the CUDA-graph (device-only) times,
    which is the kernel-to-kernel ratio at short shapes, where do_bench also counts host time."""
    for impls in _groups(rows).values():
        for r in impls.values():
            for b, base in ((b, impls.get(b)) for b in BASELINES):
                if base is None or b == r["impl"]:
                    continue
                for field, prefix in (("device_us", "speedup_vs_"), ("graph_us", "graph_speedup_vs_")):
                    if r.get(field) and base.get(field):
                        r[prefix + b] = base[field] / r[field]


def plan(opts) -> list[tuple]:
    """(estimator, N, T, layout, dtype) cells in run order (estimator-major)."""
    if opts.shapes:
        shapes = [tuple(int(v) for v in s.lower().split("x")) for s in opts.shapes.split(",")]
        nt_shapes = shapes
    elif opts.cpu:
        shapes, nt_shapes = list(CPU_SHAPES), list(CPU_SHAPES)
    elif opts.quick:
        shapes, nt_shapes = list(QUICK_SHAPES), list(QUICK_NT_SHAPES)
    else:
        shapes = [(N, T) for N in GRID_N for T in GRID_T] + list(LONG_T)
        nt_shapes = shapes
    layouts = {"tn": ["tn"], "nt": ["nt"], "both": ["tn", "nt"]}.get(opts.layout)
    cells = []
    for est in opts.estimators:
        for dt in opts.dtypes:
            for N, T in shapes:
                for layout in layouts or ["tn"] + (["nt"] if est in NT_ESTIMATORS and (N, T) in nt_shapes else []):
                    cells.append((est, N, T, layout, dt))
    if opts.quick and not opts.shapes:  # shape-major: a time-budget cut drops shapes, not estimators
        order = {s: i for i, s in enumerate(shapes)}
        cells.sort(key=lambda c: order[(c[1], c[2])])
    return cells


def environment(opts, copy_gbs) -> dict:
    """:func:`rltrain.machine.machine_info` of ``opts.device`` and this benchmark's own keys: the
    device option, the checkout's commit (the kernels measured), the copy bandwidth, the GPU's SMs and
    L2, the tolerances and the command line."""
    meta = dict(
        machine_info(opts.device), device=opts.device, commit=git_commit(ROOT), copy_gbs=copy_gbs,
        interpret=os.environ.get("TRITON_INTERPRET", "0"),
        argv=" ".join(recorded_args(sys.argv, ROOT)), loop_max_t=LOOP_MAX_T, max_cell_gib=MAX_CELL_BYTES / 2**30,
        tolerance=TOL, warmup_ms=opts.warmup_ms, rep_ms=opts.rep_ms, check_envs=opts.check_envs,
    )
    if torch.device(opts.device).type == "cuda":
        p = torch.cuda.get_device_properties(opts.device)
        meta.update(sms=p.multi_processor_count, l2_mib=getattr(p, "L2_cache_size", 0) / 2**20)
    return meta


CSV_FIELDS = ["estimator", "impl", "N", "T", "layout", "dtype", "status", "device_us", "host_us", "captured_us",
              "graph_us", "gbps",
              "frac_of_copy", "graph_frac_of_copy", "rel_err", "ref_kind", "speedup_vs_sequential", "speedup_vs_compile",
              "speedup_vs_loop", "graph_speedup_vs_sequential", "graph_speedup_vs_compile", "bytes", "first_call_s", "config", "n_input_sets", "check_envs", "note", "error"]


def write_results(out: Path, meta: dict, rows: list[dict], *, final: bool = False, plots: bool = True) -> None:
    """``out`` (JSON: ``{meta, rows}``, written atomically) and its rows as CSV next to it (``out`` with
    ``.csv``); at the end of a run (``final``) the plots ``<out stem>_speedup_<estimator>.png``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(dict(meta=meta, rows=rows), indent=1, default=str))
    tmp.replace(out)
    with open(out.with_suffix(".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    if final and plots:
        try:
            plot_all(rows, out.parent, prefix=out.stem)
        except Exception as exc:  # noqa: BLE001 - plots are optional
            print(f"plotting failed: {type(exc).__name__}: {exc}")


def _fmt_us(r: Optional[dict]) -> str:
    if r is None:
        return "-"
    if r.get("status") == "ok":
        v = r["device_us"]
        return f"{v:.1f}" if v < 1000 else f"{v:.0f}"
    return r.get("status", "?") if r.get("status") != "skipped" else "skip"


def _fmt(v, spec: str) -> str:
    return "-" if v is None else spec.format(v)


def _fmt_x(v) -> str:
    return "-" if v is None else (f"{v:.1f}x" if v < 100 else f"{v:.0f}x")


def _groups(rows):
    cells = {}
    for r in rows:
        cells.setdefault((r["estimator"], r["dtype"], r["layout"], r["N"], r["T"]), {})[r["impl"]] = r
    return cells


def summary(meta: dict, rows: list[dict], max_lines: int = 90) -> str:
    cells = _groups(rows)
    head = (f"{meta.get('device_name')} torch {meta.get('torch')} triton {meta.get('triton')} "
            f"copy {meta.get('copy_gbs') or 0:.0f} GB/s")
    out = [head, f"{'estimator':<19} {'NxT':>12} {'lay':>3} {'triton':>8} {'seq':>8} {'compile':>8} {'loop':>8} "
                 f"{'before':>8} {'x seq':>6} {'x comp':>6} {'x loop':>6} {'x bef':>6} {'%copy':>5} {'host':>5} "
                 f"{'capt':>5}"]
    if len(cells) <= max_lines:
        for (est, dt, layout, N, T), impls in cells.items():
            tr = impls.get("triton", {})
            frac = tr.get("frac_of_copy")
            out.append(
                f"{est[:19]:<19} {f'{N}x{T}':>12} {layout:>3} "
                + " ".join(f"{_fmt_us(impls.get(i)):>8}" for i in IMPLS + ("before",)) + " "
                + " ".join(f"{_fmt_x(tr.get(f'speedup_vs_{b}')):>6}" for b in BASELINES)
                + f" {_fmt(frac, '{:.0%}'):>5} {_fmt(tr.get('host_us'), '{:.0f}'):>5}"
                + f" {_fmt(tr.get('captured_us'), '{:.0f}'):>5}")
    else:  # per estimator: geometric-mean speedups over the cells where both ran
        out = [head, f"{'estimator':<19} {'cells':>5} " + " ".join(f"{'gm x ' + b:>14}" for b in BASELINES)
               + f" {'med %copy':>9}"]
        for est in dict.fromkeys(k[0] for k in cells):
            trs = [c.get("triton", {}) for k, c in cells.items() if k[0] == est]
            gm = []
            for b in BASELINES:
                v = [t[f"speedup_vs_{b}"] for t in trs if t.get(f"speedup_vs_{b}")]
                gm.append(f"{math.exp(sum(map(math.log, v)) / len(v)):.2f}x ({len(v)})" if v else "-")
            fr = [t["frac_of_copy"] for t in trs if t.get("frac_of_copy")]
            out.append(f"{est[:19]:<19} {len(trs):>5} " + " ".join(f"{g:>14}" for g in gm)
                       + f" {_fmt(statistics.median(fr) if fr else None, '{:.0%}'):>9}")
    bad = [r for r in rows if r.get("status") in ("error", "WRONG")]
    out.append(f"{len(rows)} rows, {sum(r.get('status') == 'ok' for r in rows)} ok, "
               f"{sum(r.get('status') == 'skipped' for r in rows)} skipped, {len(bad)} error/WRONG"
               + (f", {len(meta['not_run'])} cells not started (time budget)" if meta.get("not_run") else ""))
    for r in bad[:10]:
        out.append(f"  {r['status']}: {r['estimator']} {r['impl']} {r['N']}x{r['T']} {r['layout']} "
                   f"{r.get('error', '')[:120]} rel_err={r.get('rel_err')}")
    return "\n".join(out)


def run(opts) -> dict:
    """Run the benchmark described by ``opts`` (see :func:`parse_args`); returns ``{meta, rows}``."""
    started = time.perf_counter()
    out = Path(opts.out)
    torch.manual_seed(opts.seed)
    copy_gbs = None
    if not opts.no_copy:
        try:
            copy_gbs = copy_bandwidth(opts.device, opts.copy_bytes, opts.warmup_ms, opts.rep_ms)
        except Exception as exc:  # noqa: BLE001
            print(f"copy bandwidth failed: {exc}")
    meta = environment(opts, copy_gbs)
    rows: list[dict] = []
    cells = plan(opts)
    not_run = []
    last_est = None
    for i, (est, N, T, layout, dt) in enumerate(cells):
        if opts.time_budget is not None and time.perf_counter() - started > opts.time_budget:
            not_run = [f"{c[0]} {c[1]}x{c[2]} {c[3]} {c[4]}" for c in cells[i:]]
            break
        if last_est is not None and est != last_est:
            write_results(out, meta, rows)
        last_est = est
        t0 = time.perf_counter()
        cell_rows = run_cell(est, N, T, layout, dt, opts.impls, opts, copy_gbs)
        rows += cell_rows
        if opts.verbose:
            st = " ".join(f"{r['impl']}={_fmt_us(r)}" for r in cell_rows)
            print(f"[{time.perf_counter() - started:6.0f}s] {est} {N}x{T} {layout} {dt}: {st} "
                  f"({time.perf_counter() - t0:.1f}s)", flush=True)
        write_results(out, meta, rows)  # incremental: a timeout still leaves results
    meta["not_run"] = not_run
    meta["elapsed_s"] = round(time.perf_counter() - started, 1)
    write_results(out, meta, rows, final=True, plots=opts.plots)
    print(summary(meta, rows), flush=True)
    print(f"elapsed {meta['elapsed_s']} s; results in {out}", flush=True)
    return dict(meta=meta, rows=rows)


def render(path: Path) -> dict:
    """Recompute the ratios of a results file and rewrite it and its CSV (no GPU needed)."""
    data = json.loads(Path(path).read_text())
    for row in data["rows"]:
        add_bandwidth(row, data["meta"].get("copy_gbs"))
    add_ratios(data["rows"])
    write_results(Path(path), data["meta"], data["rows"], final=True, plots=False)
    return data
