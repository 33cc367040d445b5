"""The Atari suite (``scripts/atari_suite.py``): its state file, its results document, table and plot.

A suite trains one trainer with one preset on a list of games (default the Atari-5), each seed of
each game for a budget of training minutes (``charts/wall_s``), in the suite folder
``runs/atari_suite/<name>/``:

* ``suite.json`` -- :class:`SuiteState`: the settings the suite was started with and, per game and
  seed, its run folder, status (``pending``, ``running``, ``interrupted``, ``failed``, ``done``) and
  the command and outcome of each segment (a game interrupted and continued with ``--resume`` has
  several);
* ``runs/`` -- the trainers' run folders (``metrics.jsonl``, ``machine.json``, checkpoints);
* ``logs/`` -- each game's trainer output.

:func:`summarize` reads the run folders into the results document: per game and seed the average
return of the last 100 episodes (game scores) at 2, 5 and 10 training minutes and at the budget, the
final one, env steps and steps per second, the human-normalised score at the budget, the minutes to
reach CleanRL's published 10M-step PPO score, and the whole curve; per game the median over its
seeds; the Atari-5 estimate of the 57-game median human-normalised score; the machine, versions
and commands.  :func:`markdown` is its table (``scripts/results_tables.py atari-suite``) and
:func:`plot` its learning curves, one panel per game.
"""

from __future__ import annotations

import datetime
import json
import math
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

import numpy as np

from rltrain.atari_scores import ATARI5, atari5_median, cleanrl_ppo_10m, game_of, human_normalized, reference
from rltrain.config import ConfigError
from rltrain.time_to_score import RETURN, WALL, Run, common_machine, load_run

__all__ = ["STATE_FILE", "SETTINGS", "TIME_POINTS_MIN", "SuiteState", "time_points", "value_at", "minutes_to",
           "run_record", "summarize", "markdown", "plot", "to_json"]

STATE_FILE = "suite.json"
SETTINGS = ("trainer", "config", "budget_min", "checkpoint_every", "extra")  # what one suite holds fixed
TIME_POINTS_MIN = (2.0, 5.0, 10.0)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


class SuiteState:
    """``<folder>/suite.json``: the suite's settings (:data:`SETTINGS`), the commands that ran it, and
    one entry per game and seed; written atomically after every change."""

    def __init__(self, folder: Path, data: Dict[str, Any]):
        self.folder, self.data = Path(folder), data

    @property
    def path(self) -> Path:
        return self.folder / STATE_FILE

    @classmethod
    def load(cls, folder: str | Path) -> "SuiteState":
        """The suite of ``folder`` (:class:`ConfigError` where it has none or the file does not read)."""
        path = Path(folder) / STATE_FILE
        if not path.is_file():
            raise ConfigError(f"no suite in {folder} (no {STATE_FILE}: nothing was trained there)")
        try:
            data = json.loads(path.read_text())
            if not all(k in data for k in ("name", *SETTINGS, "entries")):
                raise ValueError("keys missing")
        except ValueError as e:
            raise ConfigError(f"{path} is not a suite state file: {e}") from None
        return cls(Path(folder), data)

    @classmethod
    def open(cls, folder: str | Path, name: str, settings: Mapping[str, Any], command: str) -> "SuiteState":
        """The suite of ``folder``, created with ``settings`` if new; an existing suite must have been
        started with the same settings (else :class:`ConfigError`: one suite, one configuration)."""
        folder = Path(folder)
        if (folder / STATE_FILE).is_file():
            state = cls.load(folder)
            for key in SETTINGS:
                if state.data[key] != settings[key]:
                    flag = "--" + key.replace("_", "-")
                    raise ConfigError(f"suite '{name}' was started with {flag} {state.data[key]}, not "
                                      f"{settings[key]}: another --name starts a new suite")
        else:
            state = cls(folder, {"name": name, **{k: settings[k] for k in SETTINGS}, "commands": [], "entries": {}})
        state.data["commands"].append({"command": command, "date": _now()})
        state.save()
        return state

    def save(self) -> None:
        from rltrain.checkpoint import write_atomically  # imports torch: only when a suite trains

        text = json.dumps(self.data, indent=1) + "\n"
        write_atomically(self.path, lambda f: f.write(text.encode()))

    def entry(self, env_id: str, seed: int) -> Dict[str, Any]:
        """The entry of ``env_id`` and ``seed``, added as ``pending`` if new."""
        key = f"{env_id} seed {seed}"
        entries = self.data["entries"]
        if key not in entries:
            entries[key] = {"env_id": env_id, "seed": seed, "status": "pending", "ended": None, "run_dir": None,
                            "segments": []}
        return entries[key]

    def begin_segment(self, entry: Dict[str, Any], command: str) -> Dict[str, Any]:
        """Record that ``entry``'s trainer starts with ``command`` (status ``running``); the segment,
        for its outcome."""
        segment = {"command": command, "started": _now()}
        entry["segments"].append(segment)
        entry["status"] = "running"
        self.save()
        return segment

    def entries(self) -> List[Dict[str, Any]]:
        return list(self.data["entries"].values())

    @property
    def budget_s(self) -> float:
        return 60.0 * float(self.data["budget_min"])


def time_points(budget_min: float) -> List[float]:
    """The minutes a return is read at: those of :data:`TIME_POINTS_MIN` within the budget, and the budget."""
    return sorted({t for t in TIME_POINTS_MIN if t < budget_min} | {float(budget_min)})


def _finite(x: Optional[float]) -> Optional[float]:
    return float(x) if x is not None and math.isfinite(x) else None


def value_at(run: Run, seconds: float, finished: bool = False) -> Optional[float]:
    """The run's average return at ``seconds`` of training: its last row at or before then (None
    before its first episode ended).  Past the run's last row: its last return where the run
    ``finished`` (its trainer reached its step budget), else None (not trained that far yet)."""
    if not len(run.wall_s):
        return None
    if seconds > run.wall_s[-1]:
        return _finite(run.returns[-1]) if finished else None
    i = int(np.searchsorted(run.wall_s, seconds, side="right")) - 1
    return _finite(run.returns[i]) if i >= 0 else None


def minutes_to(run: Run, threshold: float, budget_s: float) -> Optional[float]:
    """Training minutes to the first row at or above ``threshold`` within the budget (None: never)."""
    hit = np.flatnonzero((run.returns >= threshold) & (run.wall_s <= budget_s))
    return float(run.wall_s[hit[0]]) / 60.0 if hit.size else None


def run_record(entry: Mapping[str, Any], budget_min: float, root: str | Path = ".") -> Dict[str, Any]:
    """One game and seed of the results document (see :func:`summarize`) from its state entry and run
    folder (``root``: the folder the run folder's path is relative to)."""
    env_id, game = entry["env_id"], game_of(entry["env_id"])
    budget_s = 60.0 * budget_min
    finished = entry.get("ended") == "finished"
    run: Optional[Run] = None
    if entry.get("run_dir"):
        run_dir = Path(entry["run_dir"])
        try:
            run = load_run(run_dir if run_dir.is_absolute() else Path(root) / run_dir)
        except (FileNotFoundError, ValueError):
            run = None
    steps = int(run.steps[-1]) if run is not None and len(run.steps) else None
    wall = float(run.wall_s[-1]) if run is not None and len(run.wall_s) else None
    at = {f"{t:g}": (value_at(run, 60.0 * t, finished) if run is not None else None) for t in time_points(budget_min)}
    at_budget = at[f"{float(budget_min):g}"]
    reference_score = cleanrl_ppo_10m(game) if game else None
    return {
        "env_id": env_id, "game": game, "seed": entry["seed"], "status": entry["status"], "ended": entry.get("ended"),
        "run_dir": entry.get("run_dir"), "commands": [s["command"] for s in entry.get("segments", [])],
        "machine": run.machine if run is not None else {},
        "minutes": None if wall is None else wall / 60.0, "env_steps": steps,
        "steps_per_s": None if not wall or steps is None else steps / wall,
        "return_at_min": at,
        "final_return": _finite(run.returns[-1]) if run is not None and len(run.returns) else None,
        "human_normalized": None if game is None or at_budget is None else human_normalized(game, at_budget),
        "cleanrl_ppo_10m": None if reference_score is None else reference_score["mean"],
        "minutes_to_cleanrl": (None if run is None or reference_score is None
                               else minutes_to(run, reference_score["mean"], budget_s)),
        "curve": {"global_step": [] if run is None else run.steps.tolist(),
                  "wall_s": [] if run is None else [round(float(w), 2) for w in run.wall_s],
                  "avg_return": [] if run is None else [round(float(x), 3) for x in run.returns]},
    }


def _median(values: Iterable[Optional[float]]) -> Optional[float]:
    known = [v for v in values if v is not None]
    return float(np.median(known)) if known else None


def _game_record(env_id: str, runs: Sequence[Mapping[str, Any]], budget_key: str) -> Dict[str, Any]:
    """A game's seeds together: medians over the seeds (a seed that never reached CleanRL's score
    counts as never in the median of minutes)."""
    game = game_of(env_id)
    at_budget = [v for v in (r["return_at_min"][budget_key] for r in runs) if v is not None]
    minutes = [r["minutes_to_cleanrl"] for r in runs]
    reference_score = cleanrl_ppo_10m(game) if game else None
    reached = [m for m in minutes if m is not None]
    median_minutes = float(np.median(reached + [math.inf] * (len(runs) - len(reached)))) if runs else math.inf
    return {
        "env_id": env_id, "game": game, "seeds": [r["seed"] for r in runs],
        "done": f"{sum(r['status'] == 'done' for r in runs)}/{len(runs)}",
        "return_at_min": {k: _median(r["return_at_min"][k] for r in runs) for k in runs[0]["return_at_min"]},
        "return_at_budget_range": [min(at_budget), max(at_budget)] if at_budget else None,
        "human_normalized": _median(r["human_normalized"] for r in runs),
        "minutes": _median(r["minutes"] for r in runs), "env_steps": _median(r["env_steps"] for r in runs),
        "steps_per_s": _median(r["steps_per_s"] for r in runs),
        "cleanrl_ppo_10m": reference_score,
        "minutes_to_cleanrl": {"reached": f"{len(reached)}/{len(runs)}", "median": _finite(median_minutes)},
    }


def _atari5(runs: Sequence[Mapping[str, Any]], games: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The Atari-5 estimate from each game's median human-normalised score over its seeds, and per
    seed from that seed's five scores; ``None`` where one of the five has no score at the budget."""
    by_game = {g["game"]: g["human_normalized"] for g in games if g["game"] in ATARI5}
    missing = [g for g in ATARI5 if by_game.get(g) is None]
    per_seed = {}
    for seed in sorted({r["seed"] for r in runs}):
        scores = {r["game"]: r["human_normalized"] for r in runs if r["seed"] == seed and r["game"] in ATARI5}
        if all(scores.get(g) is not None for g in ATARI5):
            per_seed[str(seed)] = atari5_median(scores)
    return {"estimate": None if missing else atari5_median(by_game), "missing": missing, "per_seed": per_seed,
            "from": "each game's median human-normalised score over its seeds at the budget; per seed: that "
                    "seed's five scores"}


def summarize(state: SuiteState, root: str | Path = ".", meta: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """The suite's results document from its state and run folders (``root``: the folder the run
    folders' paths are relative to, the one the suite ran in).  ``meta``: the machine the runs
    trained on (:func:`rltrain.time_to_score.common_machine` of their ``machine.json``), unless given."""
    data = state.data
    budget_min = float(data["budget_min"])
    runs = [run_record(e, budget_min, root) for e in state.entries()]
    env_ids = list(dict.fromkeys(r["env_id"] for r in runs))
    budget_key = f"{budget_min:g}"
    games = [_game_record(e, [r for r in runs if r["env_id"] == e], budget_key) for e in env_ids]
    ref = reference()
    return {
        "meta": meta or common_machine([r["machine"] for r in runs]),
        "suite": {"name": data["name"], **{k: data[k] for k in SETTINGS},
                  "games": env_ids, "seeds": sorted({r["seed"] for r in runs}),
                  "commands": [c["command"] for c in data.get("commands", [])]},
        "metric": RETURN, "clock": WALL, "time_points_min": time_points(budget_min),
        "references": {"random_human": ref["random_human"]["source"],
                       "atari5": {"paper": ref["atari5"]["paper"],
                                  "coefficients": ref["atari5"]["coefficients_source"]},
                       "cleanrl_ppo_10m": ref["cleanrl_ppo_10m"]["source"]},
        "games": games,
        "atari5": _atari5(runs, games),
        "runs": runs,
    }


def _score(x: Optional[float]) -> str:
    """A game score: no decimals from 100, one below; ``-`` where missing."""
    if x is None:
        return "-"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.1f}"


def _percent(x: Optional[float]) -> str:
    """A human-normalised score (1 = human) in percent."""
    if x is None:
        return "-"
    return f"{100 * x:.0f}%" if abs(x) >= 0.1 else f"{100 * x:.1f}%"


def _count(x: Optional[float]) -> str:
    """A count in millions or thousands: ``12.1M``, ``20.4k``."""
    if x is None:
        return "-"
    return f"{x / 1e6:.1f}M" if x >= 1e6 else f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}"


def _minutes(x: float) -> str:
    return f"{x:g} minute" + ("" if x == 1 else "s")


def markdown(doc: Mapping[str, Any]) -> str:
    """The suite's table: per game its seeds (done), training minutes, env steps and steps/s
    (medians over the seeds), the return at each time point (median; the range over the seeds at the
    budget), the human-normalised score at the budget, CleanRL's 10M-step PPO score and the minutes
    to reach it (median, seeds that did); under it the Atari-5 estimate."""
    suite = doc["suite"]
    points = [f"{t:g}" for t in doc["time_points_min"]]
    budget_key = points[-1]
    seeds = len(suite["seeds"])
    budget = _minutes(float(suite["budget_min"]))
    lines = [f"**{suite['trainer'].upper()} `{suite['config']}`, {budget} of training a game, {seeds} "
             f"seed{'s' if seeds > 1 else ''}** (average return of the last 100 episodes, game scores)", "",
             "| game | seeds done | minutes | env steps | steps/s | " + " | ".join(f"return at {p} min" for p in points)
             + f" | human-normalised at {budget_key} min | CleanRL PPO 10M steps "
             "| minutes to CleanRL's score (seeds) |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(points) + "---:|---:|---:|"]
    for g in doc["games"]:
        cells = [_score(g["return_at_min"].get(p)) for p in points]
        span = g.get("return_at_budget_range")
        if span and len(g["seeds"]) > 1:
            cells[-1] += f" ({_score(span[0])} to {_score(span[1])})"
        ref = g.get("cleanrl_ppo_10m")
        to = g["minutes_to_cleanrl"]
        when = ("-" if ref is None
                else ("never" if to["median"] is None else f"{to['median']:.1f}") + f" ({to['reached']})")
        minutes = "-" if g["minutes"] is None else f"{g['minutes']:.1f}"
        lines.append(f"| {g['game'] or g['env_id']} | {g['done']} | {minutes} | {_count(g['env_steps'])} | "
                     f"{_count(g['steps_per_s'])} | " + " | ".join(cells) + f" | {_percent(g['human_normalized'])} | "
                     f"{'-' if ref is None else _score(ref['mean'])} | {when} |")
    a5 = doc["atari5"]
    lines.append("")
    if a5["estimate"] is None:
        lines.append(f"Atari-5 estimate of the 57-game median human-normalised score: not made (no score at "
                     f"{_minutes(float(budget_key))} for {', '.join(a5['missing'])}).")
    else:
        per_seed = ", ".join(f"seed {s}: {_percent(v)}" for s, v in a5["per_seed"].items())
        lines.append(f"Atari-5 estimate of the 57-game median human-normalised score: **{_percent(a5['estimate'])}**"
                     + (f" ({per_seed})" if len(a5["per_seed"]) > 1 else "") + ".")
    return "\n".join(lines)


def plot(doc: Mapping[str, Any], path: str | Path) -> Path:
    """One panel per game: each seed's average return against training minutes, CleanRL's 10M-step PPO
    score dashed, the budget dotted.  Written to ``path`` (PNG); returns it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    games = doc["games"]
    ncols = min(3, max(len(games), 1))
    nrows = max(1, math.ceil(len(games) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.5 * ncols, 3.4 * nrows), squeeze=False)
    budget = float(doc["suite"]["budget_min"])
    for ax, g in zip(axes.flat, games):
        for r in (r for r in doc["runs"] if r["env_id"] == g["env_id"]):
            minutes = np.asarray(r["curve"]["wall_s"], dtype=np.float64) / 60.0
            ax.plot(minutes, r["curve"]["avg_return"], linewidth=1.2, label=f"seed {r['seed']}")
        if g.get("cleanrl_ppo_10m"):
            ax.axhline(g["cleanrl_ppo_10m"]["mean"], color="gray", linestyle="--", linewidth=1.0,
                       label="CleanRL PPO, 10M steps")
        ax.axvline(budget, color="gray", linestyle=":", linewidth=0.8)
        ax.set_title(g["game"] or g["env_id"])
        ax.set_xlabel("training minutes")
        ax.set_ylabel("average return, last 100 episodes")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=7)
    for ax in list(axes.flat)[len(games):]:
        ax.set_visible(False)
    suite = doc["suite"]
    fig.suptitle(f"{suite['trainer'].upper()} {suite['config']}: {_minutes(budget)} of training a game")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def to_json(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=1, default=str)
