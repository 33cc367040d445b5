"""A ``torchrun`` job seen from outside: its workers' processes, the kill of one rank, its failure summary.

The fault checks of the tests and of ``scripts/bench_scaling.py`` kill one rank of a running job with
SIGKILL and time how long the job takes to stop (:func:`kill_rank`), then read which rank torchrun's
failure summary blames (:func:`failure_summary`).  Linux only (workers are found through ``/proc``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict

__all__ = ["worker_pids", "alive", "KilledRank", "kill_rank", "failure_summary"]


def worker_pids(launcher_pid: int) -> Dict[int, int]:
    """``{rank: pid}`` of the workers of the torchrun launcher ``launcher_pid`` (its children with ``RANK``)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            environ = (proc / "environ").read_bytes().split(b"\0") if ppid == launcher_pid else []
        except (OSError, IndexError, ValueError):
            continue
        rank = next((int(v[len(b"RANK="):]) for v in environ if v.startswith(b"RANK=")), None)
        if rank is not None:
            found[rank] = int(proc.name)
    return found


def alive(pid: int) -> bool:
    """``pid`` exists and has not exited (a zombie, exited but not yet reaped, counts as exited)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@dataclass(frozen=True)
class KilledRank:
    """What followed the kill of one rank: the job's exit status, the seconds until the launcher exited
    (``stopped_s``) and until every worker had exited too (``all_exited_s``)."""

    rank: int
    returncode: int
    stopped_s: float
    all_exited_s: float


def kill_rank(job: subprocess.Popen, rank: int, timeout: float) -> KilledRank:
    """SIGKILL the worker of ``rank`` of the torchrun launcher ``job``, then wait for the launcher and every
    worker to exit; ``subprocess.TimeoutExpired`` if that takes over ``timeout`` seconds (the job is left
    running: the caller ends it)."""
    workers = worker_pids(job.pid)
    if rank not in workers:
        raise LookupError(f"no worker of rank {rank} under pid {job.pid} (found ranks {sorted(workers)})")
    os.kill(workers[rank], signal.SIGKILL)
    killed = time.monotonic()
    job.wait(timeout=timeout)
    stopped = time.monotonic() - killed
    while any(alive(p) for p in workers.values()):  # the launcher has exited: its workers too, soon
        if time.monotonic() - killed > timeout:
            running = [p for p in workers.values() if alive(p)]
            raise subprocess.TimeoutExpired(job.args, timeout, output=f"workers still running: {running}")
        time.sleep(0.05)
    return KilledRank(rank, job.returncode, stopped, time.monotonic() - killed)


def failure_summary(output: str) -> Dict[int, str]:
    """``{rank: its block}`` of the last failure summary torchrun printed in ``output`` (the failures and the
    root cause, each block with the rank's ``exitcode`` and error); empty where it printed none."""
    if "FAILED" not in output:
        return {}
    summary = output[output.rindex("FAILED"):]
    blocks = re.split(r"^\[\d+\]:$", summary, flags=re.M)[1:]
    found = {}
    for block in blocks:
        rank = re.search(r"rank\s*: (\d+) \(local_rank", block)
        if rank:
            found[int(rank.group(1))] = block
    return found
