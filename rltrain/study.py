"""The end-to-end speedup study's arithmetic: per-backend speedups from trainer runs' iterations.

The inputs are a trainer's ``metrics.jsonl`` rows, one per iteration: ``perf/iteration_s`` (its
wall time), the credit-assignment phase (``perf/ca_s`` in PPO, ``perf/learner/ca_s`` in IMPALA:
``CA_KEYS``), the other phases and ``perf/ca_backend_index``.

**Rounds.**  A rotation run (``--ca-backend b0,b1,...``: :mod:`rltrain.credit`) gives iteration
``i`` to backend ``(i - 1) mod B``, so round ``r`` is ``B`` consecutive iterations, one per backend.
The first ``warmup_rounds`` rounds (compilation, CUDA-graph capture, autotuning, allocator growth)
are left out, and their times reported.  With one process per backend (``--separate-processes``)
round ``r`` pairs the ``r``-th iteration of each run after each run's own ``warmup_rounds``.

**Per backend** ``b`` against the baseline (the first backend), over the steady rounds ``r``, with
``t(b, r)`` its credit-assignment seconds and ``T(b, r)`` its iteration's wall seconds:

* share ``s = median_r t(base, r) / T(base, r)``: the baseline's share of its own iteration
  (``share_update``: of its update, the median of the trainer's ``perf/ca_share_update``);
* kernel speedup ``k_b = median_r t(base, r) / t(b, r)``, measured inside training;
* Amdahl's prediction ``1 / ((1 - s) + s / k_b)``;
* measured end-to-end speedup: the median of the per-round ratios ``T(base, r) / T(b, r)``, with
  their interquartile range;
* ``other_ratio = median_r (T(base, r) - t(base, r)) / (T(b, r) - t(b, r))``: how much faster all but
  credit assignment ran beside ``b``.  It is 1 where only credit assignment differs, and then the
  measured speedup is the prediction; otherwise it is the measured effect behind the difference.
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, List, Mapping, Sequence, Tuple

import numpy as np

from rltrain.timers import amdahl_speedup

__all__ = ["CA_KEYS", "quartiles", "rotation_rounds", "separate_rounds", "summarize", "stacked_phases",
           "markdown_table", "compact_table", "flat_record"]

CA_KEYS = {"ppo": "perf/ca_s", "impala": "perf/learner/ca_s"}
# phases the trainers time without sub-phases; every other stacked phase is a "perf/<group>/<phase>_s"
_TOP_LEVEL_PHASES = ("perf/ca_s", "perf/learner_queue_wait_s")


def quartiles(xs: Iterable[float]) -> Tuple[float, float, float]:
    """``(q25, median, q75)`` of ``xs`` (linear interpolation); NaNs where ``xs`` is empty."""
    xs = np.asarray(list(xs), dtype=float)
    if xs.size == 0:
        return math.nan, math.nan, math.nan
    q25, q50, q75 = np.percentile(xs, [25, 50, 75])
    return float(q25), float(q50), float(q75)


def _median(xs: Iterable[float]) -> float:
    return quartiles(xs)[1]


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.inf


def rotation_rounds(rows: Sequence[Mapping], num_backends: int,
                    warmup_rounds: int) -> Tuple[List[List[Mapping]], List[Mapping]]:
    """Split a rotation run's rows into ``(steady, warmup)``: ``steady[b][r]`` is backend ``b``'s
    iteration in steady round ``r`` (complete rounds only), ``warmup`` the rows left out.  Raises
    ``ValueError`` if an iteration ran another backend than the rotation gives it."""
    for i, row in enumerate(rows):
        if row.get("perf/ca_backend_index", 0) != i % num_backends:
            raise ValueError(f"iteration {i + 1} ran backend {row.get('perf/ca_backend_index')}, "
                             f"the rotation of {num_backends} gives it {i % num_backends}")
    skip = warmup_rounds * num_backends
    end = skip + max(0, (len(rows) - skip) // num_backends) * num_backends
    steady = [list(rows[skip + b:end:num_backends]) for b in range(num_backends)]
    return steady, list(rows[:skip])


def separate_rounds(runs: Sequence[Sequence[Mapping]],
                    warmup_rounds: int) -> Tuple[List[List[Mapping]], List[Mapping]]:
    """``(steady, warmup)`` of one run per backend: each run's first ``warmup_rounds`` iterations
    left out, the rest paired by position (as many rounds as the shortest run has)."""
    rounds = min((len(r) - warmup_rounds for r in runs), default=0)
    steady = [list(r[warmup_rounds:warmup_rounds + max(rounds, 0)]) for r in runs]
    return steady, [row for r in runs for row in r[:warmup_rounds]]


def stacked_phases(phases: Mapping[str, float]) -> Dict[str, float]:
    """The phases that add up to an iteration, from a row's ``perf/*_s`` values: the timers' leaf
    phases (``perf/<group>/<phase>_s``; the actors' excepted, they run beside the learner), PPO's
    ``ca`` and IMPALA's queue wait.  Keys lose ``perf/`` and ``_s``."""
    out = {}
    for k, v in phases.items():
        if (k.count("/") == 2 and not k.startswith("perf/actor/")) or k in _TOP_LEVEL_PHASES:
            out[k[len("perf/"):-len("_s")]] = v
    return out


def summarize(steady: Sequence[Sequence[Mapping]], names: Sequence[str], ca_key: str) -> List[dict]:
    """One result per backend (module docstring); ``names[0]`` is the baseline."""
    base = steady[0]
    t_base = [r[ca_key] for r in base]
    T_base = [r["perf/iteration_s"] for r in base]
    share = _median(t / T for t, T in zip(t_base, T_base))
    share_update = _median(r.get("perf/ca_share_update", math.nan) for r in base)
    out = []
    for name, rows in zip(names, steady):
        t = [r[ca_key] for r in rows]
        T = [r["perf/iteration_s"] for r in rows]
        k = _median(_ratio(tb, tk) for tb, tk in zip(t_base, t))
        q25, measured, q75 = quartiles(Tb / Tk for Tb, Tk in zip(T_base, T))
        keys = set.intersection(*(set(r) for r in rows)) if rows else set()
        phases = {key: _median(r[key] for r in rows) for key in sorted(keys)
                  if key.startswith("perf/") and key.endswith("_s")}
        out.append({
            "backend": name, "baseline": names[0], "rounds": len(rows),
            "iteration_s": _median(T), "ca_s": _median(t),
            "share": share, "share_update": share_update, "kernel_speedup": k,
            "predicted_speedup": amdahl_speedup(share, k) if rows else math.nan,
            "measured_speedup": measured, "measured_q25": q25, "measured_q75": q75,
            "other_ratio": _median(_ratio(Tb - tb, Tk - tk) for Tb, tb, Tk, tk in zip(T_base, t_base, T, t)),
            "phases_s": phases,
        })
    return out


def flat_record(record: Mapping) -> Dict[str, object]:
    """A result line for CSV: nested phase seconds become ``phase_<name>_ms`` columns."""
    flat = {k: v for k, v in record.items() if not isinstance(v, (dict, list))}
    for k, v in stacked_phases(record.get("phases_s", {})).items():
        flat[f"phase_{k.replace('/', '_')}_ms"] = 1e3 * v
    return flat


def _fmt(x: float, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def markdown_table(records: Sequence[Mapping]) -> str:
    """Every point and backend: times, share, k, predicted and measured speedups, check errors."""
    lines = ["| point | backend | iteration ms | CA ms | share s (iteration / update) | k | predicted | "
             "measured [IQR] | other ratio | rel err |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in records:
        if "error" in r:
            lines.append(f"| {r['point']} | {r.get('backend', '-')} | failed: {r['error']} | | | | | | | |")
            continue
        share = f"{_fmt(100 * r['share'], '.2f')}% / {_fmt(100 * r['share_update'], '.1f')}%"
        measured = (f"{_fmt(r['measured_speedup'], '.3f')} [{_fmt(r['measured_q25'], '.3f')}, "
                    f"{_fmt(r['measured_q75'], '.3f')}]")
        lines.append(f"| {r['point']} | {r['backend']} | {_fmt(1e3 * r['iteration_s'], '.2f')} | "
                     f"{_fmt(1e3 * r['ca_s'], '.3f')} | {share} | {_fmt(r['kernel_speedup'], '.3g')} | "
                     f"{_fmt(r['predicted_speedup'], '.3f')} | {measured} | {_fmt(r['other_ratio'], '.3f')} | "
                     f"{_fmt(r.get('rel_err', math.nan), '.1e')} |")
    return "\n".join(lines)


def compact_table(records: Sequence[Mapping]) -> str:
    """One line per point: the baseline's share, then ``measured (predicted)`` for each other backend."""
    points: Dict[str, List[Mapping]] = {}
    for r in records:
        points.setdefault(r["point"], []).append(r)
    others = []
    for rs in points.values():
        for r in rs:
            if "error" not in r and r["backend"] != r["baseline"] and r["backend"] not in others:
                others.append(r["backend"])
    lines = ["| point | s | " + " | ".join(f"{b} measured (predicted)" for b in others) + " |",
             "|---|---:|" + "---:|" * len(others)]
    for point, rs in points.items():
        ok = {r["backend"]: r for r in rs if "error" not in r}
        if not ok:
            lines.append(f"| {point} | failed: {rs[0]['error']} |" + " |" * len(others))
            continue
        s = next(iter(ok.values()))["share"]
        cells = [f"{_fmt(ok[b]['measured_speedup'], '.3f')} ({_fmt(ok[b]['predicted_speedup'], '.3f')})"
                 if b in ok else "-" for b in others]
        lines.append(f"| {point} | {_fmt(100 * s, '.1f')}% | " + " | ".join(cells) + " |")
    return "\n".join(lines)
