"""Hyperparameter search for large-batch PPO (or IMPALA) on Atari with Optuna: the best return in a
fixed wall clock.

    python scripts/search_hparams.py --env-id Pong-v5 --num-envs 1024 --budget-s 300 --trials 40
    python scripts/search_hparams.py --env-id Pong-v5 --num-envs 1024 --trials 0 --write-best   # read back
    python scripts/search_hparams.py --trainer impala --env-id Breakout-v5 --num-envs 1024 --budget-s 600
    python scripts/search_hparams.py --quick           # CPU check: 3 tiny CartPole trials, < 1 min

Each trial runs ``scripts/<trainer>.py`` in a subprocess with the preset (``--config``, default
configs/atari.yaml or configs/impala_atari.yaml), the user's ``--num-envs`` and the trial's values
of the flags in the trainer's space (:data:`SPACES`), and watches its ``metrics.jsonl``:

* **objective** -- the average return of the last 100 episodes (``charts/avg_episodic_return``,
  the game score on Atari) at ``--budget-s`` seconds of training (``charts/wall_s``: from the first
  iteration, start-up excluded), maximised.  The trial is stopped at the budget; a run that ends
  before it (``--total-timesteps`` reached) is scored by its last value.  A run that fails (non-finite
  loss, crash) or finishes no episode is a failed trial.  Each trial also keeps the env steps and
  steps/s behind its value and the host's processor: hosts of one kind step EnvPool at different
  speeds, so trials compare best within one host.
* **pruning** -- the return is reported every ``--report-every-s`` training seconds; Optuna's
  median pruner stops a trial whose return is below the median of earlier trials at the same time
  (after ``--startup-trials`` complete trials and the first quarter of the budget).
* **start** -- a new study's first trial trains the preset's own values (``--no-start-from-preset``:
  sampled), so the search measures the preset it is to improve on.
* **sampler** -- TPE over the flags jointly (multivariate), random for the first ``--startup-trials``,
  seeded by ``--seed`` plus the number of trials already stored (a resumed search draws new values);
  all trials train with the same ``--train-seed``.
* **storage** -- an Optuna journal file (``--study-dir``/``<study>.journal``): a search stopped at any
  point resumes with the same command, and its trials can be read back (``--trials 0``).
* ``--write-best`` writes the best trials, the space and the machine the trials trained on to
  ``docs/results/hparam_search_<trainer>_<env>.json``, each trial with the command it ran and, where
  today's trainer needs other flags to train it as it ran (``--reproduce``), its ``reproduce`` command.

PPO's space (``PPO_ATARI_SPACE``) holds the seven flags that set the speed of learning at 1024-4096
envs: learning rate and its annealing horizon (``--total-timesteps``), rollout length, minibatch size
(in steps, so it keeps its meaning when ``--num-envs`` changes) and epochs, which together give the
gradient steps per env step, and the clip and entropy coefficients.  A trial costs minutes of a GPU
host, so a search runs tens of trials, not hundreds: GAE lambda, gradient clipping, gamma, the value
loss, the network and ``--num-envs`` (the user's) stay the preset's.  Combinations the trainer
rejects (a minibatch larger than the batch) are pruned before they start.  IMPALA's
(``IMPALA_ATARI_SPACE``) has the same kinds of flags plus V-trace's lambda; its minibatch sizes are
whole trajectories that divide the preset's learner batch for every rollout length.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Tuple

import tyro

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a plain checkout too

from rltrain.config import ConfigError, exit_on_config_error  # noqa: E402
from rltrain.time_to_score import RETURN, WALL, common_machine, saved_machine  # noqa: E402
from rltrain.trainer_scripts import load_trainer  # noqa: E402
from rltrain.validation import validate  # noqa: E402

# name -> ("float" | "int", low, high, log) or ("categorical", choices); flags of the trainer
PPO_ATARI_SPACE: Dict[str, tuple] = {
    "learning_rate": ("float", 1e-4, 3e-3, True),
    # the annealing horizon; a run stops there, so the range starts above the steps a 300 s budget
    # trains at 1024 envs (about 5.5M on a 16-core GPU host)
    "total_timesteps": ("int", 5_000_000, 40_000_000, True),
    "num_steps": ("categorical", [16, 32, 64, 128]),
    "minibatch_size": ("categorical", [1024, 2048, 4096, 8192, 16384]),
    "update_epochs": ("int", 1, 4, False),
    "clip_coef": ("float", 0.1, 0.3, False),
    "ent_coef": ("float", 1e-4, 3e-2, True),
}
IMPALA_ATARI_SPACE: Dict[str, tuple] = {
    "learning_rate": ("float", 1e-4, 3e-3, True),
    "total_timesteps": ("int", 5_000_000, 100_000_000, True),  # the annealing horizon
    "num_steps": ("categorical", [10, 20, 40]),
    # steps per minibatch (whole trajectories; every choice divides a 256-trajectory learner batch of each T)
    "minibatch_size": ("categorical", [320, 640, 1280, 2560]),
    "update_epochs": ("int", 1, 2, False),
    "ent_coef": ("float", 1e-4, 3e-2, True),
    "vtrace_lambda": ("float", 0.9, 1.0, False),
}
SPACES = {"ppo": PPO_ATARI_SPACE, "impala": IMPALA_ATARI_SPACE}
PRESETS = {"ppo": "configs/atari.yaml", "impala": "configs/impala_atari.yaml"}
# --quick: PPO's kinds of flags, sized for CartPole on a CPU
QUICK_SPACE: Dict[str, tuple] = {
    "learning_rate": ("float", 1e-3, 5e-3, True),
    "num_steps": ("categorical", [16, 32]),
    "minibatch_size": ("categorical", [32, 64]),
    "update_epochs": ("int", 1, 2, False),
    "ent_coef": ("float", 1e-4, 1e-2, True),
}


@dataclass
class Args:
    """Optuna search over a trainer's flags, scored by the return at a wall-clock budget."""

    trainer: Literal["ppo", "impala"] = "ppo"
    """scripts/ppo.py or scripts/impala.py"""
    env_id: str = "Pong-v5"
    """game to search on (one preset serves every Atari game: search on one, check on others)"""
    num_envs: int = 1024
    """--num-envs of every trial (fixed: the search is for this many envs)"""
    config: str = ""
    """preset the trials start from; the space's flags override it (empty: the trainer's Atari preset)"""
    budget_s: float = 300.0
    """training seconds per trial (charts/wall_s); the objective is the return at this time"""
    trials: Optional[int] = None
    """trials to run now (default 40, --quick 3; 0: only read the stored study back)"""
    study_name: str = ""
    """Optuna study name (empty: <trainer>_<env>_<num_envs>envs_<budget>s)"""
    study_dir: str = "runs/search"
    """folder of the journal file and of the trials' run folders"""
    seed: int = 0
    """seed of the TPE sampler"""
    train_seed: int = 1
    """--seed of every trial's training run"""
    report_every_s: float = 15.0
    """training seconds between the intermediate returns reported for pruning"""
    startup_trials: int = 5
    """trials before pruning starts and before TPE models the space (until then it samples at random)"""
    extra: List[str] = field(default_factory=list)
    """more trainer flags for every trial, e.g. --extra=--ca-backend --extra=triton"""
    write_best: bool = False
    """write the best trials to docs/results/hparam_search_<trainer>_<env>.json (or --best-out)"""
    best_out: str = ""
    """where --write-best writes (empty: docs/results/hparam_search_<trainer>_<env>.json)"""
    top: int = 5
    """trials listed in the written JSON"""
    reproduce: str = ""
    """with --write-best: flags today's trainer needs on top of each listed trial's command to train it as it
    ran (e.g. --no-graph-update after the preset changed), written as the trial's reproduce command beside
    the command it ran (empty: the file's earlier reproduce commands of the same study are kept)"""
    start_from_preset: bool = True
    """a new study's first trial trains the preset's own values (where they lie in the space)"""
    quick: bool = False
    """a CPU check of the whole loop: 3 tiny CartPole trials of 4 s each"""


def quick_args(args: Args) -> Args:
    """``--quick``: CartPole, 8 envs, 3 trials of 4 training seconds, the CartPole space."""
    return Args(trainer="ppo", env_id="CartPole-v1", num_envs=8, config="configs/classic_control.yaml", budget_s=4.0,
                trials=3 if args.trials is None else args.trials, study_name=args.study_name or "quick", study_dir=args.study_dir, seed=args.seed,
                train_seed=args.train_seed, report_every_s=1.0, startup_trials=1,
                extra=["--total-timesteps", "200000", *args.extra], write_best=args.write_best,
                best_out=args.best_out, top=args.top, reproduce=args.reproduce, quick=True)


def suggest(trial, space: Dict[str, tuple]) -> Dict[str, Any]:
    """The trial's value of each flag of ``space``."""
    values = {}
    for name, spec in space.items():
        if spec[0] == "categorical":
            values[name] = trial.suggest_categorical(name, spec[1])
        elif spec[0] == "int":
            values[name] = trial.suggest_int(name, spec[1], spec[2], log=spec[3])
        else:
            values[name] = trial.suggest_float(name, spec[1], spec[2], log=spec[3])
    return values


def in_space(value: Any, spec: tuple) -> bool:
    if spec[0] == "categorical":
        return value in spec[1]
    return isinstance(value, (int, float)) and not isinstance(value, bool) and spec[1] <= value <= spec[2]


def preset_values(trainer, args: Args, config: str, space: Dict[str, tuple]) -> Optional[Dict[str, Any]]:
    """The preset's value of each flag of ``space`` (as the trainer parses ``config``), or ``None``
    where one lies outside the space."""
    parsed = trainer.cli(trial_flags(args, {}, config=config))
    values = {name: getattr(parsed, name) for name in space}
    return values if all(in_space(values[k], spec) for k, spec in space.items()) else None


def trial_flags(args: Args, values: Dict[str, Any], config: Optional[str] = None) -> List[str]:
    """The trainer flags of one trial (the preset, ``config`` if given, then the trial's values)."""
    flags = ["--config", config or args.config or PRESETS[args.trainer], "--env-id", args.env_id, "--num-envs", str(args.num_envs),
             "--seed", str(args.train_seed)]
    if "minibatch_size" in values:
        flags += ["--num-minibatches", "0"]  # derived from --minibatch-size
    for name, value in values.items():
        flag = "--" + name.replace("_", "-")
        flags += [flag if value else "--no-" + name.replace("_", "-")] if isinstance(value, bool) else [flag, str(value)]
    return flags + list(args.extra)


def _read_rows(path: Path, offset: int) -> Tuple[List[dict], int]:
    """Complete JSON lines of ``path`` after byte ``offset``; the new offset."""
    if not path.is_file():
        return [], offset
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    rows = [json.loads(line) for line in data[:end].splitlines() if line.strip()]
    return rows, offset + end


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def run_trial(trial, args: Args, flags: List[str], trial_dir: Path) -> float:
    """Run the trainer until ``budget_s`` training seconds; report returns; the return at the budget."""
    import optuna

    trial_dir.mkdir(parents=True, exist_ok=True)
    script = f"scripts/{args.trainer}.py"
    cmd = [sys.executable, str(ROOT / script), *flags, "--runs-dir", str(trial_dir / "runs"),
           "--exp-name", f"trial{trial.number}", "--no-progress"]
    trial.set_user_attr("command", " ".join([f"python {script}", *flags]))
    with open(trial_dir / "log.txt", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=os.setsid)  # its own process group: stopped with its threads
    offset, value, at_s, steps, next_report = 0, None, 0.0, 0, args.report_every_s
    metrics: Optional[Path] = None
    try:
        while True:
            done = proc.poll() is not None
            if metrics is None:
                found = list((trial_dir / "runs").glob("*/metrics.jsonl"))
                metrics = found[0] if found else None
            rows, offset = _read_rows(metrics, offset) if metrics else ([], offset)
            for row in rows:
                wall = row.get(WALL, 0.0)
                if wall > args.budget_s:
                    done = True
                    break
                if isinstance(row.get(RETURN), (int, float)):  # and the steps, at the host's speed, it took
                    value, at_s, steps = float(row[RETURN]), wall, int(row.get("global_step", 0))
                while value is not None and wall >= next_report:
                    trial.report(value, int(next_report))
                    next_report += args.report_every_s
                    if trial.should_prune():
                        raise optuna.TrialPruned(f"return {value:.2f} at {wall:.0f} s is below the median")
            if done:
                break
            time.sleep(0.5)
    finally:
        _stop(proc)
        if metrics is not None:  # the run's machine.json: where the trial trained (pruned ones too)
            trial.set_user_attr("machine", saved_machine(metrics.parent))
    if proc.returncode not in (0, -signal.SIGTERM) and value is None:
        tail = (trial_dir / "log.txt").read_text()[-1500:]
        raise RuntimeError(f"trial {trial.number} failed (exit {proc.returncode}):\n{tail}")
    if proc.returncode not in (0, -signal.SIGTERM):
        raise RuntimeError(f"trial {trial.number} stopped with exit {proc.returncode} (see {trial_dir / 'log.txt'})")
    if value is None:
        raise RuntimeError(f"trial {trial.number} finished no episode in {args.budget_s:g} s")
    trial.set_user_attr("return_at_s", at_s)
    trial.set_user_attr("steps", steps)
    trial.set_user_attr("steps_per_s", round(steps / at_s, 1) if at_s > 0 else None)
    return value


def make_study(args: Args, study_name: str):
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    Path(args.study_dir).mkdir(parents=True, exist_ok=True)
    storage = JournalStorage(JournalFileBackend(str(Path(args.study_dir) / f"{study_name}.journal")))
    study = optuna.create_study(
        study_name=study_name, storage=storage, direction="maximize", load_if_exists=True,
        pruner=optuna.pruners.MedianPruner(n_startup_trials=args.startup_trials,
                                           n_warmup_steps=int(args.budget_s / 4)))
    # a resumed search draws new values: the sampler's seed moves on with the trials already stored.
    # Tens of trials: TPE models the space after a few random ones (Optuna's default waits for 10), and
    # models the flags jointly, as the learning rate, minibatch size and epochs act together.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.sampler = optuna.samplers.TPESampler(seed=args.seed + len(study.trials),
                                                   n_startup_trials=args.startup_trials, multivariate=True)
    return study


def best_document(study, args: Args, space: Dict[str, tuple]) -> Dict[str, Any]:
    """The best trials, the space, the objective and the machine, as written by ``--write-best``."""
    import optuna

    complete = sorted((t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE),
                      key=lambda t: t.value, reverse=True)
    counts = {s.name.lower(): sum(t.state == s for t in study.trials) for s in optuna.trial.TrialState}
    return {
        "study": study.study_name, "trainer": args.trainer, "env_id": args.env_id, "num_envs": args.num_envs, "config": args.config,
        "objective": f"{RETURN} at {args.budget_s:g} s of training ({WALL}), maximised",
        "budget_s": args.budget_s, "train_seed": args.train_seed, "sampler": f"TPE (multivariate, {args.startup_trials} random trials first)", "sampler_seed": args.seed,
        "pruner": f"median (after {args.startup_trials} trials, warm-up {args.budget_s / 4:g} s)",
        "space": {k: list(v) for k, v in space.items()}, "trials": counts,
        "meta": common_machine([t.user_attrs.get("machine") for t in study.trials]),  # where the trials trained
        "best": [{"number": t.number, "value": t.value, "params": t.params,
                  "command": t.user_attrs.get("command"),
                  **{k: t.user_attrs.get(k) for k in ("return_at_s", "steps", "steps_per_s")},
                  **{k: (t.user_attrs.get("machine") or {}).get(k) for k in ("device_name", "cpu_model")}}
                 for t in complete[:args.top]],
    }


def with_reproduce(doc: Dict[str, Any], flags: str, previous: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """``doc`` (:func:`best_document`) with a ``reproduce`` command for each listed trial: its command (the
    one it ran) followed by ``flags``, the flags today's trainer needs to train it as it ran; without
    ``flags``, the one ``previous`` (the file being rewritten) holds for the same trial of the same study,
    so that a rewrite keeps it."""
    kept = {}
    if previous and previous.get("study") == doc["study"]:
        kept = {t["number"]: t["reproduce"] for t in previous.get("best", []) if t.get("reproduce")}
    for trial in doc["best"]:
        if flags.strip():
            trial["reproduce"] = f"{trial['command']} {flags.strip()}"
        elif trial["number"] in kept:
            trial["reproduce"] = kept[trial["number"]]
    return doc


def main(args: Args) -> Dict[str, Any]:
    if args.quick:
        args = quick_args(args)
    space = QUICK_SPACE if args.quick else SPACES[args.trainer]
    if args.trials is None:
        args = dataclasses.replace(args, trials=40)
    if not args.config:
        args = dataclasses.replace(args, config=PRESETS[args.trainer])
    if args.trials < 0 or args.budget_s <= 0 or args.num_envs < 1 or args.report_every_s <= 0:
        raise ConfigError("--trials must be >= 0, --budget-s and --report-every-s > 0, --num-envs >= 1")
    try:
        import optuna
    except ImportError:
        raise ConfigError("the search needs the package optuna (pip install optuna)") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study_name = args.study_name or f"{args.trainer}_{args.env_id}_{args.num_envs}envs_{args.budget_s:g}s"
    study = make_study(args, study_name)
    trainer = load_trainer(args.trainer)
    config = Path(args.config) if Path(args.config).is_absolute() else ROOT / args.config

    def objective(trial) -> float:
        values = suggest(trial, space)
        flags = trial_flags(args, values)
        try:
            validate(trainer.cli(trial_flags(args, values, config=str(config))))
        except ConfigError as e:
            raise optuna.TrialPruned(f"rejected by the trainer: {e}") from None
        trial_dir = Path(args.study_dir).resolve() / study_name / f"trial_{trial.number:04d}"
        return run_trial(trial, args, flags, trial_dir)

    def progress(study, trial) -> None:
        value = "" if trial.value is None else f" return {trial.value:.2f}"
        print(f"trial {trial.number}: {trial.state.name.lower()}{value} {trial.params}", flush=True)

    if args.start_from_preset and not study.trials:
        start = preset_values(trainer, args, str(config), space)
        if start is None:
            print(f"the preset {args.config} lies outside the space: the search starts from sampled values")
        else:
            study.enqueue_trial(start)
    if args.trials:
        study.optimize(objective, n_trials=args.trials, catch=(RuntimeError,), callbacks=[progress])
    doc = best_document(study, args, space)
    if doc["best"]:
        b = doc["best"][0]
        print(f"best: trial {b['number']}, return {b['value']:.2f} at {args.budget_s:g} s\n  {b['command']}")
    if args.write_best:
        out = Path(args.best_out or ROOT / "docs" / "results" / f"hparam_search_{args.trainer}_{args.env_id}.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        previous = json.loads(out.read_text()) if out.is_file() else None
        doc = with_reproduce(doc, args.reproduce, previous)
        out.write_text(json.dumps(doc, indent=2) + "\n")
        print(f"wrote {out}")
    return doc


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    # a SIGTERM (e.g. from `timeout`) stops the search as Ctrl-C does: the running trial's trainer is
    # stopped and Optuna stores the trial as failed, so a resumed search does not see it running
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        exit_on_config_error(lambda: main(tyro.cli(Args, description=__doc__)))
    except KeyboardInterrupt:
        print("search stopped: the journal keeps the finished trials; the same command resumes it", file=sys.stderr)
        sys.exit(130)
