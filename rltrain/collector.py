"""PPO's on-policy ``[T, N]`` rollouts: env groups stepped in turn, captured inference, pinned copies.

:meth:`RolloutCollector.collect` fills :attr:`RolloutCollector.buf` with ``T`` steps of every env, all
acted by the current parameters (exactly on-policy), and :attr:`RolloutCollector.bootstrap_value` with
``V(s_T)``.  For each step and each group ``g`` of :class:`envs.groups.EnvGroups`::

    recv(g)                    obs_{t} and the outcome of step t-1 (reward, terminated, truncated)
    pinned stage -> device     obs into the policy's static input, outcome into its [T, K, 3, M] slot
    policy step (one replay)   a_t, log pi(a_t|s_t), V(s_t); obs/action/logprob/value written to row t
    actions to the host        the one synchronisation of the step
    send(g, a_t)               group g steps while the host serves the next group

Row ``T`` of the storage is the bootstrap: the step after the last action runs the policy once more on
``s_T`` (its action is not sent) and its value is ``V(s_T)``.  The policy's static input keeps ``s_T``
for the next rollout's row 0.  Inside the recorded step the storage row is a device-side counter
(``index_copy_`` at ``step_index``, then ``step_index += 1``), so one recording serves every row.

No per-step device allocation and no other synchronisation: observations stay in their dtype (``uint8``
frames stay ``uint8``) from EnvPool's buffer through one pinned copy into the device input -- for Atari
only each step's newest frame, which :class:`envs.frame_stack.FrameStack` stacks in place into the
policy's static input (a quarter of the bytes of EnvPool's own 4-frame stacks); the
outcomes of the whole rollout become ``rewards`` / ``terminated`` / ``truncated`` / ``valid`` in a few
launches at the end.  ``valid[t] = not (terminated or truncated)[t-1]`` masks the next-step-autoreset
dummy step (carried across rollouts).  Reward normalisation, when on, runs then, step by step over the
whole ``N`` as a single synchronous pool would; observation normalisation runs per group as its
observations arrive (its running statistics see the groups one after the other).

Phases (laps of :class:`rltrain.timers.PhaseTimer`): ``rollout/env`` (waiting in ``recv``, ``send``,
episode statistics), ``rollout/h2d`` (pinned staging and copies, the end-of-rollout outcome layout),
``rollout/inference`` (the policy step), ``rollout/d2h`` (actions to the host, which waits for the
device).
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

from envs.episode_stats import EpisodeStats
from envs.frame_stack import FrameStack
from envs.groups import EnvGroups
from envs.normalize import ObsNormalizer, RewardNormalizer
from rltrain.policy_step import PolicyStep
from rltrain.rollout import HostToDevice, RolloutBuffer
from rltrain.timers import PhaseTimer

__all__ = ["RolloutCollector"]


class RolloutCollector:
    """See the module docstring.  ``capture=False`` runs the policy step eagerly on CUDA too; ``generator``
    draws the actions' noise (default: the device's default generator)."""

    def __init__(self, envs: EnvGroups, agent: nn.Module, num_steps: int, device: torch.device, *,
                 obs_norm: Optional[ObsNormalizer] = None, rew_norm: Optional[RewardNormalizer] = None,
                 capture: bool = True, generator: Optional[torch.Generator] = None):
        info = envs.info
        self.envs, self.device, self.obs_norm, self.rew_norm = envs, torch.device(device), obs_norm, rew_norm
        T, N, K, M = num_steps, envs.num_envs, envs.num_groups, envs.group_size
        self.T = T
        env_obs_dtype = torch.uint8 if info.obs_dtype == np.uint8 else torch.float32
        obs_dtype = torch.float32 if obs_norm is not None else env_obs_dtype
        self.storage = RolloutBuffer.allocate(T + 1, N, info.obs_shape, obs_dtype, info.action_shape,
                                              torch.long if info.discrete else torch.float32, self.device)
        self.buf = self.storage.map(lambda x: x[:T])
        self.outcome = torch.zeros((T, K, 3, M), dtype=torch.float32, device=self.device)
        self.prev_done = torch.zeros(N, dtype=torch.bool, device=self.device)
        self.step_index = [torch.zeros(1, dtype=torch.long, device=self.device) for _ in range(K)]
        self.policy = [
            PolicyStep(agent, M, info.obs_shape, obs_dtype, self.device, discrete=info.discrete,
                       num_actions=info.num_actions, action_low=info.action_low, action_high=info.action_high,
                       record=self._recorder(g), capture=capture, generator=generator)
            for g in range(K)]
        self.raw_obs = ([torch.zeros((M, *info.obs_shape), dtype=env_obs_dtype, device=self.device) for _ in range(K)]
                        if obs_norm is not None else None)
        env_shape = info.obs_shape
        self.stacks = self.frames = self.starts_dev = self.starts_h2d = None
        if info.stack_on_device:  # Atari: EnvPool sends each step's newest frame, stacked here
            env_shape = (1, *info.obs_shape[1:])
            self.stacks = [FrameStack(M, info.obs_shape, self.device, env_obs_dtype,
                                      stack=self.policy[g].obs if obs_norm is None else self.raw_obs[g])
                           for g in range(K)]
            self.frames = [torch.zeros((M, *env_shape), dtype=env_obs_dtype, device=self.device) for _ in range(K)]
            self.starts_dev = [torch.ones(M, dtype=torch.bool, device=self.device) for _ in range(K)]
            self.starts_h2d = [HostToDevice((M,), torch.bool, self.device) for _ in range(K)]
        self.obs_h2d = [HostToDevice((M, *env_shape), env_obs_dtype, self.device) for _ in range(K)]
        self.outcome_h2d = [HostToDevice((3, M), torch.float32, self.device) for _ in range(K)]
        self.ep_stats = [EpisodeStats(M) for _ in range(K)]  # a group's envs in order: no index arrays
        self.bootstrap_value = self.storage.values[T]
        self._started = False

    @property
    def captured(self) -> bool:
        return all(p.captured for p in self.policy)

    def _recorder(self, g: int):
        sl = self.envs.envs_of(g)
        s = self.storage
        obs, actions, logprobs, values = s.obs[:, sl], s.actions[:, sl], s.logprobs[:, sl], s.values[:, sl]
        row = self.step_index[g]

        def record(o: torch.Tensor, a: torch.Tensor, logp: torch.Tensor, v: Optional[torch.Tensor]) -> None:
            obs.index_copy_(0, row, o.unsqueeze(0))
            actions.index_copy_(0, row, a.unsqueeze(0))
            logprobs.index_copy_(0, row, logp.unsqueeze(0))
            values.index_copy_(0, row, v.unsqueeze(0))
            row.add_(1)
        return record

    def _stage_obs(self, g: int, obs_np: np.ndarray, starts: Optional[np.ndarray]) -> None:
        """Group ``g``'s observations into the policy's static input.  Stacked on the device (Atari):
        ``obs_np`` is the newest frame and ``starts`` says which envs start a game with it."""
        if self.stacks is None:
            raw = self.obs_h2d[g].into(obs_np, self.policy[g].obs if self.obs_norm is None else self.raw_obs[g])
        else:
            frame = self.obs_h2d[g].into(obs_np, self.frames[g])
            raw = self.stacks[g].push(frame, self.starts_h2d[g].into(starts, self.starts_dev[g]))
        if self.obs_norm is not None:
            self.policy[g].obs.copy_(self.obs_norm(raw))

    def collect(self, timer: PhaseTimer) -> Tuple[List[float], List[int]]:
        """One rollout into :attr:`buf` and :attr:`bootstrap_value`; returns the returns and lengths of
        the episodes that ended in it.  Call under ``torch.inference_mode()``."""
        envs, T, K = self.envs, self.T, self.envs.num_groups
        timer.mark()
        for row in self.step_index:
            row.zero_()
        if not self._started:  # first rollout (also after a resume): episodes start afresh
            for g in range(K):
                self._stage_obs(g, envs.reset(g), np.ones(envs.group_size, dtype=bool))  # every env starts a game
            self._started = True
        returns: List[float] = []
        lengths: List[int] = []
        timer.lap("rollout/h2d")
        for step in range(T + 1):
            for g in range(K):
                policy = self.policy[g]
                if step > 0:
                    obs_np, reward, terminated, truncated, info = envs.recv(g)
                    ended_ret, ended_len = self.ep_stats[g].step(reward, terminated, truncated, info)
                    returns.extend(ended_ret.tolist())
                    lengths.extend(ended_len.tolist())
                    timer.lap("rollout/env")
                    starts = self.stacks[g].starts(terminated, truncated, info) if self.stacks is not None else None
                    self._stage_obs(g, obs_np, starts)
                    self.outcome_h2d[g].into(np.stack([reward, terminated, truncated]), self.outcome[step - 1, g])
                    timer.lap("rollout/h2d")
                policy()
                timer.lap("rollout/inference")
                if step < T:
                    action = policy.actions_to_host()
                    timer.lap("rollout/d2h")
                    envs.send(g, action)
                    timer.lap("rollout/env")
        self._finish()
        timer.lap("rollout/h2d")
        return returns, lengths

    def _finish(self) -> None:
        """The rollout's outcomes ``[T, K, 3, M]`` into ``rewards`` / ``terminated`` / ``truncated`` /
        ``valid`` ``[T, N]``; reward normalisation."""
        buf, T = self.buf, self.T
        out = self.outcome.permute(0, 2, 1, 3).reshape(T, 3, -1)
        buf.rewards.copy_(out[:, 0])
        torch.gt(out[:, 1], 0, out=buf.terminated)
        torch.gt(out[:, 2], 0, out=buf.truncated)
        done = buf.terminated | buf.truncated
        buf.valid[0] = ~self.prev_done
        torch.logical_not(done[:-1], out=buf.valid[1:])
        self.prev_done.copy_(done[-1])
        if self.rew_norm is not None:
            for t in range(T):
                buf.rewards[t] = self.rew_norm(buf.rewards[t], done[t])
