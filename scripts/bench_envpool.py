"""Raw EnvPool random-action throughput: one JSON line on stdout.

    python scripts/bench_envpool.py --env-id CartPole-v1 --num-envs 4096 --num-threads 16

The denominator of the trainer's efficiency ratio (trainer SPS / raw SPS at the
same env count and threads): ``rltrain/bench/envpool.py``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rltrain.bench.envpool import raw_throughput  # noqa: E402
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
    result = raw_throughput(args.env_id, args.num_envs, args.num_threads, args.steps, args.warmup, args.seed)
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
