"""Per-env trajectory chains from EnvPool's asynchronous ``recv`` / ``send``.

With ``batch_size < num_envs`` EnvPool's ``recv()`` returns whichever
``batch_size`` envs finished first, in any order (``info["env_id"]``).  The
:class:`TrajectoryAssembler` keeps one chain per env in preallocated
time-major storage ``[T(+1), N]`` on the device and writes each batch with
index tensors ``(position[env], env)`` -- no per-env Python loop:

* :meth:`TrajectoryAssembler.observe` takes a ``recv`` batch: the reward /
  terminated / truncated of each env's previous action go to row ``pos - 1``,
  the observation to row ``pos``.  An env whose chain reaches ``pos == T``
  has a complete column: ``obs[0..T]`` (``obs[T]`` is the bootstrap
  observation), actions, behaviour log-probs, ... ``[0..T-1]``.  Complete
  columns are gathered (``index_select``), the env's chain restarts with
  ``obs[0] = obs[T]``, and once ``out_width`` columns are pending a
  :class:`Trajectory` ``[T, out_width]`` is returned.
* :meth:`TrajectoryAssembler.act` records the action, its behaviour
  log-probability, the policy version and ``valid`` at row ``pos`` and
  advances ``pos``.

``valid[t]`` is ``False`` for the next-step-autoreset dummy transition (the
step after an episode ended: action ignored, reward 0); it carries over
trajectory boundaries through ``last_done``.  With next-step autoreset the
observation after a truncated step is the final observation, i.e. the next
row of the chain, so ``values[t + 1]`` is the truncation bootstrap.

Positions live on the host (numpy; ``env_id`` comes from the host anyway), so
deciding which columns are complete costs no device synchronisation.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch

__all__ = ["Trajectory", "TrajectoryAssembler"]

_TENSORS = ("obs", "actions", "logprobs", "rewards", "terminated", "truncated", "valid", "versions", "env_ids")


@dataclass
class Trajectory:
    """A learner batch: ``M`` env columns of ``T`` steps, time-major."""

    obs: torch.Tensor         # [T+1, M, *obs_shape]; obs[T] is the bootstrap observation
    actions: torch.Tensor     # [T, M, *action_shape]
    logprobs: torch.Tensor    # [T, M] behaviour log mu(a_t | s_t)
    rewards: torch.Tensor     # [T, M]
    terminated: torch.Tensor  # [T, M] bool
    truncated: torch.Tensor   # [T, M] bool
    valid: torch.Tensor       # [T, M] bool: False for the autoreset dummy step
    versions: torch.Tensor    # [T, M] int64: learner update count of the acting parameters
    env_ids: torch.Tensor     # [M] int64: which env each column is
    # host-side extras filled in by the actor
    episode_returns: List[float] = field(default_factory=list)
    episode_lengths: List[int] = field(default_factory=list)
    actor_secs: Dict[str, float] = field(default_factory=dict)
    actor_steps: int = 0
    actor_id: int = 0

    @property
    def num_steps(self) -> int:
        return self.actions.shape[0]

    @property
    def num_envs(self) -> int:
        return self.actions.shape[1]

    def record_stream(self, stream: "torch.cuda.Stream | None" = None) -> None:
        """Mark the tensors as used on ``stream`` (default: the current one) -- needed when they were
        allocated on another CUDA stream (an actor's), so the caching allocator does not reuse them early."""
        if not self.obs.is_cuda:
            return
        stream = stream or torch.cuda.current_stream(self.obs.device)
        for k in _TENSORS:
            getattr(self, k).record_stream(stream)

    def columns(self, idx: torch.Tensor) -> "Trajectory":
        """The sub-batch of columns ``idx`` (a minibatch of envs)."""
        return Trajectory(**{k: (getattr(self, k).index_select(0 if k == "env_ids" else 1, idx))
                             for k in _TENSORS})


class TrajectoryAssembler:
    """Builds :class:`Trajectory` batches from out-of-order ``recv`` batches; see the module docstring."""

    def __init__(
        self,
        num_envs: int,
        num_steps: int,
        obs_shape: Tuple[int, ...],
        obs_dtype: torch.dtype,
        action_shape: Tuple[int, ...],
        action_dtype: torch.dtype,
        device: torch.device | str,
        out_width: int | None = None,
    ):
        N, T = num_envs, num_steps
        self.N, self.T, self.device = N, T, torch.device(device)
        self.out_width = out_width or N
        f32 = dict(dtype=torch.float32, device=self.device)
        b = dict(dtype=torch.bool, device=self.device)
        self.obs = torch.zeros((T + 1, N, *obs_shape), dtype=obs_dtype, device=self.device)
        self.actions = torch.zeros((T, N, *action_shape), dtype=action_dtype, device=self.device)
        self.logprobs = torch.zeros((T, N), **f32)
        self.rewards = torch.zeros((T, N), **f32)
        self.terminated = torch.zeros((T, N), **b)
        self.truncated = torch.zeros((T, N), **b)
        self.valid = torch.ones((T, N), **b)
        self.versions = torch.zeros((T, N), dtype=torch.long, device=self.device)
        self._version = torch.zeros((), dtype=torch.long, device=self.device)
        self.last_done = torch.zeros(N, **b)  # the env's previous step ended an episode
        self.pos = np.zeros(N, dtype=np.int64)  # host: next obs row of each env's chain
        self._pending: List[Trajectory] = []
        self._pending_cols = 0

    def _index(self, a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a, dtype=np.int64)).to(self.device, non_blocking=True)

    def observe(
        self,
        env_ids: np.ndarray,
        obs: torch.Tensor,
        reward: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
    ) -> List[Trajectory]:
        """Record one ``recv`` batch (``obs[i]`` is env ``env_ids[i]``'s new observation,
        ``reward[i]`` etc. the outcome of its previous action); returns the finished batches."""
        env_ids = np.asarray(env_ids, dtype=np.int64)
        p = self.pos[env_ids]
        if np.any(p > self.T):
            raise RuntimeError("env chain overflow: act() was not called after observe()")
        ids, rows = self._index(env_ids), self._index(p)
        prev = (rows - 1).clamp_min(0)  # p == 0 only right after reset: row 0 is rewritten later
        self.rewards[prev, ids] = reward.float()
        self.terminated[prev, ids] = terminated.bool()
        self.truncated[prev, ids] = truncated.bool()
        done = terminated.bool() | truncated.bool()
        self.last_done[ids] = done & (rows > 0)
        self.obs[rows, ids] = obs.to(self.obs.dtype)
        complete = env_ids[p == self.T]
        if complete.size == 0:
            return []
        cols = self._index(complete)
        self._pending.append(Trajectory(
            obs=self.obs.index_select(1, cols), actions=self.actions.index_select(1, cols),
            logprobs=self.logprobs.index_select(1, cols), rewards=self.rewards.index_select(1, cols),
            terminated=self.terminated.index_select(1, cols), truncated=self.truncated.index_select(1, cols),
            valid=self.valid.index_select(1, cols), versions=self.versions.index_select(1, cols),
            env_ids=cols.clone()))
        self._pending_cols += complete.size
        self.obs[0, cols] = self.obs[self.T, cols]  # the chain continues from the bootstrap obs
        self.pos[complete] = 0
        out = []
        while self._pending_cols >= self.out_width:
            out.append(self._take(self.out_width))
        return out

    def _take(self, width: int) -> Trajectory:
        parts = self._pending
        merged = {k: (torch.cat([getattr(t, k) for t in parts], dim=0 if k == "env_ids" else 1)
                      if len(parts) > 1 else getattr(parts[0], k)) for k in _TENSORS}
        total = merged["env_ids"].shape[0]
        head = {k: (v[:width] if k == "env_ids" else v[:, :width]) for k, v in merged.items()}
        self._pending, self._pending_cols = [], total - width
        if total > width:
            self._pending.append(Trajectory(**{k: (v[width:] if k == "env_ids" else v[:, width:])
                                               for k, v in merged.items()}))
        return Trajectory(**head)

    def act(self, env_ids: np.ndarray, action: torch.Tensor, logprob: torch.Tensor, version: int) -> None:
        """Record the actions chosen for the envs of the last :meth:`observe` and advance their chains."""
        env_ids = np.asarray(env_ids, dtype=np.int64)
        p = self.pos[env_ids]
        ids, rows = self._index(env_ids), self._index(p)
        self.actions[rows, ids] = action.to(self.actions.dtype)
        self.logprobs[rows, ids] = logprob.float()
        self.valid[rows, ids] = ~self.last_done[ids]
        self._version.fill_(version)  # a device scalar: the write below costs no host-to-device copy
        self.versions[rows, ids] = self._version
        self.pos[env_ids] = p + 1
