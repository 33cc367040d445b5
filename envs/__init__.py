"""Environment construction and host/tensor-side helpers around EnvPool.

* :mod:`envs.make`          -- ``make_envs``: EnvPool (Gymnasium API) with the
  standard per-family preprocessing; unknown ids fail with close matches.
* :mod:`envs.episode_stats` -- vectorised episode return/length bookkeeping
  that understands next-step autoreset, time-limit ends and episodic life.
* :mod:`envs.normalize`     -- running mean/std observation and reward
  normalisation on tensors (no per-env Python wrappers).
* :mod:`envs.groups`        -- N envs as K EnvPools stepped in turn (send / recv),
  so env stepping overlaps the device's work on the other groups.
* :mod:`envs.frame_stack`   -- Atari frame stacking on the device, bit-exact with
  EnvPool's own (EnvPool sends only each step's newest frame).
* :mod:`envs.synthetic`     -- random rollouts without environments (``--synthetic``).
"""

from envs.episode_stats import EpisodeStats
from envs.frame_stack import FrameStack
from envs.groups import EnvGroups, default_env_groups
from envs.make import EnvInfo, UnknownEnvError, env_family, make_envs, spec_info, threads_per_pool
from envs.normalize import ObsNormalizer, RewardNormalizer, RunningMeanStd

__all__ = [
    "EnvGroups",
    "EnvInfo",
    "EpisodeStats",
    "FrameStack",
    "ObsNormalizer",
    "RewardNormalizer",
    "RunningMeanStd",
    "UnknownEnvError",
    "default_env_groups",
    "threads_per_pool",
    "env_family",
    "make_envs",
    "spec_info",
]
