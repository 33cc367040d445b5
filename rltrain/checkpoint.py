"""Atomic checkpoints: write to a temp file in the same folder, then rename.

A crash (or ``kill -9``) during :func:`save_checkpoint` leaves the previous
checkpoint intact: ``os.replace`` is atomic on POSIX within one filesystem.
A checkpoint is a plain dict (model / optimizer / scheduler state dicts, RNG
states, counters, ...); what goes in it is the trainer's choice.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Callable, Dict

import torch

__all__ = ["save_checkpoint", "load_checkpoint", "write_atomically"]


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


def load_checkpoint(path: str | Path, map_location: Any = "cpu") -> Dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint`.

    Raises ``FileNotFoundError`` with the path when it does not exist."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    return torch.load(path, map_location=map_location, weights_only=False)
