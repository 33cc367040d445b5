"""Raw EnvPool throughput with random actions: the denominator of the trainers' efficiency ratio (trainer
steps/s over raw steps/s at the same env count and threads). Actions are pre-sampled uniformly, so the
timed loop is ``envs.step`` only."""

from __future__ import annotations

import time

import numpy as np


def raw_throughput(env_id: str, num_envs: int, num_threads: int = 0, steps: int = 200, warmup: int = 20,
                   seed: int = 0) -> dict:
    """Steps per second of one synchronous pool of ``num_envs`` envs with ``num_threads`` worker threads
    (0: one per core), over ``steps`` batched steps after ``warmup`` untimed ones."""
    from envs import make_envs

    envs, info = make_envs(env_id, num_envs, seed, num_threads)
    rng = np.random.default_rng(seed)
    n_pre = 16  # a few pre-sampled action batches, cycled
    if info.discrete:
        actions = rng.integers(0, info.num_actions, size=(n_pre, num_envs), dtype=np.int32)
    else:
        actions = rng.uniform(info.action_low, info.action_high,
                              size=(n_pre, num_envs, *info.action_shape)).astype(np.float32)
    envs.reset()
    for i in range(warmup):
        envs.step(actions[i % n_pre])
    t0 = time.perf_counter()
    for i in range(steps):
        envs.step(actions[i % n_pre])
    dt = time.perf_counter() - t0
    return {"env_id": env_id, "num_envs": num_envs, "num_threads": info.num_threads, "steps": steps,
            "seconds": dt, "sps": steps * num_envs / dt}
