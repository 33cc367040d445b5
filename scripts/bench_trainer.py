"""Trainer throughput against raw EnvPool, before and after, in one command: a table last, JSON written.

    python scripts/bench_trainer.py --before-root PATH        # GPU host: every default case, ~7 min
    python scripts/bench_trainer.py --cases ppo-cartpole      # a subset (names below)
    python scripts/bench_trainer.py --quick                   # tiny versions on the CPU, < 1 min
    python scripts/bench_trainer.py --markdown docs/results/trainer_throughput.json   # its tables
    python scripts/bench_trainer.py --cases ppo-cartpole-torchrun1 --out docs/results/torchrun_overhead.json

For each case (an env, N envs, T steps):

1. **raw EnvPool**: random actions through one synchronous pool of the same N
   (``scripts/bench_envpool.py``), in this process, with one thread per core and, for CartPole, half as
   many (4096 CartPole envs step faster on 8 threads of a 16-core host than on 16): the faster is "raw";
2. **the trainers**, each a subprocess with its checkout first on ``PYTHONPATH``: ``after`` is this
   checkout, ``before`` the checkout at ``--before-root`` (same flags, minus the ones it does not
   have), then variants of ``after`` (one env group, no CUDA graphs, ``--compile``, ...).  Each runs a
   few iterations; its ``metrics.jsonl`` gives, after the warm-up iterations (CUDA-graph recording,
   kernel compilation):

   * ``sps``: env steps per second of wall clock between the last warm-up record and the last one
     (everything counted: rollout, update, logging), and ``vs_raw`` = ``sps`` / raw;
   * ``phases_ms``: each ``perf/<phase>_s`` in ms per iteration (IMPALA: per learner update);
   * PPO: ``rollout_sps`` = batch / rollout time, the rollout alone against raw (``rollout_vs_raw``);
   * IMPALA: ``learner_wait`` = the learner's queue wait summed over the timed updates / their wall
     clock, the actors' own steps/s (``actor_sps``, per actor, queue waits left out), the policy lag.

Raw and trainers run one after the other on the same machine in one call, so the ratios compare like
with like.  Creating 4096 Atari envs takes about a minute each time: a case creates them three times
(raw, before, after), so the Atari cases run few iterations and have no variants.

Cases: ``ppo-cartpole`` (CartPole-v1, 4096 x 128), ``ppo-breakout`` (Breakout-v5, 4096 x 16, the
Atari preset otherwise), ``impala-cartpole`` (CartPole-v1, 4096 x 32), ``impala-breakout`` (Breakout-v5,
4096 x 20), ``update-breakout`` (no envs: the Atari PPO update's network work -- 4 epochs x 4 minibatches
of 16384 frames through the Nature CNN, forward, backward, clip, fused Adam -- in each of
``UPDATE_VARIANTS``: deterministic or timed cuDNN, contiguous or channels-last, TF32 matrix products, bf16
autocast, ``torch.compile``; ms per update; the rows the trainers run on CUDA name their flag).  The last
two are not in the default set: they do not fit the default run's time.  ``ppo-cartpole-torchrun1``
(``ppo-cartpole`` without variants) is the cost of ``torchrun --standalone --nproc-per-node 1`` (a process
group, DDP, the per-iteration collectives) against the plain run: the after trainer plain then under
torchrun, three times in turn (drift between runs shows); ``torchrun_vs_plain`` is the ratio of their mean
steps/s, ``torchrun_vs_plain_pairs`` each turn's ratio.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import tyro

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_envpool  # noqa: E402
from rltrain.machine import machine_info  # noqa: E402
from rltrain.runtime import num_cores  # noqa: E402
from rltrain.trainer import GPU_MEMORY_METRIC  # noqa: E402

DEFAULT_OUT = ROOT / "docs" / "results" / "trainer_throughput.json"


@dataclass(frozen=True)
class Case:
    """One benchmark case: the trainer, its env and sizes, and how long each run lasts."""

    trainer: str                    # "ppo" | "impala"
    env_id: str
    num_envs: int
    num_steps: int
    warmup: int                     # rounds of num_envs * num_steps env steps left out
    timed: int                      # rounds timed
    flags: Tuple[str, ...] = ()     # both checkouts
    after_flags: Tuple[str, ...] = ()  # this checkout only (flags the old trainers lack)
    variants: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()  # (label, after flags replacing after_flags)
    quick_after_flags: Tuple[str, ...] = ()  # after_flags of the tiny --quick version
    torchrun_ranks: Tuple[int, ...] = ()  # after again under torchrun with K ranks, in turn with plain runs
    torchrun_turns: int = 3
    raw_steps: int = 200
    raw_warmup: int = 20
    raw_threads: Tuple[int, ...] = (1,)  # raw EnvPool with cores / k threads for each k; the fastest is "raw"

    @property
    def round_steps(self) -> int:
        return self.num_envs * self.num_steps


CARTPOLE_VARIANTS = (
    ("after, 2 groups x cores threads each", ("--num-threads", str(2 * num_cores()))),
    ("after, --compile", ("--compile",)),
    ("after, 1 env group", ("--env-groups", "1")),
    ("after, no CUDA graphs", ("--no-cuda-graphs",)),
)
IMPALA_AFTER = ("--num-actors", "2", "--learner-batch-envs", "512")
IMPALA_QUICK = ("--num-actors", "2", "--learner-batch-envs", "2")
CASES: Dict[str, Case] = {
    "ppo-cartpole": Case("ppo", "CartPole-v1", 4096, 128, warmup=2, timed=5, variants=CARTPOLE_VARIANTS,
                         raw_threads=(1, 2)),
    # the update of both checkouts: 4 epochs x 4 minibatches of the batch (CleanRL's Atari update)
    "ppo-breakout": Case("ppo", "Breakout-v5", 4096, 16, warmup=1, timed=3,
                         flags=("--config", "configs/atari.yaml", "--num-minibatches", "4", "--update-epochs", "4"),
                         after_flags=("--minibatch-size", "0"), raw_steps=20, raw_warmup=3,
                         variants=(("after, --num-threads cores/2", ("--minibatch-size", "0", "--num-threads",
                                                                    str(max(1, num_cores() // 2)))),
                                   # the frames' copy into pinned memory (rollout/h2d) on 4 threads, not 1
                                   ("after, --torch-threads 4", ("--minibatch-size", "0", "--torch-threads", "4")))),
    "impala-cartpole": Case("impala", "CartPole-v1", 4096, 32, warmup=3, timed=12, after_flags=IMPALA_AFTER,
                            quick_after_flags=IMPALA_QUICK,
                            variants=(
                                ("after, --compile", ("--num-actors", "2", "--learner-batch-envs", "512", "--compile")),
                                ("after, --compile, batches of 256",
                                 ("--num-actors", "2", "--learner-batch-envs", "256", "--compile")),
                            ) + tuple((f"after, batches of {w}", ("--num-actors", "2", "--learner-batch-envs", str(w)))
                                      for w in (256, 1024, 128)) + (
                                ("after, full-width batches (2048)", ("--num-actors", "2")),),
                            raw_threads=(1, 2)),
    "impala-breakout": Case("impala", "Breakout-v5", 4096, 20, warmup=1, timed=3,
                            flags=("--config", "configs/impala_atari.yaml"), after_flags=IMPALA_AFTER,
                            quick_after_flags=IMPALA_QUICK,
                            raw_steps=20, raw_warmup=3),
}
CASES["ppo-cartpole-torchrun1"] = dataclasses.replace(CASES["ppo-cartpole"], timed=16, variants=(),
                                                       torchrun_ranks=(1,))
DEFAULT_CASES = "ppo-cartpole,impala-cartpole,ppo-breakout"
UPDATE_CASES = {"update-breakout": dict(obs_shape=(4, 84, 84), num_actions=4, minibatch=16384, minibatches=4,
                                        epochs=4)}
@dataclass(frozen=True)
class UpdateVariant:
    """How ``update_microbench`` runs the update: cuDNN deterministic or timed (``cudnn.benchmark``),
    channels-last convolutions (the Nature CNN's own layout switch, ``NatureCNN.channels_last``; the
    trainers' CUDA layout; off: contiguous), ``torch.compile`` of the loss, TF32 matrix products, bf16 autocast."""

    deterministic: bool = True
    channels_last: bool = False
    compiled: bool = False
    tf32: bool = False
    bf16: bool = False


UPDATE_VARIANTS = (  # rows: what ran; "(--flag)": the rows the trainers run on CUDA
    ("cuDNN deterministic", UpdateVariant()),
    ("cuDNN deterministic + channels_last (--torch-deterministic)", UpdateVariant(channels_last=True)),
    ("cuDNN timed", UpdateVariant(deterministic=False)),
    ("cuDNN timed + channels_last", UpdateVariant(deterministic=False, channels_last=True)),
    ("cuDNN timed + TF32 matmul", UpdateVariant(deterministic=False, tf32=True)),
    ("cuDNN timed + channels_last + TF32 (--no-torch-deterministic)",
     UpdateVariant(deterministic=False, channels_last=True, tf32=True)),
    ("cuDNN timed + bf16 autocast", UpdateVariant(deterministic=False, bf16=True)),
    ("cuDNN timed + compile", UpdateVariant(deterministic=False, compiled=True)),
)


def quick_case(case: Case) -> Case:
    """The tiny CPU version of ``case``: a few envs, a few steps, the trainer's defaults (a preset's
    minibatch size may not fit its batch), no variants."""
    atari = case.env_id.startswith("Breakout")
    return dataclasses.replace(case, num_envs=4 if atari else 8, num_steps=4 if atari else 16, warmup=1,
                               timed=2, flags=(), after_flags=case.quick_after_flags, variants=(),
                               raw_steps=10 if atari else 50, raw_warmup=2)


@dataclass
class Args:
    cases: str = DEFAULT_CASES
    """comma-separated cases: ppo-cartpole, ppo-breakout, impala-cartpole, impala-breakout, update-breakout,
    ppo-cartpole-torchrun1"""
    before_root: Optional[str] = None
    """another checkout whose trainers are the 'before' (e.g. a copy of main); none: after only"""
    out: Optional[str] = None
    """JSON file (default docs/results/trainer_throughput.json; with --quick a temporary file)"""
    quick: bool = False
    """tiny versions on the CPU (a test of the benchmark, not a measurement)"""
    variants: bool = True
    """run the after trainer's variants too (--quick has none)"""
    num_threads: int = 0
    """EnvPool threads of the raw pool (0: one per core, as the trainers' default)"""
    run_timeout: int = 240
    """seconds before a trainer run is given up (recorded as an error; a Breakout run takes ~1.5 min)"""
    time_budget: float = 400.0
    """no variant starts after this many seconds (raw, before and after always run, first)"""
    markdown: Optional[str] = None
    """print the Markdown tables of this results file and exit (nothing is run)"""


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
        rollout_s = sum(r.get("perf/rollout_s", 0.0) for r in timed)
        out["rollout_sps"] = steps / rollout_s if rollout_s > 0 else float("nan")
    else:
        wait = sum(r.get("perf/learner_queue_wait_s", 0.0) for r in timed)
        out["learner_wait"] = wait / seconds  # of the learner's wall clock, its logging included
        out["actor_sps"] = sum(r.get("charts/actor_SPS", 0.0) for r in timed) / n
        if any("policy_lag/mean" in r for r in timed):
            out["policy_lag_mean"] = sum(r.get("policy_lag/mean", 0.0) for r in timed) / n
    return out


def update_microbench(obs_shape, num_actions: int, minibatch: int, minibatches: int, epochs: int,
                      repeats: int = 3, warmup: int = 2) -> Dict[str, Dict]:
    """ms per PPO-style update (``epochs`` x ``minibatches`` steps of ``minibatch`` random frames through the
    Nature CNN: forward, a policy/value/entropy loss, backward, clip, Adam) for each of UPDATE_VARIANTS."""
    import torch
    from agents import make_agent
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    saved = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
             torch.backends.cuda.matmul.allow_tf32)
    out: Dict[str, Dict] = {}
    n = minibatch * minibatches
    gen = torch.Generator().manual_seed(0)
    obs = torch.randint(0, 256, (n, *obs_shape), dtype=torch.uint8, generator=gen).to(device)
    actions = torch.randint(0, num_actions, (n,), generator=gen).to(device)
    adv, ret = torch.randn(n, generator=gen).to(device), torch.randn(n, generator=gen).to(device)
    for label, v in UPDATE_VARIANTS:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = v.deterministic, not v.deterministic
        torch.backends.cuda.matmul.allow_tf32 = v.tf32
        torch.manual_seed(0)
        agent = make_agent("nature_cnn", obs_shape, True, num_actions)
        agent.torso.channels_last = v.channels_last  # the agent's own layout switch (agents/nature_cnn.py)
        agent = agent.to(device)
        optimizer = torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5, fused=device.type == "cuda")

        def loss_fn(x, a, adv_mb, ret_mb):
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=v.bf16):
                _, logp, entropy, value = agent.get_action_and_value(x, a)
            return (-(logp * adv_mb).mean() + 0.5 * (value.float() - ret_mb).square().mean()
                    - 0.01 * entropy.float().mean())
        step_loss = torch.compile(loss_fn, dynamic=False) if v.compiled else loss_fn

        def update():
            for _ in range(epochs):
                for mb in torch.randperm(n, device=device).view(minibatches, minibatch):
                    loss = step_loss(obs[mb], actions[mb], adv[mb], ret[mb])
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                    torch.nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                    optimizer.step()
        try:
            for _ in range(warmup):
                update()
            times = []
            for _ in range(repeats):
                if device.type == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                update()
                if device.type == "cuda":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            out[label] = {"update_ms": 1e3 * sorted(times)[len(times) // 2], "minibatch": minibatch,
                          "steps": epochs * minibatches}
        except Exception as e:  # noqa: BLE001 -- one failed variant must not lose the others
            out[label] = {"error": f"{type(e).__name__}: {e}"[:500]}
    (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
     torch.backends.cuda.matmul.allow_tf32) = saved
    return out


def raw_envpool(case: Case, threads: int) -> Dict:
    """Raw EnvPool with ``threads`` worker threads (0: each of ``cores / k`` for k in ``case.raw_threads``);
    the fastest is the raw figure, every count tried is kept under ``tried``."""
    counts = [threads] if threads else sorted({max(1, num_cores() // k) for k in case.raw_threads}, reverse=True)
    tried = {}
    for n in counts:
        res = bench_envpool.main(bench_envpool.Args(env_id=case.env_id, num_envs=case.num_envs, num_threads=n,
                                                    steps=case.raw_steps, warmup=case.raw_warmup))
        tried[res["num_threads"]] = res
    best = max(tried.values(), key=lambda r: r["sps"])
    return {"sps": best["sps"], "num_threads": best["num_threads"], "steps": best["steps"] * case.num_envs,
            "tried": {str(n): r["sps"] for n, r in tried.items()}}


def torchrun_vs_plain(runs: Dict[str, Dict]) -> Dict[str, Dict]:
    """``torchrun_vs_plain``: {K: mean steps/s under torchrun with K ranks / mean steps/s of the plain
    runs taken in turn with them}; ``torchrun_vs_plain_pairs``: {K: that ratio in each turn}.  Runs carry
    their ``turn``; empty without torchrun runs."""
    plain = {r["turn"]: r["sps"] for r in runs.values() if "turn" in r and not r.get("torchrun_ranks") and "sps" in r}
    ratios: Dict[str, float] = {}
    pairs: Dict[str, List[float]] = {}
    for k in sorted({r["torchrun_ranks"] for r in runs.values() if r.get("torchrun_ranks")}):
        under = {r["turn"]: r["sps"] for r in runs.values() if r.get("torchrun_ranks") == k and "sps" in r}
        if plain and under:
            ratios[str(k)] = (sum(under.values()) / len(under)) / (sum(plain.values()) / len(plain))
            pairs[str(k)] = [under[t] / plain[t] for t in sorted(under) if t in plain]
    return {"torchrun_vs_plain": ratios, "torchrun_vs_plain_pairs": pairs} if ratios else {}


# ---------------------------------------------------------------------------- report
BEFORE_ROOT = "<checkout of before_commit>"  # what --before-root stands for in a recorded command


def machine(argv: Sequence[str], before_root: Optional[str], script: str = "scripts/bench_trainer.py") -> Dict:
    """:func:`rltrain.machine.machine_info`, the two checkouts' commits and the command line (``python
    script argv``): the arguments as given (a relative ``--out`` stays relative), the ``--before-root``
    path, which names a directory of the measuring machine, replaced by :data:`BEFORE_ROOT`."""
    def recorded(a: str) -> str:
        if before_root and a in (before_root, f"--before-root={before_root}"):
            return a.replace(before_root, BEFORE_ROOT)
        return a
    return {**machine_info(), "after_commit": git_commit(ROOT),
            "before_commit": git_commit(Path(before_root)) if before_root else None,
            "command": " ".join(["python", script, *map(recorded, argv)])}


def git_commit(root: Path) -> Optional[str]:
    """The commit checked out at ``root``, with ``+dirty`` where tracked files differ from it (the figures
    then come from a tree no commit holds); None where ``root`` is not the top of a git checkout (a copy
    made with ``git archive`` inside another checkout must not report that checkout's commit)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != Path(root).resolve():
        return None
    try:
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return lines[1] + "+unknown"
    return lines[1] + ("+dirty" if status.returncode != 0 or status.stdout.strip() else "")


def table(results: Dict) -> str:
    def pct(x):
        return f"{100 * x:.1f}%" if isinstance(x, float) and math.isfinite(x) else "-"
    lines = [f"{'case':<16}{'run':<38}{'steps/s':>12}{'vs raw':>9}{'rollout':>9}{'update ms':>11}{'wait':>8}",
             "-" * 103]
    for name, case in results["cases"].items():
        if "updates" in case:
            for i, (label, run) in enumerate(case["updates"].items()):
                text = f"{run['update_ms']:>11.1f}" if "update_ms" in run else f"  error: {run['error'][:50]}"
                lines.append(f"{name if i == 0 else '':<16}{label:<38}{'':>30}{text}")
            continue
        raw = case["raw"]["sps"]
        lines.append(f"{name:<16}{'raw EnvPool':<38}{raw:>12,.0f}{'100.0%':>9}")
        for label, run in reported_runs(case):
            if "error" in run:
                lines.append(f"{'':<16}{label:<38}  error: {run['error'].splitlines()[-1][:60]}")
                continue
            phases = run["phases_ms"]
            update = phases.get("update", phases.get("learner", float("nan")))
            lines.append(f"{'':<16}{label:<38}{run['sps']:>12,.0f}{pct(run['sps'] / raw):>9}"
                         f"{pct(run.get('rollout_sps', float('nan')) / raw):>9}{update:>11.1f}"
                         f"{pct(run.get('learner_wait', float('nan'))):>8}")
    for name, case in results["cases"].items():
        for k, ratio in case.get("torchrun_vs_plain", {}).items():
            turns = ", ".join(f"{r:.3f}" for r in case.get("torchrun_vs_plain_pairs", {}).get(k, []))
            lines.append(f"{name}: torchrun {k} rank(s) / plain steps/s = {ratio:.3f} (each turn: {turns})")
    lines.append("(rollout: PPO's rollout alone vs raw; update: PPO update / IMPALA learner busy ms per iteration;"
                 " wait: IMPALA learner's queue-wait share)")
    return "\n".join(lines)


def reported_runs(case: Dict):
    """A case's ``(label, run)`` pairs, without the runs that did not start (the time budget was spent)."""
    return [(label, run) for label, run in case["runs"].items() if not run.get("error", "").startswith("skipped")]


def write(results: Dict, path: Path, t_start: float) -> None:
    results["meta"]["wall_s"] = round(time.perf_counter() - t_start, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, default=str) + "\n")


TITLES = {"ppo": "PPO", "impala": "IMPALA"}


def main_runs(runs: List[Tuple[str, Dict]]) -> List[Tuple[str, Dict]]:
    """``before`` and the first ``after`` run of a case's ``(label, run)`` pairs, its variants left out."""
    after = next((label for label, _ in runs if label.startswith("after")), None)
    return [(label, run) for label, run in runs if label in ("before", after)]


PHASE_ORDER = ("rollout", "ca", "update", "learner", "learner_queue_wait", "actor", "actor_queue_wait")


def phase_order(phase: str) -> Tuple[int, bool, str]:
    """Sort key of a phase name: the trainers' order of their top-level phases, sub-phases after their phase."""
    top = phase.split("/")[0]
    return (PHASE_ORDER.index(top) if top in PHASE_ORDER else len(PHASE_ORDER), "/" in phase, phase)


def markdown(results: Dict, variants: bool = True) -> str:
    """Markdown of a results file: where and when, one throughput row per run, and each case's phase
    table (one row per run: its steps per iteration and each phase's ms per iteration -- IMPALA: per
    learner update -- sub-phases after their phase).  Without ``variants``: before and after alone."""
    meta = results["meta"]
    lines = [f"{meta.get('device_name')}, driver {meta.get('driver')}, CUDA {meta.get('cuda')}, torch "
             f"{meta.get('torch')}, Triton {meta.get('triton')}, EnvPool {meta.get('envpool')}, "
             f"{meta.get('cpu_cores')} CPU cores; {str(meta.get('date'))[:10]}.", "",
             "| case | run | steps/s | vs raw EnvPool | rollout vs raw | learner waiting |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    trainer_cases = {n: c for n, c in results["cases"].items() if "runs" in c}
    for name, case in trainer_cases.items():
        title = f"{TITLES[case['trainer']]} {case['env_id']} {case['num_envs']} x {case['num_steps']}"
        lines.append(f"| {title} | raw EnvPool | {case['raw']['sps']:,.0f} | 100% | | |")
        for label, run in (reported_runs(case) if variants else main_runs(reported_runs(case))):
            if "error" in run:
                lines.append(f"| | {label} | {run['error'].splitlines()[-1][:60]} | | | |")
                continue
            rollout = f"{100 * run['rollout_vs_raw']:.0f}%" if "rollout_vs_raw" in run else ""
            wait = f"{100 * run['learner_wait']:.0f}%" if "learner_wait" in run else ""
            lines.append(f"| | {label} | {run['sps']:,.0f} | {100 * run['vs_raw']:.0f}% | {rollout} | {wait} |")
    for name, case in trainer_cases.items():
        runs = {label: run for label, run in case["runs"].items() if "phases_ms" in run}
        if not runs:
            continue
        unit = "ms / iteration" if case["trainer"] == "ppo" else "ms / learner update"
        phases = sorted({k for run in runs.values() for k in run["phases_ms"]}, key=phase_order)
        lines += ["", f"**{name}** ({unit})", "",
                  "| run | steps / iteration | " + " | ".join(k if "/" in k else f"**{k}**" for k in phases)
                  + " | **iteration** |", "| --- |" + " ---: |" * (len(phases) + 2)]
        for label, run in runs.items():
            cells = [run["phases_ms"].get(k) for k in phases] + [run["iteration_ms"]]
            lines.append(f"| {label} | {run['batch_steps']:,} | "
                         + " | ".join("" if v is None else f"{v:.1f}" for v in cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- main
def main(argv: Optional[Sequence[str]] = None) -> Dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = tyro.cli(Args, args=argv)
    if args.markdown:
        text = markdown(json.loads(Path(args.markdown).read_text()))
        print(text)
        return {"markdown": text}
    names = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in names if c not in CASES and c not in UPDATE_CASES]
    if unknown:
        raise SystemExit(f"error: unknown case(s) {unknown}; choose from {sorted([*CASES, *UPDATE_CASES])}")
    out_path = Path(args.out) if args.out else (
        Path(tempfile.gettempdir()) / "trainer_throughput_quick.json" if args.quick else DEFAULT_OUT)
    before = Path(args.before_root).resolve() if args.before_root else None
    if before is not None and not (before / "scripts" / "ppo.py").is_file():
        raise SystemExit(f"error: --before-root {before} has no scripts/ppo.py")
    results: Dict = {"meta": machine(argv, args.before_root), "cases": {}}
    raw_cache: Dict[Tuple[str, int], Dict] = {}
    t_start = time.perf_counter()

    def elapsed() -> float:
        return time.perf_counter() - t_start

    # the figures the issue asks for first (raw, before, after of every case), then the variants while
    # the time budget lasts
    # case, label, checkout, flags, torchrun ranks, turn (plain and torchrun runs in turn; 0: not in turns)
    jobs: List[Tuple[str, str, Path, Sequence[str], int, int]] = []
    for name in names:
        if name in CASES:
            case = quick_case(CASES[name]) if args.quick else CASES[name]
            jobs += [(name, "before", before, (), 0, 0)] if before is not None else []
            turns = case.torchrun_turns if case.torchrun_ranks else 0
            jobs.append((name, "after", ROOT, case.after_flags, 0, 1 if turns else 0))
            for turn in range(1, turns + 1):  # in turn, so that drift between runs shows
                again = f" ({turn})" if turn > 1 else ""
                jobs += [(name, f"after{again}", ROOT, case.after_flags, 0, turn)] if again else []
                jobs += [(name, f"after, torchrun {k} rank(s){again}", ROOT, case.after_flags, k, turn)
                         for k in case.torchrun_ranks]
    if args.variants:
        jobs += [(name, label, ROOT, flags, 0, 0) for name in names if name in CASES
                 for label, flags in (quick_case(CASES[name]) if args.quick else CASES[name]).variants]
    with tempfile.TemporaryDirectory(prefix="bench_trainer_") as tmp:
        for name in names:
            if name in UPDATE_CASES:
                print(f"[{elapsed():6.0f}s] {name}", flush=True)
                sizes = dict(UPDATE_CASES[name])
                if args.quick:
                    sizes.update(minibatch=8, minibatches=2, epochs=1)
                results["cases"][name] = {"updates": update_microbench(**sizes), **sizes}
                write(results, out_path, t_start)
        for i, (name, label, root, extra, nproc, turn) in enumerate(jobs):
            case = quick_case(CASES[name]) if args.quick else CASES[name]
            entry = results["cases"].get(name)
            if entry is None:
                print(f"[{elapsed():6.0f}s] {name}: raw EnvPool", flush=True)
                key = (case.env_id, case.num_envs)
                if key not in raw_cache:
                    raw_cache[key] = raw_envpool(case, args.num_threads)
                entry = results["cases"][name] = {
                    "trainer": case.trainer, "env_id": case.env_id, "num_envs": case.num_envs,
                    "num_steps": case.num_steps, "raw": raw_cache[key], "runs": {}}
            if not (label in ("before", "after") or turn) and elapsed() > args.time_budget:
                entry["runs"][label] = {"flags": list(extra), "error": f"skipped: past the {args.time_budget} s budget"}
                continue
            print(f"[{elapsed():6.0f}s] {name}: {label}", flush=True)
            run = run_trainer(root, case, extra, Path(tmp) / f"run-{i}", args.run_timeout, nproc)
            if "sps" in run:
                run["vs_raw"] = run["sps"] / entry["raw"]["sps"]
                if "rollout_sps" in run:
                    run["rollout_vs_raw"] = run["rollout_sps"] / entry["raw"]["sps"]
            run.update({"torchrun_ranks": nproc} if nproc else {})
            run.update({"turn": turn} if turn else {})
            entry["runs"][label] = run
            entry.update(torchrun_vs_plain(entry["runs"]))
            write(results, out_path, t_start)  # a call cut short still leaves what was measured
    write(results, out_path, t_start)
    print(f"\nwrote {out_path} ({results['meta']['wall_s']:.0f} s, {results['meta']['device_name']})\n")
    print(table(results), flush=True)
    return results


if __name__ == "__main__":
    main()
