"""The multi-GPU scaling benchmark's runs (``scripts/bench_scaling.py``, whose docstring states the method):
each case on K ranks under torchrun, the fault check, the results file, its plot."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence

import torch

from rltrain.bench.scaling_tables import add_scaling, markdown
from rltrain.bench.trainer_cases import CASES, Case, quick_case
from rltrain.bench.trainer_runs import machine, run_trainer, trainer_command, write
from rltrain.checkpoint import load_checkpoint
from rltrain.torchrun_jobs import failure_summary, kill_rank

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = ROOT / "docs" / "results" / "multi_gpu_scaling.json"
DEFAULT_CASES = "ppo-breakout,ppo-cartpole,impala-cartpole"
QUICK_CASES = "ppo-cartpole,impala-cartpole"
FAULT_CASE = "ppo-cartpole"
RESUME_ITERATIONS = 3


def default_ranks(gpus: int) -> List[int]:
    """1 and every power of two up to ``gpus``; without GPUs 1 and 2 (CPU ranks, Gloo)."""
    return [1, 2] if gpus == 0 else [1] + [2 ** i for i in range(1, gpus.bit_length())]


def rank_case(case: Case, ranks: int) -> Case:
    """``case`` on ``ranks`` ranks: the same envs per rank, so ``ranks`` times the global ``--num-envs``."""
    return dataclasses.replace(case, num_envs=case.num_envs * ranks)


def meta(argv: Sequence[str], cuda: bool) -> Dict:
    """bench_trainer's machine info (the command as given), this checkout's commit, GPU count, NCCL."""
    m = machine(argv, None, script="scripts/bench_scaling.py")
    m["commit"] = m.pop("after_commit")
    m.pop("before_commit")
    nccl = torch.cuda.nccl.version() if cuda else None
    return {**m, "gpu_count": torch.cuda.device_count(), "dist_backend": "nccl" if cuda else "gloo",
            "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl}


def fault_check(case: Case, ranks: int, extra: Sequence[str], dist_timeout_s: float, tmp: Path,
                timeout: float) -> Dict:
    """Kill the last of ``ranks`` ranks of a ``case`` run once its first checkpoint exists; resume it."""
    runs, log = tmp / "fault_runs", tmp / "fault.log"
    flags = [*extra, "--checkpoint-every", "1", "--dist-timeout-s", str(dist_timeout_s)]
    long_run = dataclasses.replace(rank_case(case, ranks), warmup=0, timed=10_000)
    cmd, env = trainer_command(ROOT, long_run, flags, runs, nproc=ranks)
    out: Dict = {"case": FAULT_CASE, "ranks": ranks, "killed_rank": ranks - 1, "signal": "SIGKILL",
                 "dist_timeout_s": dist_timeout_s, "num_envs": long_run.num_envs}
    with open(log, "w") as sink:
        job = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, process_group=0)
        try:
            deadline = time.monotonic() + timeout
            while not list(runs.glob("*/checkpoints/latest.pt")):
                if job.poll() is not None or time.monotonic() > deadline:
                    return {**out, "error": f"no checkpoint (exit {job.poll()}): {log.read_text()[-1500:]}"}
                time.sleep(0.05)
            killed = kill_rank(job, ranks - 1, timeout=dist_timeout_s + 60)
        except (subprocess.TimeoutExpired, LookupError) as e:
            return {**out, "error": f"{type(e).__name__}: {e}"[:1500]}
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
    named = failure_summary(log.read_text()).get(ranks - 1, "")
    out.update(exit_code=killed.returncode, launcher_exited_s=round(killed.stopped_s, 2),
               all_exited_s=round(killed.all_exited_s, 2), within_timeout=killed.all_exited_s < dist_timeout_s,
               failed_rank_named="SIGKILL" in named)
    (ckpt_path,) = runs.glob("*/checkpoints/latest.pt")
    ckpt_step = int(load_checkpoint(ckpt_path)["global_step"])
    metrics = ckpt_path.parent.parent / "metrics.jsonl"
    logged = len(metrics.read_text().splitlines())
    resume = dataclasses.replace(long_run, timed=ckpt_step // long_run.round_steps + RESUME_ITERATIONS)
    cmd, env = trainer_command(ROOT, resume, [*flags, "--resume", str(ckpt_path)], runs, nproc=ranks)
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**out, "resume_error": f"timed out after {timeout} s"}
    steps = [json.loads(line)["global_step"] for line in metrics.read_text().splitlines()[logged:] if line.strip()]
    out.update(checkpoint_step=ckpt_step, resume_exit_code=done.returncode, resumed_steps=steps,
               resume_continued=done.returncode == 0 and steps[:1] == [ckpt_step + long_run.round_steps])
    if done.returncode != 0:
        out["resume_error"] = (done.stderr or done.stdout)[-1500:]
    return out


def plot(results: Dict, path: Path) -> None:
    """Steps/s (log scale) and efficiency against K, one line per case."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax_sps, ax_eff) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name in results["cases"]:
        rows = [r for r in results["rows"] if r["case"] == name and "sps" in r]
        ks = [r["ranks"] for r in rows]
        ax_sps.plot(ks, [r["sps"] for r in rows], "o-", label=name)
        ax_eff.plot(ks, [r["efficiency"] if r["efficiency"] is not None else float("nan") for r in rows], "o-",
                    label=name)
    ks = sorted({r["ranks"] for r in results["rows"]}) or [1]
    for ax, label in ((ax_sps, "steps/s (all ranks)"), (ax_eff, "efficiency sps(K) / (K sps(1))")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("ranks K (one GPU each)" if results["meta"]["dist_backend"] == "nccl" else "ranks K (CPU)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    ax_sps.set_yscale("log")
    ax_eff.axhline(1.0, color="grey", lw=0.8, ls="--")
    ax_eff.set_ylim(0, 1.15)
    ax_eff.legend()
    m = results["meta"]
    fig.suptitle(f"{m.get('device_name')}, {m.get('dist_backend')}, torch {m.get('torch')}; {str(m.get('date'))[:10]}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(args, argv: Sequence[str]) -> Dict:
    """The benchmark of ``scripts/bench_scaling.py``'s ``Args`` (its command line ``argv``, recorded in the
    results file): the fault check first where asked for, then every case on each K; the results file
    written after each run, its plot after each case, the table printed at the end; bad ``--cases``,
    ``--ranks``, ``--fault-ranks`` or ``--timed`` exit with ``error: ...``."""
    cuda = torch.cuda.is_available() and not args.quick
    gpus = torch.cuda.device_count() if cuda else 0
    names = [c.strip() for c in (QUICK_CASES if args.quick else args.cases).split(",") if c.strip()]
    if unknown := [c for c in names if c not in DEFAULT_CASES.split(",")]:
        raise SystemExit(f"error: --cases: unknown case(s) {unknown}; choose from {DEFAULT_CASES}")
    ranks = [int(k) for k in args.ranks.split(",") if k.strip()] if args.ranks else default_ranks(gpus)
    if not ranks or min(ranks) < 1 or (cuda and max(ranks) > gpus):
        raise SystemExit(f"error: --ranks {args.ranks}: each K must be >= 1 and, on CUDA, at most the {gpus} GPU(s)")
    fault_ranks = args.fault_ranks or max(ranks)
    if fault_ranks < 1 or (cuda and fault_ranks > gpus):
        raise SystemExit(f"error: --fault-ranks {fault_ranks}: must be >= 1 and, on CUDA, at most the {gpus} GPU(s)")
    extra_cpu = ["--no-cuda"] if args.quick else []
    timed = dict((item.split("=", 1) + [""])[:2] for item in args.timed.split(",") if item.strip())
    if any(n not in names or not t.isdigit() or int(t) < 1 for n, t in timed.items()):
        raise SystemExit(f"error: --timed {args.timed}: NAME=N for cases of --cases, N >= 1")
    cases = {n: quick_case(CASES[n]) if args.quick else CASES[n] for n in names}
    cases = {n: dataclasses.replace(c, timed=int(timed.get(n, c.timed))) for n, c in cases.items()}
    out_path = Path(args.out) if args.out else (
        Path(tempfile.gettempdir()) / "multi_gpu_scaling_quick.json" if args.quick else DEFAULT_OUT)
    results: Dict = {"meta": meta(argv, cuda), "cases": {
        n: {"trainer": c.trainer, "env_id": c.env_id, "num_envs_per_rank": c.num_envs, "num_steps": c.num_steps,
            "flags": [*c.flags, *c.after_flags, *extra_cpu], "warmup": c.warmup, "timed": c.timed}
        for n, c in cases.items()}, "ranks": ranks, "rows": []}
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench_scaling_") as tmp:
        if args.fault_check or args.quick:  # first: it is short, and a call cut short keeps it
            print(f"[{time.perf_counter() - t_start:6.0f}s] fault check: {fault_ranks} rank(s)", flush=True)
            case = quick_case(CASES[FAULT_CASE]) if args.quick else CASES[FAULT_CASE]
            results["fault_check"] = fault_check(case, fault_ranks, [*case.after_flags, *extra_cpu],
                                                 args.dist_timeout_s, Path(tmp), args.run_timeout)
            write(results, out_path, t_start)
        for name, case in cases.items():
            for k in ranks:
                print(f"[{time.perf_counter() - t_start:6.0f}s] {name}: {k} rank(s)", flush=True)
                run_case = rank_case(case, k)
                run = run_trainer(ROOT, run_case, [*case.after_flags, *extra_cpu], Path(tmp) / f"{name}-{k}",
                                  args.run_timeout, nproc=k)
                results["rows"].append({"case": name, "ranks": k, "num_envs": run_case.num_envs, **run})
                add_scaling(results["rows"])
                write(results, out_path, t_start)  # a call cut short still leaves what was measured
            plot(results, out_path.with_suffix(".png"))
    write(results, out_path, t_start)
    print(f"\nwrote {out_path} and {out_path.with_suffix('.png').name} ({results['meta']['wall_s']:.0f} s)\n")
    print(markdown(results), flush=True)
    return results
