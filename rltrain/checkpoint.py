"""Checkpoints: atomic writes, reading with a clear error, and the record of who wrote one.

* :func:`save_checkpoint` / :func:`write_atomically` -- write to a temp file in the same folder, then
  rename: a crash (or ``kill -9``) while writing leaves the previous checkpoint intact (``os.replace``
  is atomic on POSIX within one filesystem).  A checkpoint is a plain dict (model / optimizer /
  scheduler state dicts, RNG states, counters, ...); what goes in it is the trainer's choice.
* :func:`load_checkpoint` -- the dict back, or a :class:`CheckpointError` (a
  :class:`~rltrain.config.ConfigError`: exit 2) naming the file and what is wrong with it: missing,
  empty, truncated or not a checkpoint, not a dict, written by a newer format.
* :class:`Origin` -- which trainer (``ppo`` / ``impala``), environment and network wrote a trainer's
  checkpoint; :func:`origin_record` is what a checkpoint stores of it (with :data:`FORMAT_VERSION`),
  :func:`origin_of` reads it back (for a checkpoint written before the record, it is derived from
  the saved args and weights), :func:`check_resumable` refuses to continue a run with another trainer,
  environment or network.
"""

from __future__ import annotations

import os
import pickle
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Dict, Mapping, Optional, Sequence

import torch

from rltrain.config import ConfigError

__all__ = ["FORMAT_VERSION", "CheckpointError", "Origin", "save_checkpoint", "load_checkpoint", "write_atomically",
           "require_keys", "network_of", "trainer_of_args", "origin_record", "origin_of", "check_resumable",
           "RESUME_KEYS"]

FORMAT_VERSION = 1
"""The layout of a trainer's checkpoint.  1: the origin record (``format``, ``trainer``, ``env_id``,
``network``) beside model, optimizer, scheduler, counters, args and run folder; a checkpoint without
``format`` predates the record (its origin is derived, :func:`origin_of`)."""

RESUME_KEYS = ("args", "model", "optimizer", "scheduler", "iteration", "global_step", "run_dir")
"""What ``--resume`` reads from a trainer's checkpoint (``scripts/evaluate.py`` needs ``args`` and ``model``)."""


class CheckpointError(ConfigError):
    """A checkpoint that is missing, cannot be read, or cannot be used for what it was given to."""


def write_atomically(path: str | Path, write: Callable[[BinaryIO], Any]) -> Path:
    """Call ``write(f)`` on a temp file beside ``path``, flush it to disk, then rename it to ``path``:
    readers see the old file or the whole new one, never part of it.  Returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def save_checkpoint(state: Dict[str, Any], path: str | Path) -> Path:
    """Atomically write ``state`` (``torch.save``) to ``path``; returns ``path``."""
    return write_atomically(path, lambda f: torch.save(state, f))


# What torch.load raises on a file that is not a whole checkpoint: a truncated zip archive (RuntimeError), an
# empty file (EOFError), other bytes (pickle's UnpicklingError, a ValueError or a lookup error on the way)
_UNREADABLE = (RuntimeError, EOFError, ValueError, TypeError, AttributeError, ImportError, LookupError,
               pickle.UnpicklingError)


def load_checkpoint(path: str | Path, map_location: Any = "cpu") -> Dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint`.

    Raises :class:`CheckpointError` naming the file: ``checkpoint not found: PATH``, or ``checkpoint
    PATH: truncated or not a checkpoint (...)`` for a file ``torch.load`` cannot read (empty, cut
    short, text), a checkpoint that is not a dict, or one of a format newer than :data:`FORMAT_VERSION`."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    if path.stat().st_size == 0:
        raise CheckpointError(f"checkpoint {path}: truncated or not a checkpoint (the file is empty)")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=False)
    except OSError as e:
        raise CheckpointError(f"checkpoint {path} cannot be read: {e.strerror or e}") from None
    except _UNREADABLE as e:
        raise CheckpointError(f"checkpoint {path}: truncated or not a checkpoint ({_first_sentence(e)})") from None
    if not isinstance(ckpt, dict):
        raise CheckpointError(f"checkpoint {path}: not a checkpoint (it holds a {type(ckpt).__name__}, "
                              f"not a dict of state)")
    version = ckpt.get("format", 0)
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise CheckpointError(f"checkpoint {path} has format {version!r}; this rltrain reads formats up to "
                              f"{FORMAT_VERSION} (a newer rltrain wrote it)")
    return ckpt


def _first_sentence(e: BaseException) -> str:
    """The start of an exception's message, on one line (torch's run to several sentences)."""
    text = " ".join(str(e).split()) or type(e).__name__
    return re.split(r"(?<=\.) ", text, maxsplit=1)[0][:160]


def require_keys(ckpt: Mapping[str, Any], path: str | Path, keys: Sequence[str] = RESUME_KEYS) -> None:
    """:class:`CheckpointError` unless ``ckpt`` holds every key of ``keys`` (``args`` a dict): a trainer's
    checkpoint."""
    missing = [k for k in keys if k not in ckpt]
    if missing or ("args" in keys and not isinstance(ckpt["args"], dict)):
        raise CheckpointError(f"checkpoint {path} is not a checkpoint of scripts/ppo.py or scripts/impala.py "
                              f"(it has no {', '.join(repr(k) for k in missing) or 'dict of args'})")


# ----------------------------------------------------------------------------- who wrote a checkpoint
@dataclass(frozen=True)
class Origin:
    """The trainer, environment and network of a run: a run continues only with all three the same."""

    trainer: str  # "ppo" | "impala"
    env_id: str
    network: Optional[str]  # network_of(model's state dict): "mlp 64x64", "nature_cnn", ... (", Q critic")

    def __str__(self) -> str:
        return f"{self.trainer} on {self.env_id}" + (f" with network {self.network}" if self.network else "")


def network_of(model_state: Mapping[str, torch.Tensor]) -> str:
    """The network an :class:`agents.ActorCritic` state dict holds: its torso (``mlp`` with its hidden
    widths, ``nature_cnn``, ``impala_resnet``) and ``, Q critic`` for a Q head (Retrace) instead of a value
    head.  Read from the parameter names and shapes, so that a checkpoint written before the origin
    record gets the same description as a new one."""
    keys = list(model_state)
    if any(k.startswith("torso.stages.") for k in keys):
        torso = "impala_resnet"
    elif any(k.startswith("torso.conv.") for k in keys):
        torso = "nature_cnn"
    elif any(k.startswith("torso.net.") for k in keys):
        widths = sorted((int(k.split(".")[2]), model_state[k].shape[0]) for k in keys
                        if k.startswith("torso.net.") and k.endswith(".weight"))
        torso = "mlp " + "x".join(str(w) for _, w in widths)
    else:
        torso = "unknown"
    return torso + (", Q critic" if "value_head.q.weight" in model_state else "")


def trainer_of_args(args: Mapping[str, Any]) -> str:
    """The trainer whose arguments ``args`` are: IMPALA's have ``correction``, PPO's do not."""
    return "impala" if "correction" in args else "ppo"


def origin_record(trainer: str, env_id: str, model_state: Mapping[str, torch.Tensor]) -> Dict[str, Any]:
    """The keys a trainer's checkpoint stores about its origin, and the format it is written in."""
    return {"format": FORMAT_VERSION, "trainer": trainer, "env_id": env_id, "network": network_of(model_state)}


def origin_of(ckpt: Mapping[str, Any]) -> Origin:
    """Who wrote ``ckpt``: its record, or for a checkpoint written before the record (no ``format``) the
    trainer from its args' fields (:func:`trainer_of_args`), its args' ``env_id`` and the network of its
    weights (:func:`network_of`)."""
    args = ckpt.get("args") or {}
    return Origin(ckpt.get("trainer") or trainer_of_args(args), str(ckpt.get("env_id") or args.get("env_id")),
                  ckpt.get("network") or network_of(ckpt.get("model") or {}))


def check_resumable(ckpt: Mapping[str, Any], path: str | Path, trainer: str, env_id: str,
                    model: Optional[torch.nn.Module] = None) -> None:
    """:class:`CheckpointError` unless the run of checkpoint ``ckpt`` (at ``path``) can go on as this one: the
    same trainer and environment and, with ``model`` (this run's network, built), the same network, parameter
    by parameter.  The message names both sides, e.g. ``--resume PATH: written by impala on CartPole-v1 with
    network mlp 64x64; this is ppo on CartPole-v1 with network mlp 64x64 (another trainer) ...``."""
    written = origin_of(ckpt)
    here = Origin(trainer, env_id, network_of(model.state_dict()) if model is not None else None)
    differ = [what for what, a, b in (("another trainer", written.trainer, here.trainer),
                                      ("another environment", written.env_id, here.env_id),
                                      ("another network", written.network, here.network or written.network))
              if a != b]
    if not differ and model is not None:
        mine = {k: tuple(v.shape) for k, v in model.state_dict().items()}
        theirs = {k: tuple(v.shape) for k, v in ckpt["model"].items()}
        if mine != theirs:
            name = next(k for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k))
            differ = [f"another network: parameter {name} is {theirs.get(name)} there, {mine.get(name)} here"]
    if differ:
        raise CheckpointError(f"--resume {path}: written by {written}; this is {here} ({'; '.join(differ)}). A run "
                              f"continues with the trainer, environment and network that wrote it: start a new run "
                              f"instead (nothing was written)")
