"""The trainer benchmark's cases (``scripts/bench_trainer.py``, whose docstring describes each): the trainer,
its env and sizes, how long each run lasts, the flags of the before and after checkouts and the after
trainer's variants; ``quick_case`` gives the tiny CPU version of one."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Dict, Tuple

from envs.make import env_family
from rltrain.runtime import num_cores


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


def quick_case(case: Case) -> Case:
    """The tiny CPU version of ``case``: a few envs, a few steps, the trainer's defaults (a preset's
    minibatch size may not fit its batch), only the variants it keeps (``quick_variants``)."""
    atari = env_family(case.env_id) == "atari"
    return dataclasses.replace(case, num_envs=4 if atari else 8, num_steps=4 if atari else 16, warmup=1,
                               timed=2, flags=(), after_flags=case.quick_after_flags, variants=case.quick_variants,
                               raw_steps=10 if atari else 50, raw_warmup=2)
