"""Multi-GPU scaling of the trainers under torchrun, and a fault check, in one command: JSON, PNG, table.

    python scripts/bench_scaling.py --fault-check               # K = 1 and each power of two up to the GPUs
    python scripts/bench_scaling.py --ranks 1,8 --timed ppo-breakout=2   # these K; 2 timed Breakout rounds
    python scripts/bench_scaling.py --quick                     # tiny CartPole on the CPU (Gloo), K = 1, 2
    python scripts/bench_scaling.py --markdown docs/results/multi_gpu_scaling.json   # its table

Every case gives each rank the same work (the sizes below are per rank), so K ranks step K times the
environments: ``--num-envs`` is the global count.  For each case and each K in turn, in this process,
``scripts/bench_trainer.py``'s :func:`~bench_trainer.run_trainer` runs the trainer under ``torchrun
--standalone --nproc-per-node K`` (K = 1 too: the baseline pays for the same launch), and its metrics
after the warm-up rounds give (:func:`~bench_trainer.summarize`):

* ``sps``: total env steps per second of all ranks; ``efficiency`` = sps(K) / (K * sps(1));
* ``phases_ms``: each phase's ms per iteration (IMPALA: per learner update), the slowest rank's;
* ``allreduce_share``: the gradient all-reduce time the backward did not hide (``update/allreduce``,
  IMPALA ``learner/allreduce``) / the iteration (none with one rank: no DDP);
* ``gpu_mem_peak_gib``: the peak ``torch.cuda.max_memory_allocated`` of the rank that used most (CUDA).

Cases (per rank): ``ppo-breakout`` Breakout-v5 4096 x 16 (the Atari preset, 4 epochs x 4 minibatches),
``ppo-cartpole`` CartPole-v1 4096 x 128, ``impala-cartpole`` CartPole-v1 4096 x 32 (2 actors, learner
batches of 512 envs): bench_trainer's cases of those names.

``--fault-check`` (first: it is short, and a call cut short keeps it): PPO CartPole on K ranks
(``--fault-ranks``, default the largest K) checkpointing every iteration; once the first checkpoint
exists the last rank is killed with SIGKILL.  Recorded: seconds until the launcher and until every worker
had exited, the exit code, whether torchrun's failure summary names the killed rank, the collective
timeout (``--dist-timeout-s``); then ``--resume latest.pt`` on K ranks for 3 iterations, and whether its
first logged step is the checkpoint's plus one iteration.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import torch
import tyro

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_trainer import (CASES, Case, machine, phase_order, quick_case, run_trainer, trainer_command,  # noqa: E402
                           write)
import results_tables  # noqa: E402
from rltrain.checkpoint import load_checkpoint  # noqa: E402
from rltrain.torchrun_jobs import failure_summary, kill_rank  # noqa: E402

DEFAULT_OUT = ROOT / "docs" / "results" / "multi_gpu_scaling.json"
DEFAULT_CASES = "ppo-breakout,ppo-cartpole,impala-cartpole"
QUICK_CASES = "ppo-cartpole,impala-cartpole"
FAULT_CASE = "ppo-cartpole"
RESUME_ITERATIONS = 3
TITLES = {"ppo": "PPO", "impala": "IMPALA"}


@dataclass
class Args:
    cases: str = DEFAULT_CASES
    """comma-separated cases: ppo-breakout, ppo-cartpole, impala-cartpole (sizes per rank)"""
    ranks: str = ""
    """comma-separated rank counts K (default: 1 and every power of two up to the GPUs; no GPU: 1,2)"""
    timed: str = ""
    """timed rounds after the warm-up, NAME=N for each case named (e.g. ppo-breakout=2); others keep their own"""
    fault_check: bool = False
    """kill the last rank of a PPO CartPole run after its first checkpoint, then resume it (see above)"""
    fault_ranks: int = 0
    """ranks of the fault check (0: the largest of --ranks)"""
    dist_timeout_s: float = 60.0
    """the trainers' --dist-timeout-s in the fault check (the collective timeout)"""
    out: Optional[str] = None
    """JSON file (default docs/results/multi_gpu_scaling.json; --quick: a temporary file); the PNG beside it"""
    quick: bool = False
    """tiny CartPole cases on the CPU with Gloo, K = 1, 2, and the fault check (a test, not a measurement)"""
    run_timeout: int = 300
    """seconds before a trainer run is given up (recorded as an error)"""
    markdown: Optional[str] = None
    """print the Markdown table of this results file and exit (nothing is run)"""


def default_ranks(gpus: int) -> List[int]:
    """1 and every power of two up to ``gpus``; without GPUs 1 and 2 (CPU ranks, Gloo)."""
    return [1, 2] if gpus == 0 else [1] + [2 ** i for i in range(1, gpus.bit_length())]


def rank_case(case: Case, ranks: int) -> Case:
    """``case`` on ``ranks`` ranks: the same envs per rank, so ``ranks`` times the global ``--num-envs``."""
    return dataclasses.replace(case, num_envs=case.num_envs * ranks)


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


def fmt(value: Optional[float], spec: str) -> str:
    return "-" if value is None else spec.format(value)


def markdown(results: Dict) -> str:
    """Where and when; one row per case and K: steps/s, efficiency, iteration and top-level phases (ms,
    the slowest rank's), the all-reduce ms and share, peak GPU memory; the fault check's line."""
    m = results["meta"]
    lines = [results_tables.machine(m), "",
             "| case (per rank) | K | steps/s | efficiency | iteration ms | phases ms | all-reduce ms | "
             "all-reduce share | peak GPU GiB |", "| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for name, case in results["cases"].items():
        title = f"{TITLES[case['trainer']]} {case['env_id']} {case['num_envs_per_rank']} x {case['num_steps']}"
        for r in (r for r in results["rows"] if r["case"] == name):
            if "sps" not in r:
                lines.append(f"| {title} | {r['ranks']} | {r.get('error', '?').splitlines()[-1][:60]} | | | | | | |")
                continue
            phases = " · ".join(f"{k} {r['phases_ms'][k]:.1f}" for k in sorted(r["phases_ms"], key=phase_order)
                                if "/" not in k)
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


def main(argv: Optional[Sequence[str]] = None) -> Dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = tyro.cli(Args, args=argv, description=__doc__)
    if args.markdown:
        text = markdown(json.loads(Path(args.markdown).read_text()))
        print(text)
        return {"markdown": text}
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


if __name__ == "__main__":
    main()
