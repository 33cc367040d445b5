"""``num_envs`` EnvPool environments as K groups stepped in turn, so env stepping overlaps device work.

PPO needs a ``[T, N]`` rollout in which every env takes exactly ``T`` steps with the current policy.
EnvPool's asynchronous mode with ``batch_size < num_envs`` on ONE pool returns whichever envs finished
first: per-env chains then end unequal within a fixed ``[T, N]`` rollout, and holding back the envs that
already took their ``T`` steps can leave fewer than ``batch_size`` envs in flight, so ``recv`` blocks
for ever.  Instead :class:`EnvGroups` builds K pools of ``N / K`` envs (``batch_size`` = the pool's
size).  Each pool is then EnvPool's synchronous case driven through ``send`` / ``recv``: a ``recv``
returns all of its envs, in env-id order (checked), and the host is free between the ``send`` of
group ``g`` and its ``recv``.  A rollout steps the groups in turn::

    send(A) ... [host: B's copies + inference] send(B) ... recv(A) [host: A's] send(A) ... recv(B) ...

so while the host and the device work on one group the others step.  Pool ``g`` is seeded with
``seed + g * N / K``: EnvPool seeds env ``i`` of a pool with ``seed + i``, so every env gets the seed it
would get in one pool of ``N`` -- the same episodes as a single synchronous pool for the same actions
(tested).

Atari pools send only each step's newest frame (``make_envs(..., stack_on_device=True)``; the collector
stacks them, :mod:`envs.frame_stack`).  ``num_threads`` is per group (0: one per core); for
classic-control envs the groups, which step at the same time, divide it between them
(:func:`envs.make.threads_per_pool`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, List, Tuple

import numpy as np
import torch

from envs.make import EnvInfo, env_family, make_envs, threads_per_pool
from rltrain.config import ConfigError

__all__ = ["EnvGroups", "default_env_groups"]


def default_env_groups(requested: int, num_envs: int, device: torch.device) -> int:
    """``requested`` if > 0; else 2 on CUDA (when 2 divides ``num_envs``), 1 on the CPU, where
    inference and env stepping share the same cores and overlapping them gains nothing."""
    if requested > 0:
        return requested
    return 2 if torch.device(device).type == "cuda" and num_envs % 2 == 0 else 1


class EnvGroups:
    """K EnvPools of ``num_envs / K`` envs; see the module docstring.  ``kwargs`` go to
    :func:`envs.make.make_envs` (and from there to ``envpool.make``)."""

    def __init__(self, env_id: str, num_envs: int, num_groups: int, seed: int, num_threads: int = 0,
                 **kwargs: Any):
        if num_groups < 1 or num_envs % num_groups:
            raise ConfigError(f"--env-groups {num_groups} must be >= 1 and divide --num-envs {num_envs}")
        self.num_envs, self.num_groups = num_envs, num_groups
        self.group_size = M = num_envs // num_groups
        self.pools: List[Any] = []
        threads = threads_per_pool(num_threads, num_groups, env_family(env_id))
        for g in range(num_groups):
            pool, info = make_envs(env_id, M, seed + g * M, threads, batch_size=M, stack_on_device=True, **kwargs)
            self.pools.append(pool)
        self.info: EnvInfo = dataclasses.replace(info, num_envs=num_envs)
        self._ids = np.arange(M, dtype=np.int32)

    def envs_of(self, g: int) -> slice:
        """The env indices ``[g * M, (g + 1) * M)`` of group ``g``."""
        return slice(g * self.group_size, (g + 1) * self.group_size)

    def reset(self, g: int) -> np.ndarray:
        """Reset group ``g`` (synchronously); its first observations."""
        return self.pools[g].reset()[0]

    def send(self, g: int, action: np.ndarray) -> None:
        """Start stepping group ``g`` with ``action`` (one row per env of the group); returns at once."""
        self.pools[g].send(action, self._ids)

    def recv(self, g: int) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Wait for group ``g``'s step: ``(obs, reward, terminated, truncated, info)`` in env order."""
        out = self.pools[g].recv()
        if not np.array_equal(out[4]["env_id"], self._ids):
            raise RuntimeError(f"EnvPool returned group {g}'s envs out of order ({out[4]['env_id'][:8]}...); "
                               "a pool whose batch_size equals its num_envs must return them in env order")
        return out

    def close(self) -> None:
        for pool in self.pools:
            if hasattr(pool, "close"):
                pool.close()
