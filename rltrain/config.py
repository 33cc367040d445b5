"""Command-line + YAML configuration for the trainers.

``parse_args(Args)`` builds a dataclass instance from, in increasing priority,

1. the dataclass defaults,
2. a preset given by ``--config path.yaml`` (keys are field names; ``-`` or
   ``_`` both accepted),
3. the other command-line flags, parsed by `tyro <https://brentyi.github.io/tyro/>`_.

Bad input raises :class:`ConfigError` with a message meant for the user
(unparsable YAML, unknown field with close matches, ...); the scripts print
it and exit with status 2.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
import difflib
import sys
from pathlib import Path
from typing import Any, Callable, ClassVar, Dict, Literal, Optional, Sequence, Type, TypeVar

import tyro
import yaml

__all__ = ["ConfigError", "DistributedArgs", "ExperimentArgs", "parse_args", "load_yaml_preset", "close_matches"]

T = TypeVar("T")


@dataclass
class DistributedArgs:
    """The flags of a ``torchrun`` launch (:mod:`rltrain.distributed`); a plain ``python`` run ignores them."""

    dist_backend: Literal["auto", "nccl", "gloo"] = "auto"
    """torch.distributed backend under torchrun: auto = NCCL on CUDA, Gloo on CPU"""
    dist_timeout_s: float = 300.0
    """seconds a collective waits for the other ranks; a dead or hung rank stops the job after this"""


@dataclass
class ExperimentArgs(DistributedArgs):
    """The flags every trainer shares: run naming, seeding, device, logging, checkpoints and the
    ``torchrun`` launch (:class:`DistributedArgs`).

    A trainer's ``Args`` dataclass inherits these (tyro lists them first) and may override a default
    (``exp_name``); ``--config`` presets and ``--resume`` apply to them like to any other field.  It
    names its trainer in the class variable ``TRAINER`` (``"ppo"``, ``"impala"``), which its
    checkpoints record: ``--resume`` continues only a checkpoint of the same trainer.
    """

    TRAINER: ClassVar[str] = ""

    exp_name: str = "run"
    """name of this experiment (part of the run folder name: letters, digits, '.', '_', '+', '=', '-')"""
    seed: int = 1
    """seed of the experiment (torch, numpy, python, EnvPool)"""
    torch_deterministic: bool = True
    """deterministic cuDNN kernels (torch.backends.cudnn.deterministic) and full-fp32 matrix products; off:
    cuDNN picks the fastest convolution algorithms by timing them (cudnn.benchmark) and CUDA matrix
    products run in TF32 (torch.backends.cuda.matmul.allow_tf32)"""
    cuda: bool = True
    """use CUDA when it is available"""
    cuda_graphs: bool = True
    """replay the rollout's / actors' policy step from a CUDA graph (CUDA only)"""
    config: Optional[str] = None
    """YAML preset from configs/ (field: value); CLI flags override it"""
    runs_dir: str = "runs"
    """root folder of run folders runs/{env_id}__{exp_name}__{seed}__{timestamp}/"""
    track: bool = False
    """log to Weights & Biases (offline when there is no network)"""
    wandb_project_name: str = "rltrain"
    """the wandb project"""
    wandb_entity: Optional[str] = None
    """the wandb entity (team)"""
    progress: bool = True
    """show a progress bar on the console"""
    save_model: bool = False
    """save a final checkpoint (model, optimizer, ...) to {run}/checkpoints/final.pt"""
    checkpoint_every: int = 0
    """write {run}/checkpoints/latest.pt atomically every K iterations (learner updates) (0: never)"""
    resume: Optional[str] = None
    """checkpoint to resume from, in its run folder; its saved args are the defaults, flags override them (the
    trainer, --env-id and network must be the checkpoint's)"""
    eval_every: int = 0
    """evaluate the policy every K iterations (learner updates) on full episodes, logged as eval/score
    and eval/score_std (0: never); its time is left out of charts/wall_s"""
    eval_episodes: int = 10
    """episodes per evaluation (one env each; Atari without episodic life or reward clipping: the game score)"""
    eval_greedy: bool = False
    """evaluate the most likely action instead of sampling (CleanRL's published scores sample)"""


class ConfigError(ValueError):
    """User-facing configuration error (bad flag value, bad config file, ...)."""


def close_matches(word: str, choices: Sequence[str], n: int = 5, cutoff: float = 0.5) -> str:
    """``" Did you mean: a, b?"`` for the closest ``choices`` (``""`` if none)."""
    m = difflib.get_close_matches(word, list(choices), n=n, cutoff=cutoff)
    return f" Did you mean: {', '.join(m)}?" if m else ""


def load_yaml_preset(path: str | Path, cls: Type[Any]) -> Dict[str, Any]:
    """Read a YAML mapping of ``cls`` field overrides; validate the names."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} does not parse as YAML: {e}") from None
    if data is None:  # an empty file, or comments only: a preset that sets nothing is a mistaken path
        raise ConfigError(f"config file {path} sets no field (it is empty or holds only comments); "
                          f"write field: value lines, or leave --config out")
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must be a mapping of field: value, got {type(data).__name__}")
    names = [f.name for f in dataclasses.fields(cls)]
    out: Dict[str, Any] = {}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name not in names:
            raise ConfigError(
                f"config file {path}: unknown field '{key}'.{close_matches(name, names)}"
            )
        out[name] = value
    return out


def _config_path(argv: Sequence[str]) -> Optional[str]:
    for i, a in enumerate(argv):
        if a == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--config="):
            return a.split("=", 1)[1]
    return None


def parse_args(
    cls: Type[T],
    argv: Optional[Sequence[str]] = None,
    default: Optional[T] = None,
    description: Optional[str] = None,
) -> T:
    """Defaults (``default`` or ``cls()``) <- ``--config`` YAML <- CLI flags
    (tyro).  ``cls`` must be a dataclass; if it has a ``config`` field, the
    preset path is stored there."""
    argv = list(sys.argv[1:] if argv is None else argv)
    default = cls() if default is None else default
    path = _config_path(argv)
    if path is not None:
        preset = load_yaml_preset(path, cls)
        if any(f.name == "config" for f in dataclasses.fields(cls)):
            preset["config"] = path
        try:
            default = dataclasses.replace(default, **preset)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"config file {path}: {e}") from None
    return tyro.cli(cls, args=argv, default=default, description=description)


def exit_on_config_error(run: Callable[[], Any]) -> Any:
    """``run()``, for a script's ``__main__``: a :class:`ConfigError` (bad input) prints ``error: <message>``
    on stderr and exits with status 2, as the trainers do."""
    try:
        return run()
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
