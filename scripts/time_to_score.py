"""Time-to-score of training runs: when the average return first reaches each threshold, and curves.

    python scripts/time_to_score.py runs/Pong-v5__ppo__* runs/Breakout-v5__ppo__* \\
        --thresholds Pong-v5=20 Breakout-v5=300,400                # writes runs/time_to_score.json
    python scripts/time_to_score.py runs/Pong-v5__preset__3__* --merge docs/results/time_to_score.json \\
        --out docs/results/time_to_score.json                     # the recorded results, on purpose

For each run folder (``metrics.jsonl`` of scripts/ppo.py or scripts/impala.py) it finds the first
iteration whose ``charts/avg_episodic_return`` (mean of the last 100 episodes) is >= each threshold,
and reports the global step and the training minutes (``charts/wall_s``, summed over ``--resume``
segments).  Runs of one game with one ``--exp-name`` (or one ``--alias`` label) are seeds of one
configuration: the JSON gives their median, min and max, and ``learning_curves_<env>.png`` beside it
shows return against steps and against minutes (median line, min-max band).  Each run keeps its machine
(the ``machine.json`` the trainers write: device, driver, CPU cores, versions, date), the command it ran,
its label, the command that reproduces it with today's code where that differs (``--reproduce``),
crossings and whole curve, so a later call can ``--merge`` this document with new run folders and draw
every curve again; the stored command, label and reproduce command are kept.  The JSON goes beside the
run folders (``runs/time_to_score.json``) unless ``--out`` names another file, so the recorded results
in ``docs/results/`` change only when ``--out`` asks for them (a call with ``--merge`` documents alone
needs it).

    python scripts/time_to_score.py --merge docs/results/time_to_score.json --alias preset=preset-eager \\
        --reproduce preset-eager=--no-graph-update --out docs/results/time_to_score.json
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import tyro

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout too

from rltrain.config import ConfigError, exit_on_config_error, load_yaml_preset  # noqa: E402
from rltrain.time_to_score import (Run, command_line, load_run, parse_thresholds, plot,  # noqa: E402
                                   runs_from_document, summarize, to_json)
from rltrain.trainer_process import load_trainer  # noqa: E402


@dataclass
class Args:
    """Time-to-score of run folders."""

    runs: tyro.conf.Positional[List[str]]
    """run folders (runs/<env>__<exp_name>__<seed>__<time>)"""
    merge: List[str] = field(default_factory=list)
    """earlier documents of this script whose runs join these (from their stored curves; a run folder
    given again replaces its stored run)"""
    alias: List[str] = field(default_factory=list)
    """OLD=NEW: count runs named OLD (--exp-name) as seeds of configuration NEW, e.g. a search trial that
    trained the preset (the runs' label, merged runs' included; their exp name stays)"""
    reproduce: List[str] = field(default_factory=list)
    """CONFIG=FLAGS: the flags today's trainer needs on top of the commands of configuration CONFIG's runs
    to train them as they ran (e.g. preset-eager=--no-graph-update after the preset changed), stored as
    each run's reproduce command beside the command it ran (a merged run keeps its stored one)"""
    thresholds: List[str] = field(default_factory=lambda: ["Pong-v5=20", "Breakout-v5=300,400"])
    """VALUE[,VALUE] for every game or ENV_ID=VALUE[,VALUE] for one"""
    out: Optional[str] = None
    """the JSON to write; the PNG learning curves go beside it (default: time_to_score.json in the folder of the
    first run folder, e.g. runs/; needed when only --merge documents are given)"""
    plots: bool = True
    """write the PNG learning curves"""


def _defaults(run: Run) -> Dict:
    """The trainer's defaults with the run's ``--config`` preset applied (for a short command line)."""
    try:
        module = load_trainer(run.trainer)
        defaults = dataclasses.asdict(module.Args())
        if run.args.get("config") and Path(run.args["config"]).is_file():
            defaults.update(load_yaml_preset(run.args["config"], module.Args))
        return defaults
    except (FileNotFoundError, AttributeError, ConfigError, ValueError):
        return {}


def output_path(args: Args) -> Path:
    """``--out``, or ``time_to_score.json`` beside the first run folder: never a tracked results file by default."""
    if args.out:
        return Path(args.out)
    if not args.runs:
        raise ConfigError("--out is needed when no run folder is given (only --merge documents)")
    return Path(args.runs[0]).resolve().parent / "time_to_score.json"


def main(args: Args) -> dict:
    try:
        thresholds = parse_thresholds(args.thresholds)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    aliases = dict(a.partition("=")[::2] for a in args.alias)
    if any(not old or not new for old, new in aliases.items()):
        raise ConfigError(f"--alias: expected OLD=NEW, got {args.alias}")
    reproduce = dict(r.partition("=")[::2] for r in args.reproduce)
    if any(not config or not flags.strip() for config, flags in reproduce.items()):
        raise ConfigError(f"--reproduce: expected CONFIG=FLAGS, got {args.reproduce}")
    runs = []
    for folder in args.runs:
        try:
            runs.append(load_run(folder))
        except (FileNotFoundError, ValueError) as e:
            raise ConfigError(str(e)) from None
    fresh = {r.run_dir for r in runs}
    for path in args.merge:
        try:
            runs += [r for r in runs_from_document(json.loads(Path(path).read_text())) if r.run_dir not in fresh]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"--merge {path}: {type(e).__name__}: {e}") from None
    for run in runs:
        run.label = aliases.get(run.exp_name, run.label)
    runs.sort(key=lambda r: r.run_dir)  # one document for the same runs, whichever were folders or merged
    # a merged run keeps the command it was stored with (its few stored args cannot rebuild it)
    commands = {r.run_dir: command_line(r, _defaults(r)) for r in runs if r.args and r.command is None}
    doc = summarize(runs, thresholds, commands, reproduce=reproduce)
    out = output_path(args)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.plots:
        doc["plots"] = [str(p) for p in plot(runs, thresholds, out.parent)]
    out.write_text(to_json(doc) + "\n")
    for g in doc["groups"]:
        for t, s in g["thresholds"].items():
            when = ("never" if s["median_minutes"] is None else
                    f"median {s['median_minutes']:.1f} min (range {s['min_minutes']:.1f}-{s['max_minutes']:.1f}), "
                    f"{s['median_steps']:.3g} steps")
            print(f"{g['group']}: >= {t} reached by {s['reached']} seeds; {when}")
    print(f"wrote {out}" + (f" and {len(doc.get('plots', []))} PNG(s)" if args.plots else ""))
    return doc


if __name__ == "__main__":
    exit_on_config_error(lambda: main(tyro.cli(Args, description=__doc__)))
