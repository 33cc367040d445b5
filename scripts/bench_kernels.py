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
from typing import Callable, Optional

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import kernels  # noqa: E402
from kernels import reference as R  # noqa: E402
from kernels._triton import runs_triton, triton  # noqa: E402
from kernels.estimators import MODULES  # noqa: E402
from kernels.launch import LaunchConfig, choose_config  # noqa: E402
from kernels.launch.heuristic import device_info  # noqa: E402
from kernels.backends import get_backend  # noqa: E402
from rltrain.machine import machine_info  # noqa: E402

ESTIMATORS = tuple(kernels.ESTIMATORS)
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
L2_BYTES = 60 * 2**20
TOL = {"f32": 1e-4, "bf16": 2e-2}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}

# Per estimator: positional and keyword tensor arguments as (name, kind), and fixed keywords.
# kinds: f = normal, lr = 0.3 * normal, term ~5%, trunc ~2%, done ~7% (bool), vec = [N] normal,
# beta = uniform [0.5, 1).
SPECS = {
    "gae": dict(pos=[("rewards", "f"), ("values", "f"), ("terminated", "term"), ("bootstrap_value", "vec")],
                kw=[("truncated", "trunc")]),
    "vtrace": dict(pos=[("rewards", "f"), ("values", "f"), ("log_rhos", "lr"), ("terminated", "term"),
                        ("bootstrap_value", "vec")], kw=[("truncated", "trunc")]),
    "retrace": dict(pos=[("rewards", "f"), ("q_taken", "f"), ("expected_next_q", "f"), ("log_rhos", "lr"),
                         ("terminated", "term")], kw=[("truncated", "trunc")]),
    "lambda_returns": dict(pos=[("rewards", "f"), ("next_values", "f"), ("terminated", "term")],
                           kw=[("truncated", "trunc")]),
    "discounted_returns": dict(pos=[("rewards", "f"), ("terminated", "term")],
                               kw=[("truncated", "trunc"), ("next_values", "f"), ("bootstrap_value", "vec")]),
    "eligibility_traces": dict(pos=[("inputs", "f"), ("dones", "done")], kw=[]),
    "episodic_prefix_sum": dict(pos=[("inputs", "f"), ("dones", "done")], kw=[]),
    "linear_scan": dict(pos=[("alpha", "f"), ("beta", "beta")], kw=[], fixed=dict(reverse=True)),
}
NUM_OUT = {op: 2 if op in ("gae", "vtrace") else 1 for op in ESTIMATORS}


# --------------------------------------------------------------------------- #
# inputs
# --------------------------------------------------------------------------- #
def cell_bytes(est: str, N: int, T: int, dtype: torch.dtype) -> int:
    """Bytes of one input set plus the outputs (flags are bool, 1 byte)."""
    size = torch.finfo(dtype).bits // 8
    spec = SPECS[est]
    total = 0
    for _, kind in spec["pos"] + spec["kw"]:
        total += N * size if kind == "vec" else N * T * (1 if kind in ("term", "trunc", "done") else size)
    return total + NUM_OUT[est] * N * T * size


def make_inputs(est: str, N: int, T: int, layout: str, dtype: torch.dtype, device, seed: int):
    """Random inputs of the public signature: ``(args, kwargs)``; ``layout`` "tn" = [T, N], "nt" = [N, T]."""
    gen = torch.Generator(device=device).manual_seed(seed)
    shape = (T, N) if layout == "tn" else (N, T)

    def draw(kind):
        if kind == "vec":
            return torch.randn(N, generator=gen, device=device).to(dtype)
        if kind in ("term", "trunc", "done"):
            p = {"term": 0.05, "trunc": 0.02, "done": 0.07}[kind]
            return torch.rand(shape, generator=gen, device=device) < p
        if kind == "beta":
            return (0.5 + 0.5 * torch.rand(shape, generator=gen, device=device)).to(dtype)
        x = torch.randn(shape, generator=gen, device=device)
        return (0.3 * x if kind == "lr" else x).to(dtype)

    spec = SPECS[est]
    args = [draw(kind) for _, kind in spec["pos"]]
    kwargs = {name: draw(kind) for name, kind in spec["kw"]}
    kwargs.update(spec.get("fixed", {}))
    kwargs["time_dim"] = 0 if layout == "tn" else 1
    return args, kwargs


def _env_slice(x, k: int, layout: str):
    """First ``k`` environments of a tensor argument, time-major (vectors: first k entries)."""
    if not isinstance(x, torch.Tensor):
        return x
    if x.dim() == 1:
        return x[:k]
    return x[:, :k] if layout == "tn" else x[:k].t()


def _out_slice(o: torch.Tensor, k: int, layout: str) -> torch.Tensor:
    return o[:, :k] if layout == "tn" else o[:k].t()


def reference_outputs(est, args, kwargs, layout, check_envs, ref_max_t, device):
    """Float64 reference on the first ``check_envs`` environments: ``(outputs, kind)``.

    ``kernels.reference`` (a Python loop over T) on the CPU when T <= ref_max_t; beyond, the eager
    float64 log-step scan of the baselines' pairs on the device (an independent algorithm from the
    fused kernels, itself checked against ``kernels.reference`` by the tests)."""
    k = min(check_envs, args[0].shape[1 if layout == "tn" else 0])
    T = args[0].shape[0 if layout == "tn" else 1]
    sl_args = [_env_slice(a, k, layout) for a in args]
    sl_kw = {n: _env_slice(v, k, layout) for n, v in kwargs.items() if n != "time_dim"}
    if T <= ref_max_t:
        up = lambda x: x.detach().to("cpu", torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else (x.cpu() if isinstance(x, torch.Tensor) else x)  # noqa: E731
        out = getattr(R, est)(*[up(a) for a in sl_args], **{n: up(v) for n, v in sl_kw.items()})
        kind = "reference"
    else:
        from kernels.baselines import compiled

        up = lambda x: x.detach().to(torch.float64).contiguous() if isinstance(x, torch.Tensor) and x.is_floating_point() else x  # noqa: E731
        out = getattr(compiled.EAGER, est)(*[up(a) for a in sl_args], **{n: up(v) for n, v in sl_kw.items()})
        kind = "logstep-f64"
    out = out if isinstance(out, tuple) else (out,)
    return tuple(o.to("cpu", torch.float64) for o in out), k, kind


def rel_err(outs, refs, k, layout) -> float:
    """Worst relative error (2-norm) of an estimator's output, or tuple of outputs, against the
    reference outputs of its first ``k`` environments; inf if any output is not finite."""
    worst = 0.0
    for o, r in zip(outs if isinstance(outs, tuple) else (outs,), refs):
        if not bool(torch.isfinite(o).all()):
            return math.inf
        s = _out_slice(o, k, layout).to("cpu", torch.float64)
        den = max(torch.linalg.vector_norm(r).item(), 1e-300)
        worst = max(worst, torch.linalg.vector_norm(s - r).item() / den)
    return worst


INPUT_SET_SEED_STEP = 7919  # input set i of a cell is seeded base + INPUT_SET_SEED_STEP * i


def _cell_inputs(est, N, T, layout, dtype_name, device, seed, prepare=None):
    """One set of a cell's random inputs, changed by ``prepare`` if given."""
    args, kw = make_inputs(est, N, T, layout, DTYPES[dtype_name], device, seed)
    return (args, kw) if prepare is None else prepare(args, kw)


def _checked_cell(est, N, T, layout, dtype_name, device, check_envs, prepare=None):
    """One cell's random inputs (changed by ``prepare`` if given) and their float64 reference."""
    args, kw = _cell_inputs(est, N, T, layout, dtype_name, device, 0, prepare)
    return args, kw, reference_outputs(est, args, kw, layout, check_envs, 16384, device)


def checked_times(calls: dict, est: str, N: int, T: int, layout: str, dtype_name: str, rounds: int,
                  warmup_ms: float, rep_ms: float, device="cuda", check_envs: int = 64,
                  prepare: Optional[Callable] = None, timer: Optional[Callable] = None,
                  input_sets: int = 1) -> dict:
    """Interleaved timings of several implementations of one cell, on the same inputs: ``calls``
    maps a label to ``f(args, kwargs) -> outputs`` (``kernels.<est>``'s inputs and outputs, e.g.
    one block shape, or another library behind an adapter). Each round checks every call against
    the float64 reference, then times it. ``{label: [us, or "WRONG <err>" / "FAIL <error>", ...]}``:
    a wrong or failing call is recorded, never timed; the others still are (for sweeps).
    ``prepare(args, kwargs) -> (args, kwargs)`` changes the random inputs first (e.g. drops one);
    ``timer(fn) -> us`` replaces ``time_us`` (e.g. ``graph_us`` for short cells). With
    ``input_sets`` > 1 the timed calls take that many input sets in turn (the checked one first, the
    others seeded ``INPUT_SET_SEED_STEP * i``), so that calls replayed without an L2 flush read their inputs from
    DRAM."""
    args, kw, (refs, k, _) = _checked_cell(est, N, T, layout, dtype_name, device, check_envs, prepare)
    sets = [(args, kw)] + [_cell_inputs(est, N, T, layout, dtype_name, device, INPUT_SET_SEED_STEP * i, prepare)
                           for i in range(1, input_sets)]
    times = {label: [] for label in calls}
    for _ in range(rounds):
        for label, call in calls.items():
            try:
                out = call(args, kw)
                sync(device)
                err = rel_err(out, refs, k, layout)
                if not err <= TOL[dtype_name]:
                    times[label].append(f"WRONG {err:.1e}")
                    continue
                cycle = itertools.cycle(sets)
                fn = lambda: call(*next(cycle))  # noqa: E731
                times[label].append(timer(fn) if timer else time_us(fn, device, warmup_ms, rep_ms))
            except Exception as exc:  # noqa: BLE001 - e.g. a block shape over the shared memory
                times[label].append(f"FAIL {type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}")
    return times


# --------------------------------------------------------------------------- #
# timing
# --------------------------------------------------------------------------- #
def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


SLOW_CALL_S = 0.05  # calls slower than this are timed over SLOW_CALLS calls, not do_bench's many


def time_us(fn, device, warmup_ms: float, rep_ms: float, slow_calls: int = 3) -> float:
    """Median device time of one call, in microseconds (do_bench; CUDA events over a few calls when
    one call takes more than ``SLOW_CALL_S``, e.g. the sequential kernel at T = 1M)."""
    if torch.device(device).type == "cuda":
        import triton.testing  # noqa: F401 - do_bench

        sync(device)
        t0 = time.perf_counter()
        fn()
        sync(device)
        if time.perf_counter() - t0 > SLOW_CALL_S:
            times = []
            for _ in range(slow_calls):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            return 1e3 * statistics.median(times)
        return 1e3 * triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
    t0 = time.perf_counter()
    fn()
    min_calls = slow_calls if time.perf_counter() - t0 > SLOW_CALL_S else 5
    times = []
    start = time.perf_counter()
    while len(times) < min_calls or (time.perf_counter() - start < rep_ms / 1e3 and len(times) < 1000):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


def host_us(fn, device, calls: int) -> float:
    """Wall time per call of ``calls`` back-to-back calls (one sync at the end)."""
    fn()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync(device)
    return 1e6 * (time.perf_counter() - t0) / calls


def captured_us(fn, sets: list, device, calls: int) -> float:
    """``host_us`` of ``kernels.capture``'s calls: one captured call per input set, taken in turn (so
    each reads its inputs from DRAM), as a training loop calls the estimator on buffers it refills in
    place. On a GPU each call is one CUDA-graph launch; on the CPU it runs the estimator again."""
    captured = itertools.cycle([kernels.capture(fn, *args, **kwargs) for args, kwargs in sets])
    return host_us(lambda: next(captured)(), device, calls)


GRAPH_CALLS = 20  # calls captured in one CUDA graph for graph_us (at least; one per input set)
MAX_INPUT_SETS = 256


def input_set_count(nbytes: int, device, l2_fills: int = 3, most: int = MAX_INPUT_SETS) -> int:
    """How many input sets a cell of ``nbytes`` rotates through on a GPU: enough to fill the L2
    ``l2_fills`` times (at most ``most``), so that each timed call, and each call replayed from a
    CUDA graph (which has no L2 flush), reads inputs the L2 does not hold. One on the CPU."""
    if torch.device(device).type != "cuda":
        return 1
    return max(1, min(most, math.ceil(l2_fills * L2_BYTES / nbytes)))


def graph_us(fn, device, floor_us: float, calls: int = GRAPH_CALLS, replays: int = 10) -> Optional[float]:
    """Device-only time per call: ``calls`` calls captured in one CUDA graph, replayed (median of
    ``replays``, CUDA events). No host work between the kernels, so for short calls this is the
    device time that ``time_us`` (whose host launch can outlast do_bench's L2 flush) and
    ``host_us`` (host-bound) cannot show. ``None`` on the CPU, when capture fails (e.g. an impl
    that syncs), or when the result is below ``floor_us`` (the byte floor at the copy bandwidth:
    a replay that fast did not do the work).
    """
    if torch.device(device).type != "cuda":
        return None
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm allocator and caches off the capture
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        graph.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(replays):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(1e3 * start.elapsed_time(end) / calls)
        del graph
        us = statistics.median(times)
        return us if us >= floor_us else None
    except Exception:  # noqa: BLE001 - an impl that cannot be captured has no graph time
        torch.cuda.synchronize()
        return None


def copy_bandwidth(device, nbytes: int, warmup_ms: float, rep_ms: float) -> float:
    """Device-to-device copy bandwidth in GB/s (bytes read + bytes written)."""
    n = nbytes // 4
    src = torch.rand(n, device=device)
    dst = torch.empty_like(src)
    us = time_us(lambda: dst.copy_(src), device, warmup_ms, rep_ms)
    del src, dst
    return 2 * n * 4 / (us * 1e-6) / 1e9


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
        sets = [_cell_inputs(est, N, T, layout, dtype_name, device, opts.seed + INPUT_SET_SEED_STEP * i)
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
    device option, the copy bandwidth, the GPU's SMs and L2, the tolerances and the command line."""
    meta = dict(
        machine_info(opts.device), device=opts.device, copy_gbs=copy_gbs,
        interpret=os.environ.get("TRITON_INTERPRET", "0"),
        argv=" ".join(sys.argv), loop_max_t=LOOP_MAX_T, max_cell_gib=MAX_CELL_BYTES / 2**30,
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
            from plot_bench import plot_all
        except ImportError:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from plot_bench import plot_all
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


def render(path: Path) -> dict:
    """Recompute the ratios of a results file and rewrite it and its CSV (no GPU needed)."""
    data = json.loads(Path(path).read_text())
    for row in data["rows"]:
        add_bandwidth(row, data["meta"].get("copy_gbs"))
    add_ratios(data["rows"])
    write_results(Path(path), data["meta"], data["rows"], final=True, plots=False)
    return data


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
