"""Scripted environments for the trainer tests: every observation, reward and episode end is known.

An env replays a fixed script of transitions, whatever the actions.  Its episodes are given as
``(length, end)`` pairs, ``end`` ``"terminated"`` or ``"truncated"`` (a time limit), repeated for
ever; after every end comes next-step autoreset's dummy transition (reward 0, no flags; its
observation is the first of the next episode).  The observation before transition ``i`` and the
reward of an ordinary transition are fixed functions of ``i mod period`` and the env's index, so
with ``period`` a multiple of the script's length the env is periodic.

* :meth:`ScriptedEnv.transition` / :meth:`ScriptedEnv.observation`: the script, for references;
* :class:`ScriptedGroups`: :class:`envs.groups.EnvGroups`' interface (PPO's rollout collector);
* :class:`ScriptedAsyncPool`: EnvPool's asynchronous interface (IMPALA's actors), every env in
  each ``recv``;
* :func:`expected_rollout`: the ``[T, N]`` transitions ``start .. start + T - 1`` of a list of envs,
  as the trainers' storage should hold them.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch

from envs.make import EnvInfo

OBS_DIM = 4
NUM_ACTIONS = 2
APERIODIC = 1 << 30


class ScriptedEnv:
    """One env replaying its script (module docstring)."""

    def __init__(self, index: int, episodes: Sequence[Tuple[int, str]], period: int = APERIODIC):
        flags: List[Tuple[bool, bool]] = []  # (terminated, truncated) of each transition of one cycle
        for length, end in episodes:
            if end not in ("terminated", "truncated"):
                raise ValueError(f"episode end must be 'terminated' or 'truncated', got {end!r}")
            flags += [(False, False)] * (length - 1) + [(end == "terminated", end == "truncated")]
            flags.append((False, False))  # next-step autoreset's dummy transition
        self.index, self.period = index, period
        self.cycle = flags or [(False, False)]  # no episodes: one endless episode
        self.dummy = [any(self.cycle[c - 1]) for c in range(len(self.cycle))]  # follows an end: reward 0
        self.step_count = 0

    def observation(self, i: int) -> np.ndarray:
        """The observation before transition ``i``."""
        k, j = i % self.period, self.index
        return np.array([np.sin(0.7 * k + j), np.cos(0.3 * k + 2 * j), ((13 * k + j) % 7) / 7 - 0.5, 0.1 * j],
                        dtype=np.float32)

    def transition(self, i: int) -> Tuple[float, bool, bool]:
        """``(reward, terminated, truncated)`` of transition ``i``."""
        c = i % len(self.cycle)
        terminated, truncated = self.cycle[c]
        if self.dummy[c]:
            return 0.0, False, False
        k = i % self.period
        return 0.25 * ((7 * k + 3 * self.index) % 5) - 0.3 + 0.05 * self.index, terminated, truncated

    def reset(self) -> np.ndarray:
        self.step_count = 0
        return self.observation(0)

    def step(self) -> Tuple[np.ndarray, float, bool, bool]:
        i = self.step_count
        self.step_count += 1
        return (self.observation(i + 1), *self.transition(i))


def env_info(num_envs: int) -> EnvInfo:
    return EnvInfo(env_id="CartPole-v1", family="classic", num_envs=num_envs, num_threads=1, obs_shape=(OBS_DIM,),
                   obs_dtype=np.dtype(np.float32), discrete=True, action_shape=(), num_actions=NUM_ACTIONS,
                   action_low=None, action_high=None)


def _batch(envs: Sequence[ScriptedEnv], outs):
    obs, rew, term, trunc = zip(*outs)
    ids = np.array([e.index for e in envs], dtype=np.int32)
    return (np.stack(obs), np.array(rew, dtype=np.float32), np.array(term), np.array(trunc),
            {"env_id": ids})


class ScriptedGroups:
    """:class:`envs.groups.EnvGroups`' interface over scripted envs, one group per ``envs_per_group``."""

    def __init__(self, scripts: Sequence[Sequence[Tuple[int, str]]], num_groups: int = 1, period: int = APERIODIC):
        self.envs = [ScriptedEnv(j, s, period) for j, s in enumerate(scripts)]
        self.num_envs, self.num_groups = len(self.envs), num_groups
        self.group_size = self.num_envs // num_groups
        self.info = env_info(self.num_envs)
        self._pending: Dict[int, list] = {}

    def envs_of(self, g: int) -> slice:
        return slice(g * self.group_size, (g + 1) * self.group_size)

    def reset(self, g: int) -> np.ndarray:
        return np.stack([e.reset() for e in self.envs[self.envs_of(g)]])

    def send(self, g: int, action: np.ndarray) -> None:
        assert len(action) == self.group_size
        self._pending[g] = [e.step() for e in self.envs[self.envs_of(g)]]

    def recv(self, g: int):
        obs, rew, term, trunc, _ = _batch(self.envs[self.envs_of(g)], self._pending.pop(g))
        return obs, rew, term, trunc, {"env_id": np.arange(self.group_size, dtype=np.int32)}

    def close(self) -> None:
        pass


class ScriptedAsyncPool:
    """EnvPool's asynchronous interface (``async_reset`` / ``send`` / ``recv``) over scripted envs; a
    ``recv`` returns every env, in env order."""

    def __init__(self, scripts: Sequence[Sequence[Tuple[int, str]]], period: int = APERIODIC):
        self.envs = [ScriptedEnv(j, s, period) for j, s in enumerate(scripts)]
        self.info = env_info(len(self.envs))
        self._pending: list = []

    def async_reset(self) -> None:
        self._pending = [(e.reset(), 0.0, False, False) for e in self.envs]

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        assert list(env_id) == list(range(len(self.envs)))
        self._pending = [e.step() for e in self.envs]

    def recv(self):
        return _batch(self.envs, self._pending)

    def close(self) -> None:
        pass


def expected_rollout(envs: Sequence[ScriptedEnv], start: int, T: int) -> Dict[str, torch.Tensor]:
    """Transitions ``start .. start + T - 1`` of every env as ``[T, N]`` tensors (``obs`` ``[T + 1, N, 4]``:
    the last row is the bootstrap observation), with ``valid`` False for the step after an end."""
    out = {k: [] for k in ("rewards", "terminated", "truncated", "valid")}
    for e in envs:
        steps = [e.transition(i) for i in range(start - 1, start + T)]  # one before: valid of the first row
        out["rewards"].append([s[0] for s in steps[1:]])
        out["terminated"].append([s[1] for s in steps[1:]])
        out["truncated"].append([s[2] for s in steps[1:]])
        out["valid"].append([not (start + t > 0 and (a[1] or a[2])) for t, a in enumerate(steps[:-1])])
    rollout = {k: torch.tensor(v).T for k, v in out.items()}
    rollout["rewards"] = rollout["rewards"].double()
    rollout["obs"] = torch.from_numpy(np.stack([np.stack([e.observation(i) for e in envs])
                                                for i in range(start, start + T + 1)]))
    return rollout
