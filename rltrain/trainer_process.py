"""A trainer script (``scripts/ppo.py``, ``scripts/impala.py``) run as a child process for a budget of
training seconds.

The trainers log one row per iteration to their run folder's ``metrics.jsonl``, with
``charts/wall_s``: training seconds since the run started, continued across ``--resume`` segments
(:mod:`rltrain.wallclock`; start-up and evaluation left out).  :func:`train_for` starts a trainer in
its own process group, follows that file as it grows, hands every row within the budget to a
callback and stops the trainer at the first row past it.  ``scripts/search_hparams.py`` scores its
trials this way and ``scripts/atari_suite.py`` trains each game of its suite.

* :func:`load_trainer` -- a trainer script as a module, for its flag parser (flags are checked
  before a process starts).  The one place a trainer program is loaded: the tools that run a trainer
  or read its flags (the hyperparameter search, the Atari suite, the time-to-score table's short
  command lines, the speedup study, the update benchmark) load it here, by path, as the module
  ``<name>_script``, once per process; the tests' ``load_script`` gives the same module.  No script
  imports another.
* :func:`read_rows` -- the complete JSON lines a file gained since an offset.
* :func:`stop` -- a signal to the trainer's process group, a grace period, then SIGKILL.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import util
from pathlib import Path
from types import ModuleType
from typing import Callable, List, Optional, Sequence, Tuple

__all__ = ["ATARI_PRESETS", "TRAINERS", "TimedRun", "load_trainer", "read_rows", "stop", "train_for"]

ROOT = Path(__file__).resolve().parents[1]
WALL = "charts/wall_s"
# the general Atari preset of each trainer
ATARI_PRESETS = {"ppo": "configs/atari.yaml", "impala": "configs/impala_atari.yaml"}
TRAINERS = ("ppo", "impala")


def load_trainer(name: str) -> ModuleType:
    """``scripts/<name>.py`` (``name`` one of :data:`TRAINERS`) as the module ``<name>_script``
    (loaded once, registered in ``sys.modules``, where dataclasses and tyro look its ``Args`` up; a
    script that fails to load is not left there half-made)."""
    if name not in TRAINERS:
        raise ValueError(f"unknown trainer {name!r}; choose one of {TRAINERS}")
    spec = util.spec_from_file_location(f"{name}_script", ROOT / "scripts" / f"{name}.py")
    if spec.name not in sys.modules:
        module = util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[spec.name]
            raise
    return sys.modules[spec.name]


def read_rows(path: Path, offset: int) -> Tuple[List[dict], int]:
    """Complete JSON lines of ``path`` after byte ``offset``; the new offset (a line still being
    written is left for the next call)."""
    if not path.is_file():
        return [], offset
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    rows = [json.loads(line) for line in data[:end].splitlines() if line.strip()]
    return rows, offset + end


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM, grace_s: float = 30.0) -> None:
    """Send ``sig`` to ``proc``'s process group and wait up to ``grace_s`` seconds, then SIGKILL it.
    SIGINT lets a trainer finish its iteration and write its checkpoint (``--checkpoint-every``)."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _own_group(parent_death_signal: Optional[int]) -> Callable[[], None]:
    """The child's set-up before it runs the trainer: a process group of its own (stopped with its
    threads and workers), and on Linux ``parent_death_signal`` when the parent dies (a killed suite
    does not leave its trainer running)."""
    parent = os.getpid()
    # looked up here, in the parent: the child between fork and exec only calls it
    linux = sys.platform.startswith("linux")
    prctl = ctypes.CDLL(None, use_errno=True).prctl if parent_death_signal and linux else None

    def setup() -> None:
        os.setsid()
        if prctl is not None:
            prctl(1, int(parent_death_signal))  # PR_SET_PDEATHSIG
            if os.getppid() != parent:  # the parent died before the request
                os.kill(os.getpid(), int(parent_death_signal))
    return setup


@dataclass
class TimedRun:
    """How a trainer run by :func:`train_for` ended."""

    returncode: int
    metrics: Optional[Path]  # its metrics.jsonl (None: it never wrote one)
    past_budget: bool  # it logged a row past the budget and was stopped there
    last_wall_s: float  # the training seconds of the last row read (0 without one)


def train_for(cmd: Sequence[str], budget_s: float, find_metrics: Callable[[], Optional[Path]], log_path: Path, *,
              cwd: Optional[Path] = None, on_row: Optional[Callable[[dict], None]] = None, offset: int = 0,
              stop_signal: int = signal.SIGTERM, grace_s: float = 30.0, poll_s: float = 0.5,
              parent_death_signal: Optional[int] = None) -> TimedRun:
    """Run ``cmd`` (a trainer, its output appended to ``log_path``) until it ends or logs a row whose
    ``charts/wall_s`` exceeds ``budget_s``; then stop it with ``stop_signal``.

    ``find_metrics()`` returns the run's ``metrics.jsonl`` once the trainer has made its run folder
    (``None`` until then); rows are read from byte ``offset`` of it (a resumed run: its earlier
    segments' rows are already there).  ``on_row(row)`` sees each row within the budget, in order;
    an exception it raises stops the trainer and propagates, as does a ``KeyboardInterrupt``."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(list(cmd), cwd=cwd, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=_own_group(parent_death_signal))
    metrics: Optional[Path] = None
    past, last_wall = False, 0.0
    try:
        while not past:
            done = proc.poll() is not None  # read what it wrote before it ended
            metrics = metrics or find_metrics()
            rows, offset = read_rows(metrics, offset) if metrics else ([], offset)
            for row in rows:
                last_wall = float(row.get(WALL, 0.0))
                if last_wall > budget_s:
                    past = True
                    break
                if on_row is not None:
                    on_row(row)
            if done:
                break
            if not past:
                time.sleep(poll_s)
    finally:
        stop(proc, stop_signal, grace_s)
    return TimedRun(proc.returncode, metrics, past, last_wall)
