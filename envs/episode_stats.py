"""Vectorised episode return/length statistics for next-step-autoreset envs.

Feed every ``env.step`` output to :meth:`EpisodeStats.step`; it returns the
returns and lengths of the episodes that *really* ended at that step:

* time-limit ends (``truncated``) count as episode ends, like terminations;
* the dummy transition that follows every end (next-step autoreset: the
  action is ignored, reward 0) is not counted in the length;
* Atari with episodic life: a life loss sets ``terminated`` for learning but
  the game goes on, so the episode ends only when ``info["terminated"]``
  (game over) or ``truncated``; returns use the unclipped ``info["reward"]``.

Everything is numpy on the host, where the env outputs already are, so it
costs no device synchronisation.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Tuple

import numpy as np

__all__ = ["EpisodeStats"]


class EpisodeStats:
    """Running per-env return/length accumulators (``float64`` / ``int64``)."""

    def __init__(self, num_envs: int):
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)
        self.prev_done = np.zeros(num_envs, dtype=bool)
        self.ended_envs = np.zeros(0, dtype=np.int64)  # envs whose episode ended at the last step

    def step(
        self,
        reward: np.ndarray,
        terminated: np.ndarray,
        truncated: np.ndarray,
        info: Mapping[str, Any],
        env_ids: Optional[np.ndarray] = None,
    ) -> Tuple[np.ndarray, np.ndarray]:
        """Account one step; return ``(returns, lengths)`` of episodes that ended
        (:attr:`ended_envs` then says which envs, in the same order).

        ``env_ids``: the envs these arrays belong to (EnvPool async ``recv``
        returns a subset, in any order); ``None`` means all envs in order."""
        if env_ids is not None:
            return self._step_subset(reward, terminated, truncated, info, np.asarray(env_ids))
        valid = ~self.prev_done  # the step after an end is the autoreset dummy
        raw = np.asarray(info.get("reward", reward), dtype=np.float64)
        self.returns += np.where(valid, raw, 0.0)
        self.lengths += valid
        done = np.logical_or(terminated, truncated)
        if "terminated" in info and "lives" in info:  # episodic life: end = game over
            ended = np.logical_or(np.asarray(info["terminated"], dtype=bool), truncated)
        else:
            ended = done
        ended = np.logical_and(ended, valid)
        out = self.returns[ended].copy(), self.lengths[ended].copy()
        self.ended_envs = np.flatnonzero(ended)
        self.returns[ended] = 0.0
        self.lengths[ended] = 0
        self.prev_done = np.asarray(done, dtype=bool).copy()
        return out

    def _step_subset(self, reward, terminated, truncated, info, ids):
        valid = ~self.prev_done[ids]
        raw = np.asarray(info.get("reward", reward), dtype=np.float64)
        self.returns[ids] += np.where(valid, raw, 0.0)
        self.lengths[ids] += valid
        done = np.logical_or(terminated, truncated)
        if "terminated" in info and "lives" in info:
            ended = np.logical_or(np.asarray(info["terminated"], dtype=bool), truncated)
        else:
            ended = done
        ended_ids = ids[np.logical_and(ended, valid)]
        out = self.returns[ended_ids].copy(), self.lengths[ended_ids].copy()
        self.ended_envs = ended_ids
        self.returns[ended_ids] = 0.0
        self.lengths[ended_ids] = 0
        self.prev_done[ids] = np.asarray(done, dtype=bool)
        return out
