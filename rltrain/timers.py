"""Per-phase wall-clock timers for training loops, plus Amdahl's law.

:class:`PhaseTimer` measures named phases (``"rollout/env"``, ``"ca"``,
``"update/backward"`` ...) without synchronising the device in the hot loop:

* on CUDA each phase occurrence records a pair of CUDA events on the current
  stream (events come from a pool reused every iteration); the elapsed times
  are only read in :meth:`PhaseTimer.read`, which synchronises once on the
  last event -- call it once per iteration;
* on CPU it uses ``time.perf_counter``.

Phases are meant to be contiguous (each one starts where the previous ended),
so their sum is the iteration time.  A loop of many short phases (a rollout:
env, copies, inference, env, ...) times them as laps: :meth:`PhaseTimer.mark`
once, then :meth:`PhaseTimer.lap` at the end of each phase -- one CUDA event
(or clock read) per phase boundary instead of two per phase.  :class:`PhaseTable` accumulates the
per-iteration readings and formats the end-of-run table.

Work that runs in another thread beside the iteration (PPO's ``--overlap-rollout`` collects the next
rollout while the update runs, :mod:`rltrain.overlap`) is timed by a timer of its own and kept apart:
its phases are *overlapped*, shown in a block of their own after the table's total and logged as
``perf/overlapped/<phase>_s`` (:func:`overlapped_phases`), so that the phases counted in the total
still add up to the iteration's wall clock.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Tuple

import torch

__all__ = ["PhaseTimer", "PhaseTable", "amdahl_speedup", "group_totals", "overlapped_phases", "OVERLAPPED"]

OVERLAPPED = "overlapped/"
"""The name prefix of the phases of work that ran beside the iteration's own (not in its total)."""


def amdahl_speedup(share: float, k: float) -> float:
    """Whole-job speedup ``1 / ((1-s) + s/k)`` when a part taking share ``s``
    of the time is made ``k`` times faster (Amdahl's law)."""
    if k <= 0:
        raise ValueError(f"speedup k must be > 0, got {k}")
    return 1.0 / ((1.0 - share) + share / k)


class PhaseTimer:
    """Accumulates seconds per named phase; read (and reset) once per iteration.

    >>> timer = PhaseTimer(torch.device("cpu"))
    >>> with timer.phase("rollout/env"):
    ...     pass
    >>> secs = timer.read()          # {"rollout/env": 1.2e-06}
    """

    def __init__(self, device: torch.device | str):
        self.device = torch.device(device)
        self.cuda = self.device.type == "cuda"
        self._host: Dict[str, float] = defaultdict(float)
        self._pairs: List[Tuple[str, "torch.cuda.Event", "torch.cuda.Event"]] = []
        self._pool: List["torch.cuda.Event"] = []
        self._used = 0
        self._lap_start: "torch.cuda.Event | float | None" = None

    def _event(self) -> "torch.cuda.Event":
        if self._used == len(self._pool):
            self._pool.append(torch.cuda.Event(enable_timing=True))
        ev = self._pool[self._used]
        self._used += 1
        ev.record()
        return ev

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time the enclosed block as (one more occurrence of) phase ``name``."""
        if self.cuda:
            start = self._event()
            try:
                yield
            finally:
                self._pairs.append((name, start, self._event()))
        else:
            t0 = time.perf_counter()
            try:
                yield
            finally:
                self._host[name] += time.perf_counter() - t0

    def mark(self) -> "torch.cuda.Event | float":
        """A point in time (a CUDA event recorded on the current stream, or ``time.perf_counter()``
        on CPU), returned for :meth:`add_interval` and kept as the start of the next :meth:`lap`.

        Laps: ``mark()`` once, then ``lap(name)`` at the end of each phase.  Intervals: a phase
        whose boundary is only known inside another piece of code (a DDP communication hook marks
        when the last gradient bucket is ready) is counted from two marks with
        :meth:`add_interval`.  Marks are valid until the next :meth:`read`."""
        self._lap_start = self._event() if self.cuda else time.perf_counter()
        return self._lap_start

    def lap(self, name: str) -> None:
        """Add the time since the last :meth:`mark` / :meth:`lap` to phase ``name``; the next lap
        starts here."""
        if self._lap_start is None:
            raise RuntimeError("PhaseTimer.lap() before mark()")
        if self.cuda:
            end = self._event()
            self._pairs.append((name, self._lap_start, end))
            self._lap_start = end
        else:
            now = time.perf_counter()
            self._host[name] += now - self._lap_start
            self._lap_start = now

    def add_interval(self, name: str, start: "torch.cuda.Event | float", end: "torch.cuda.Event | float") -> None:
        """Count the time from mark ``start`` to mark ``end`` as (one more occurrence of) phase ``name``."""
        if self.cuda:
            self._pairs.append((name, start, end))
        else:
            self._host[name] += end - start

    def read(self) -> Dict[str, float]:
        """Seconds per phase since the last read; resets the timer.

        On CUDA this is the single device synchronisation of the iteration.  Laps need a new
        :meth:`mark` after a read."""
        self._lap_start = None
        if self.cuda:
            out: Dict[str, float] = defaultdict(float)
            if self._pairs:
                self._pairs[-1][2].synchronize()
            for name, a, b in self._pairs:
                out[name] += a.elapsed_time(b) / 1e3
            self._pairs.clear()
            self._used = 0
            return dict(out)
        out = dict(self._host)
        self._host.clear()
        return out


def group_totals(secs: Dict[str, float]) -> Dict[str, float]:
    """Sum sub-phases by their top-level prefix: ``"update/backward" -> "update"``."""
    out: Dict[str, float] = defaultdict(float)
    for name, s in secs.items():
        out[name.split("/", 1)[0]] += s
    return dict(out)


def overlapped_phases(secs: Dict[str, float]) -> Dict[str, float]:
    """The phases (and their group totals) of work beside the iteration, named with the :data:`OVERLAPPED`
    prefix: ``{"rollout/env": 1.2}`` -> ``{"overlapped/rollout": 1.2, "overlapped/rollout/env": 1.2}``."""
    return {OVERLAPPED + k: s for k, s in {**group_totals(secs), **secs}.items()}


class PhaseTable:
    """Accumulates per-iteration phase seconds and prints a summary table.

    The first ``warmup`` iterations are left out of the table: they carry one-off costs (kernel
    compilation, allocator growth, cuDNN autotuning) that a steady-state phase share must not show.
    ``overlapped`` phases (another thread's, beside the iteration) go to :attr:`overlapped`, a block of
    their own after the total, with their share of the same timed total.
    """

    def __init__(self, warmup: int = 1) -> None:
        self.totals: Dict[str, float] = defaultdict(float)
        self.overlapped: Dict[str, float] = defaultdict(float)
        self.iterations = 0
        self.wall = 0.0
        self.warmup = warmup
        self.skipped = 0

    def add(self, secs: Dict[str, float], wall: Optional[float] = None,
            overlapped: Optional[Dict[str, float]] = None) -> None:
        if self.skipped < self.warmup:
            self.skipped += 1
            return
        for k, v in secs.items():
            self.totals[k] += v
        for k, v in (overlapped or {}).items():
            self.overlapped[k] += v
        self.iterations += 1
        if wall is not None:
            self.wall += wall

    def _rows(self, totals: Dict[str, float], total: float, n: int) -> List[str]:
        lines = []
        groups = group_totals(totals)
        for g in sorted(groups, key=lambda g: -groups[g]):
            lines.append(f"{g:<22}{groups[g]:>10.3f}{1e3 * groups[g] / n:>10.2f}{100 * groups[g] / total:>8.2f}%")
            subs = sorted((k for k in totals if k.startswith(g + "/")), key=lambda k: -totals[k])
            for k in subs:
                v = totals[k]
                lines.append(f"  {k:<20}{v:>10.3f}{1e3 * v / n:>10.2f}{100 * v / total:>8.2f}%")
        return lines

    def format(self) -> str:
        """A fixed-width table: phase, total s, ms/iteration, share of timed total."""
        total = sum(self.totals.values()) or 1.0
        n = max(self.iterations, 1)
        lines = [
            f"(steady state: {self.iterations} iterations after {self.skipped} warm-up)",
            f"{'phase':<22}{'total s':>10}{'ms/iter':>10}{'share':>9}",
            "-" * 51,
        ]
        lines += self._rows(self.totals, total, n)
        lines.append("-" * 51)
        lines.append(f"{'timed total':<22}{total:>10.3f}{1e3 * total / n:>10.2f}{100.0:>8.2f}%")
        if self.wall:
            lines.append(f"{'iteration wall':<22}{self.wall:>10.3f}{1e3 * self.wall / n:>10.2f}")
        if self.overlapped:
            lines.append("overlapped: another thread, beside the phases above (not in the total; share of it)")
            lines += self._rows(self.overlapped, total, n)
        return "\n".join(lines)
