"""Evaluation: play full episodes with a policy and return the game scores.

* :func:`make_eval_envs` -- EnvPool envs that report the game score: Atari without episodic-life
  resets and without reward clipping (same 84x84 gray frame stack, no-ops and fire-reset as
  training, so the policy sees what it was trained on); classic control and MuJoCo as they are.
* :class:`AgentPolicy` -- an actor-critic as ``obs (numpy) -> action (numpy)``: actions *sampled*
  from the policy by default, as CleanRL evaluates its published agents (``greedy=True`` takes
  the mode; a greedy Atari policy can stall, e.g. never pressing FIRE in Breakout).
* :func:`evaluate` -- ``N`` envs in parallel until ``episodes`` episodes are complete.  Env ``i``
  contributes a fixed quota (``episodes / N`` rounded), its first episodes after the reset, so the
  short episodes that finish first are not over-represented.
* :class:`VideoRecorder` -- one episode of env 0 as MP4 (imageio + imageio-ffmpeg) or GIF
  (imageio), frames from EnvPool's ``render()`` (full-size colour Atari frames, 210 x 160).
* :class:`PeriodicEvaluation` -- the trainers' ``--eval-every`` hook (``eval/score``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import torch

from envs import EpisodeStats, env_family, make_envs
from rltrain.config import ConfigError

__all__ = ["EvalResult", "AgentPolicy", "VideoRecorder", "PeriodicEvaluation", "make_eval_envs",
           "evaluate", "EVAL_ATARI_KWARGS"]

EVAL_ATARI_KWARGS = dict(episodic_life=False, reward_clip=False)
"""EnvPool options that make an Atari env report the game score: a game is one episode."""


def make_eval_envs(env_id: str, num_envs: int, seed: int, num_threads: int = 0, render: bool = False):
    """``(envs, EnvInfo)`` for evaluation; ``render=True`` enables EnvPool's ``render()`` frames."""
    kwargs: Dict[str, Any] = dict(EVAL_ATARI_KWARGS) if env_family(env_id) == "atari" else {}
    if render:
        kwargs["render_mode"] = "rgb_array"
    try:
        return make_envs(env_id, num_envs, seed, num_threads, **kwargs)
    except (TypeError, ValueError, AssertionError, RuntimeError) as e:
        if not render or isinstance(e, ConfigError):
            raise
        import envpool

        raise ConfigError(f"cannot record a video of {env_id}: this EnvPool ({envpool.__version__}) does not "
                          f"render it (render_mode='rgb_array'): {e}") from None


@dataclass
class EvalResult:
    """Scores (undiscounted, unclipped returns) and lengths of complete episodes."""

    scores: List[float] = field(default_factory=list)
    lengths: List[int] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return float(np.mean(self.scores)) if self.scores else math.nan

    @property
    def std(self) -> float:
        return float(np.std(self.scores)) if self.scores else math.nan

    def summary(self) -> Dict[str, Any]:
        return {"episodes": len(self.scores), "mean": self.mean, "std": self.std,
                "min": float(np.min(self.scores)), "max": float(np.max(self.scores)),
                "mean_length": float(np.mean(self.lengths)), "scores": self.scores, "lengths": self.lengths}


class AgentPolicy:
    """An :class:`agents.ActorCritic` as ``policy(obs) -> action`` on numpy arrays.

    ``obs_norm``: the training run's observation normaliser, applied without updating it;
    ``action_low``/``action_high``: continuous actions are clipped to the bounds (as in training)."""

    def __init__(self, agent: torch.nn.Module, device: torch.device, *, greedy: bool = False,
                 obs_norm: Optional[Callable] = None, action_low=None, action_high=None):
        self.agent, self.device, self.greedy, self.obs_norm = agent, torch.device(device), greedy, obs_norm
        self.low = None if action_low is None else torch.as_tensor(action_low, device=self.device)
        self.high = None if action_high is None else torch.as_tensor(action_high, device=self.device)

    @torch.inference_mode()
    def __call__(self, obs: np.ndarray) -> np.ndarray:
        x = torch.as_tensor(obs, device=self.device)
        x = x if x.dtype == torch.uint8 else x.float()
        if self.obs_norm is not None:
            x = self.obs_norm(x, update=False)
        dist, _ = self.agent.dist_and_critic(x)
        action = dist.mode if self.greedy else dist.sample()
        if self.low is not None:
            action = torch.maximum(torch.minimum(action, self.high), self.low)
        return action.cpu().numpy()


class VideoRecorder:
    """Stream frames to ``path`` (``.mp4``: imageio-ffmpeg; ``.gif``: imageio's Pillow plugin).

    A missing package is a :class:`ConfigError` naming it, raised when the recorder is made."""

    def __init__(self, path: str | Path, fps: int = 30):
        self.path, self.fps, self.frames = Path(path), fps, 0
        suffix = self.path.suffix.lower()
        if suffix not in (".mp4", ".gif"):
            raise ConfigError(f"--video {self.path}: the file must end in .mp4 or .gif")
        try:
            import imageio.v2 as imageio
        except ImportError:
            raise ConfigError("recording a video needs the package imageio (pip install imageio)") from None
        if suffix == ".mp4":
            try:
                import imageio_ffmpeg  # noqa: F401
            except ImportError:
                raise ConfigError("writing an MP4 needs the package imageio-ffmpeg (pip install imageio-ffmpeg); "
                                  "or ask for a .gif") from None
        self._imageio, self._writer = imageio, None
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def add(self, frame: np.ndarray) -> None:
        """Append one ``[H, W, 3]`` uint8 frame (odd sizes are padded to even for H.264)."""
        if self._writer is None:
            if self.path.suffix.lower() == ".mp4":
                self._writer = self._imageio.get_writer(self.path, fps=self.fps, macro_block_size=1)
            else:
                self._writer = self._imageio.get_writer(self.path, mode="I", duration=1000 / self.fps, loop=0)
        if self.path.suffix.lower() == ".mp4" and (frame.shape[0] % 2 or frame.shape[1] % 2):
            frame = np.pad(frame, ((0, frame.shape[0] % 2), (0, frame.shape[1] % 2), (0, 0)))
        self._writer.append_data(np.ascontiguousarray(frame))
        self.frames += 1

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def evaluate(policy: Callable[[np.ndarray], np.ndarray], envs: Any, num_envs: int, episodes: int,
             recorder: Optional[VideoRecorder] = None) -> EvalResult:
    """Play until ``episodes`` full episodes are complete; env ``i`` plays ``quota[i]`` of them.

    Episode ends follow :class:`envs.EpisodeStats` (terminations and time-limit truncations; the
    autoreset step after an end is not counted).  ``recorder``: env 0's first episode is
    recorded, one frame per step (the envs must be made with ``render=True``)."""
    if episodes < 1:
        raise ConfigError(f"--episodes must be >= 1, got {episodes}")
    quota = np.full(num_envs, episodes // num_envs) + (np.arange(num_envs) < episodes % num_envs)
    taken = np.zeros(num_envs, dtype=np.int64)
    stats, result = EpisodeStats(num_envs), EvalResult()
    obs, _ = envs.reset()
    recording = recorder is not None
    if recording:
        recorder.add(envs.render(env_ids=[0])[0])
    while (taken < quota).any():
        obs, reward, terminated, truncated, info = envs.step(policy(obs))
        if recording:
            recorder.add(envs.render(env_ids=[0])[0])
        returns, lengths = stats.step(reward, terminated, truncated, info)
        for env, ret, length in zip(stats.ended_envs, returns, lengths):
            if env == 0:
                recording = False
            if taken[env] < quota[env]:
                taken[env] += 1
                result.scores.append(float(ret))
                result.lengths.append(int(length))
    if recorder is not None:
        recorder.close()
    return result


class PeriodicEvaluation:
    """The trainers' ``--eval-every K`` hook: ``episodes`` envs, one full episode each, on their own
    EnvPool (seeded apart from training), returning ``eval/score`` (mean) and ``eval/score_std``."""

    def __init__(self, env_id: str, episodes: int, seed: int, device: torch.device, greedy: bool = False,
                 num_threads: int = 0):
        self.episodes, self.device, self.greedy = episodes, device, greedy
        self.envs, self.info = make_eval_envs(env_id, episodes, seed, num_threads)

    def __call__(self, agent: torch.nn.Module, obs_norm: Optional[Callable] = None) -> Dict[str, float]:
        policy = AgentPolicy(agent, self.device, greedy=self.greedy, obs_norm=obs_norm,
                             action_low=self.info.action_low, action_high=self.info.action_high)
        result = evaluate(policy, self.envs, self.episodes, self.episodes)
        return {"eval/score": result.mean, "eval/score_std": result.std,
                "eval/episode_length": float(np.mean(result.lengths))}

    def close(self) -> None:
        self.envs.close() if hasattr(self.envs, "close") else None
