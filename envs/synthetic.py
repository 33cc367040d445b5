"""Synthetic rollouts: the data a rollout would hand the learner, made up without environments.

A trainer run with ``--synthetic`` creates no environment: it fills its rollout storage once
(:func:`fill_rollout` for PPO's :class:`rltrain.rollout.RolloutBuffer`, :func:`random_trajectory`
for an IMPALA learner batch served by :class:`SyntheticPool`) and learns from that same rollout
every iteration, through its own credit-assignment and update code.  It measures the update at
shapes the environments cannot reach, or take minutes to create, as rl-triton's synthetic update did.

What the rollout holds (``[T, N]``, time-major):

* episode ends: each step ends its episode with probability ``1 / mean_episode_len``; an end is a
  truncation (a time limit: the critic bootstraps) with probability ``truncated_fraction``, else a
  termination; the step after an end is next-step autoreset's dummy (``valid`` False, reward 0);
* observations: standard normal for vector observations, uniform bytes for images;
* rewards: standard normal on valid steps;
* actions, their log-probabilities (and PPO's values): sampled from the trainer's own agent on those
  observations, so importance ratios start at 1 as in a real rollout.
"""

from __future__ import annotations

import threading
from typing import Optional, Tuple

import torch
import torch.nn as nn

from envs.async_collector import Trajectory

__all__ = ["episode_flags", "random_observations", "fill_rollout", "random_trajectory", "SyntheticPool"]

MEAN_EPISODE_LEN = 100
TRUNCATED_FRACTION = 0.25
_ROWS_PER_FORWARD = 65536  # agent forward passes over the made-up observations, in chunks of this many rows


def episode_flags(T: int, N: int, generator: torch.Generator, device: torch.device,
                  mean_episode_len: float = MEAN_EPISODE_LEN,
                  truncated_fraction: float = TRUNCATED_FRACTION) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(terminated, truncated, valid)`` bool ``[T, N]``: random episode ends (module docstring);
    ``valid[t]`` is False after an end at ``t - 1``."""
    ends = torch.rand(T, N, generator=generator, device=device) < 1.0 / mean_episode_len
    truncated = ends & (torch.rand(T, N, generator=generator, device=device) < truncated_fraction)
    terminated = ends & ~truncated
    valid = torch.ones(T, N, dtype=torch.bool, device=device)
    valid[1:] = ~ends[:-1]
    return terminated, truncated, valid


def random_observations(shape: Tuple[int, ...], dtype: torch.dtype, generator: torch.Generator,
                        device: torch.device) -> torch.Tensor:
    """Standard normal floats, or uniform bytes for ``torch.uint8`` (images)."""
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, dtype=torch.uint8, generator=generator, device=device)
    return torch.randn(shape, generator=generator, device=device).to(dtype)


def _generator(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def fill_rollout(buf, agent: nn.Module, seed: int) -> torch.Tensor:
    """Fill PPO's rollout storage ``buf`` (a :class:`rltrain.rollout.RolloutBuffer`) with a random
    rollout acted on by ``agent``; returns the observation after the last step (``V(s_T)``'s)."""
    T, N = buf.num_steps, buf.num_envs
    device = buf.obs.device
    g = _generator(device, seed)
    buf.obs.copy_(random_observations(tuple(buf.obs.shape), buf.obs.dtype, g, device))
    next_obs = random_observations((N, *buf.obs.shape[2:]), buf.obs.dtype, g, device)
    terminated, truncated, valid = episode_flags(T, N, g, device)
    buf.terminated.copy_(terminated)
    buf.truncated.copy_(truncated)
    buf.valid.copy_(valid)
    buf.rewards.copy_(torch.where(valid, torch.randn(T, N, generator=g, device=device), 0.0))
    obs, actions = buf.obs.flatten(0, 1), buf.actions.flatten(0, 1)
    logprobs, values = buf.logprobs.view(-1), buf.values.view(-1)
    with torch.inference_mode():
        for rows in torch.arange(T * N, device=device).split(_ROWS_PER_FORWARD):
            action, logprob, _, value = agent.get_action_and_value(obs[rows])
            actions[rows], logprobs[rows], values[rows] = action.to(actions.dtype), logprob, value
    return next_obs


def random_trajectory(agent: nn.Module, *, num_steps: int, num_envs: int, obs_shape: Tuple[int, ...],
                      obs_dtype: torch.dtype, action_shape: Tuple[int, ...], action_dtype: torch.dtype,
                      device: torch.device, seed: int) -> Trajectory:
    """An IMPALA learner batch ``[T(+1), N]`` of a random rollout (module docstring), with the behaviour
    log-probabilities of ``agent``'s policy and policy version 0."""
    T, N = num_steps, num_envs
    device = torch.device(device)
    g = _generator(device, seed)
    obs = random_observations((T + 1, N, *obs_shape), obs_dtype, g, device)
    terminated, truncated, valid = episode_flags(T, N, g, device)
    rewards = torch.where(valid, torch.randn(T, N, generator=g, device=device), 0.0)
    actions = torch.empty((T, N, *action_shape), dtype=action_dtype, device=device)
    logprobs = torch.empty(T, N, device=device)
    flat_actions, flat_logprobs = actions.flatten(0, 1), logprobs.view(-1)
    with torch.inference_mode():
        flat_obs = obs[:T].flatten(0, 1)
        for rows in torch.arange(T * N, device=device).split(_ROWS_PER_FORWARD):
            dist = agent.policy_head(agent.torso(flat_obs[rows]))
            action = dist.sample()
            flat_actions[rows], flat_logprobs[rows] = action.to(action_dtype), dist.log_prob(action)
    return Trajectory(obs=obs, actions=actions, logprobs=logprobs, rewards=rewards, terminated=terminated,
                      truncated=truncated, valid=valid,
                      versions=torch.zeros(T, N, dtype=torch.long, device=device),
                      env_ids=torch.arange(N, device=device))


class SyntheticPool:
    """The learner side of :class:`rltrain.actor_learner.ActorPool` over one stored batch: :meth:`get`
    returns ``traj`` every time, marked as acted on by the learner's latest parameters (no policy
    lag), with no episodes and no actor steps.  A Ctrl-C recorded by ``interrupt`` surfaces in
    :meth:`get` as with actors."""

    def __init__(self, traj: Trajectory, version: int = 0, interrupt=None):
        self.traj, self.version, self.interrupt = traj, version, interrupt
        self.actors: list = []
        self.stop = threading.Event()

    def start(self) -> None:
        pass

    def get(self) -> Trajectory:
        if self.interrupt is not None:
            self.interrupt.check()
        self.traj.versions.fill_(self.version)
        self.version += 1
        return self.traj

    def close(self, timeout_s: Optional[float] = None) -> None:
        self.stop.set()
