"""Seconds of training since a run started, continued across ``--resume`` (``charts/wall_s``).

A run's time-to-score is read against this clock: it starts at the first iteration of the first
segment, a resumed segment starts from the seconds its checkpoint stored (so a run split over
several processes adds its training segments up), and evaluation (``--eval-every``) is left out.
Start-up (imports, env construction) and the work lost after the last checkpoint of a killed
segment are not training seconds of the run.  (IMPALA's actors keep stepping while the learner
evaluates, so a time-to-score run leaves ``--eval-every`` off.)
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

__all__ = ["TrainingClock"]


class TrainingClock:
    """``TrainingClock(previous_s)``; :meth:`start` at the first iteration, :meth:`seconds` any time."""

    def __init__(self, previous_s: float = 0.0):
        self.previous_s = float(previous_s)
        self._started: float | None = None
        self._paused_s = 0.0

    def start(self) -> None:
        self._started = time.perf_counter()

    def seconds(self) -> float:
        """Training seconds of the run so far (earlier segments included, pauses excluded)."""
        if self._started is None:
            return self.previous_s
        return self.previous_s + time.perf_counter() - self._started - self._paused_s

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Time spent inside is not training time (evaluation)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._paused_s += time.perf_counter() - t0
