"""EnvPool construction with the Gymnasium API and per-family preprocessing.

``make_envs(env_id, num_envs, seed)`` returns a synchronous EnvPool
(``env_type="gymnasium"``: ``reset() -> (obs, info)``, ``step(a) -> (obs,
reward, terminated, truncated, info)`` with next-step autoreset) plus an
:class:`EnvInfo` describing its spaces.

Families:

* ``atari``   -- EnvPool's standard preprocessing: 84x84 grayscale, frame
  stack 4, episodic life, reward clipping, up to 30 no-ops (as CleanRL's
  ``ppo_atari_envpool.py``).  Observations are ``uint8``.  With ``stack_on_device=True`` (the
  trainers) EnvPool returns only each step's newest frame and the trainer stacks them on the device
  (:mod:`envs.frame_stack`): a quarter of the bytes through the host copy.
* ``mujoco``  -- continuous control; normalisation is done by the trainer on
  tensors (:mod:`envs.normalize`).
* ``classic`` -- everything else (CartPole, Pendulum, ...).
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any, Optional, Tuple

import gymnasium as gym
import numpy as np

with warnings.catch_warnings():  # gymnasium: "Box low's precision lowered" while registering specs
    warnings.simplefilter("ignore", UserWarning)
    import envpool

from rltrain.config import ConfigError, close_matches
from rltrain.runtime import num_cores

__all__ = ["EnvInfo", "UnknownEnvError", "env_family", "make_envs", "spec_info", "ATARI_KWARGS"]

ATARI_KWARGS = dict(
    img_height=84, img_width=84, stack_num=4, episodic_life=True, reward_clip=True, noop_max=30
)


class UnknownEnvError(ConfigError):
    """The env id is not registered in EnvPool."""


@dataclass(frozen=True)
class EnvInfo:
    """What a trainer needs to know about the environments it steps."""

    env_id: str
    family: str  # "atari" | "mujoco" | "classic"
    num_envs: int
    num_threads: int
    obs_shape: Tuple[int, ...]
    obs_dtype: np.dtype
    discrete: bool
    action_shape: Tuple[int, ...]  # () for discrete
    num_actions: int  # n for discrete, action dim for continuous
    action_low: Optional[np.ndarray]  # continuous bounds (None for discrete)
    action_high: Optional[np.ndarray]
    # the env returns only the newest frame [1, H, W] of obs_shape [k, H, W]: stack with envs.frame_stack
    stack_on_device: bool = False


def _check_env_id(env_id: str) -> None:
    known = envpool.list_all_envs()
    if env_id not in known:
        raise UnknownEnvError(f"unknown env id '{env_id}' (not registered in EnvPool).{close_matches(env_id, known)}")


def env_family(env_id: str) -> str:
    """``"atari"``, ``"mujoco"`` or ``"classic"`` from the EnvPool spec class."""
    _check_env_id(env_id)
    from envpool.registration import registry

    module = str(registry.specs[env_id][0]) if env_id in registry.specs else ""
    if module.startswith("envpool.atari"):
        return "atari"
    if module.startswith("envpool.mujoco"):
        return "mujoco"
    return "classic"


# Families whose steps cost well under a microsecond: pools stepping at the same time split the cores
# between them.  Elsewhere each pool gets them all, so that while the host works on one pool's batch the
# others can use every core.  On a 16-core H100 host (docs/perf.md, trainer throughput), 4096 CartPole-v1
# envs in 2 pools: 8 threads each 1.83M steps/s, 16 each 1.17M; 4096 Breakout-v5: 16,186 and 17,724.
SHARE_CORES = {"classic": True, "atari": False, "mujoco": False}


def threads_per_pool(num_threads: int, pools: int, family: str) -> int:
    """EnvPool worker threads of each of ``pools`` pools that step at the same time: ``num_threads``
    each (0: one per core), divided among the pools for the families that share the cores
    (``SHARE_CORES``, by :func:`env_family`); at least one."""
    threads = num_threads if num_threads > 0 else num_cores()
    return max(1, threads // pools) if SHARE_CORES[family] else threads


def make_envs(
    env_id: str,
    num_envs: int,
    seed: int,
    num_threads: int = 0,
    batch_size: Optional[int] = None,
    stack_on_device: bool = False,
    **kwargs: Any,
) -> Tuple[Any, EnvInfo]:
    """Build ``num_envs`` EnvPool envs (Gymnasium API); sync mode by default.

    ``batch_size`` (``1 <= batch_size <= num_envs``) is EnvPool's async batch:
    use ``async_reset()`` / ``recv()`` / ``send(action, env_id)``; ``recv``
    returns the first ``batch_size`` envs that finished, ``info["env_id"]``
    says which (see :mod:`envs.async_collector`).

    ``num_threads <= 0`` uses one EnvPool worker thread per core (capped at
    ``num_envs``).  ``kwargs`` go to ``envpool.make`` and override the
    family defaults (e.g. ``episodic_life=False``).

    ``stack_on_device`` (Atari with ``stack_num > 1``; ignored elsewhere): EnvPool is built with
    ``stack_num=1`` and returns only each step's newest frame ``[1, H, W]``; ``info.obs_shape`` stays
    ``[stack_num, H, W]`` and ``info.stack_on_device`` is True: the caller stacks the frames with
    :class:`envs.frame_stack.FrameStack`."""
    if num_envs < 1:
        raise ConfigError(f"num_envs must be >= 1, got {num_envs}")
    if batch_size is not None and not 1 <= batch_size <= num_envs:
        raise ConfigError(f"EnvPool batch_size must be in [1, num_envs={num_envs}], got {batch_size}")
    family = env_family(env_id)
    threads = num_threads if num_threads > 0 else min(num_cores(), num_envs)
    opts = _family_options(family, kwargs)
    stack = stack_on_device and family == "atari" and opts.get("stack_num", 1) > 1
    with warnings.catch_warnings():  # gymnasium: "Box low's precision lowered" for float64 MuJoCo spaces
        warnings.simplefilter("ignore", UserWarning)
        envs = envpool.make(
            env_id, env_type="gymnasium", num_envs=num_envs, batch_size=batch_size or num_envs,
            num_threads=threads, seed=seed, **(dict(opts, stack_num=1) if stack else opts),
        )
        obs_space, act_space = envs.observation_space, envs.action_space
    info = _env_info(env_id, family, num_envs, threads, obs_space, act_space)
    if stack:
        info = dataclasses.replace(info, obs_shape=(opts["stack_num"], *info.obs_shape[1:]), stack_on_device=True)
    return envs, info


def spec_info(env_id: str, num_envs: int, **kwargs: Any) -> EnvInfo:
    """The :class:`EnvInfo` that ``make_envs(env_id, num_envs, ...)`` would return, read from EnvPool's
    spec: no environment is created (``--synthetic`` runs).  ``num_threads`` is 0 (none run)."""
    if num_envs < 1:
        raise ConfigError(f"num_envs must be >= 1, got {num_envs}")
    family = env_family(env_id)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        spec = envpool.make_spec(env_id, num_envs=num_envs, **_family_options(family, kwargs))
        obs_space, act_space = spec.gymnasium_observation_space, spec.gymnasium_action_space
    return _env_info(env_id, family, num_envs, 0, obs_space, act_space)


def _family_options(family: str, overrides: dict) -> dict:
    opts = dict(ATARI_KWARGS) if family == "atari" else {}
    opts.update(overrides)
    return opts


def _env_info(env_id: str, family: str, num_envs: int, threads: int, obs_space, act_space) -> EnvInfo:
    discrete = isinstance(act_space, gym.spaces.Discrete)
    return EnvInfo(
        env_id=env_id,
        family=family,
        num_envs=num_envs,
        num_threads=threads,
        obs_shape=tuple(obs_space.shape),
        obs_dtype=np.dtype(obs_space.dtype),
        discrete=discrete,
        action_shape=() if discrete else tuple(act_space.shape),
        num_actions=int(act_space.n) if discrete else int(np.prod(act_space.shape)),
        action_low=None if discrete else np.asarray(act_space.low, dtype=np.float32),
        action_high=None if discrete else np.asarray(act_space.high, dtype=np.float32),
    )
