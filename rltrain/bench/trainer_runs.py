"""The trainer benchmark's runs (``scripts/bench_trainer.py``, whose docstring states the method): raw
EnvPool, each trainer run in a subprocess and the figures from its metrics, the runs in turns, and the
results file with its ``meta``."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from rltrain.bench.envpool import raw_throughput
from rltrain.bench.trainer_cases import CASES, Case, quick_case
from rltrain.bench.trainer_tables import phase_order, table
from rltrain.bench.update_microbench import UPDATE_CASES, update_microbench
from rltrain.machine import git_commit, machine_info, recorded_args
from rltrain.runtime import num_cores
from rltrain.timers import OVERLAPPED
from rltrain.trainer import GPU_MEMORY_METRIC

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "docs" / "results" / "trainer_throughput.json"
OVERLAPPED_ROLLOUT = f"perf/{OVERLAPPED}rollout_s"  # PPO --overlap-rollout: the collector thread's rollout


# ---------------------------------------------------------------------------- runs
def trainer_flags(case: Case, extra: Sequence[str]) -> List[str]:
    """The flags of a run of ``case`` (``warmup + timed`` rounds), ``extra`` last; no checkpoints unless
    ``extra`` sets ``--checkpoint-every``."""
    total = case.round_steps * (case.warmup + case.timed)
    checkpoints = [] if "--checkpoint-every" in extra else ["--checkpoint-every", "0"]
    return [*case.flags, "--env-id", case.env_id, "--num-envs", str(case.num_envs), "--num-steps",
            str(case.num_steps), "--total-timesteps", str(total), *checkpoints, *extra]


def trainer_command(root: Path, case: Case, extra: Sequence[str], runs_dir: Path,
                    nproc: int = 0) -> Tuple[List[str], Dict[str, str]]:
    """The command line and environment of ``root``'s trainer for ``case`` (``nproc`` > 0: under ``torchrun
    --standalone --nproc-per-node nproc``), ``root`` first on ``PYTHONPATH``; run it from ``root``."""
    launch = ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc)] if nproc else []
    cmd = [sys.executable, *launch, str(root / "scripts" / f"{case.trainer}.py"), "--runs-dir", str(runs_dir),
           "--no-progress", *trainer_flags(case, extra)]
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return cmd, env


def run_trainer(root: Path, case: Case, extra: Sequence[str], runs_dir: Path, timeout: int, nproc: int = 0) -> Dict:
    """Run ``root``'s trainer for ``case`` in a subprocess (:func:`trainer_command`); the figures from its
    metrics.jsonl (rank 0 writes it)."""
    cmd, env = trainer_command(root, case, extra, runs_dir, nproc)
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s", "flags": list(extra)}
    result: Dict = {"flags": list(extra), "process_s": round(time.perf_counter() - t0, 1)}
    if done.returncode != 0:
        return {**result, "error": f"exit {done.returncode}: {(done.stderr or done.stdout)[-1500:]}"}
    files = list(runs_dir.glob("*/metrics.jsonl"))
    if len(files) != 1:
        return {**result, "error": f"expected one metrics.jsonl under {runs_dir}, found {len(files)}"}
    rows = [json.loads(line) for line in files[0].read_text().splitlines() if line.strip()]
    return {**result, **summarize(case, rows)}


def summarize(case: Case, rows: List[Dict]) -> Dict:
    """Figures of a run from its metrics rows; the rows up to ``warmup`` rounds of steps are left out."""
    cut = case.round_steps * case.warmup
    warm = [r for r in rows if r["global_step"] <= cut]
    timed = [r for r in rows if r["global_step"] > cut]
    if not warm or not timed:
        return {"error": f"{len(rows)} metrics rows: none left after the warm-up of {cut} steps"}
    start = warm[-1]
    steps = timed[-1]["global_step"] - start["global_step"]
    seconds = timed[-1]["time"] - start["time"]
    n = len(timed)
    phases = sorted({k for r in timed for k in r if k.startswith("perf/") and k.endswith("_s")
                     and k != "perf/iteration_s"})
    out = {
        "iterations": n,
        "steps": steps,
        "sps": steps / seconds if seconds > 0 else float("nan"),
        "iteration_ms": 1e3 * sum(r["perf/iteration_s"] for r in timed) / n,
        "batch_steps": steps // n,
        "phases_ms": {k[len("perf/"):-len("_s")]: 1e3 * sum(r.get(k, 0.0) for r in timed) / n for k in phases},
        "final_avg_return": rows[-1].get("charts/avg_episodic_return"),
    }
    memory = [r[GPU_MEMORY_METRIC] for r in timed if GPU_MEMORY_METRIC in r]
    if memory:  # CUDA runs: the peak of the rank that used most
        out["gpu_mem_peak_gib"] = max(memory)
    if case.trainer == "ppo":
        # the rollouts' own seconds: the collector thread's where they overlapped the update (--overlap-rollout;
        # the last iteration starts none), else the iteration's rollout phases
        rollout_s = ([r[OVERLAPPED_ROLLOUT] for r in timed if OVERLAPPED_ROLLOUT in r]
                     or [r.get("perf/rollout_s", 0.0) for r in timed])
        out["rollout_sps"] = len(rollout_s) * (steps / n) / sum(rollout_s) if sum(rollout_s) > 0 else float("nan")
    else:
        wait = sum(r.get("perf/learner_queue_wait_s", 0.0) for r in timed)
        out["learner_wait"] = wait / seconds  # of the learner's wall clock, its logging included
        out["actor_sps"] = sum(r.get("charts/actor_SPS", 0.0) for r in timed) / n
        if any("policy_lag/mean" in r for r in timed):
            out["policy_lag_mean"] = sum(r.get("policy_lag/mean", 0.0) for r in timed) / n
    return out


def raw_envpool(case: Case, threads: int) -> Dict:
    """Raw EnvPool with ``threads`` worker threads (0: each of ``cores / k`` for k in ``case.raw_threads``);
    the fastest is the raw figure, every count tried is kept under ``tried``."""
    counts = [threads] if threads else sorted({max(1, num_cores() // k) for k in case.raw_threads}, reverse=True)
    tried = {}
    for n in counts:
        res = raw_throughput(case.env_id, case.num_envs, n, steps=case.raw_steps, warmup=case.raw_warmup)
        print(json.dumps(res), flush=True)
        tried[res["num_threads"]] = res
    best = max(tried.values(), key=lambda r: r["sps"])
    return {"sps": best["sps"], "num_threads": best["num_threads"], "steps": best["steps"] * case.num_envs,
            "tried": {str(n): r["sps"] for n, r in tried.items()}}


def torchrun_vs_plain(runs: Dict[str, Dict]) -> Dict[str, Dict]:
    """``torchrun_vs_plain``: {K: mean steps/s under torchrun with K ranks / mean steps/s of the plain
    ``after`` runs taken in the same turns}; ``torchrun_vs_plain_pairs``: {K: that ratio in each turn}.
    ``runs``: a case's entries (:func:`label_entry`); empty without torchrun runs."""
    def sps_by_turn(entries: List[Dict]) -> Dict[int, float]:
        return {run.get("turn", 1): run["sps"] for entry in entries for run in entry.get("turns", [entry])
                if "sps" in run}
    plain = sps_by_turn([runs["after"]] if "after" in runs else [])
    ratios: Dict[str, float] = {}
    pairs: Dict[str, List[float]] = {}
    for k in sorted({e["torchrun_ranks"] for e in runs.values() if e.get("torchrun_ranks")}):
        under = sps_by_turn([e for e in runs.values() if e.get("torchrun_ranks") == k])
        if plain and under:
            ratios[str(k)] = (sum(under.values()) / len(under)) / (sum(plain.values()) / len(plain))
            pairs[str(k)] = [under[t] / plain[t] for t in sorted(under) if t in plain]
    return {"torchrun_vs_plain": ratios, "torchrun_vs_plain_pairs": pairs} if ratios else {}


# ---------------------------------------------------------------------------- turns
SPREAD_KEYS = ("sps", "vs_raw", "rollout_sps", "rollout_vs_raw", "learner_wait")


@dataclass(frozen=True)
class Job:
    """One trainer run: ``label`` of case ``name`` in ``turn``, ``root``'s trainer with ``flags`` (``nproc`` > 0:
    under torchrun with that many ranks)."""

    name: str
    label: str
    root: Path
    flags: Tuple[str, ...]
    turn: int
    nproc: int = 0

    @property
    def always(self) -> bool:
        """The first turn's before and after: they run whatever the time budget."""
        return self.turn == 1 and self.label in ("before", "after")


def schedule(cases: Dict[str, Case], turns: Dict[str, int], before: Optional[Path], variants: bool) -> List[Job]:
    """Every run, in order: turn by turn (case ``name`` takes part in ``turns[name]`` of them), every case's
    before, after and torchrun runs, then every case's variants.  Round-robin, so that drift between runs
    hits each label alike; within a turn, the figures the issue asks for first."""
    jobs: List[Job] = []
    for turn in range(1, max(turns.values(), default=0) + 1):
        now = [name for name in cases if turn <= turns[name]]
        for name in now:
            case = cases[name]
            jobs += [Job(name, "before", before, (), turn)] if before is not None else []
            jobs.append(Job(name, "after", ROOT, case.after_flags, turn))
            jobs += [Job(name, f"after, torchrun {k} rank(s)", ROOT, case.after_flags, turn, k)
                     for k in case.torchrun_ranks]
        if variants:
            jobs += [Job(name, label, ROOT, flags, turn) for name in now for label, flags in cases[name].variants]
    return jobs


def spread_of(values: List[float], key: str) -> Dict[str, float]:
    """``{key}_median``, ``{key}_min``, ``{key}_max`` of ``values`` (NaNs left out); empty without any."""
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    if not values:
        return {}
    return {f"{key}_median": statistics.median(values), f"{key}_min": min(values), f"{key}_max": max(values)}


def label_entry(runs: List[Dict], turns: int) -> Dict:
    """The entry of one label from its runs, one per turn so far (each with its ``turn``), of ``turns``: the
    run itself where ``turns`` is 1; else every run (skipped and failed ones included) under ``turns`` and,
    over the turns that ran, the median, min and max of each of :data:`SPREAD_KEYS`, each phase's median ms
    and the median iteration ms.  No turn ran: the last error, a real failure before a skip."""
    if turns == 1:
        return runs[0]
    entry: Dict = {"flags": runs[0]["flags"], "turns": runs}
    entry.update({"torchrun_ranks": runs[0]["torchrun_ranks"]} if "torchrun_ranks" in runs[0] else {})
    ran = [r for r in runs if "sps" in r]
    if not ran:
        failed = [r for r in runs if not r["error"].startswith("skipped")] or runs
        return {**entry, "error": failed[-1]["error"]}
    for key in SPREAD_KEYS:
        entry.update(spread_of([r[key] for r in ran if key in r], key))
    phases = sorted({k for r in ran for k in r["phases_ms"]}, key=phase_order)
    entry.update(batch_steps=ran[0]["batch_steps"],
                 iteration_ms=statistics.median(r["iteration_ms"] for r in ran),
                 phases_ms={k: statistics.median(r["phases_ms"][k] for r in ran if k in r["phases_ms"])
                            for k in phases})
    return entry


def raw_entry(raws: Dict[int, Dict], turns: int) -> Dict:
    """A case's ``raw`` from raw EnvPool's figure in each turn so far ({turn: figure}), of ``turns``: the
    figure itself where ``turns`` is 1; else every turn's (with its ``turn``) under ``turns`` and the median,
    min and max of their steps/s."""
    if turns == 1:
        return raws[1]
    return {**spread_of([r["sps"] for r in raws.values()], "sps"),
            "turns": [{**raw, "turn": turn} for turn, raw in raws.items()]}


# ---------------------------------------------------------------------------- report
BEFORE_ROOT = "<checkout of before_commit>"  # what --before-root stands for in a recorded command


def machine(argv: Sequence[str], before_root: Optional[str], script: str = "scripts/bench_trainer.py") -> Dict:
    """:func:`rltrain.machine.machine_info`, the two checkouts' commits and the command line (``python
    script argv``): the arguments as :func:`rltrain.machine.recorded_args` keeps them, the ``--before-root``
    path, which names a directory of the measuring machine, replaced by :data:`BEFORE_ROOT`."""
    def recorded(a: str) -> str:
        if before_root and a in (before_root, f"--before-root={before_root}"):
            return a.replace(before_root, BEFORE_ROOT)
        return a
    return {**machine_info(), "after_commit": git_commit(ROOT),
            "before_commit": git_commit(Path(before_root)) if before_root else None,
            "command": " ".join(["python", script, *recorded_args(map(recorded, argv), ROOT)])}


def write(results: Dict, path: Path, t_start: float) -> None:
    results["meta"]["wall_s"] = round(time.perf_counter() - t_start, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, default=str) + "\n")


# ---------------------------------------------------------------------------- main
def run(args, argv: Sequence[str]) -> Dict:
    """The benchmark of ``scripts/bench_trainer.py``'s ``Args`` (its command line ``argv``, recorded in the
    results file): every case's runs in turns, the results file written after each run, the table printed
    at the end; a bad case, ``--before-root`` or ``--turns`` exits with ``error: ...``."""
    names = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in names if c not in CASES and c not in UPDATE_CASES]
    if unknown:
        raise SystemExit(f"error: unknown case(s) {unknown}; choose from {sorted([*CASES, *UPDATE_CASES])}")
    out_path = Path(args.out) if args.out else (
        Path(tempfile.gettempdir()) / "trainer_throughput_quick.json" if args.quick else DEFAULT_OUT)
    before = Path(args.before_root).resolve() if args.before_root else None
    if before is not None and not (before / "scripts" / "ppo.py").is_file():
        raise SystemExit(f"error: --before-root {before} has no scripts/ppo.py")
    if args.turns is not None and args.turns < 1:
        raise SystemExit(f"error: --turns must be at least 1, got {args.turns}")
    cases = {name: quick_case(CASES[name]) if args.quick else CASES[name] for name in names if name in CASES}
    turns = {name: args.turns or case.turns for name, case in cases.items()}
    budget = args.time_budget if args.time_budget is not None else 400.0 * max(turns.values(), default=1)
    jobs = schedule(cases, turns, before, args.variants)
    results: Dict = {"meta": machine(argv, args.before_root), "cases": {}}
    raws: Dict[Tuple[str, int, int], Dict] = {}  # (env, N, turn): raw EnvPool, shared by the cases of one env
    runs: Dict[str, Dict[str, List[Dict]]] = {name: {} for name in cases}  # case: label: its run of each turn
    case_raws: Dict[str, Dict[int, Dict]] = {name: {} for name in cases}  # case: turn: the raw its runs met
    t_start = time.perf_counter()

    def elapsed() -> float:
        return time.perf_counter() - t_start

    with tempfile.TemporaryDirectory(prefix="bench_trainer_") as tmp:
        for name in names:
            if name in UPDATE_CASES:
                print(f"[{elapsed():6.0f}s] {name}", flush=True)
                sizes = dict(UPDATE_CASES[name])
                if args.quick:
                    sizes.update(minibatch=8, minibatches=2, epochs=1)
                results["cases"][name] = {"updates": update_microbench(**sizes), **sizes}
                write(results, out_path, t_start)
        for i, job in enumerate(jobs):
            case, k = cases[job.name], turns[job.name]
            of_turn = f" (turn {job.turn} of {k})" if k > 1 else ""
            if not job.always and elapsed() > budget:
                run = {"flags": list(job.flags), "error": f"skipped: past the {budget} s budget"}
            else:
                key = (case.env_id, case.num_envs, job.turn)
                if key not in raws:
                    print(f"[{elapsed():6.0f}s] {job.name}: raw EnvPool{of_turn}", flush=True)
                    raws[key] = raw_envpool(case, args.num_threads)
                case_raws[job.name][job.turn] = raws[key]
                print(f"[{elapsed():6.0f}s] {job.name}: {job.label}{of_turn}", flush=True)
                run = run_trainer(job.root, case, job.flags, Path(tmp) / f"run-{i}", args.run_timeout, job.nproc)
                if "sps" in run:
                    run["vs_raw"] = run["sps"] / raws[key]["sps"]
                    if "rollout_sps" in run:
                        run["rollout_vs_raw"] = run["rollout_sps"] / raws[key]["sps"]
                run.update({"torchrun_ranks": job.nproc} if job.nproc else {})
            run.update({"turn": job.turn} if k > 1 else {})
            runs[job.name].setdefault(job.label, []).append(run)
            entries = {label: label_entry(done, k) for label, done in runs[job.name].items()}
            results["cases"][job.name] = {
                "trainer": case.trainer, "env_id": case.env_id, "num_envs": case.num_envs,
                "num_steps": case.num_steps, **({"num_turns": k} if k > 1 else {}),
                "raw": raw_entry(case_raws[job.name], k), "runs": entries, **torchrun_vs_plain(entries)}
            write(results, out_path, t_start)  # a call cut short still leaves what was measured
    write(results, out_path, t_start)
    print(f"\nwrote {out_path} ({results['meta']['wall_s']:.0f} s, {results['meta']['device_name']})\n")
    print(table(results), flush=True)
    return results
