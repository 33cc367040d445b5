"""Steps to score as a search objective: one trial's values trained on several games, each until it scores.

A :class:`ScoreTarget` is a game, the score to reach, a reference and a budget, the last two in units
of a measure: env steps (``global_step``) or training seconds (``charts/wall_s``).  A trial trains
each game in turn with the same values until the average return of its last 100 episodes
(``charts/avg_episodic_return``) first reaches the score, or the measure passes the budget
(:class:`GameWatch`).  Its cost on a game is

    cost = reached_at / reference               where it reached the score at ``reached_at``
    cost = budget * penalty / reference         where it did not within the budget (penalty >= 1)

and the trial's objective is the sum of its games' costs, minimised (:class:`ScoreObjective`).  The
reference puts the games on one scale: with each game's reference the steps the current preset needs,
a trial as fast as the preset costs 1 per game and one twice as fast 0.5.

Pruning (:class:`BoundReporter`): a trial reports at a grid of points, ``points`` per game at
``budget * k / points`` (k = 1 .. points).  At a point ``x`` of the game in progress the value is a
lower bound of the trial's objective: the costs of the games done, plus ``x / reference`` while the
game has not reached its score by ``x`` (it reaches it later, or never, and costs more), or plus its
cost once it has; after a game ends, its remaining points report its cost.  A trial whose bound is
above the median of the complete trials' objectives (:func:`above_median`) will end above it, so it
stops there: a trial that misses a game's score is stopped at that game's budget (its cost then
includes the penalty) without training the games after it.  The comparison is with the complete
trials' final objectives, not with their values at the same point: being slower on the first game
says nothing about the next (a trial behind on Pong may win on Breakout).  Optuna's ``MedianPruner``
compares a trial's best value so far with the others' at the same step, which neither holds.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from rltrain.config import ConfigError
from rltrain.time_to_score import RETURN, WALL

__all__ = ["MEASURES", "ScoreTarget", "ScoreObjective", "GameWatch", "BoundReporter", "above_median"]

MEASURES: Dict[str, str] = {"steps": "global_step", "seconds": WALL}
"""The measure of a target's reference and budget -> the metrics key that gives it."""


@dataclass(frozen=True)
class ScoreTarget:
    """Reach ``score`` on ``env_id``; ``reference`` and ``budget`` in the measure's units."""

    env_id: str
    score: float
    reference: float
    budget: float

    @classmethod
    def parse(cls, spec: str) -> "ScoreTarget":
        """``"ENV_ID:SCORE:REFERENCE:BUDGET"``, e.g. ``"Pong-v5:20:6e6:7.5e6"``; a bad one raises
        :class:`ConfigError` naming it."""
        parts = spec.split(":")
        try:
            if len(parts) != 4:
                raise ValueError
            env_id, score, reference, budget = parts[0], float(parts[1]), float(parts[2]), float(parts[3])
        except ValueError:
            raise ConfigError(f"--targets {spec!r}: expected ENV_ID:SCORE:REFERENCE:BUDGET "
                              f"(e.g. Pong-v5:20:6e6:7.5e6)") from None
        if not env_id or not reference > 0 or not budget > 0:
            raise ConfigError(f"--targets {spec!r}: needs a game, and a reference and a budget > 0")
        return cls(env_id, score, reference, budget)

    def spec(self) -> str:
        """The ``ENV_ID:SCORE:REFERENCE:BUDGET`` this target parses from."""
        return f"{self.env_id}:{self.score:g}:{self.reference:g}:{self.budget:g}"


@dataclass(frozen=True)
class ScoreObjective:
    """The targets of a search, the penalty of a game not reached, and the pruning grid (module docstring)."""

    targets: Tuple[ScoreTarget, ...]
    penalty: float = 2.0
    points: int = 16

    def __post_init__(self):
        if not self.targets:
            raise ConfigError("--targets: give at least one ENV_ID:SCORE:REFERENCE:BUDGET")
        games = [t.env_id for t in self.targets]
        if len(set(games)) != len(games):
            raise ConfigError(f"--targets: each game once, got {games}")
        if not self.penalty >= 1.0:
            raise ConfigError(f"--penalty must be >= 1 (a game not reached costs at least its budget), "
                              f"got {self.penalty}")
        if self.points < 1:
            raise ConfigError(f"--report-points must be an integer >= 1, got {self.points}")

    def cost(self, game: int, reached_at: Optional[float]) -> float:
        """``reached_at / reference``, or ``budget * penalty / reference`` where not reached (None)."""
        t = self.targets[game]
        return (t.budget * self.penalty if reached_at is None else reached_at) / t.reference

    def total(self, reached_at: Sequence[Optional[float]]) -> float:
        """The objective: the sum over the games of :meth:`cost`."""
        return sum(self.cost(game, at) for game, at in enumerate(reached_at))

    def grid(self, game: int) -> List[Tuple[int, float]]:
        """The report points of ``game``: ``(step, at)`` with Optuna's step numbered over all games."""
        budget = self.targets[game].budget
        return [(game * self.points + k - 1, budget * k / self.points) for k in range(1, self.points + 1)]

    def describe(self, measure: str) -> str:
        games = " + ".join(f"{measure} to {t.score:g} on {t.env_id} / {t.reference:g}" for t in self.targets)
        return (f"{games}, minimised; a game not reached within its budget costs budget x {self.penalty:g} / "
                f"reference")


class GameWatch:
    """Follows one run's metrics rows for a target: where the measure stands and where the score was reached."""

    def __init__(self, target: ScoreTarget, measure: str):
        self.target, self.key = target, MEASURES[measure]
        self.reached_at: Optional[float] = None
        self.at, self.steps, self.wall_s = 0.0, 0, 0.0
        self.over_budget = False

    @property
    def done(self) -> bool:
        return self.reached_at is not None or self.over_budget

    def feed(self, row: Mapping) -> bool:
        """Take the next row; True once the run is done for the target (reached, or past the budget)."""
        if self.done:
            return True
        at = float(row.get(self.key, 0.0))
        if at > self.target.budget:
            self.over_budget = True
            return True
        self.at, self.steps, self.wall_s = at, int(row.get("global_step", 0)), float(row.get(WALL, 0.0))
        score = row.get(RETURN)
        if isinstance(score, (int, float)) and score >= self.target.score:
            self.reached_at = at
        return self.done


class BoundReporter:
    """Reports each grid point of :class:`ScoreObjective` once, through ``report(value, step)`` (which
    may raise to prune), with the lower bound of the module docstring."""

    def __init__(self, objective: ScoreObjective, report: Callable[[float, int], None]):
        self.objective, self.report = objective, report
        self.reported: set = set()

    def progress(self, game: int, done: float, at: float) -> None:
        """Game ``game`` has not reached its score by ``at``; ``done``: the costs of the games before it."""
        for step, x in self.objective.grid(game):
            if x <= at and step not in self.reported:
                self._report(done + x / self.objective.targets[game].reference, step)

    def finish(self, game: int, value: float) -> None:
        """Game ``game`` has ended; ``value``: the costs of the games up to it, included."""
        for step, _ in self.objective.grid(game):
            if step not in self.reported:
                self._report(value, step)

    def _report(self, value: float, step: int) -> None:
        self.reported.add(step)
        self.report(value, step)


def above_median(bound: float, objectives: Sequence[float]) -> bool:
    """Whether a trial's lower ``bound`` is above the median of the complete trials' ``objectives``
    (False without any): then its own objective will be too."""
    return bool(objectives) and bound > statistics.median(objectives)
