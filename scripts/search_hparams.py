"""Hyperparameter search for large-batch PPO (or IMPALA) on Atari with Optuna: the best return in a
fixed wall clock, or the fewest env steps to a score on several games together.

    python scripts/search_hparams.py --env-id Pong-v5 --num-envs 1024 --budget-s 300 --trials 40
    python scripts/search_hparams.py --env-id Pong-v5 --num-envs 1024 --trials 0 --write-best   # read back
    python scripts/search_hparams.py --trainer impala --env-id Breakout-v5 --num-envs 1024 --budget-s 600
    python scripts/search_hparams.py --objective to-score --num-envs 1024 --trials 24   # Pong 20 + Breakout 300
    python scripts/search_hparams.py --quick           # CPU check: 3 tiny CartPole trials, < 1 min

``--objective return`` (the default) is described first; ``--objective to-score`` after it.

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

**--objective to-score** (PPO; :mod:`rltrain.score_objective`): each trial trains every game of
``--targets`` (``ENV_ID:SCORE:REFERENCE:BUDGET``; default Pong-v5 20 and Breakout-v5 300) in turn,
with the same values and ``--num-envs``, each until its average return first reaches the score or
its ``--measure`` (env steps, or training seconds on this host) passes the budget.  The objective is
the sum over the games of the measure at the score divided by the game's reference (a game not
reached costs its budget x ``--penalty``), minimised.  The default references are the env steps
``configs/atari.yaml``'s recorded runs needed (Pong-v5 20: 6.0M, Breakout-v5 300: 6.5M), so that preset costs about
2 and a trial that halves the steps on both games 1; the budgets 1.25 times them.  Every trial
reports a lower bound of its objective at ``--report-points`` points per game, and stops once that
bound is above the median objective of the complete trials (after ``--startup-trials`` of them): a
trial that misses Pong's score within its budget stops there, before Breakout.  The space
(``PPO_TO_SCORE_SPACE``) holds the recipe's ingredients with the flags that set the gradient steps per env step: the KL-adaptive learning rate's target (or
none: ``--learning-rate`` annealed linearly over ``--total-timesteps``) and whether it adapts after
every minibatch or every epoch, value normalisation, the
learning rate, rollout length, minibatch size, epochs, gamma, the entropy bonus, the network and its
activation.  The trials start from ``configs/atari_fast.yaml``; the first trains its own values.
``--num-envs-choices 256 512 1024`` (with ``--measure seconds``) adds the env count to the space: at a
fixed rollout length fewer envs make more policy updates per env step (rl_games' EnvPool Pong config
trains 24 envs) but step slower on the same cores, a trade that only training seconds weigh.
``--write-best`` writes ``docs/results/hparam_search_<trainer>_to_score.json`` with each game's
steps, seconds and command of the best trials (and, with ``--reproduce``, each game's reproduce command).
"""

from __future__ import annotations

import dataclasses
import json
import math
import signal
import sys
import warnings
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Dict, List, Literal, Optional, Tuple

import tyro

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a plain checkout too

from rltrain.config import ConfigError, exit_on_config_error  # noqa: E402
from rltrain.score_objective import BoundReporter, GameWatch, ScoreObjective, ScoreTarget, above_median  # noqa: E402
from rltrain.time_to_score import RETURN, WALL, common_machine, saved_machine  # noqa: E402
from rltrain.trainer_process import ATARI_PRESETS, load_trainer, train_for  # noqa: E402
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
# --objective to-score: the recipe's ingredients and the flags that set the gradient steps per env step
PPO_TO_SCORE_SPACE: Dict[str, tuple] = {
    # the KL-adaptive rate's target; None: --learning-rate annealed over --total-timesteps (trial_flags)
    "kl_adaptive_lr": ("categorical", [None, 0.005, 0.008, 0.01, 0.016, 0.02]),
    "kl_adaptive_every": ("categorical", ["minibatch", "epoch"]),  # moot without a target (trial_flags)
    "norm_value": ("categorical", [False, True]),
    "learning_rate": ("float", 1e-4, 3e-3, True),  # with the KL rule: its starting value
    "num_steps": ("categorical", [16, 32, 64, 128]),
    "minibatch_size": ("categorical", [1024, 2048, 4096, 8192]),
    "update_epochs": ("int", 2, 8, False),
    "gamma": ("categorical", [0.98, 0.99, 0.995, 0.999]),
    "ent_coef": ("float", 1e-4, 3e-2, True),
    "agent": ("categorical", ["nature_cnn", "impala_resnet"]),
    "cnn_activation": ("categorical", ["relu", "elu"]),
}
SPACES = {"ppo": PPO_ATARI_SPACE, "impala": IMPALA_ATARI_SPACE}
PRESETS = ATARI_PRESETS
TO_SCORE_PRESET = "configs/atari_fast.yaml"
# the default --targets per --measure: the reference is what configs/atari.yaml's recorded runs needed
# (docs/results/time_to_score.json, preset-eager: Pong-v5 20 after 5.96M steps and 260 s, seed 3;
# Breakout-v5 300 after 6.49M steps and 323 s), the budget 1.25 times it
DEFAULT_TARGETS = {
    "steps": ("Pong-v5:20:6e6:7.5e6", "Breakout-v5:300:6.5e6:8.125e6"),
    "seconds": ("Pong-v5:20:260:325", "Breakout-v5:300:323:404"),
}
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
    """--num-envs of every trial (fixed: the search is for this many envs; with --num-envs-choices, the first
    trial's)"""
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
    extra: tyro.conf.UseAppendAction[List[str]] = field(default_factory=list)
    """more trainer flags for every trial, e.g. --extra=--ca-backend --extra=triton"""
    write_best: bool = False
    """write the best trials to docs/results/hparam_search_<trainer>_<env>.json (or --best-out)"""
    best_out: str = ""
    """where --write-best writes (empty: docs/results/hparam_search_<trainer>_<env>.json)"""
    top: int = 5
    """trials listed in the written JSON"""
    reproduce: str = ""
    """with --write-best: flags today's trainer needs on top of each listed trial's command (to-score: each
    game's) to train it as it ran (e.g. --no-graph-update after the preset changed), written as its reproduce
    command beside the command it ran (empty: the file's earlier reproduce commands of the same study are
    kept)"""
    start_from_preset: bool = True
    """a new study's first trial trains the preset's own values (where they lie in the space)"""
    quick: bool = False
    """a CPU check of the whole loop: 3 tiny CartPole trials of 4 s each"""
    objective: Literal["return", "to-score"] = "return"
    """return: the average return at --budget-s on --env-id, maximised; to-score: the --measure to reach
    each of --targets' scores with the same values on every game, each over its reference, summed,
    minimised (PPO; module docstring)"""
    targets: Tuple[str, ...] = ()
    """to-score: ENV_ID:SCORE:REFERENCE:BUDGET per game, the last two in --measure's units (empty: Pong-v5
    20 and Breakout-v5 300 with the steps and seconds configs/atari.yaml needed as references)"""
    measure: Literal["steps", "seconds"] = "steps"
    """to-score: env steps (global_step) or training seconds (charts/wall_s, one host's speed) to a score"""
    penalty: float = 2.0
    """to-score: a game not reached within its budget costs budget x penalty / reference (>= 1)"""
    report_points: int = 16
    """to-score: points per game at which a trial reports a lower bound of its objective for pruning"""
    num_envs_choices: Tuple[int, ...] = ()
    """to-score with --measure seconds: search --num-envs over these counts too (e.g. 256 512 1024; fewer envs
    make more policy updates per env step but step slower, so only training seconds compare them); --num-envs
    is then the first trial's count"""


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
    """The trainer flags of one trial (the preset, ``config`` if given, then the trial's values).  A
    ``kl_adaptive_lr`` value also sets the schedule it excludes: ``--no-anneal-lr`` with a target,
    ``--anneal-lr`` without one (None), and then the trainer's default ``--kl-adaptive-every`` (without a
    target there is nothing to schedule)."""
    num_envs = values.get("num_envs", args.num_envs)
    values = {k: v for k, v in values.items() if k != "num_envs"}
    flags = ["--config", config or args.config or PRESETS[args.trainer], "--env-id", args.env_id, "--num-envs", str(num_envs),
             "--seed", str(args.train_seed)]
    if "minibatch_size" in values:
        flags += ["--num-minibatches", "0"]  # derived from --minibatch-size
    if "kl_adaptive_lr" in values:
        flags += ["--anneal-lr" if values["kl_adaptive_lr"] is None else "--no-anneal-lr"]
        if values["kl_adaptive_lr"] is None:
            values = {k: v for k, v in values.items() if k != "kl_adaptive_every"}
    for name, value in values.items():
        flag = "--" + name.replace("_", "-")
        flags += [flag if value else "--no-" + name.replace("_", "-")] if isinstance(value, bool) else [flag, str(value)]
    return flags + list(args.extra)


def trainer_command(args: Args, flags: List[str], trial_dir: Path, exp_name: str) -> List[str]:
    """The command line of one training run of a trial, its run folder under ``trial_dir/runs``."""
    return [sys.executable, str(ROOT / "scripts" / f"{args.trainer}.py"), *flags, "--runs-dir", str(trial_dir / "runs"),
            "--exp-name", exp_name, "--no-progress"]


def run_trial(trial, args: Args, flags: List[str], trial_dir: Path) -> float:
    """Run the trainer until ``budget_s`` training seconds; report returns; the return at the budget."""
    import optuna

    cmd = trainer_command(args, flags, trial_dir, f"trial{trial.number}")
    trial.set_user_attr("command", " ".join([f"python scripts/{args.trainer}.py", *flags]))
    log = trial_dir / "log.txt"
    log.unlink(missing_ok=True)
    found: List[Path] = []
    value, at_s, steps, next_report = None, 0.0, 0, args.report_every_s

    def find_metrics() -> Optional[Path]:
        if not found:
            found.extend(list((trial_dir / "runs").glob("*/metrics.jsonl"))[:1])
        return found[0] if found else None

    def on_row(row: dict) -> None:
        nonlocal value, at_s, steps, next_report
        wall = row.get(WALL, 0.0)
        if isinstance(row.get(RETURN), (int, float)):  # and the steps, at the host's speed, it took
            value, at_s, steps = float(row[RETURN]), wall, int(row.get("global_step", 0))
        while value is not None and wall >= next_report:
            trial.report(value, int(next_report))
            next_report += args.report_every_s
            if trial.should_prune():
                raise optuna.TrialPruned(f"return {value:.2f} at {wall:.0f} s is below the median")

    try:
        run = train_for(cmd, args.budget_s, find_metrics, log, cwd=ROOT, on_row=on_row)
    finally:
        if found:  # the run's machine.json: where the trial trained (pruned ones too)
            trial.set_user_attr("machine", saved_machine(found[0].parent))
    if run.returncode not in (0, -signal.SIGTERM) and value is None:
        tail = log.read_text()[-1500:]
        raise RuntimeError(f"trial {trial.number} failed (exit {run.returncode}):\n{tail}")
    if run.returncode not in (0, -signal.SIGTERM):
        raise RuntimeError(f"trial {trial.number} stopped with exit {run.returncode} (see {log})")
    if value is None:
        raise RuntimeError(f"trial {trial.number} finished no episode in {args.budget_s:g} s")
    trial.set_user_attr("return_at_s", at_s)
    trial.set_user_attr("steps", steps)
    trial.set_user_attr("steps_per_s", round(steps / at_s, 1) if at_s > 0 else None)
    return value


class _Decided(Exception):
    """Raised from a row callback of :func:`run_to_score`: the game's score or budget is reached."""


def run_to_score(trial, args: Args, target: ScoreTarget, flags: List[str], trial_dir: Path,
                 progress) -> GameWatch:
    """Run the trainer on ``target``'s game until its score or budget (:class:`GameWatch`); after each
    row short of both, ``progress(at)`` (which may prune the trial)."""
    watch = GameWatch(target, args.measure)
    found: List[Path] = []

    def find_metrics() -> Optional[Path]:
        if not found:
            found.extend(list((trial_dir / "runs").glob("*/metrics.jsonl"))[:1])
        return found[0] if found else None

    def on_row(row: dict) -> None:
        if watch.feed(row):
            raise _Decided
        progress(watch.at)

    returncode = 0
    try:  # the budget is the watch's (steps or seconds), not train_for's
        returncode = train_for(trainer_command(args, flags, trial_dir, f"trial{trial.number}"), math.inf,
                               find_metrics, trial_dir / "log.txt", cwd=ROOT, on_row=on_row).returncode
    except _Decided:
        pass
    finally:
        if found:
            trial.set_user_attr("machine", saved_machine(found[0].parent))
    if returncode not in (0, -signal.SIGTERM) and watch.reached_at is None:
        tail = (trial_dir / "log.txt").read_text()[-1500:]
        raise RuntimeError(f"trial {trial.number} failed on {target.env_id} (exit {returncode}):\n{tail}")
    return watch


def score_trial(trial, args: Args, objective: ScoreObjective, values: Dict[str, Any], trial_dir: Path) -> float:
    """Train each game of ``objective`` in turn with the trial's ``values`` (only ``--env-id`` differs);
    report the lower bound at the grid points; the objective (:mod:`rltrain.score_objective`)."""
    import optuna

    def report(value: float, step: int) -> None:
        trial.report(value, step)
        if trial.should_prune():
            raise optuna.TrialPruned(f"objective >= {value:.3f} at report point {step}: above the median")

    reporter, done = BoundReporter(objective, report), 0.0
    for game, target in enumerate(objective.targets):
        flags = trial_flags(dataclasses.replace(args, env_id=target.env_id), values)
        watch = run_to_score(trial, args, target, flags, trial_dir / target.env_id,
                             partial(reporter.progress, game, done))
        cost = objective.cost(game, watch.reached_at)
        trial.set_user_attr(target.env_id, {
            "reached": watch.reached_at is not None, "cost": cost, "steps": watch.steps, "wall_s": watch.wall_s,
            "steps_per_s": round(watch.steps / watch.wall_s, 1) if watch.wall_s > 0 else None,
            "command": " ".join([f"python scripts/{args.trainer}.py", *flags])})
        done += cost
        reporter.finish(game, done)
    return done


def median_bound_pruner(n_startup_trials: int):
    """An Optuna pruner that stops a trial where its latest value, a lower bound of its minimised
    objective, is above the median of the complete trials' objectives
    (:func:`rltrain.score_objective.above_median`), once ``n_startup_trials`` trials are complete."""
    import optuna

    class MedianBoundPruner(optuna.pruners.BasePruner):
        def prune(self, study, trial) -> bool:
            step = trial.last_step
            complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
            if step is None or len(complete) < n_startup_trials:
                return False
            return above_median(trial.intermediate_values[step], [t.value for t in complete])

    return MedianBoundPruner()


def make_study(args: Args, study_name: str, direction: str = "maximize", pruner=None):
    """The study in its journal; ``pruner`` (default: the median pruner of the return objective, after
    the first quarter of ``--budget-s``)."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    Path(args.study_dir).mkdir(parents=True, exist_ok=True)
    storage = JournalStorage(JournalFileBackend(str(Path(args.study_dir) / f"{study_name}.journal")))
    study = optuna.create_study(
        study_name=study_name, storage=storage, direction=direction, load_if_exists=True,
        pruner=pruner or optuna.pruners.MedianPruner(n_startup_trials=args.startup_trials,
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


def score_document(study, args: Args, space: Dict[str, tuple], objective: ScoreObjective) -> Dict[str, Any]:
    """``--objective to-score``'s :func:`best_document`: the lowest objectives first, each game's figures."""
    import optuna

    complete = sorted((t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE), key=lambda t: t.value)
    counts = {s.name.lower(): sum(t.state == s for t in study.trials) for s in optuna.trial.TrialState}
    return {
        "study": study.study_name, "trainer": args.trainer, "num_envs": args.num_envs,
        **({"num_envs_choices": list(args.num_envs_choices)} if args.num_envs_choices else {}), "config": args.config,
        "objective": objective.describe(args.measure), "measure": args.measure,
        "targets": [dataclasses.asdict(t) for t in objective.targets], "penalty": objective.penalty,
        "train_seed": args.train_seed, "sampler": f"TPE (multivariate, {args.startup_trials} random trials first)",
        "sampler_seed": args.seed,
        "pruner": f"a lower bound of the objective, reported at {objective.points} points per game, above the "
                  f"median objective of the complete trials (after {args.startup_trials} trials)",
        "space": {k: list(v) for k, v in space.items()}, "trials": counts,
        "meta": common_machine([t.user_attrs.get("machine") for t in study.trials]),
        "best": [{"number": t.number, "value": t.value, "params": t.params,
                  "games": {g.env_id: t.user_attrs.get(g.env_id) for g in objective.targets},
                  **{k: (t.user_attrs.get("machine") or {}).get(k) for k in ("device_name", "cpu_model")}}
                 for t in complete[:args.top]],
    }


def to_score_space(args: Args) -> Dict[str, tuple]:
    """``PPO_TO_SCORE_SPACE``, with ``--num-envs-choices`` as one more categorical flag (``num_envs``); those
    counts compare only in training seconds (``--measure seconds``), each a positive number of envs."""
    choices = tuple(args.num_envs_choices)
    if not choices:
        return PPO_TO_SCORE_SPACE
    if args.measure != "seconds":
        raise ConfigError("--num-envs-choices needs --measure seconds: fewer envs take fewer env steps to a score "
                          "but step slower, so env steps alone would always favour the fewest")
    if min(choices) < 1 or len(set(choices)) != len(choices):
        raise ConfigError(f"--num-envs-choices {' '.join(map(str, choices))}: distinct counts >= 1")
    return {**PPO_TO_SCORE_SPACE, "num_envs": ("categorical", list(choices))}


def to_score_objective(args: Args) -> ScoreObjective:
    """The :class:`ScoreObjective` of ``--targets`` (or the defaults of ``--measure``), ``--penalty``,
    ``--report-points``."""
    specs = args.targets or DEFAULT_TARGETS[args.measure]
    return ScoreObjective(tuple(ScoreTarget.parse(s) for s in specs), args.penalty, args.report_points)


def commanded(trial: Dict[str, Any]) -> List[Tuple[Optional[str], Dict[str, Any]]]:
    """The entries of a listed trial that hold a command it ran, each with its key: the trial itself
    (``--objective return``, key None) or each of its games (``to-score``, key the game)."""
    entries: List[Tuple[Optional[str], Dict[str, Any]]] = [(None, trial)] if trial.get("command") else []
    games = trial.get("games") or {}
    return entries + [(game, entry) for game, entry in games.items()
                      if isinstance(entry, dict) and entry.get("command")]


def with_reproduce(doc: Dict[str, Any], flags: str, previous: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """``doc`` (:func:`best_document` or :func:`score_document`) with a ``reproduce`` command beside each
    command of a listed trial (:func:`commanded`: the trial's, or each game's): that command (the one it
    ran) followed by ``flags``, the flags today's trainer needs to train it as it ran; without ``flags``,
    the one ``previous`` (the file being rewritten) holds for the same trial (and game) of the same study,
    so that a rewrite keeps it."""
    kept = {}
    if previous and previous.get("study") == doc["study"]:
        kept = {(t["number"], key): entry["reproduce"] for t in previous.get("best", [])
                for key, entry in commanded(t) if entry.get("reproduce")}
    for trial in doc["best"]:
        for key, entry in commanded(trial):
            if flags.strip():
                entry["reproduce"] = f"{entry['command']} {flags.strip()}"
            elif (trial["number"], key) in kept:
                entry["reproduce"] = kept[trial["number"], key]
    return doc


def main(args: Args) -> Dict[str, Any]:
    if args.quick:
        args = quick_args(args)
    if args.objective == "to-score":
        return main_to_score(args)
    if args.num_envs_choices:
        raise ConfigError("--num-envs-choices is a flag of --objective to-score (with --measure seconds)")
    space = QUICK_SPACE if args.quick else SPACES[args.trainer]
    if args.trials is None:
        args = dataclasses.replace(args, trials=40)
    if not args.config:
        args = dataclasses.replace(args, config=PRESETS[args.trainer])
    if args.trials < 0 or args.budget_s <= 0 or args.num_envs < 1 or args.report_every_s <= 0:
        raise ConfigError("--trials must be >= 0, --budget-s and --report-every-s > 0, --num-envs >= 1")
    import_optuna()  # before anything starts
    study_name = args.study_name or f"{args.trainer}_{args.env_id}_{args.num_envs}envs_{args.budget_s:g}s"
    study = make_study(args, study_name)
    trainer = load_trainer(args.trainer)
    config = Path(args.config) if Path(args.config).is_absolute() else ROOT / args.config

    def objective(trial) -> float:
        values = suggest(trial, space)
        flags = trial_flags(args, values)
        trial_dir = checked_trial_dir(trial, args, study_name, trainer, [trial_flags(args, values, config=str(config))])
        return run_trial(trial, args, flags, trial_dir)

    optimize(study, args, objective, preset_values(trainer, args, str(config), space),
             lambda trial: "" if trial.value is None else f" return {trial.value:.2f}")
    doc = best_document(study, args, space)
    if doc["best"]:
        b = doc["best"][0]
        print(f"best: trial {b['number']}, return {b['value']:.2f} at {args.budget_s:g} s\n  {b['command']}")
    if args.write_best:
        write_best(doc, args, f"hparam_search_{args.trainer}_{args.env_id}.json")
    return doc


def main_to_score(args: Args) -> Dict[str, Any]:
    """``--objective to-score``: the search of the module docstring's second part."""
    if args.trainer != "ppo":
        raise ConfigError("--objective to-score searches PPO's recipe (PPO_TO_SCORE_SPACE); use --trainer ppo")
    objective = to_score_objective(args)
    space = to_score_space(args)
    args = dataclasses.replace(args, trials=40 if args.trials is None else args.trials,
                               config=args.config or TO_SCORE_PRESET)
    if args.trials < 0 or args.num_envs < 1:
        raise ConfigError("--trials must be >= 0, --num-envs >= 1")
    import_optuna()  # before anything starts
    games = "+".join(t.env_id for t in objective.targets)
    envs = "-".join(map(str, args.num_envs_choices)) if args.num_envs_choices else str(args.num_envs)
    study_name = args.study_name or f"{args.trainer}_to_score_{games}_{envs}envs_{args.measure}"
    study = make_study(args, study_name, direction="minimize",
                       pruner=median_bound_pruner(args.startup_trials))
    trainer = load_trainer(args.trainer)
    config = Path(args.config) if Path(args.config).is_absolute() else ROOT / args.config

    def run(trial) -> float:
        values = suggest(trial, space)
        trial_dir = checked_trial_dir(trial, args, study_name, trainer, [
            trial_flags(dataclasses.replace(args, env_id=target.env_id), values, config=str(config))
            for target in objective.targets])
        return score_trial(trial, args, objective, values, trial_dir)

    optimize(study, args, run, preset_values(trainer, args, str(config), space),
             lambda trial: "" if trial.value is None else f" objective {trial.value:.3f}")
    doc = score_document(study, args, space, objective)
    if doc["best"]:
        b = doc["best"][0]
        print(f"best: trial {b['number']}, objective {b['value']:.3f} ({objective.describe(args.measure)})")
    if args.write_best:
        write_best(doc, args, f"hparam_search_{args.trainer}_to_score.json")
    return doc


def import_optuna() -> None:
    """Import optuna once, its logging quieted (the functions below import it again, from the cache); a
    ConfigError where it is not installed."""
    try:
        import optuna
    except ImportError:
        raise ConfigError("the search needs the package optuna (pip install optuna)") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)


def checked_trial_dir(trial, args: Args, study_name: str, trainer, commands: List[List[str]]) -> Path:
    """The folder of ``trial``'s runs, once the trainer accepts each of its ``commands`` (flag lists); a
    combination the trainer rejects (a minibatch larger than the batch) prunes the trial before it starts."""
    import optuna

    try:
        for flags in commands:
            validate(trainer.cli(flags))
    except ConfigError as e:
        raise optuna.TrialPruned(f"rejected by the trainer: {e}") from None
    return Path(args.study_dir).resolve() / study_name / f"trial_{trial.number:04d}"


def optimize(study, args: Args, run, start: Optional[Dict[str, Any]], describe) -> None:
    """Run ``--trials`` trials of ``run`` in ``study``, one line each (``describe(trial)``: its value); a new
    study with ``--start-from-preset`` first trains the preset's values ``start`` (None: outside the space)."""
    def progress(study, trial) -> None:
        print(f"trial {trial.number}: {trial.state.name.lower()}{describe(trial)} {trial.params}", flush=True)

    if args.start_from_preset and not study.trials:
        if start is None:
            print(f"the preset {args.config} lies outside the space: the search starts from sampled values")
        else:
            study.enqueue_trial(start)
    if args.trials:
        study.optimize(run, n_trials=args.trials, catch=(RuntimeError,), callbacks=[progress])


def write_best(doc: Dict[str, Any], args: Args, name: str) -> None:
    """``doc`` to ``--best-out`` (default ``docs/results/<name>``), keeping the reproduce commands of the file
    it replaces (:func:`with_reproduce`)."""
    out = Path(args.best_out or ROOT / "docs" / "results" / name)
    out.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(out.read_text()) if out.is_file() else None
    out.write_text(json.dumps(with_reproduce(doc, args.reproduce, previous), indent=2) + "\n")
    print(f"wrote {out}")


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
