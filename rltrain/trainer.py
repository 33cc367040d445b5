"""Plumbing every trainer repeats around its algorithm: flags, run folder, checkpoints, exit codes.

* :func:`parse_trainer_args` -- the trainer's ``Args`` from, in increasing priority, its defaults, the
  saved args of a ``--resume`` checkpoint, a ``--config`` preset and the other flags.
* :class:`TrainerState` -- what a checkpoint holds (model, optimizer, LR scheduler, counters, the args
  and the run folder, shared by every rank; each rank's RNG states, extra state such as normaliser
  statistics and its recent episode returns) and how a run is restored from one.  The learning rate
  given by the flags wins over the checkpoint's.
* :func:`start_run` -- restore from ``args.resume`` (same run folder, metrics appended; only a checkpoint
  of the same trainer, environment and network, checked before anything is written) or make a fresh
  run folder, then open the :class:`~rltrain.logger.Logger` (rank 0; the other ranks log nothing).
* :func:`checkpoint_due` / :func:`interrupted_line` -- when ``latest.pt`` is written (every
  ``--checkpoint-every`` iterations, and always after a Ctrl-C) and how a Ctrl-C is reported.
* :func:`iteration_readout` / :func:`episode_metrics` / :func:`memory_metrics` -- one iteration's figures
  of every rank in one collective: phase seconds (the slowest rank's), loss means, episode sums, the stop
  flags, the peak GPU memory of the rank that used most.
* :func:`run_main` -- the ``__main__`` guard: ``main(args, ctx)`` in the process's
  :func:`~rltrain.distributed.distributed_context` (torchrun's ``@record`` for the failure summary); an
  error meant for the user exits with its status and one line on stderr (``ConfigError`` 2,
  ``NonFiniteLossError`` 3, more per trainer), not a traceback.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Type, TypeVar, Union

import numpy as np
import torch
from torch.distributed.elastic.multiprocessing.errors import get_error_handler, record

from rltrain.checkpoint import check_resumable, load_checkpoint, origin_record, require_keys, write_atomically
from rltrain.config import ConfigError, parse_args
from rltrain.credit import CreditMismatchError
from rltrain.distributed import DistContext, NullLogger, distributed_context, end_worker, launched_by_torchrun
from rltrain.logger import Logger
from rltrain.machine import machine_info
from rltrain.losses import NonFiniteLossError
from rltrain.runtime import ensure_run_dir, make_run_dir
from rltrain.seeding import get_rng_state, set_rng_state

__all__ = ["parse_trainer_args", "TrainerState", "RunStart", "start_run", "iteration_readout", "episode_metrics",
           "memory_metrics", "GPU_MEMORY_METRIC", "report_end", "run_main", "EXIT_CODES", "lay_out_like_params",
           "checkpoint_due", "interrupted_line"]

A = TypeVar("A")

RECENT_EPISODES = 100  # the window of charts/avg_episodic_return
GPU_MEMORY_METRIC = "perf/gpu_mem_peak_gib"
"""The most GPU memory any rank's tensors have held since its start (``torch.cuda.max_memory_allocated``), GiB."""

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
    (fields the checkpoint does not know keep ``cls``'s defaults; ones ``cls`` does not know are dropped).

    A ``--resume`` checkpoint that cannot be read, or was written by another trainer (``cls.TRAINER``) or
    for another ``--env-id``, is a :class:`~rltrain.checkpoint.CheckpointError` here, before any flag is
    checked against the other trainer's saved values (:func:`start_run` checks the network too)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    default = ckpt = None
    path = _flag_value(argv, "--resume")
    trainer = getattr(cls, "TRAINER", "")
    if path:
        ckpt = load_checkpoint(path)
        require_keys(ckpt, path, ("args",))
        if trainer:
            check_resumable(ckpt, path, trainer, str(ckpt["args"].get("env_id")))
        known = {f.name for f in dataclasses.fields(cls)}
        default = cls(**{k: v for k, v in ckpt["args"].items() if k in known})
    args = parse_args(cls, argv, default=default, description=description)
    if ckpt is not None and trainer:
        check_resumable(ckpt, path, trainer, args.env_id)
    return args


class TrainerState:
    """The objects a checkpoint saves and restores; ``extras`` maps a name to an object with
    ``state_dict()`` / ``load_state_dict()`` or to ``None`` (saved as ``None``, e.g. an unused normaliser).
    ``args`` is the trainer's ``Args``: its class names the trainer (``Args.TRAINER``), recorded with
    ``args.env_id`` and the network (:func:`rltrain.checkpoint.origin_record`).

    Model, optimizer, scheduler, counters, args, origin and run folder are the same on every rank (DDP keeps
    the replicas equal) and saved once; RNG states, ``extras`` and the recent episode returns are each
    rank's own (:meth:`rltrain.distributed.DistContext.save_checkpoint`).  A single process's checkpoint
    holds both at its top level."""

    def __init__(self, args: Any, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                 scheduler: Any, **extras: Any):
        self.args, self.model, self.optimizer, self.scheduler = args, model, optimizer, scheduler
        self.extras = extras

    def save(self, path: str | Path, *, iteration: int, global_step: int, recent_returns: Sequence[float],
             run_dir: str | Path, wall_s: Optional[float] = None, ctx: Optional[DistContext] = None) -> None:
        """Write the checkpoint atomically (collective under torchrun: every rank calls it, rank 0 writes);
        ``wall_s``: the run's training seconds so far, continued by a resumed run (:attr:`RunStart.wall_s`)."""
        ctx = ctx or DistContext()
        shared = {
            **origin_record(self.trainer, self.args.env_id, self.model.state_dict()),
            "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(), "iteration": iteration, "global_step": global_step,
            "args": dataclasses.asdict(self.args), "run_dir": str(run_dir),
            **({"wall_s": wall_s} if wall_s is not None else {}),
        } if ctx.is_main else None
        rank_state = {
            "rng": get_rng_state(), "recent_returns": list(recent_returns),
            **{name: obj.state_dict() if obj is not None else None for name, obj in self.extras.items()},
        }
        ctx.save_checkpoint(path, shared, rank_state)

    @property
    def trainer(self) -> str:
        """``ppo`` or ``impala``: the ``TRAINER`` of the args' class."""
        return type(self.args).TRAINER

    def check_resumable(self, ckpt: Mapping[str, Any], path: str | Path) -> None:
        """:class:`~rltrain.checkpoint.CheckpointError` unless ``ckpt`` is a checkpoint of this trainer, this
        environment and this network (:func:`rltrain.checkpoint.check_resumable`)."""
        require_keys(ckpt, path)
        check_resumable(ckpt, path, self.trainer, self.args.env_id, self.model)

    def restore(self, ckpt: Mapping[str, Any], rank_state: Optional[Mapping[str, Any]] = None) -> None:
        """Load model, optimizer and scheduler from ``ckpt``, RNG states and extras from ``rank_state``
        (default: ``ckpt``, a single process's checkpoint); the learning rate of the flags replaces the
        checkpoint's as the scheduler's base."""
        rank_state = ckpt if rank_state is None else rank_state
        self.model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        lay_out_like_params(self.optimizer)
        self.scheduler.load_state_dict(ckpt["scheduler"])
        self.scheduler.base_lrs = [self.args.learning_rate for _ in self.scheduler.base_lrs]
        for group in self.optimizer.param_groups:
            group["initial_lr"] = self.args.learning_rate
        set_rng_state(rank_state["rng"])
        for name, obj in self.extras.items():
            if obj is not None and rank_state.get(name) is not None:
                obj.load_state_dict(rank_state[name])


def lay_out_like_params(optimizer: torch.optim.Optimizer) -> None:
    """Give every optimizer state tensor shaped like its parameter (Adam's moments) the parameter's strides.

    ``load_state_dict`` keeps the strides the checkpoint was saved with, and fused Adam walks a parameter,
    its gradient and its moments as flat memory: contiguous moments (a checkpoint written on the CPU)
    next to channels-last CUDA weights (:class:`agents.NatureCNN`) would pair each weight with another
    weight's moments.  Values are unchanged."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            state = optimizer.state.get(p, {})
            for key, value in list(state.items()):
                if torch.is_tensor(value) and value.shape == p.shape and value.stride() != p.stride():
                    state[key] = torch.empty_like(p, dtype=value.dtype).copy_(value)


@dataclass
class RunStart:
    """Where a run starts: its folder and logger, and the counters it continues from."""

    run_dir: Path
    logger: Union[Logger, NullLogger]  # NullLogger on ranks other than 0
    iteration: int  # iterations (learner updates) already done
    global_step: int
    recent_returns: deque  # this rank's returns of its last RECENT_EPISODES episodes
    resumed: bool
    wall_s: float = 0.0  # training seconds of the checkpoint's run (0 for a fresh run)


def start_run(args: Any, state: TrainerState, total_iterations: int, ctx: DistContext) -> RunStart:
    """Restore ``state`` from ``args.resume`` (each rank its own part) and continue in its run folder, or
    have rank 0 make a fresh folder ``{runs_dir}/{env_id}__{exp_name}__{seed}__{timestamp}`` and hand
    its path to the other ranks; rank 0 opens the logger, the others get a :class:`NullLogger`.

    A resumed run goes on in the run folder its checkpoint names, so the checkpoint must be one this run
    continues: the same trainer, environment and network (:meth:`TrainerState.check_resumable`); any other
    is a :class:`~rltrain.checkpoint.CheckpointError` before a file is touched."""
    recent: deque = deque(maxlen=RECENT_EPISODES)
    ckpt = mine = None
    if args.resume:
        ckpt, mine = ctx.load_checkpoint(args.resume)
        state.check_resumable(ckpt, args.resume)
        state.restore(ckpt, mine)
        iteration, global_step = ckpt["iteration"], ckpt["global_step"]
        recent.extend(mine.get("recent_returns", []))
        run_dir = Path(ckpt["run_dir"])
        if ctx.is_main:
            ensure_run_dir(run_dir)
    else:
        iteration, global_step = 0, 0
        run_dir = ctx.broadcast_object(make_run_dir(args.runs_dir, args.env_id, args.exp_name, args.seed)
                                       if ctx.is_main else None)
    logger = Logger(run_dir, dataclasses.asdict(args), total_iterations=total_iterations,
                    start_iteration=iteration, track=args.track, wandb_project=args.wandb_project_name,
                    wandb_entity=args.wandb_entity, console=args.progress) if ctx.is_main else NullLogger()
    if ctx.is_main:
        record_machine(run_dir, ctx)
    return RunStart(run_dir, logger, iteration, global_step, recent, ckpt is not None,
                    float(ckpt.get("wall_s", 0.0)) if ckpt is not None else 0.0)


def record_machine(run_dir: Path, ctx: DistContext) -> None:
    """Append this segment's machine (:func:`rltrain.machine.machine_info`: device, driver, CPU cores,
    versions, date; and the number of ranks) to ``run_dir/machine.json``, a list with one entry per
    segment (a ``--resume`` may run on another machine), so a run's results name where it trained."""
    path = run_dir / "machine.json"
    segments = json.loads(path.read_text()) if path.is_file() else []
    segments.append({**machine_info(ctx.device), "ranks": ctx.world_size})
    text = json.dumps(segments, indent=1) + "\n"
    write_atomically(path, lambda f: f.write(text.encode()))


_EPISODE_SUMS = ("episodes/return_sum", "episodes/length_sum", "episodes/count",
                 "episodes/recent_return_sum", "episodes/recent_count")


def iteration_readout(ctx: DistContext, *, phase_secs: Mapping[str, float], means: Mapping[str, float],
                      episode_returns: Sequence[float], episode_lengths: Sequence[float],
                      recent_returns: Sequence[float],
                      finite: bool, interrupted: bool = False, sums: Optional[Mapping[str, float]] = None,
                      maxima: Optional[Mapping[str, float]] = None) -> Dict[str, float]:
    """One iteration's figures of every rank, in one collective (:meth:`DistContext.reduce_scalars`),
    the same on every rank, so that every rank takes the same decisions from them:

    * ``phase_secs`` keys: the maximum over ranks (the slowest rank sets the pace);
    * ``means`` keys (losses, diagnostics): the mean over ranks (a rank's masked means use the global
      denominators, so the mean of the ranks' values is the whole batch's);
    * ``sums`` and the episode figures of :data:`_EPISODE_SUMS` (this iteration's returns and lengths,
      the recent returns' sum and count): summed, see :func:`episode_metrics`; ``maxima``: the maximum;
    * ``"nonfinite_rank"``: the lowest rank whose loss was not ``finite`` (``inf``: none);
    * ``"interrupted"``: 1 if a Ctrl-C reached any rank;
    * :data:`GPU_MEMORY_METRIC` (a CUDA device only): the maximum over ranks of each rank's peak
      ``torch.cuda.max_memory_allocated`` since its start, in GiB (:func:`memory_metrics`).

    In a single process it returns its own figures (summed and averaged over one rank: the same
    floats)."""
    sums, maxima = sums or {}, maxima or {}
    local = {**phase_secs, **means, **sums, **maxima,
             "episodes/return_sum": float(np.sum(episode_returns)), "episodes/count": len(episode_returns),
             "episodes/length_sum": float(np.sum(episode_lengths)),
             "episodes/recent_return_sum": float(np.sum(recent_returns)), "episodes/recent_count": len(recent_returns),
             "nonfinite_rank": math.inf if finite else ctx.rank, "interrupted": float(interrupted)}
    if ctx.device.type == "cuda":
        local[GPU_MEMORY_METRIC] = torch.cuda.max_memory_allocated(ctx.device) / 2**30
    ops = {**dict.fromkeys(phase_secs, "max"), **dict.fromkeys(means, "mean"), **dict.fromkeys(sums, "sum"),
           **dict.fromkeys(maxima, "max"), **dict.fromkeys(_EPISODE_SUMS, "sum"),
           "nonfinite_rank": "min", "interrupted": "max", GPU_MEMORY_METRIC: "max"}
    return ctx.reduce_scalars(local, ops)


def episode_metrics(readout: Mapping[str, float]) -> Dict[str, float]:
    """``charts/episodic_return`` and ``charts/episodic_length`` (the means over the episodes that ended
    this iteration on any rank) and ``charts/avg_episodic_return`` (over each rank's last
    ``RECENT_EPISODES`` episodes), from :func:`iteration_readout`; a chart without episodes is left out."""
    out = {}
    if readout["episodes/count"]:
        out["charts/episodic_return"] = readout["episodes/return_sum"] / readout["episodes/count"]
        out["charts/episodic_length"] = readout["episodes/length_sum"] / readout["episodes/count"]
    if readout["episodes/recent_count"]:
        out["charts/avg_episodic_return"] = readout["episodes/recent_return_sum"] / readout["episodes/recent_count"]
    return out


def memory_metrics(readout: Mapping[str, float]) -> Dict[str, float]:
    """:data:`GPU_MEMORY_METRIC` of :func:`iteration_readout` where the run is on CUDA; nothing on the CPU."""
    return {GPU_MEMORY_METRIC: readout[GPU_MEMORY_METRIC]} if GPU_MEMORY_METRIC in readout else {}


def report_end(ctx: DistContext, agent: torch.nn.Module, logger: Any, tables: Mapping[str, Any],
               labels: Mapping[str, str], *, unit: str, estimator: str, recent_returns: Sequence[float],
               global_step: int, start_time: float, training_s: Optional[float] = None) -> float:
    """The end of a run, on every rank: check that the ranks' parameters are identical, then write (rank
    0's logger) each credit-assignment backend's phase table -- ``tables`` and ``labels`` by backend name,
    ``unit`` what a table row counts ("iterations", "updates"), ``estimator`` what the backend computes
    ("GAE", "vtrace") -- and the last line: global step, the average return of every rank's last
    episodes, ``wall W s this segment`` (seconds since ``start_time``, this process's iterations) and, given
    ``training_s`` (the run's :class:`~rltrain.wallclock.TrainingClock`: every ``--resume`` segment, evaluation
    left out, the last ``charts/wall_s``), ``S s of training in all``.  Returns that average (NaN without
    episodes)."""
    ctx.check_replicas(agent)
    if ctx.has_peers:
        logger.write(f"parameters identical on all {ctx.world_size} ranks")
    recent = iteration_readout(ctx, phase_secs={}, means={}, episode_returns=[], episode_lengths=[],
                               recent_returns=recent_returns, finite=True)  # every rank's last episodes
    avg_return = episode_metrics(recent).get("charts/avg_episodic_return", float("nan"))
    of_rank0 = f", rank 0 of {ctx.world_size}" if ctx.is_distributed else ""
    for name, table in tables.items():
        logger.write(f"\nphase table ({table.iterations} {unit}, {estimator} backend {labels[name]}{of_rank0}):\n"
                     f"{table.format()}")
    in_all = f", {training_s:.1f}s of training in all (charts/wall_s)" if training_s is not None else ""
    logger.write(f"global step {global_step}, average return (last {recent['episodes/recent_count']:.0f} episodes) "
                 f"{avg_return:.1f}, wall {time.perf_counter() - start_time:.1f}s this segment{in_all}")
    return avg_return


def checkpoint_due(every: int, iteration: int, interrupted: bool) -> bool:
    """Whether ``checkpoints/latest.pt`` is written after ``iteration``: every ``every`` iterations
    (``--checkpoint-every``; 0: never) and, whatever ``every`` is, after the iteration a Ctrl-C stopped
    the run at, so that a stopped run can always be resumed."""
    return bool(every and iteration % every == 0) or interrupted


def interrupted_line(unit: str, iteration: int, checkpoint: Path) -> str:
    """The console line of a run stopped by Ctrl-C: the last finished ``iteration`` (the one ``checkpoint``
    holds, ``unit`` "iteration" or "update") and the command's flag that continues from it."""
    return f"interrupted at {unit} {iteration}; continue with --resume {checkpoint}"


def run_main(main: Callable[[Any, DistContext], Any], cli: Callable[[], Any],
             exit_codes: Optional[Mapping[type, int]] = None) -> None:
    """``main(cli(), ctx)`` in :func:`~rltrain.distributed.distributed_context` (a plain ``python`` run:
    a single process without a process group; under torchrun: this rank, joined to the others, wrapped
    in torchrun's ``@record`` so that its failure summary shows a failing rank's error).  An exception
    of a class in ``EXIT_CODES`` (or ``exit_codes``) prints ``error: <message>`` on stderr (naming the
    rank under torchrun) and exits with that class's status."""
    codes = {**EXIT_CODES, **(exit_codes or {})}
    (record(_run_main) if launched_by_torchrun() else _run_main)(main, cli, codes)


def _run_main(main: Callable[[Any, DistContext], Any], cli: Callable[[], Any], codes: Mapping[type, int]) -> None:
    ctx = None
    try:
        args = cli()
        with distributed_context(cuda=args.cuda, backend=args.dist_backend, timeout_s=args.dist_timeout_s) as ctx:
            main(args, ctx)
        end_worker(ctx)  # under torchrun: exit 0 now, without the teardown that can abort (end_worker)
    except tuple(codes) as e:
        where = f" on rank {ctx.rank} of {ctx.world_size}" if ctx is not None and ctx.is_distributed else ""
        notes = "".join(f"\n{note}" for note in getattr(e, "__notes__", ()))
        print(f"error{where}: {e}{notes}", file=sys.stderr)
        if where:
            get_error_handler().record_exception(e)  # torchrun's failure summary shows the message too
        sys.exit(next(code for cls, code in codes.items() if isinstance(e, cls)))
