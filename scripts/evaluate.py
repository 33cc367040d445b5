"""Evaluate a saved PPO or IMPALA agent on full episodes: the game score, mean and std, as JSON and video.

    python scripts/evaluate.py --checkpoint runs/<run>/checkpoints/final.pt --episodes 100
    python scripts/evaluate.py --checkpoint runs/<run>/checkpoints/latest.pt --episodes 30 \\
        --video breakout.mp4 --json breakout_eval.json

The agent is rebuilt from the checkpoint's saved args (network, Q head for Retrace, observation
normalisation).  Atari envs play whole games (no episodic-life resets, no reward clipping), so a
score is the game score; classic control and MuJoCo play their episodes as in training.  Actions are
sampled from the policy, as CleanRL's published scores are (``--greedy`` takes the most likely one).
``--video`` records the first episode of env 0: ``.mp4`` needs imageio-ffmpeg, ``.gif`` imageio.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional

import torch
import tyro

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a plain checkout too

from agents import make_agent  # noqa: E402
from envs import ObsNormalizer  # noqa: E402
from rltrain.checkpoint import load_checkpoint, origin_of, require_keys  # noqa: E402
from rltrain.config import exit_on_config_error  # noqa: E402
from rltrain.evaluation import AgentPolicy, VideoRecorder, evaluate, make_eval_envs  # noqa: E402
from rltrain.machine import machine_info, recorded_args  # noqa: E402
from rltrain.runtime import select_device  # noqa: E402
from rltrain.validation import validate  # noqa: E402


@dataclass
class Args:
    """Evaluate a checkpoint of scripts/ppo.py or scripts/impala.py."""

    checkpoint: str
    """checkpoint written by a trainer (runs/<run>/checkpoints/final.pt or latest.pt)"""
    episodes: int = 30
    """full episodes to play"""
    num_envs: int = 16
    """environments played in parallel (each plays episodes / num_envs of the episodes)"""
    greedy: bool = False
    """take the most likely action instead of sampling one"""
    video: Optional[str] = None
    """record one episode to this .mp4 or .gif"""
    fps: int = 30
    """frames per second of the video"""
    json: Optional[str] = None
    """write the scores and their summary to this JSON file"""
    seed: int = 0
    """seed of the evaluation envs and of the sampled actions"""
    num_threads: int = 0
    """EnvPool worker threads (0: one per core)"""
    cuda: bool = True
    """run the policy on CUDA when it is available"""


def _mlp_hidden(state: Dict[str, torch.Tensor]) -> tuple:
    """Hidden sizes of an MLP actor torso, read from its weights (``torso.net.<i>.weight``)."""
    layers = sorted((int(k.split(".")[2]), w.shape[0]) for k, w in state.items()
                    if k.startswith("torso.net.") and k.endswith(".weight"))
    return tuple(width for _, width in layers)


def rebuild_agent(saved: Dict[str, Any], state: Dict[str, torch.Tensor], info) -> torch.nn.Module:
    """The trainer's network for ``info``'s spaces, from the checkpoint's args and weights."""
    arch = saved.get("agent", "auto")
    if arch == "auto":
        arch = "nature_cnn" if len(info.obs_shape) == 3 else "mlp"
    extra = {"hidden": _mlp_hidden(state)} if arch == "mlp" else {}
    agent = make_agent(arch, info.obs_shape, info.discrete, info.num_actions,
                       q_head=saved.get("correction") == "retrace", norm_value=saved.get("norm_value", False),
                       cnn_activation=saved.get("cnn_activation", "relu"), **extra)
    agent.load_state_dict(state)
    return agent.eval()


def main(args: Args, command: Optional[str] = None) -> Dict[str, Any]:
    """Play ``args.episodes`` full episodes; the report (``--json``) holds the scores, their summary, the
    checkpoint's step and training seconds, ``meta`` (machine, versions, date) and ``command``."""
    validate(args)
    ckpt = load_checkpoint(args.checkpoint)  # a file that is not a whole checkpoint: ConfigError naming it
    require_keys(ckpt, args.checkpoint, ("args", "model"))
    saved = ckpt["args"]
    recorder = VideoRecorder(args.video, args.fps) if args.video else None  # a missing codec fails here
    device = select_device(args.cuda)
    torch.manual_seed(args.seed)
    num_envs = min(args.num_envs, args.episodes)
    envs, info = make_eval_envs(saved["env_id"], num_envs, args.seed, args.num_threads, render=recorder is not None)
    agent = rebuild_agent(saved, ckpt["model"], info).to(device)
    obs_norm = None
    if ckpt.get("obs_norm") is not None:
        obs_norm = ObsNormalizer(info.obs_shape, device)
        obs_norm.load_state_dict(ckpt["obs_norm"])
    policy = AgentPolicy(agent, device, greedy=args.greedy, obs_norm=obs_norm,
                         action_low=info.action_low, action_high=info.action_high)
    result = evaluate(policy, envs, num_envs, args.episodes, recorder)
    envs.close() if hasattr(envs, "close") else None
    report = {
        "checkpoint": str(args.checkpoint), "env_id": saved["env_id"],
        "trainer": origin_of(ckpt).trainer, "exp_name": saved.get("exp_name"),
        "global_step": ckpt.get("global_step"), "wall_s": ckpt.get("wall_s"),
        "policy": "greedy" if args.greedy else "sampled", "seed": args.seed, "device": str(device),
        "video": args.video, "command": command, "meta": machine_info(device), **result.summary(),
    }
    print(f"{saved['env_id']}: score {result.mean:.2f} +- {result.std:.2f} over {len(result.scores)} episodes "
          f"({report['policy']} actions; min {report['min']:g}, max {report['max']:g})")
    if recorder is not None:
        print(f"video: {args.video} ({recorder.frames} frames)")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
        print(f"scores: {args.json}")
    return report


if __name__ == "__main__":
    command = shlex.join(["python", "scripts/evaluate.py", *recorded_args(sys.argv[1:], ROOT)])
    exit_on_config_error(lambda: main(tyro.cli(Args, description=__doc__), command=command))
