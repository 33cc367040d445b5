"""The kernel benchmarks' cells: random inputs of an estimator's public signature, the bytes a call
moves, and the check of a call's outputs against the float64 reference before it is timed
(``checked_times``, the sweeps' and the rl-triton comparison's cell)."""

from __future__ import annotations

import itertools
import math
from typing import Callable, Optional

import torch

import kernels
from kernels import reference as R
from rltrain.bench.timing import sync, time_us

ESTIMATORS = tuple(kernels.ESTIMATORS)

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


def cell_inputs(est, N, T, layout, dtype_name, device, seed, prepare=None):
    """One set of a cell's random inputs, changed by ``prepare`` if given."""
    args, kw = make_inputs(est, N, T, layout, DTYPES[dtype_name], device, seed)
    return (args, kw) if prepare is None else prepare(args, kw)


def _checked_cell(est, N, T, layout, dtype_name, device, check_envs, prepare=None):
    """One cell's random inputs (changed by ``prepare`` if given) and their float64 reference."""
    args, kw = cell_inputs(est, N, T, layout, dtype_name, device, 0, prepare)
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
    sets = [(args, kw)] + [cell_inputs(est, N, T, layout, dtype_name, device, INPUT_SET_SEED_STEP * i, prepare)
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
