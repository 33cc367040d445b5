"""The Atari suite: one trainer with one preset on several games, each for a budget of training minutes.

    python scripts/atari_suite.py                      # PPO, configs/atari.yaml, the Atari-5, 10 minutes, seed 1
    python scripts/atari_suite.py --trainer impala     # IMPALA, configs/impala_atari.yaml
    python scripts/atari_suite.py --games Pong Breakout --seeds 1 2 3 --budget-min 5
    timeout -s INT 540 python scripts/atari_suite.py   # a bounded call; the same command goes on from there
    python scripts/atari_suite.py --summarize-only --out docs/results/atari_suite.json   # publish

Each game (EnvPool's ``<Game>-v5``) and seed trains ``scripts/<trainer>.py --config <preset>`` until
its run has logged ``--budget-min`` training minutes (``charts/wall_s``: start-up left out, summed
over ``--resume`` segments; :func:`rltrain.trainer_process.train_for` stops it with Ctrl-C's signal,
so it writes its checkpoint), or until the trainer ends on its own (the preset's
``total_timesteps``).  Games run one after the other; the suite folder
``--suite-dir/<name>/`` keeps the state (``suite.json``), the run folders and the trainers' logs, so
a suite stopped at any point (Ctrl-C, SIGTERM, ``timeout -s INT``; the trainer stops with it and
keeps a checkpoint every ``--checkpoint-every`` iterations) goes on with the same command: a
finished game is skipped, an interrupted one continues with ``--resume`` from its latest checkpoint.
One line per game says where it starts and how it ended.

At the end, and with ``--summarize-only`` without training, it writes the results document
(``rltrain.atari_suite.summarize``: per game and seed the return at 2, 5 and 10 minutes, the final
one, env steps, steps/s, the human-normalised score, the minutes to reach CleanRL's published
10M-step PPO score, the Atari-5 estimate of the 57-game median; machine, versions, commands) into
the suite folder, or ``--out``, with the PNG of the learning curves beside it.  Exit status: 0
every game done, 1 a game failed (the others still ran), 2 bad input, 130 stopped.
"""

from __future__ import annotations

import dataclasses
import fcntl
import math
import re
import shlex
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Literal, Optional, Tuple

import tyro

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a plain checkout too

from rltrain.atari_scores import ATARI5, GAMES  # noqa: E402
from rltrain.atari_suite import SuiteState, markdown, plot, run_record, summarize, to_json  # noqa: E402
from rltrain.config import ConfigError, close_matches, exit_on_config_error  # noqa: E402
from rltrain.time_to_score import load_run  # noqa: E402
from rltrain.trainer_process import ATARI_PRESETS, load_trainer, train_for  # noqa: E402
from rltrain.validation import validate  # noqa: E402

# --checkpoint-every 0: about every 30-50 training seconds with the Atari presets (a PPO iteration of
# 1024 x 32 steps takes ~1.6 s on a 16-core host; an IMPALA learner update of 256 x 20, ~0.25 s)
CHECKPOINT_EVERY = {"ppo": 20, "impala": 200}
SUITE_FLAGS = ("--env-id", "--seed", "--exp-name", "--runs-dir", "--checkpoint-every", "--resume", "--config")


@dataclass
class Args:
    """A trainer and preset on several games, each for a budget of training minutes; resumable."""

    trainer: Literal["ppo", "impala"] = "ppo"
    """scripts/ppo.py or scripts/impala.py"""
    config: str = ""
    """the preset every game trains with (empty: the trainer's Atari preset, configs/atari.yaml or
    configs/impala_atari.yaml)"""
    games: List[str] = field(default_factory=lambda: list(ATARI5))
    """Atari games (Qbert or Qbert-v5; default the Atari-5) or other EnvPool task ids (no reference scores)"""
    seeds: List[int] = field(default_factory=lambda: [1])
    """--seed of each game's runs"""
    budget_min: float = 10.0
    """training minutes of each game and seed (charts/wall_s)"""
    name: str = ""
    """the suite's name, its folder under --suite-dir and the runs' --exp-name (empty: trainer, preset and
    budget, e.g. ppo_atari_10min, impala_atari_10min)"""
    suite_dir: str = "runs/atari_suite"
    """where suite folders go"""
    checkpoint_every: int = 0
    """the runs' --checkpoint-every (0: 20 iterations for PPO, 200 learner updates for IMPALA)"""
    extra: tyro.conf.UseAppendAction[List[str]] = field(default_factory=list)
    """more trainer flags for every run, one per --extra, e.g. --extra=--num-envs --extra=2048"""
    out: str = ""
    """the results JSON (empty: atari_suite.json in the suite folder); the PNG goes beside it"""
    plots: bool = True
    """write the PNG of the learning curves"""
    summarize_only: bool = False
    """train nothing: write the results of the suite's run folders as they are"""
    stop_grace_s: float = 120.0
    """seconds a stopped trainer has to finish its iteration and write its checkpoint before it is killed"""


def resolve_games(names: List[str]) -> List[str]:
    """EnvPool task ids of ``names``: a game of the 57 (``Qbert``, ``Qbert-v5``) or an EnvPool id."""
    import envpool  # noqa: F401 -- registers the tasks

    from envpool.registration import registry

    known = set(registry.specs)
    if not names:
        raise ConfigError("--games: name at least one game")
    env_ids = []
    for name in names:
        env_id = name if name in known else f"{name}-v5"
        if env_id not in known:
            choices = list(GAMES) + sorted(known)
            raise ConfigError(f"--games: unknown game '{name}' (neither one of the 57 Atari games nor an EnvPool "
                              f"task).{close_matches(name, choices)}")
        if env_id in env_ids:
            raise ConfigError(f"--games: '{name}' given twice")
        env_ids.append(env_id)
    return env_ids


def check_args(args: Args) -> Tuple[Args, List[str]]:
    """``args`` with their defaults resolved (preset, name, checkpoint period) and the games' task
    ids; :class:`ConfigError` for bad input."""
    if not (isinstance(args.budget_min, (int, float)) and math.isfinite(args.budget_min) and args.budget_min > 0):
        raise ConfigError(f"--budget-min must be a number of minutes > 0, got {args.budget_min}")
    if not args.seeds or len(set(args.seeds)) != len(args.seeds):
        raise ConfigError(f"--seeds: give each seed once, got {args.seeds}")
    if args.checkpoint_every < 0 or args.stop_grace_s <= 0:
        raise ConfigError("--checkpoint-every must be >= 0 and --stop-grace-s > 0")
    clash = [f for f in args.extra if f.split("=")[0] in SUITE_FLAGS]
    if clash:
        raise ConfigError(f"--extra: {', '.join(clash)} is set by the suite (--games, --seeds, --name, --config, "
                          f"--checkpoint-every)")
    config = args.config or ATARI_PRESETS[args.trainer]
    if not Path(config).is_file():
        raise ConfigError(f"--config: no such preset {config} (paths are relative to the folder the suite runs in)")
    stem = Path(config).stem
    name = args.name or f"{stem if stem.startswith(args.trainer) else f'{args.trainer}_{stem}'}_{args.budget_min:g}min"
    if not re.fullmatch(r"[A-Za-z0-9._-]+", name):
        raise ConfigError(f"--name must be letters, digits, '.', '_' or '-', got '{name}'")
    every = args.checkpoint_every or CHECKPOINT_EVERY[args.trainer]
    return dataclasses.replace(args, config=config, name=name, checkpoint_every=every), resolve_games(args.games)


def fresh_flags(args: Args, env_id: str, seed: int, runs_dir: Path) -> List[str]:
    """The trainer flags of a game's first segment."""
    return ["--config", args.config, "--env-id", env_id, "--seed", str(seed), "--exp-name", args.name,
            "--runs-dir", str(runs_dir), "--checkpoint-every", str(args.checkpoint_every), "--no-progress",
            *args.extra]


def command_line(args: Args) -> str:
    """``python scripts/atari_suite.py`` with the flags that differ from the defaults."""
    parts, defaults = ["python scripts/atari_suite.py"], Args()
    for f in dataclasses.fields(Args):
        value = getattr(args, f.name)
        if value == getattr(defaults, f.name):
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            parts.append(flag if value else "--no-" + f.name.replace("_", "-"))
        elif isinstance(value, list):
            parts.append(" ".join([flag, *map(str, value)]) if f.name != "extra"
                         else " ".join(f"--extra={shlex.quote(str(v))}" for v in value))
        else:
            parts.append(f"{flag} {shlex.quote(str(value))}")
    return " ".join(parts)


def _lock(folder: Path):
    """Hold ``folder/.lock`` while the suite trains (one process per suite)."""
    folder.mkdir(parents=True, exist_ok=True)
    handle = open(folder / ".lock", "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise ConfigError(f"suite {folder} is being trained by another process") from None
    return handle


def _trained_s(run_dir: Optional[str]) -> float:
    """The training seconds the run's curve reaches (0 without a run folder or a logged row)."""
    if not run_dir:
        return 0.0
    try:
        run = load_run(run_dir)
    except (FileNotFoundError, ValueError):
        return 0.0
    return float(run.wall_s[-1]) if len(run.wall_s) else 0.0


def _outcome_line(record: Dict) -> str:
    """How a game and seed ended: minutes, steps, steps/s, return at the budget, human-normalised
    score, CleanRL's 10M-step score reached or not."""
    if record["minutes"] is None:
        return "no iteration logged"
    budget_key = list(record["return_at_min"])[-1]
    ret = record["return_at_min"][budget_key]
    sps = record["steps_per_s"]
    parts = [f"{record['minutes']:.1f} min", f"{record['env_steps'] / 1e6:.2f}M steps",
             f"{'-' if sps is None else f'{sps:,.0f}'} steps/s",
             f"return {'-' if ret is None else f'{ret:.1f}'} at {budget_key} min"]
    if record["human_normalized"] is not None:
        parts.append(f"human-normalised {100 * record['human_normalized']:.0f}%")
    if record["cleanrl_ppo_10m"] is not None:
        to = record["minutes_to_cleanrl"]
        parts.append(f"CleanRL's 10M-step {record['cleanrl_ppo_10m']:g} "
                     + ("not reached" if to is None else f"reached at {to:.1f} min"))
    return ", ".join(parts)


def train_game(args: Args, state: SuiteState, env_id: str, seed: int, label: str) -> str:
    """Train one game and seed to the budget (or go on from its checkpoint); its status after."""
    entry = state.entry(env_id, seed)
    budget_s = state.budget_s
    if entry["status"] != "done" and _trained_s(entry["run_dir"]) > budget_s:  # stopped after its trainer
        entry.update(status="done", ended="budget")
        state.save()
    if entry["status"] == "done":
        print(f"{label}: done ({_outcome_line(run_record(entry, args.budget_min))}); skipped", flush=True)
        return "done"
    runs_dir = state.folder / "runs"
    latest = Path(entry["run_dir"]) / "checkpoints" / "latest.pt" if entry["run_dir"] else None
    script = f"scripts/{args.trainer}.py"
    if latest is not None and latest.is_file():
        flags = ["--resume", str(latest)]
        metrics = Path(entry["run_dir"]) / "metrics.jsonl"
        offset = metrics.stat().st_size if metrics.is_file() else 0
        print(f"{label}: continuing from {latest} (its curve reaches {_trained_s(entry['run_dir']) / 60:.1f} of "
              f"{args.budget_min:g} min)", flush=True)
    else:
        if entry["run_dir"]:
            print(f"{label}: {entry['run_dir']} has no checkpoint; training again in a new run folder", flush=True)
        entry["run_dir"], offset = None, 0
        flags = fresh_flags(args, env_id, seed, runs_dir)
        print(f"{label}: training {args.budget_min:g} min", flush=True)
    before = set(runs_dir.glob(f"{env_id}__{args.name}__{seed}__*"))
    segment = state.begin_segment(entry, " ".join(["python", script, *map(shlex.quote, flags)]))

    def find_metrics() -> Optional[Path]:
        if not entry["run_dir"]:
            new = sorted(set(runs_dir.glob(f"{env_id}__{args.name}__{seed}__*")) - before)
            if not new:
                return None
            entry["run_dir"] = str(new[0])
            state.save()
        return Path(entry["run_dir"]) / "metrics.jsonl"

    log = state.folder / "logs" / f"{env_id}__{seed}.log"
    try:
        run = train_for([sys.executable, str(ROOT / script), *flags], budget_s, find_metrics, log,
                        offset=offset, stop_signal=signal.SIGINT, grace_s=args.stop_grace_s,
                        parent_death_signal=signal.SIGINT)
    except KeyboardInterrupt:
        segment["outcome"] = "interrupted"
        entry["status"] = "interrupted"
        state.save()
        kept = Path(entry["run_dir"]) / "checkpoints" / "latest.pt" if entry["run_dir"] else None
        print(f"{label}: stopped; " + (f"the same command goes on from {kept}" if kept and kept.is_file()
                                       else "no checkpoint yet: the same command starts it again"), flush=True)
        raise
    segment["exit"] = run.returncode
    if run.past_budget or run.returncode == 0:
        segment["outcome"] = "budget" if run.past_budget else "finished"
        entry.update(status="done", ended=segment["outcome"])
    else:
        segment["outcome"] = "failed"
        entry["status"] = "failed"
    state.save()
    if entry["status"] == "failed":
        tail = log.read_text(errors="replace").strip().splitlines()[-5:] if log.is_file() else []
        print(f"{label}: failed (exit {run.returncode}; log {log})" + "".join(f"\n    {t}" for t in tail),
              file=sys.stderr, flush=True)
    else:
        ended = "budget reached" if run.past_budget else "the trainer finished its steps"
        print(f"{label}: done, {ended} ({_outcome_line(run_record(entry, args.budget_min))})", flush=True)
    return entry["status"]


def write_results(args: Args, state: SuiteState) -> Dict:
    """The results document of the suite (and its PNG), where ``--out`` says or in the suite folder."""
    doc = summarize(state)
    out = Path(args.out) if args.out else state.folder / "atari_suite.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.plots:
        doc["plot"] = str(plot(doc, out.with_suffix(".png")))
    out.write_text(to_json(doc) + "\n")
    print(markdown(doc))
    print(f"wrote {out}" + (f" and {doc['plot']}" if args.plots else ""))
    return doc


def main(args: Args) -> Dict:
    """Train the suite's games that are not done (none with ``--summarize-only``), then write its
    results; returns the results document."""
    command = command_line(args)
    args, env_ids = check_args(args)
    folder = Path(args.suite_dir) / args.name
    if args.summarize_only:
        return write_results(args, SuiteState.load(folder))
    lock = _lock(folder)
    try:
        settings = {"trainer": args.trainer, "config": args.config, "budget_min": float(args.budget_min),
                    "checkpoint_every": args.checkpoint_every, "extra": list(args.extra)}
        trainer = load_trainer(args.trainer)
        for env_id in env_ids:  # every game's flags, before any game trains
            validate(trainer.cli(fresh_flags(args, env_id, args.seeds[0], folder / "runs")))
        state = SuiteState.open(folder, args.name, settings, command)
        jobs = [(env_id, seed) for env_id in env_ids for seed in args.seeds]
        for i, (env_id, seed) in enumerate(jobs, 1):
            train_game(args, state, env_id, seed, f"[{i}/{len(jobs)}] {env_id} seed {seed}")
        return write_results(args, state)
    finally:
        lock.close()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _interrupt)  # `timeout`, a scheduler: as Ctrl-C
    try:
        result = exit_on_config_error(lambda: main(tyro.cli(Args, description=__doc__)))
    except KeyboardInterrupt:
        print("suite stopped: the same command goes on from each game's latest checkpoint", file=sys.stderr)
        sys.exit(130)
    sys.exit(1 if any(r["status"] == "failed" for r in result["runs"]) else 0)
