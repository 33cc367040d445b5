"""Time-to-score: when a run's average return first reaches a threshold, in steps and in minutes.

A run folder's ``metrics.jsonl`` has one row per iteration with ``global_step``, ``charts/wall_s``
(training seconds since the run started, summed over ``--resume`` segments) and
``charts/avg_episodic_return`` (the mean of the last 100 finished episodes; the trainers' Atari
returns are game scores: unclipped, whole games).  Functions here:

* :func:`load_run` -- the run's curve, arguments and machine (``machine.json``).  A resumed segment
  logs again the iterations after its checkpoint that the killed segment had logged; the last row of
  an iteration wins, so the curve follows the segments whose time was counted.
  :func:`runs_from_document` -- the runs of a written document, from the curves it stores.
* :func:`first_crossing` -- the first row whose average return is ``>= threshold``.
* :func:`step_curve` / :func:`band` -- curves of several seeds on one grid (the last logged value
  at each point, no interpolation between rows) and their median, min and max.
* :func:`summarize` -- the JSON document of ``scripts/time_to_score.py``; :func:`plot` its PNGs;
  :func:`markdown` its tables (``scripts/results_tables.py time-to-score``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

__all__ = ["Run", "Crossing", "load_run", "runs_from_document", "machine_of", "common_machine", "saved_machine",
           "first_crossing", "step_curve", "band", "summarize", "plot", "parse_thresholds", "host_info",
           "command_line", "markdown", "to_json", "RETURN", "WALL"]

RETURN = "charts/avg_episodic_return"
WALL = "charts/wall_s"


@dataclass
class Run:
    """One training run: its curve (rows with an average return) and what it was."""

    run_dir: str
    env_id: str
    exp_name: str
    seed: int
    trainer: str
    args: Dict[str, Any] = field(default_factory=dict)
    steps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    wall_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    returns: np.ndarray = field(default_factory=lambda: np.zeros(0))
    machine: Dict[str, Any] = field(default_factory=dict)  # where it trained (its latest segment)
    command: Optional[str] = None  # how it was started, where known without its args
    label: Optional[str] = None  # the configuration it counts as, where not its exp name (--alias)
    reproduce: Optional[str] = None  # the command that trains it as it ran with today's code, where not its own

    @property
    def configuration(self) -> str:
        """What the run is a seed of: its ``label`` where it has one, else its experiment name."""
        return self.label or self.exp_name

    @property
    def group(self) -> str:
        """Runs of one game and one configuration are seeds of one configuration."""
        return f"{self.env_id} {self.configuration}"


@dataclass(frozen=True)
class Crossing:
    global_step: int
    wall_s: float

    @property
    def minutes(self) -> float:
        return self.wall_s / 60.0


def _saved_args(run_dir: Path) -> Dict[str, Any]:
    """The run's arguments: its ``args.json``, else those saved in its checkpoint, else none."""
    if (run_dir / "args.json").is_file():
        return dict(json.loads((run_dir / "args.json").read_text()))
    for name in ("final.pt", "latest.pt"):
        path = run_dir / "checkpoints" / name
        if path.is_file():
            from rltrain.checkpoint import load_checkpoint  # a checkpoint that cannot be read: ConfigError

            return dict(load_checkpoint(path).get("args") or {})
    return {}


def saved_machine(run_dir: Path) -> Dict[str, Any]:
    """The machine of the run's latest segment (``machine.json``, written by the trainers), or none."""
    path = run_dir / "machine.json"
    segments = json.loads(path.read_text()) if path.is_file() else []
    return dict(segments[-1]) if segments else {}


def load_run(run_dir: str | Path) -> Run:
    """Read ``run_dir/metrics.jsonl``, its arguments (``args.json`` or a checkpoint's) and its machine."""
    run_dir = Path(run_dir)
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no metrics.jsonl in {run_dir}")
    by_iteration: Dict[int, Dict[str, Any]] = {}
    for i, line in enumerate(path.read_text().splitlines()):
        if line.strip():
            row = json.loads(line)
            by_iteration[int(row.get("charts/iteration", i))] = row  # a resumed segment's row wins
    rows = [r for _, r in sorted(by_iteration.items()) if isinstance(r.get(RETURN), (int, float))]
    if rows and WALL not in rows[0]:
        raise ValueError(f"{path} has no {WALL}: it was written by a trainer that does not log training seconds")
    args = _saved_args(run_dir)
    parts = run_dir.name.split("__")  # {env_id}__{exp_name}__{seed}__{timestamp}
    env_id = args.get("env_id", parts[0])
    exp_name = args.get("exp_name", parts[1] if len(parts) > 1 else run_dir.name)
    seed = int(args.get("seed", parts[2] if len(parts) > 2 else 0))
    from rltrain.checkpoint import trainer_of_args  # torch only where a run folder is read

    trainer = trainer_of_args(args) if args else exp_name
    return Run(str(run_dir), env_id, exp_name, seed, trainer, args,
               steps=np.array([r["global_step"] for r in rows], dtype=np.int64),
               wall_s=np.array([r[WALL] for r in rows], dtype=np.float64),
               returns=np.array([r[RETURN] for r in rows], dtype=np.float64), machine=saved_machine(run_dir))


def _folder_exp_name(run_dir: str) -> Optional[str]:
    """The experiment name in a run folder's name (``{env_id}__{exp_name}__{seed}__{timestamp}``)."""
    parts = Path(run_dir).name.split("__")
    return parts[1] if len(parts) == 4 else None


def runs_from_document(doc: Mapping[str, Any]) -> List[Run]:
    """The runs of a document :func:`summarize` wrote, rebuilt from their stored curves (so results of
    runs whose folders are gone can be summarised and plotted again beside new ones), with their stored
    command, ``label`` and ``reproduce``. A document written before labels stored a run's configuration
    as its ``exp_name``: where that differs from the run folder's name, the folder's is the run's
    experiment name and the stored one its label."""
    runs = []
    for r in doc.get("runs", []):
        curve = r.get("curve")
        if curve is None:
            raise ValueError(f"run {r.get('run_dir')} has no stored curve (written before curves were kept)")
        exp_name, label = r["exp_name"], r.get("label")
        if "label" not in r and _folder_exp_name(r["run_dir"]) not in (None, exp_name):
            exp_name, label = _folder_exp_name(r["run_dir"]), exp_name
        runs.append(Run(r["run_dir"], r["env_id"], exp_name, int(r["seed"]), r["trainer"],
                        args={k: r[k] for k in ("num_envs", "config") if r.get(k)},
                        steps=np.array(curve["global_step"], dtype=np.int64),
                        wall_s=np.array(curve["wall_s"], dtype=np.float64),
                        returns=np.array(curve["avg_return"], dtype=np.float64),
                        machine=dict(r.get("machine") or doc.get("meta", {})), command=r.get("command"),
                        label=label, reproduce=r.get("reproduce")))
    return runs


def first_crossing(run: Run, threshold: float) -> Optional[Crossing]:
    """The first logged point where the average return is ``>= threshold`` (None: never)."""
    hit = np.flatnonzero(run.returns >= threshold)
    if not hit.size:
        return None
    i = hit[0]
    return Crossing(int(run.steps[i]), float(run.wall_s[i]))


def step_curve(x: np.ndarray, y: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """The last ``y`` logged at or before each grid point (NaN before the first)."""
    idx = np.searchsorted(x, grid, side="right") - 1
    out = np.where(idx >= 0, y[np.clip(idx, 0, None)], np.nan) if len(x) else np.full(len(grid), np.nan)
    return out.astype(np.float64)


def band(curves: Sequence[tuple], points: int = 200) -> Dict[str, np.ndarray]:
    """Median, min and max over seeds of ``(x, y)`` curves, on a grid up to the shortest run's end."""
    end = min(float(x[-1]) for x, _ in curves)
    grid = np.linspace(0.0, end, points)
    ys = np.stack([step_curve(x, y, grid) for x, y in curves])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns before the first episode ends
        return {"x": grid, "median": np.nanmedian(ys, 0), "min": np.nanmin(ys, 0), "max": np.nanmax(ys, 0)}


def parse_thresholds(specs: Sequence[str]) -> Dict[str, List[float]]:
    """``["20", "Breakout-v5=300,400"]`` -> ``{"*": [20.0], "Breakout-v5": [300.0, 400.0]}``."""
    out: Dict[str, List[float]] = {}
    for spec in specs:
        env, _, values = spec.rpartition("=")
        try:
            out.setdefault(env or "*", []).extend(float(v) for v in values.split(","))
        except ValueError:
            raise ValueError(f"--thresholds {spec!r}: expected VALUE[,VALUE] or ENV_ID=VALUE[,VALUE]") from None
    return out


def _thresholds_for(env_id: str, thresholds: Mapping[str, List[float]]) -> List[float]:
    return sorted(set(thresholds.get(env_id, []) + thresholds.get("*", [])))


def host_info() -> Dict[str, Any]:
    """:func:`rltrain.machine.machine_info` of the machine this runs on (the one the runs trained
    on), with the versions of gymnasium and numpy."""
    from rltrain.machine import machine_info, package_version

    return {**machine_info(), "gymnasium": package_version("gymnasium"), "numpy": package_version("numpy")}


def machine_of(runs: Sequence[Run]) -> Dict[str, Any]:
    """The machine the runs trained on: :func:`common_machine` of their ``machine.json`` records."""
    return common_machine([r.machine for r in runs])


def common_machine(machines: Sequence[Optional[Mapping[str, Any]]]) -> Dict[str, Any]:
    """One record for the machines of several runs: the latest by date, with ``devices``
    (``cpu_models``) listing every device name (processor) where they differ; :func:`host_info` of
    this machine where none was recorded."""
    known = sorted((dict(m) for m in machines if m), key=lambda m: str(m.get("date", "")))
    if not known:
        return host_info()
    meta = {k: v for k, v in known[-1].items() if k != "ranks"}
    for key, listed in (("device_name", "devices"), ("cpu_model", "cpu_models")):
        names = sorted({str(m[key]) for m in known if m.get(key)})  # runs older than the key name none
        if len(names) > 1:
            meta[listed] = names
    return meta


def _cards(machines: Sequence[Mapping[str, Any]]) -> str:
    """The devices of runs' machines, short: ``H100``, ``H100, H200``."""
    names = sorted({str((m or {}).get("device_name") or "?") for m in machines})
    return ", ".join(n.replace("NVIDIA ", "").split(" ")[0] for n in names)


def command_line(run: Run, defaults: Optional[Dict[str, Any]] = None) -> str:
    """``python scripts/<trainer>.py`` with the flags that differ from ``defaults`` (the trainer's
    defaults with its ``--config`` preset applied); without defaults every saved arg is listed."""
    skip = {"resume", "runs_dir", "progress", "track"}
    parts = [f"python scripts/{run.trainer}.py"]
    if run.args.get("config"):
        parts.append(f"--config {run.args['config']}")
    for key, value in run.args.items():
        if key in skip or key == "config" or (defaults is not None and _same(defaults.get(key), value)):
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            parts.append(flag if value else f"--no-{key.replace('_', '-')}")
        else:
            parts.append(f"{flag} {value}")
    return " ".join(parts)


def _same(default: Any, saved: Any) -> bool:
    """A default equals its value read back from JSON (tuples come back as lists)."""
    return json.loads(json.dumps(default, default=str)) == saved


def _finite(x: float) -> Optional[float]:
    return float(x) if x is not None and math.isfinite(x) else None


def summarize(runs: Sequence[Run], thresholds: Mapping[str, List[float]],
              commands: Optional[Mapping[str, str]] = None, meta: Optional[Dict[str, Any]] = None,
              reproduce: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The time-to-score document: per run its machine, command (the one it ran: ``commands``' entry for
    its folder, else its stored one, else rebuilt from its arguments), ``label`` (the configuration it
    counts as, where not its exp name), ``reproduce``, crossings, final point (steps, training seconds,
    steps per training second, average return) and curve (every logged point: global step, training
    seconds, average return); per group (seeds of one configuration) the median, min and
    max minutes and steps to each threshold over the seeds that reached it. ``reproduce`` maps a
    configuration to the flags today's trainer needs on top of its runs' commands to train them as they
    ran: their ``reproduce`` is the command with those flags (else the run's stored one, else none).
    ``meta`` names the machine: :func:`machine_of` the runs, unless given."""
    doc: Dict[str, Any] = {"meta": meta or machine_of(runs), "metric": RETURN, "clock": WALL, "runs": [], "groups": []}
    groups: Dict[str, List[Run]] = {}
    for run in runs:
        groups.setdefault(run.group, []).append(run)
        command = (commands or {}).get(run.run_dir) or run.command or command_line(run)
        flags = (reproduce or {}).get(run.configuration)
        crossings = {}
        for t in _thresholds_for(run.env_id, thresholds):
            c = first_crossing(run, t)
            crossings[f"{t:g}"] = None if c is None else {"global_step": c.global_step, "wall_s": c.wall_s,
                                                          "minutes": c.minutes}
        doc["runs"].append({
            "run_dir": run.run_dir, "env_id": run.env_id, "exp_name": run.exp_name, "label": run.label,
            "trainer": run.trainer, "seed": run.seed, "command": command,
            "reproduce": f"{command} {flags}" if flags else run.reproduce,
            "num_envs": run.args.get("num_envs"), "config": run.args.get("config"), "machine": run.machine,
            "final": {"global_step": int(run.steps[-1]) if len(run.steps) else 0,
                      "wall_s": _finite(run.wall_s[-1]) if len(run.wall_s) else None,
                      "steps_per_s": _finite(round(run.steps[-1] / run.wall_s[-1], 1))
                      if len(run.steps) and run.wall_s[-1] > 0 else None,
                      "avg_return": _finite(run.returns[-1]) if len(run.returns) else None,
                      "best_avg_return": _finite(run.returns.max()) if len(run.returns) else None},
            "crossings": crossings,
            "curve": {"global_step": run.steps.tolist(), "wall_s": [round(float(w), 2) for w in run.wall_s],
                      "avg_return": [round(float(x), 3) for x in run.returns]},
        })
    for name, members in groups.items():
        entry: Dict[str, Any] = {"group": name, "env_id": members[0].env_id,
                                 "configuration": members[0].configuration,
                                 "seeds": sorted(r.seed for r in members), "thresholds": {}}
        for t in _thresholds_for(members[0].env_id, thresholds):
            hits = [c for c in (first_crossing(r, t) for r in members) if c is not None]
            minutes = [c.minutes for c in hits]
            steps = [c.global_step for c in hits]
            entry["thresholds"][f"{t:g}"] = {
                "reached": f"{len(hits)}/{len(members)}",
                # the median over all seeds: a seed that never reached the bar counts as +inf
                "median_minutes": _finite(float(np.median(minutes + [math.inf] * (len(members) - len(hits))))),
                "min_minutes": min(minutes) if minutes else None, "max_minutes": max(minutes) if minutes else None,
                "median_steps": _finite(float(np.median(steps + [math.inf] * (len(members) - len(hits))))),
            }
        doc["groups"].append(entry)
    return doc


def plot(runs: Sequence[Run], thresholds: Mapping[str, List[float]], out_dir: str | Path) -> List[Path]:
    """One PNG per game: average return against steps and against minutes, median and min-max over
    the seeds of each configuration (its card named where the runs used several), thresholds dashed.
    Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    several_cards = bool(machine_of(runs).get("devices"))  # as markdown() decides from the document's meta
    for env_id in sorted({r.env_id for r in runs}):
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        by_group: Dict[str, List[Run]] = {}
        for r in runs:
            if r.env_id == env_id and len(r.steps):
                by_group.setdefault(r.configuration, []).append(r)
        for name, members in sorted(by_group.items()):
            label = f"{name} ({len(members)} seed{'s' if len(members) > 1 else ''}" \
                + (f", {_cards([r.machine for r in members])})" if several_cards else ")")
            for ax, xs, scale in ((axes[0], [r.steps for r in members], 1.0),
                                  (axes[1], [r.wall_s for r in members], 60.0)):
                b = band([(x / scale, r.returns) for x, r in zip(xs, members)])
                line, = ax.plot(b["x"], b["median"], label=label)
                if len(members) > 1:
                    ax.fill_between(b["x"], b["min"], b["max"], alpha=0.2, color=line.get_color())
        for ax, xlabel in zip(axes, ("environment steps", "training minutes")):
            for t in _thresholds_for(env_id, thresholds):
                ax.axhline(t, color="gray", linestyle="--", linewidth=0.8)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("average return, last 100 episodes")
            ax.grid(alpha=0.3)
        axes[0].legend(loc="lower right", fontsize=8)
        fig.suptitle(f"{env_id}: median and min-max over seeds")
        fig.tight_layout()
        path = out_dir / f"learning_curves_{env_id}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def markdown(doc: Mapping[str, Any]) -> str:
    """One table per game of a :func:`summarize` document: per configuration its envs, seeds and
    training minutes, the final average return (median and range over the seeds) and the median
    minutes to each threshold with how many seeds reached it; a ``card`` column where the document's
    runs trained on more than one kind of device."""
    lines: List[str] = []
    by_card = bool(doc.get("meta", {}).get("devices"))
    by_env: Dict[str, List[Mapping[str, Any]]] = {}
    for g in doc["groups"]:
        by_env.setdefault(g["env_id"], []).append(g)
    for env_id, groups in sorted(by_env.items()):
        thresholds = list(groups[0]["thresholds"])
        lines += [f"**{env_id}**", "", "| configuration | " + ("card | " if by_card else "")
                  + "envs | seeds | minutes | final return (range) | "
                  + " | ".join(f">= {t}: minutes (seeds)" for t in thresholds) + " |",
                  "|---|" + ("---|" if by_card else "") + "---:|---:|---:|---:|" + "---:|" * len(thresholds)]
        for g in groups:
            runs = [r for r in doc["runs"] if f"{r['env_id']} {r.get('label') or r['exp_name']}" == g["group"]]
            finals = [r["final"]["avg_return"] for r in runs if r["final"]["avg_return"] is not None]
            minutes = [r["final"]["wall_s"] / 60.0 for r in runs if r["final"]["wall_s"] is not None]
            envs = sorted({r.get("num_envs") for r in runs if r.get("num_envs")})
            cells = [f"{_median_text(s['median_minutes'])} ({s['reached']})" for s in g["thresholds"].values()]
            final = (f"{np.median(finals):.1f} ({min(finals):.1f} to {max(finals):.1f})" if len(finals) > 1
                     else f"{finals[0]:.1f}" if finals else "-")
            config = runs[0].get("config")
            name = f"{runs[0]['trainer'].upper()} `{g['configuration']}`" + (f", `{config}`" if config else "")
            card = f"{_cards([r.get('machine') for r in runs])} | " if by_card else ""
            lines.append(f"| {name} | {card}{', '.join(map(str, envs)) or '-'} | "
                         f"{len(runs)} | {max(minutes, default=0.0):.1f} | {final} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines).rstrip()


def _median_text(minutes: Optional[float]) -> str:
    return "never" if minutes is None else f"{minutes:.1f}"


def to_json(doc: Dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, default=lambda o: dataclasses.asdict(o) if dataclasses.is_dataclass(o) else str(o))
