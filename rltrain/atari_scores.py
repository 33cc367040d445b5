"""Reference scores of the 57 Atari games: human-normalised scores, the Atari-5 estimate of the
57-game median, and CleanRL's published PPO scores at 10M steps.

The figures and their sources are in ``rltrain/data/atari_scores.json`` (games named as EnvPool names
them: ``BattleZone`` is the task ``BattleZone-v5``):

* :func:`human_normalized` -- ``(score - random) / (human - random)`` with the random and human scores
  of the 57-game benchmark (0: random play, 1: the human tester).
* :func:`atari5_median` -- Aitchison, Sweetser and Hutter's Atari-5 regression (ICML 2023): the median
  human-normalised score over the 57 games estimated from five games' normalised scores ``h_g``,
  with the scores in percent, ``S_g = 100 h_g``::

      log10(1 + M) = sum_g c_g log10(1 + max(S_g, 0)),   M = 10 ** (...) - 1   (percent)

  a linear model without intercept on log-transformed scores; returned as a fraction like ``h_g``.
* :func:`cleanrl_ppo_10m` -- the average game score of CleanRL's ``ppo_atari_envpool_xla_jax.py``
  after 10M env steps (mean and standard deviation over its 3 seeds), the bar the suite times.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = ["DATA", "GAMES", "ATARI5", "reference", "human_normalized", "atari5_median", "cleanrl_ppo_10m",
           "game_of"]

DATA = Path(__file__).resolve().parent / "data" / "atari_scores.json"


@functools.lru_cache(maxsize=1)
def reference() -> Dict[str, Any]:
    """The reference document (``rltrain/data/atari_scores.json``), sources included."""
    return json.loads(DATA.read_text())


GAMES: Tuple[str, ...] = tuple(reference()["random_human"]["games"])  # the 57, EnvPool's names
ATARI5: Tuple[str, ...] = tuple(reference()["atari5"]["coefficients"])  # the five, in the paper's order


def game_of(env_id: str) -> Optional[str]:
    """The game of an EnvPool Atari task (``"Qbert-v5"`` -> ``"Qbert"``); ``None`` outside the 57."""
    name = env_id[:-len("-v5")] if env_id.endswith("-v5") else None
    return name if name in GAMES else None


def human_normalized(game: str, score: float) -> float:
    """``(score - random) / (human - random)`` of ``game`` (one of :data:`GAMES`)."""
    entry = reference()["random_human"]["games"].get(game)
    if entry is None:
        raise KeyError(f"no random and human scores for {game!r} (the 57 games: {', '.join(GAMES)})")
    return (score - entry["random"]) / (entry["human"] - entry["random"])


def atari5_median(normalized: Mapping[str, float]) -> float:
    """The Atari-5 estimate of the median human-normalised score over the 57 games (a fraction, like
    the inputs) from the human-normalised scores of the five games of :data:`ATARI5` (every one
    needed; a score below random counts as random)."""
    missing = [g for g in ATARI5 if g not in normalized or not math.isfinite(normalized[g])]
    if missing:
        raise ValueError(f"the Atari-5 estimate needs a score for each of {', '.join(ATARI5)}; missing: "
                         f"{', '.join(missing)}")
    coefficients = reference()["atari5"]["coefficients"]
    log_median = sum(c * math.log10(1.0 + max(100.0 * normalized[g], 0.0)) for g, c in coefficients.items())
    return (10.0 ** log_median - 1.0) / 100.0


def cleanrl_ppo_10m(game: str) -> Optional[Dict[str, Any]]:
    """CleanRL's published PPO score of ``game`` after 10M env steps: ``{"mean", "std", "source"}``,
    ``None`` where it published none."""
    entry = reference()["cleanrl_ppo_10m"]["games"].get(game)
    return dict(entry) if entry else None
