"""Raw EnvPool random-action throughput: one JSON line on stdout.

    python scripts/bench_envpool.py --env-id CartPole-v1 --num-envs 4096 --num-threads 16

The denominator of the trainer's efficiency ratio (trainer SPS / raw SPS at the
same env count and threads).  Actions are pre-sampled uniformly, so the
timed loop is ``envs.step`` only.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs import make_envs  # noqa: E402
from rltrain.config import ConfigError  # noqa: E402


@dataclass
class Args:
    env_id: str = "CartPole-v1"
    """EnvPool task id"""
    num_envs: int = 4096
    """number of parallel environments"""
    num_threads: int = 0
    """EnvPool worker threads (0: one per core)"""
    steps: int = 200
    """timed batched steps"""
    warmup: int = 20
    """untimed batched steps first"""
    seed: int = 0
    """EnvPool seed"""


def main(args: Args) -> dict:
    envs, info = make_envs(args.env_id, args.num_envs, args.seed, args.num_threads)
    rng = np.random.default_rng(args.seed)
    n_pre = 16  # a few pre-sampled action batches, cycled
    if info.discrete:
        actions = rng.integers(0, info.num_actions, size=(n_pre, args.num_envs), dtype=np.int32)
    else:
        actions = rng.uniform(info.action_low, info.action_high,
                              size=(n_pre, args.num_envs, *info.action_shape)).astype(np.float32)
    envs.reset()
    for i in range(args.warmup):
        envs.step(actions[i % n_pre])
    t0 = time.perf_counter()
    for i in range(args.steps):
        envs.step(actions[i % n_pre])
    dt = time.perf_counter() - t0
    result = {"env_id": args.env_id, "num_envs": args.num_envs, "num_threads": info.num_threads,
              "steps": args.steps, "seconds": dt, "sps": args.steps * args.num_envs / dt}
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
