"""Trainer throughput against raw EnvPool, before and after, in one command: a table last, JSON written.

    python scripts/bench_trainer.py --before-root PATH        # GPU host: every default case, ~7 min
    python scripts/bench_trainer.py --cases ppo-cartpole      # a subset (names below)
    python scripts/bench_trainer.py --cases ppo-breakout --turns 3   # every run 3 times, round-robin: median (range)
    python scripts/bench_trainer.py --quick                   # tiny versions on the CPU, < 1 min
    python scripts/bench_trainer.py --markdown docs/results/trainer_throughput.json   # its tables
    python scripts/bench_trainer.py --cases ppo-cartpole-torchrun1 --out docs/results/torchrun_overhead.json

For each case (an env, N envs, T steps):

1. **raw EnvPool**: random actions through one synchronous pool of the same N
   (``scripts/bench_envpool.py``'s measurement), in this process, with one thread per core and, for CartPole, half as
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

The code: the cases in ``rltrain/bench/trainer_cases.py``, the runs in ``rltrain/bench/trainer_runs.py``,
the tables in ``rltrain/bench/trainer_tables.py``, the update cases in ``rltrain/bench/update_microbench.py``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Sequence

import tyro

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a plain checkout too

from rltrain.bench.trainer_cases import DEFAULT_CASES  # noqa: E402
from rltrain.bench.trainer_runs import run  # noqa: E402
from rltrain.bench.trainer_tables import markdown  # noqa: E402


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
    """run the after trainer's variants too (--quick: only those a case keeps, ppo-atari-overlap's)"""
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


def main(argv: Optional[Sequence[str]] = None) -> Dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = tyro.cli(Args, args=argv)
    if args.markdown:
        text = markdown(json.loads(Path(args.markdown).read_text()))
        print(text)
        return {"markdown": text}
    return run(args, argv)


if __name__ == "__main__":
    main()
