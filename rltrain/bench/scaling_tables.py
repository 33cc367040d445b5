"""The multi-GPU scaling benchmark's arithmetic and table (``scripts/bench_scaling.py``): each row's efficiency
and all-reduce share, and the Markdown of a results file (``results_tables.py scaling``)."""

from __future__ import annotations

from typing import Dict, List, Optional

from rltrain.bench.formats import machine
from rltrain.bench.trainer_tables import TITLES, is_group, phase_order


def allreduce_ms(row: Dict) -> Optional[float]:
    """ms per iteration in the gradient all-reduce (``update/allreduce``, ``learner/allreduce``: the slowest
    rank's; ``rank0/...`` left out); None where the run had none (one rank: no DDP)."""
    ms = [v for k, v in row.get("phases_ms", {}).items() if k.endswith("/allreduce") and not k.startswith("rank0/")]
    return sum(ms) if ms else None


def allreduce_share(row: Dict) -> Optional[float]:
    """:func:`allreduce_ms` / the iteration's ms; None where the run had no all-reduce."""
    ms = allreduce_ms(row)
    return ms / row["iteration_ms"] if ms is not None and row.get("iteration_ms") else None


def add_scaling(rows: List[Dict]) -> List[Dict]:
    """Each measured row gets ``efficiency`` = sps / (ranks * sps of its case's 1-rank row; None without
    one) and ``allreduce_share``."""
    base = {r["case"]: r["sps"] for r in rows if r["ranks"] == 1 and r.get("sps")}
    for r in rows:
        if "sps" in r:
            r["efficiency"] = r["sps"] / (r["ranks"] * base[r["case"]]) if r["case"] in base else None
            r["allreduce_share"] = allreduce_share(r)
    return rows


def fmt(value: Optional[float], spec: str) -> str:
    return "-" if value is None else spec.format(value)


def markdown(results: Dict) -> str:
    """Where and when; one row per case and K: steps/s, efficiency, iteration and top-level phases (ms,
    the slowest rank's), the all-reduce ms and share, peak GPU memory; the fault check's line."""
    m = results["meta"]
    lines = [machine(m), "",
             "| case (per rank) | K | steps/s | efficiency | iteration ms | phases ms | all-reduce ms | "
             "all-reduce share | peak GPU GiB |", "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for name, case in results["cases"].items():
        title = f"{TITLES[case['trainer']]} {case['env_id']} {case['num_envs_per_rank']} x {case['num_steps']}"
        for r in (r for r in results["rows"] if r["case"] == name):
            if "sps" not in r:
                lines.append(f"| {title} | {r['ranks']} | {r.get('error', '?').splitlines()[-1][:60]} | | | | | | |")
                continue
            phases = " · ".join(f"{k} {r['phases_ms'][k]:.1f}" for k in sorted(r["phases_ms"], key=phase_order)
                                if is_group(k))
            cells = [f"{r['sps']:,.0f}", fmt(r.get("efficiency"), "{:.0%}"), f"{r['iteration_ms']:.1f}", phases,
                     fmt(allreduce_ms(r), "{:.1f}"), fmt(r.get("allreduce_share"), "{:.1%}"),
                     fmt(r.get("gpu_mem_peak_gib"), "{:.2f}")]
            lines.append(f"| {title} | {r['ranks']} | " + " | ".join(cells) + " |")
            title = ""
    f = results.get("fault_check")
    if f and "exit_code" in f:
        lines += ["", f"Fault check: PPO CartPole-v1 on {f['ranks']} ranks, rank {f['killed_rank']} killed with "
                  f"SIGKILL after the first checkpoint: every process exited {f['all_exited_s']:.1f} s later "
                  f"(collective timeout {f['dist_timeout_s']:.0f} s), exit code {f['exit_code']}, failure summary "
                  f"{'names' if f['failed_rank_named'] else 'does not name'} rank {f['killed_rank']}; "
                  f"resumed on {f['ranks']} ranks from global step {f.get('checkpoint_step')}: "
                  f"{'continued' if f.get('resume_continued') else 'did not continue'}."]
    elif f:
        lines += ["", f"Fault check: {f.get('error', '?').splitlines()[-1][:100]}"]
    return "\n".join(lines)
