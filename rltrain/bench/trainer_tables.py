"""The trainer benchmark's tables (``scripts/bench_trainer.py``): the console table printed at the end of a
run, and the Markdown of a results file (``results_tables.py trainer``): steps/s against raw EnvPool per
run and each case's phase table; a case of several turns shows the median and the range."""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

from rltrain.bench.formats import machine
from rltrain.timers import OVERLAPPED


def spread(entry: Dict, key: str) -> Optional[Tuple[float, Optional[float], Optional[float]]]:
    """``key``'s figure in a run entry or a case's ``raw``: (median, min, max) over the turns of a multi-turn
    entry, (value, None, None) of a single run; None where the entry has no such figure."""
    if f"{key}_median" in entry:
        return entry[f"{key}_median"], entry[f"{key}_min"], entry[f"{key}_max"]
    return (entry[key], None, None) if key in entry else None


def median(entry: Dict, key: str) -> float:
    """``key``'s figure (a multi-turn entry: its median over the turns); NaN where absent."""
    got = spread(entry, key)
    return float("nan") if got is None else got[0]


def steps_cell(entry: Dict, key: str = "sps") -> str:
    """Steps/s: ``12,345``; over several turns the median and the range, ``12,345 (12,001-12,678)``."""
    value, lo, hi = spread(entry, key)
    return f"{value:,.0f}" if lo is None else f"{value:,.0f} ({lo:,.0f}-{hi:,.0f})"


def percent_cell(entry: Dict, key: str) -> str:
    """A ratio in percent: ``92%``; over several turns the median and the range, ``92.5% (88.1-93.0)``;
    empty where absent."""
    got = spread(entry, key)
    if got is None:
        return ""
    value, lo, hi = got
    return f"{100 * value:.0f}%" if lo is None else f"{100 * value:.1f}% ({100 * lo:.1f}-{100 * hi:.1f})"


def turns_label(label: str, entry: Dict, turns: int) -> str:
    """A run's label, with how many of the case's ``turns`` gave figures where some did not."""
    ran = sum("sps" in run for run in entry.get("turns", ()))
    return f"{label} ({ran} of {turns} turns)" if "turns" in entry and ran < turns else label


def table(results: Dict) -> str:
    def pct(x):
        return f"{100 * x:.1f}%" if isinstance(x, float) and math.isfinite(x) else "-"

    def span(entry, key, scale=100.0, unit="%", digits=1):  # a multi-turn entry's range, after its row
        got = spread(entry, key)
        if got is None or got[1] is None:
            return ""
        return f"  {scale * got[1]:,.{digits}f}-{scale * got[2]:,.{digits}f}{unit}"
    w = max([16, *(len(name) + 2 for name in results["cases"])])  # the case column
    lines = [f"{'case':<{w}}{'run':<38}{'steps/s':>12}{'vs raw':>9}{'rollout':>9}{'update ms':>11}{'wait':>8}",
             "-" * (w + 87)]
    for name, case in results["cases"].items():
        if "updates" in case:
            for i, (label, run) in enumerate(case["updates"].items()):
                text = f"{run['update_ms']:>11.1f}" if "update_ms" in run else f"  error: {run['error'][:50]}"
                lines.append(f"{name if i == 0 else '':<{w}}{label:<38}{'':>30}{text}")
            continue
        lines.append(f"{name:<{w}}{'raw EnvPool':<38}{median(case['raw'], 'sps'):>12,.0f}{'100.0%':>9}"
                     + span(case["raw"], "sps", 1.0, " steps/s", 0))
        for label, run in reported_runs(case):
            label = turns_label(label, run, case.get("num_turns", 1))
            if "error" in run:
                lines.append(f"{'':<{w}}{label:<38}  error: {run['error'].splitlines()[-1][:60]}")
                continue
            phases = run["phases_ms"]
            update = phases.get("update", phases.get("learner", float("nan")))
            lines.append(f"{'':<{w}}{label:<38}{median(run, 'sps'):>12,.0f}{pct(median(run, 'vs_raw')):>9}"
                         f"{pct(median(run, 'rollout_vs_raw')):>9}{update:>11.1f}"
                         f"{pct(median(run, 'learner_wait')):>8}" + span(run, "vs_raw"))
    for name, case in results["cases"].items():
        for k, ratio in case.get("torchrun_vs_plain", {}).items():
            turns = ", ".join(f"{r:.3f}" for r in case.get("torchrun_vs_plain_pairs", {}).get(k, []))
            lines.append(f"{name}: torchrun {k} rank(s) / plain steps/s = {ratio:.3f} (each turn: {turns})")
    lines.append("(rollout: PPO's rollout alone vs raw; update: PPO update / IMPALA learner busy ms per iteration;"
                 " wait: IMPALA learner's queue-wait share)")
    if any(case.get("num_turns", 1) > 1 for case in results["cases"].values()):
        lines.append("(several turns: each figure the median over the turns, the range of steps/s or vs raw last)")
    return "\n".join(lines)


def reported_runs(case: Dict):
    """A case's ``(label, run)`` pairs, without the runs that did not start (the time budget was spent)."""
    return [(label, run) for label, run in case["runs"].items() if not run.get("error", "").startswith("skipped")]


TITLES = {"ppo": "PPO", "impala": "IMPALA"}


def main_runs(runs: List[Tuple[str, Dict]]) -> List[Tuple[str, Dict]]:
    """``before`` and the first ``after`` run of a case's ``(label, run)`` pairs, its variants left out."""
    after = next((label for label, _ in runs if label.startswith("after")), None)
    return [(label, run) for label, run in runs if label in ("before", after)]


PHASE_ORDER = ("rollout", "ca", "update", "learner", "learner_queue_wait", "actor", "actor_queue_wait")


def phase_order(phase: str) -> Tuple[bool, int, bool, str]:
    """Sort key of a phase name: the trainers' order of their top-level phases, sub-phases after their phase,
    phases of another thread (``overlapped/...``, beside the iteration) after all of the iteration's own."""
    overlapped, name = phase.startswith(OVERLAPPED), phase.removeprefix(OVERLAPPED)
    top = name.split("/")[0]
    return (overlapped, PHASE_ORDER.index(top) if top in PHASE_ORDER else len(PHASE_ORDER), "/" in name, name)


def is_group(phase: str) -> bool:
    """Whether ``phase`` is a top-level phase (``update``, ``overlapped/rollout``), not a sub-phase."""
    return "/" not in phase.removeprefix(OVERLAPPED)


def markdown(results: Dict, variants: bool = True) -> str:
    """Markdown of a results file: where and when, one throughput row per run, and each case's phase
    table (one row per run: its steps per iteration and each phase's ms per iteration -- IMPALA: per
    learner update -- sub-phases after their phase).  A case of several turns: one row per label, each
    figure the median over the turns, steps/s and ratios with their range in brackets, the phases the
    median.  Without ``variants``: before and after alone."""
    meta = results["meta"]
    lines = [machine(meta), "",
             "| case | run | steps/s | vs raw EnvPool | rollout vs raw | learner waiting |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    trainer_cases = {n: c for n, c in results["cases"].items() if "runs" in c}
    for name, case in trainer_cases.items():
        title = f"{TITLES[case['trainer']]} {case['env_id']} {case['num_envs']} x {case['num_steps']}"
        title += f"; median (range) of {case['num_turns']} turns" if case.get("num_turns", 1) > 1 else ""
        lines.append(f"| {title} | raw EnvPool | {steps_cell(case['raw'])} | 100% | | |")
        for label, run in (reported_runs(case) if variants else main_runs(reported_runs(case))):
            label = turns_label(label, run, case.get("num_turns", 1))
            if "error" in run:
                lines.append(f"| | {label} | {run['error'].splitlines()[-1][:60]} | | | |")
                continue
            lines.append(f"| | {label} | {steps_cell(run)} | {percent_cell(run, 'vs_raw')} | "
                         f"{percent_cell(run, 'rollout_vs_raw')} | {percent_cell(run, 'learner_wait')} |")
    for name, case in trainer_cases.items():
        runs = {label: run for label, run in case["runs"].items() if "phases_ms" in run}
        if not runs:
            continue
        unit = "ms / iteration" if case["trainer"] == "ppo" else "ms / learner update"
        unit += f", median of {case['num_turns']} turns" if case.get("num_turns", 1) > 1 else ""
        phases = sorted({k for run in runs.values() for k in run["phases_ms"]}, key=phase_order)
        lines += ["", f"**{name}** ({unit})", "",
                  "| run | steps / iteration | " + " | ".join(f"**{k}**" if is_group(k) else k for k in phases)
                  + " | **iteration** |", "| --- |" + " ---: |" * (len(phases) + 2)]
        for label, run in runs.items():
            cells = [run["phases_ms"].get(k) for k in phases] + [run["iteration_ms"]]
            lines.append(f"| {label} | {run['batch_steps']:,} | "
                         + " | ".join("" if v is None else f"{v:.1f}" for v in cells) + " |")
    return "\n".join(lines)
