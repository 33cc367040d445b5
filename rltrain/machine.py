"""Which machine, which versions, when: the ``meta`` every results file carries.

:func:`machine_info` is the one definition of these keys; each benchmark or study adds only its own
(SM count, commits from :func:`git_commit`, rounds, ...) next to them.  ``scripts/results_tables.py``
prints them under its tables (``rltrain.bench.formats.machine``) and ``tests/test_docs.py`` requires ``device_name, driver, cuda,
torch, triton, date`` in the ``meta`` of every file under ``docs/results/``.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.metadata
import platform
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import torch

from rltrain.runtime import num_cores, select_device

__all__ = ["machine_info", "cpu_model", "nvidia_driver", "package_version", "git_commit", "recorded_args",
           "OUTSIDE_CHECKOUT", "DRIVER_QUERY_TIMEOUT_S"]

DRIVER_QUERY_TIMEOUT_S = 10.0
OUTSIDE_CHECKOUT = "DIR"  # what a recorded command writes for a folder outside the checkout


def machine_info(device: Union[torch.device, str, None] = None) -> Dict[str, Any]:
    """The machine a result was measured on, its software versions and the time.

    ``device``: the device the figures were measured on; ``None`` means the first CUDA device where
    there is one, else the CPU. Keys:

    * ``date`` -- now, UTC, ISO 8601 to the second (``2026-01-02T03:04:05+00:00``);
    * ``device_name`` -- the CUDA device's name, or ``"cpu (<processor>)"``;
    * ``driver`` -- the NVIDIA driver (``nvidia-smi``), ``None`` where there is none;
    * ``cuda`` -- the CUDA version torch was built with (``None`` for a CPU build);
    * ``torch``, ``triton``, ``envpool`` -- versions, ``None`` where not installed; ``python``;
    * ``cpu_cores`` -- the cores this process may run on; ``cpu_model`` -- :func:`cpu_model` (hosts
      with the same GPU step EnvPool at different speeds).
    """
    device = torch.device(device) if device is not None else select_device(cuda=True)
    processor = cpu_model()
    if device.type == "cuda":
        device_name = torch.cuda.get_device_name(device)
    else:
        device_name = f"{device.type} ({processor or platform.machine() or 'unknown'})"
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device_name": device_name,
        "driver": nvidia_driver(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": package_version("triton"),
        "python": platform.python_version(),
        "cpu_cores": num_cores(),
        "cpu_model": processor,
        "envpool": package_version("envpool"),
    }


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> Optional[str]:
    """The processor's name: the first ``model name`` line of ``cpuinfo`` (Linux), else
    :func:`platform.processor`; ``None`` where neither names one."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or None


def nvidia_driver(timeout_s: float = DRIVER_QUERY_TIMEOUT_S) -> Optional[str]:
    """``nvidia-smi``'s driver version (the first GPU's; one driver serves them all), or ``None``
    where ``nvidia-smi`` is missing, fails or does not answer within ``timeout_s``."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split()
    return lines[0] if done.returncode == 0 and lines else None


def package_version(name: str) -> Optional[str]:
    """The installed version of distribution/module ``name``, ``None`` where it is not installed.

    The distribution's metadata first (no import); a module whose distribution goes by another
    name (``triton`` from ``pytorch-triton``) is imported for its ``__version__``.
    """
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        return getattr(importlib.import_module(name), "__version__", None)
    except ImportError:
        return None


def git_commit(root: Path) -> Optional[str]:
    """The commit checked out at ``root``, with ``+dirty`` where tracked files differ from it (the figures
    then come from a tree no commit holds); None where ``root`` is not the top of a git checkout (a copy
    made with ``git archive`` inside another checkout must not report that checkout's commit)."""
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = out.stdout.split()
    if out.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != Path(root).resolve():
        return None
    try:
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return lines[1] + "+unknown"
    return lines[1] + ("+dirty" if status.returncode != 0 or status.stdout.strip() else "")


def recorded_args(argv: Sequence[str], root: Path) -> List[str]:
    """``argv`` as a results file keeps it: the arguments as given, except absolute paths (alone or as
    ``--flag=PATH``), which name folders of the measuring machine: one inside the checkout ``root`` is
    written relative to it, one outside as ``DIR/<file name>`` (:data:`OUTSIDE_CHECKOUT`), so the command
    reads the same on any machine and still says which file it wrote."""
    root = Path(root).resolve()

    def path(value: str) -> str:
        if not value.startswith("/"):
            return value
        p = Path(value).resolve()
        try:
            return str(p.relative_to(root))
        except ValueError:
            return f"{OUTSIDE_CHECKOUT}/{p.name}"

    def argument(a: str) -> str:
        flag, eq, value = a.partition("=")
        return f"{flag}={path(value)}" if eq and a.startswith("-") else path(a)

    return [argument(a) for a in argv]
