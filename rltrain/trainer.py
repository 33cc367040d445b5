"""Plumbing every trainer repeats around its algorithm: flags, run folder, checkpoints, exit codes.

* :func:`parse_trainer_args` -- the trainer's ``Args`` from, in increasing priority, its defaults, the
  saved args of a ``--resume`` checkpoint, a ``--config`` preset and the other flags.
* :class:`TrainerState` -- what a checkpoint holds (model, optimizer, LR scheduler, RNG states, extra
  state such as normaliser statistics, counters, the args and the run folder) and how a run is restored
  from one.  The learning rate given by the flags wins over the checkpoint's.
* :func:`start_run` -- restore from ``args.resume`` (same run folder, metrics appended) or make a fresh
  run folder, then open the :class:`~rltrain.logger.Logger`.
* :func:`run_main` -- the ``__main__`` guard: an error meant for the user exits with its status and one
  line on stderr (``ConfigError`` 2, ``NonFiniteLossError`` 3, more per trainer), not a traceback.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Type, TypeVar

import torch

from rltrain.checkpoint import load_checkpoint, save_checkpoint
from rltrain.config import ConfigError, parse_args
from rltrain.credit import CreditMismatchError
from rltrain.logger import Logger
from rltrain.losses import NonFiniteLossError
from rltrain.runtime import make_run_dir
from rltrain.seeding import get_rng_state, set_rng_state

__all__ = ["parse_trainer_args", "TrainerState", "RunStart", "start_run", "run_main", "EXIT_CODES"]

A = TypeVar("A")

RECENT_EPISODES = 100  # the window of charts/avg_episodic_return

EXIT_CODES: Dict[type, int] = {ConfigError: 2, NonFiniteLossError: 3, CreditMismatchError: 5}


def _flag_value(argv: Sequence[str], flag: str) -> Optional[str]:
    for i, a in enumerate(argv):
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
        if a == flag and i + 1 < len(argv):
            return argv[i + 1]
    return None


def parse_trainer_args(cls: Type[A], argv: Optional[Sequence[str]] = None, description: Optional[str] = None) -> A:
    """Parse flags into ``cls``; with ``--resume PATH`` the checkpoint's saved args are the defaults
    (fields the checkpoint does not know keep ``cls``'s defaults; ones ``cls`` does not know are dropped)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    default = None
    path = _flag_value(argv, "--resume")
    if path:
        try:
            saved = load_checkpoint(path)["args"]
        except FileNotFoundError as e:
            raise ConfigError(str(e)) from None
        known = {f.name for f in dataclasses.fields(cls)}
        default = cls(**{k: v for k, v in saved.items() if k in known})
    return parse_args(cls, argv, default=default, description=description)


class TrainerState:
    """The objects a checkpoint saves and restores; ``extras`` maps a name to an object with
    ``state_dict()`` / ``load_state_dict()`` or to ``None`` (saved as ``None``, e.g. an unused normaliser)."""

    def __init__(self, args: Any, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 scheduler: Any, **extras: Any):
        self.args, self.model, self.optimizer, self.scheduler = args, model, optimizer, scheduler
        self.extras = extras

    def save(self, path: str | Path, *, iteration: int, global_step: int, recent_returns: Sequence[float],
             run_dir: str | Path, wall_s: Optional[float] = None) -> None:
        """Write the checkpoint atomically (:func:`rltrain.checkpoint.save_checkpoint`); ``wall_s``: the
        run's training seconds so far, continued by a resumed run (:attr:`RunStart.wall_s`)."""
        save_checkpoint({
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(), "rng": get_rng_state(),
            "iteration": iteration, "global_step": global_step, "args": dataclasses.asdict(self.args),
            **{name: obj.state_dict() if obj is not None else None for name, obj in self.extras.items()},
            "recent_returns": list(recent_returns), "run_dir": str(run_dir),
            **({"wall_s": wall_s} if wall_s is not None else {}),
        }, path)

    def restore(self, ckpt: Mapping[str, Any]) -> None:
        """Load model, optimizer, scheduler, RNG states and extras from ``ckpt``; the learning rate of the
        flags replaces the checkpoint's as the scheduler's base."""
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scheduler.load_state_dict(ckpt["scheduler"])
        self.scheduler.base_lrs = [self.args.learning_rate for _ in self.scheduler.base_lrs]
        for group in self.optimizer.param_groups:
            group["initial_lr"] = self.args.learning_rate
        set_rng_state(ckpt["rng"])
        for name, obj in self.extras.items():
            if obj is not None and ckpt.get(name) is not None:
                obj.load_state_dict(ckpt[name])


@dataclass
class RunStart:
    """Where a run starts: its folder and logger, and the counters it continues from."""

    run_dir: Path
    logger: Logger
    iteration: int  # iterations (learner updates) already done
    global_step: int
    recent_returns: deque  # returns of the last RECENT_EPISODES episodes
    resumed: bool
    wall_s: float = 0.0  # training seconds of the checkpoint's run (0 for a fresh run)


def start_run(args: Any, state: TrainerState, total_iterations: int, device: torch.device) -> RunStart:
    """Restore ``state`` from ``args.resume`` and continue in its run folder, or make a fresh folder
    ``{runs_dir}/{env_id}__{exp_name}__{seed}__{timestamp}``; open the logger either way."""
    recent: deque = deque(maxlen=RECENT_EPISODES)
    ckpt = load_checkpoint(args.resume, map_location=device) if args.resume else None
    if ckpt is not None:
        state.restore(ckpt)
        iteration, global_step = ckpt["iteration"], ckpt["global_step"]
        recent.extend(ckpt.get("recent_returns", []))
        run_dir = Path(ckpt["run_dir"])
        run_dir.mkdir(parents=True, exist_ok=True)
    else:
        iteration, global_step = 0, 0
        run_dir = make_run_dir(args.runs_dir, args.env_id, args.exp_name, args.seed)
    logger = Logger(run_dir, dataclasses.asdict(args), total_iterations=total_iterations,
                    start_iteration=iteration, track=args.track, wandb_project=args.wandb_project_name,
                    wandb_entity=args.wandb_entity, console=args.progress)
    return RunStart(run_dir, logger, iteration, global_step, recent, ckpt is not None,
                    float(ckpt.get("wall_s", 0.0)) if ckpt is not None else 0.0)


def run_main(main: Callable[[Any], Any], cli: Callable[[], Any],
             exit_codes: Optional[Mapping[type, int]] = None) -> None:
    """``main(cli())``; an exception of a class in ``EXIT_CODES`` (or ``exit_codes``) prints
    ``error: <message>`` on stderr and exits with that class's status."""
    codes = {**EXIT_CODES, **(exit_codes or {})}
    try:
        main(cli())
    except tuple(codes) as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(next(code for cls, code in codes.items() if isinstance(e, cls)))
