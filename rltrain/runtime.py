"""Process runtime setup: device choice, torch CPU threads, ``--compile``, run-folder naming."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, TypeVar

import torch

from rltrain.config import ConfigError

__all__ = ["num_cores", "select_device", "set_torch_threads", "compiled", "make_run_dir", "ensure_run_dir"]

F = TypeVar("F", bound=Callable)


def num_cores() -> int:
    """CPU cores this process may run on (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def select_device(cuda: bool) -> torch.device:
    """``cuda`` if requested and available, else ``cpu``."""
    return torch.device("cuda" if cuda and torch.cuda.is_available() else "cpu")


def set_torch_threads(n: int, device: torch.device, cores: int = 0) -> int:
    """Set torch's intra-op threads; ``n <= 0`` picks a default.

    The default leaves the cores to EnvPool: 1 thread when a GPU does the math
    (the host only orchestrates), and half the cores (at least 1) on CPU, where
    EnvPool's worker threads step the environments in between inferences.
    ``cores``: the cores this process may use (0: all it may run on; several
    processes on one node: its share).
    """
    if n <= 0:
        n = 1 if device.type == "cuda" else max(1, (cores or num_cores()) // 2)
    torch.set_num_threads(n)
    return n


def compiled(fn: F, enabled: bool) -> F:
    """``torch.compile(fn, dynamic=False)`` when ``enabled`` (a trainer's ``--compile``), else ``fn`` itself.

    The trainers compile per-minibatch work whose shapes are the same every call, so each graph is
    specialised to its shapes (``dynamic=False``); another shape (a whole batch rather than a minibatch)
    compiles a graph of its own on first use.  The first call of each compiles (seconds
    to a minute); the gradients flow through the compiled graph's own backward."""
    return torch.compile(fn, dynamic=False) if enabled else fn


def make_run_dir(root: str | Path, env_id: str, exp_name: str, seed: int) -> Path:
    """Create ``{root}/{env_id}__{exp_name}__{seed}__{timestamp}/`` and return it; a ``root`` where no folder
    can be made (``/proc/x``, under a file, no permission) is a :class:`~rltrain.config.ConfigError` naming
    ``--runs-dir``."""
    base = Path(root) / f"{env_id}__{exp_name}__{seed}__{int(time.time())}"
    path, i = base, 1
    while path.exists():  # two runs in the same second
        path, i = base.with_name(f"{base.name}_{i}"), i + 1
    try:
        path.mkdir(parents=True)
    except OSError as e:
        raise ConfigError(f"--runs-dir {root}: cannot create the run folder {path}: {e.strerror or e}") from None
    return path


def ensure_run_dir(path: str | Path) -> Path:
    """The run folder of a resumed run, created again if it is gone (the checkpoint was moved); a
    :class:`~rltrain.config.ConfigError` naming it where it cannot be made."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--resume: cannot create the checkpoint's run folder {path}: {e.strerror or e}") from None
    return path
