"""Trainer throughput against raw EnvPool, before and after, in one command: a table last, JSON written.

    python scripts/bench_trainer.py --before-root PATH        # GPU host: every default case, ~7 min
    python scripts/bench_trainer.py --cases ppo-cartpole      # a subset (names below)
    python scripts/bench_trainer.py --cases ppo-breakout --turns 3   # every run 3 times, round-robin: median (range)
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
with like.  Creating 4096 Atari envs takes about a minute each time: a case creates them once per run
(raw, before, after, each variant), so the Atari cases run few iterations and few variants.

**Turns** (``--turns K``, default 1): one sample per run hides the drift between runs (a Breakout
rollout's env phase moves by 300 ms an iteration from one run to the next).  With K > 1 every case runs
K turns, round-robin: each turn measures raw EnvPool again, then runs before, after and each variant
once (turn 1: raw, after, variant a, variant b; turn 2: raw, after, variant a, variant b; ...), and each
run is divided by its own turn's raw figure, so drift hits every label alike.  A label's entry then
keeps each turn's run under ``turns`` and gives ``vs_raw_median``, ``vs_raw_min``, ``vs_raw_max``,
``sps_median`` (and min/max; likewise ``rollout_vs_raw``, ``learner_wait``), with ``phases_ms`` and
``iteration_ms`` the median over the turns; the case's ``raw`` keeps each turn's figure the same way,
its ``num_turns`` is K.  The tables show one row per label: the median and, in brackets, the range.
With K = 1 a label's entry is its run itself.  ``--time-budget`` (default 400 s a turn): turn 1's before
and after always run; no other run starts past the budget (its entry says it was skipped).

Cases: ``ppo-cartpole`` (CartPole-v1, 4096 x 128), ``ppo-breakout`` (Breakout-v5, 4096 x 16, the
Atari preset otherwise), ``ppo-atari-preset`` (Pong-v5 as configs/atari.yaml trains it, 1024 x 32:
``after`` with the eager update, ``--no-graph-update``, against the preset's ``--graph-update``),
``ppo-atari-overlap`` (the same preset as it is, synchronous, against ``--overlap-rollout``, which steps the
next rollout while the update runs; 3 turns by default: the figure is a few percent, drift between runs
is as large; the overlapped run's ``rollout_vs_raw`` is its collector thread's own steps/s and its phases
name that thread's ``overlapped/rollout/...`` beside the main thread's ``rollout/wait``),
``impala-cartpole`` (CartPole-v1, 4096 x 32), ``impala-breakout`` (Breakout-v5, 4096 x 20),
``update-breakout`` (no envs: the Atari PPO update -- 4 epochs x 4 minibatches of 16384 frames through
the Nature CNN, scripts/ppo.py's loss, backward, clip, fused Adam -- in each of ``UPDATE_VARIANTS``:
deterministic or timed cuDNN, contiguous or channels-last, TF32 matrix products, bf16 autocast,
``torch.compile``, a CUDA graph of the minibatch step; ms per update; the rows the trainers run on CUDA
name their flag), ``update-atari-preset`` (the same for configs/atari.yaml's update: 4 epochs x 16
minibatches of 2048 frames).  The last
two are not in the default set: they do not fit the default run's time.  ``ppo-cartpole-torchrun1``
(``ppo-cartpole`` without variants) is the cost of ``torchrun --standalone --nproc-per-node 1`` (a process
group, DDP, the per-iteration collectives) against the plain run: the after trainer plain then under
torchrun, in 3 turns by default (drift between runs shows); ``torchrun_vs_plain`` is the ratio of their
mean steps/s, ``torchrun_vs_plain_pairs`` each turn's ratio.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import tyro

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import bench_envpool  # noqa: E402
import results_tables  # noqa: E402
from envs.make import env_family  # noqa: E402
from rltrain.machine import machine_info  # noqa: E402
from rltrain.runtime import num_cores  # noqa: E402
from rltrain.timers import OVERLAPPED  # noqa: E402
from rltrain.trainer import GPU_MEMORY_METRIC  # noqa: E402

DEFAULT_OUT = ROOT / "docs" / "results" / "trainer_throughput.json"
OVERLAPPED_ROLLOUT = f"perf/{OVERLAPPED}rollout_s"  # PPO --overlap-rollout: the collector thread's rollout


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
    quick_variants: Tuple[Tuple[str, Tuple[str, ...]], ...] = ()  # the variants it keeps (the case's point)
    torchrun_ranks: Tuple[int, ...] = ()  # after again under torchrun with K ranks, each turn after the plain run
    turns: int = 1                  # turns without --turns
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
OVERLAP_VARIANTS = (("after, --overlap-rollout", ("--overlap-rollout",)),)
IMPALA_QUICK = ("--num-actors", "2", "--learner-batch-envs", "2")
CASES: Dict[str, Case] = {
    "ppo-cartpole": Case("ppo", "CartPole-v1", 4096, 128, warmup=2, timed=5, variants=CARTPOLE_VARIANTS,
                         raw_threads=(1, 2)),
    # the update of both checkouts: 4 epochs x 4 minibatches of the batch (CleanRL's Atari update)
    "ppo-breakout": Case("ppo", "Breakout-v5", 4096, 16, warmup=1, timed=5,
                         flags=("--config", "configs/atari.yaml", "--num-minibatches", "4", "--update-epochs", "4"),
                         after_flags=("--minibatch-size", "0"), raw_steps=20, raw_warmup=3,
                         # the frames' copy into pinned memory (rollout/h2d) on 4 threads, not 1
                         variants=(("after, --torch-threads 4", ("--minibatch-size", "0", "--torch-threads", "4")),)),
    # configs/atari.yaml as the README runs it (1024 envs x 32 steps, 4 epochs of 2048-step minibatches):
    # the eager update against the one replayed from a CUDA graph, end to end
    "ppo-atari-preset": Case("ppo", "Pong-v5", 1024, 32, warmup=3, timed=20, flags=("--config", "configs/atari.yaml"),
                             after_flags=("--no-graph-update",),
                             variants=(("after, --graph-update", ("--graph-update",)),), raw_steps=100, raw_warmup=10),
    # the preset synchronous against --overlap-rollout (envs stepping the next rollout during the update), end to
    # end: the overlapped trainer against raw EnvPool is the figure (>= 97% is the aim)
    "ppo-atari-overlap": Case("ppo", "Pong-v5", 1024, 32, warmup=3, timed=20, flags=("--config", "configs/atari.yaml"),
                              variants=OVERLAP_VARIANTS, quick_variants=OVERLAP_VARIANTS, turns=3, raw_steps=100,
                              raw_warmup=10),
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
                                                       torchrun_ranks=(1,), turns=3)
DEFAULT_CASES = "ppo-cartpole,impala-cartpole,ppo-breakout"
UPDATE_CASES = {"update-breakout": dict(obs_shape=(4, 84, 84), num_actions=4, minibatch=16384, minibatches=4,
                                        epochs=4),
                # configs/atari.yaml's update: 1024 envs x 32 steps, 4 epochs of 2048-step minibatches
                "update-atari-preset": dict(obs_shape=(4, 84, 84), num_actions=6, minibatch=2048, minibatches=16,
                                            epochs=4)}
@dataclass(frozen=True)
class UpdateVariant:
    """How ``update_microbench`` runs the update: cuDNN deterministic or timed (``cudnn.benchmark``),
    channels-last convolutions (the Nature CNN's own layout switch, ``NatureCNN.channels_last``; the
    trainers' CUDA layout; off: contiguous), ``torch.compile`` of the loss, TF32 matrix products, bf16 autocast,
    the whole minibatch step captured in a CUDA graph (CUDA only: what launching costs at small minibatches)."""

    deterministic: bool = True
    channels_last: bool = False
    compiled: bool = False
    tf32: bool = False
    bf16: bool = False
    graphed: bool = False  # the minibatch step replayed from one CUDA graph (rltrain.cuda_graph.GraphedStep)


UPDATE_VARIANTS = (  # rows: what ran; "(--flag)": the rows the trainers run on CUDA
    ("cuDNN deterministic", UpdateVariant()),
    ("cuDNN deterministic + channels_last (--torch-deterministic)", UpdateVariant(channels_last=True)),
    ("cuDNN timed", UpdateVariant(deterministic=False)),
    ("cuDNN timed + channels_last", UpdateVariant(deterministic=False, channels_last=True)),
    ("cuDNN timed + TF32 matmul", UpdateVariant(deterministic=False, tf32=True)),
    ("cuDNN timed + channels_last + TF32 (--no-torch-deterministic)",
     UpdateVariant(deterministic=False, channels_last=True, tf32=True)),
    ("cuDNN timed + bf16 autocast", UpdateVariant(deterministic=False, bf16=True)),
    ("cuDNN timed + channels_last + bf16 autocast", UpdateVariant(deterministic=False, channels_last=True, bf16=True)),
    ("cuDNN timed + compile", UpdateVariant(deterministic=False, compiled=True)),
    ("cuDNN timed + channels_last + TF32 + CUDA graph (--graph-update)",
     UpdateVariant(deterministic=False, channels_last=True, tf32=True, graphed=True)),
)


def quick_case(case: Case) -> Case:
    """The tiny CPU version of ``case``: a few envs, a few steps, the trainer's defaults (a preset's
    minibatch size may not fit its batch), only the variants it keeps (``quick_variants``)."""
    atari = env_family(case.env_id) == "atari"
    return dataclasses.replace(case, num_envs=4 if atari else 8, num_steps=4 if atari else 16, warmup=1,
                               timed=2, flags=(), after_flags=case.quick_after_flags, variants=case.quick_variants,
                               raw_steps=10 if atari else 50, raw_warmup=2)


@dataclass
class Args:
    cases: str = DEFAULT_CASES
    """comma-separated cases: ppo-cartpole, ppo-breakout, ppo-atari-preset, ppo-atari-overlap, impala-cartpole,
    impala-breakout, update-breakout, update-atari-preset, ppo-cartpole-torchrun1"""
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
    turns: Optional[int] = None
    """run every case's runs this many times, round-robin, raw EnvPool again at each turn's start; the tables
    give the median and range (default: 1, ppo-cartpole-torchrun1: 3)"""
    time_budget: Optional[float] = None
    """no run starts after this many seconds but the first turn's before and after, which always run, first
    (default: 400 s a turn)"""
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


def update_microbench(obs_shape, num_actions: int, minibatch: int, minibatches: int, epochs: int,
                      repeats: int = 3, warmup: int = 2) -> Dict[str, Dict]:
    """ms per PPO update (``epochs`` x ``minibatches`` steps of ``minibatch`` random frames through the
    Nature CNN: scripts/ppo.py's loss with configs/atari.yaml's coefficients, backward, clipping, Adam)
    for each of UPDATE_VARIANTS."""
    import torch
    import ppo
    from agents import make_agent
    from rltrain.cuda_graph import GraphedStep, capturable_adam
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    preset = ppo.cli(["--config", str(ROOT / "configs" / "atari.yaml")])  # clip, entropy, value coefficients
    saved = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
             torch.backends.cuda.matmul.allow_tf32)
    out: Dict[str, Dict] = {}
    n = minibatch * minibatches
    gen = torch.Generator().manual_seed(0)
    source = {"obs": torch.randint(0, 256, (n, *obs_shape), dtype=torch.uint8, generator=gen),
              "actions": torch.randint(0, num_actions, (n,), generator=gen),
              "logprobs": -3 * torch.rand(n, generator=gen), "advantages": torch.randn(n, generator=gen),
              "returns": torch.randn(n, generator=gen), "values": torch.randn(n, generator=gen),
              "valid": torch.ones(n)}
    assert set(source) == {*ppo.LOSS_ROWS, "valid"}
    source = {k: x.to(device) for k, x in source.items()}
    for label, v in UPDATE_VARIANTS:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = v.deterministic, not v.deterministic
        torch.backends.cuda.matmul.allow_tf32 = v.tf32
        torch.manual_seed(0)
        agent = make_agent("nature_cnn", obs_shape, True, num_actions)
        agent.torso.channels_last = v.channels_last  # the agent's own layout switch (agents/nature_cnn.py)
        agent = agent.to(device)
        if v.graphed and device.type != "cuda":
            out[label] = {"error": "skipped: CUDA graphs need CUDA"}
            continue
        optimizer = (capturable_adam(agent.parameters(), 2.5e-4, 1e-5, device) if v.graphed else
                     torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5, fused=device.type == "cuda"))
        loss_fn = partial(ppo.minibatch_loss, preset, agent)
        step_loss = torch.compile(loss_fn, dynamic=False) if v.compiled else loss_fn

        def autocast_loss(rows, step_loss=step_loss, bf16=v.bf16):
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                return step_loss(rows)
        step = partial(ppo.minibatch_step, preset, agent, optimizer, loss_fn=autocast_loss)
        graphed = GraphedStep(step, agent.parameters(), optimizer, device) if v.graphed else None

        def update():
            for _ in range(epochs):
                for mb in torch.randperm(n, device=device).view(minibatches, minibatch):
                    if graphed is not None:
                        graphed(source, mb)
                    else:
                        step({k: x[mb] for k, x in source.items()})
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
    lines = [results_tables.machine(meta), "",
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


if __name__ == "__main__":
    main()
