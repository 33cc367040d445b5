"""The trainers' one interface to ``torch.distributed``: launch, gradients, global statistics,
rank-0 output, per-rank checkpoint state and failures.

Launch.  ``torchrun --nproc-per-node K scripts/ppo.py ...`` (multi-node: add ``--nnodes M
--rdzv-backend c10d --rdzv-endpoint HOST:PORT``) starts K processes per node with ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` set;
:func:`distributed_context` reads them and joins the process group: NCCL on CUDA, Gloo on CPU
(``--dist-backend`` forces one), each rank on GPU ``LOCAL_RANK``.  A plain ``python
scripts/ppo.py`` has none of those variables and gets a single-process context with no process
group at all: every method below then reduces over one rank without a collective, so a trainer
has one code path.  Bad launches raise :class:`~rltrain.config.ConfigError` before any process
waits on another: more ranks on a node than GPUs, NCCL without CUDA, half the variables set.

How the trainers use it (``scripts/ppo.py``, ``scripts/impala.py``; ``--num-envs`` and
``--total-timesteps`` are global, each rank holds its share)::

    run_main(main, cli)          # rltrain.trainer: @record + distributed_context(...) as ctx: main(args, ctx)

    def main(args, ctx=None):
        ctx = ctx or DistContext.single_process(args.cuda)        # main(args) in-process: one rank
        run_args, args = args, ctx.rank_args(args)                # num_envs / W envs; ConfigError unless W divides
        seed_everything(ctx.rank_seed(args.seed))                 # python / numpy / torch per rank
        envs = make_envs(args.env_id, args.num_envs, ctx.env_seed(args.seed, args.num_envs), ...)
        agent = make_agent(...).to(ctx.device)
        run = start_run(run_args, state, iterations, ctx)         # rank 0: run folder (broadcast), Logger
        learner = ctx.wrap_model(agent)                           # DDP (rank 0's weights) or agent
        ...                                                       # acting: agent (its CUDA graph), not learner
        for epoch ...:
            terms = ctx.masked_moments(adv, valid, index=minibatches).loss_terms()  # [K, 3], one all-reduce
            for k, mb in enumerate(minibatches):
                _, logp, ent, v = learner("get_action_and_value", obs[mb], act[mb])
                adv_mean, adv_std, denom = terms[k]           # normalise, masked sums / denom
                with ctx.timed_backward(timer):               # "update/backward" + "update/allreduce"
                    loss.backward()
        g = iteration_readout(ctx, ...)                           # rltrain.trainer: one collective per iteration
        logger.log(...)                                           # a NullLogger on ranks other than 0
        state.save(path, ..., ctx=ctx)                            # rank 0 writes every rank's state

Gradients.  :meth:`DistContext.wrap_model` returns ``DistributedDataParallel(agent)``, which
averages gradients over ranks during ``backward``, but only for passes through ``forward``:
the update calls ``learner("get_action_and_value", ...)`` (``ActorCritic.forward`` dispatches
by name) once per backward; acting, bootstrap values and parameter publishing use the plain
``agent``.  A communication hook marks when the last gradient bucket is ready, so
:meth:`DistContext.timed_backward` splits the backward phase into the backward compute and
the all-reduce time the compute did not hide.

Global statistics.  A masked mean over the samples of every rank is ``sum_r sum(x m) / C``
with ``C`` the global count; DDP's gradient is the mean over ranks of each rank's gradient, so
each rank computes its loss as ``sum_local(x m) / (C / W)`` (:attr:`MaskedMoments.denominator`):
one update on a batch split over W ranks equals one process on the whole batch.
:meth:`DistContext.masked_moments` gives the global sums, count, mean and std of a masked tensor
in one all-reduce, per minibatch when given their indices (PPO reduces the minibatches of an
epoch together, again after an advantage recompute; IMPALA's advantages exist only after each
minibatch's forward, so it reduces once per minibatch).  :meth:`DistContext.reduce_scalars` /
:meth:`DistContext.gather_scalars` reduce a dict of floats (episode sums and counts, losses, phase
seconds: max over ranks, the stop flags) in one all-gather.  :class:`RunningStatsSync` merges the
ranks' observation / reward normaliser statistics once per iteration.  With one rank
(:attr:`DistContext.has_peers` false) none of this runs: no DDP, no collective.

Rank 0.  :attr:`DistContext.is_main` gates logging (:class:`NullLogger` elsewhere) and the run
folder (:meth:`DistContext.broadcast_object` hands its path to the others);
:meth:`DistContext.save_checkpoint` gathers every rank's own state (RNG, normaliser, per-env
returns) into rank 0's atomic checkpoint and :meth:`DistContext.load_checkpoint` gives each rank
its own back (the file must be readable on every node).  :meth:`DistContext.check_replicas`
compares every rank's parameters with rank 0's (the trainers: at each checkpoint and at the end).

Faults.  A rank that raises inside :func:`distributed_context` writes its error to the
rendezvous store before it exits; torchrun then stops the other workers (SIGTERM) and prints
the failing rank's traceback (the ``@record`` decorator).  A rank that is killed leaves the
others in their next collective, which fails when the peer's connection drops or after
``--dist-timeout-s``; their error then carries a note naming the rank(s) that reported an
error first, if any.  NCCL's watchdog enforces the same timeout on GPU collectives.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel

from rltrain.checkpoint import load_checkpoint, save_checkpoint
from rltrain.config import ConfigError, DistributedArgs
from rltrain.runtime import num_cores, select_device
from rltrain.validation import validate

__all__ = ["DistributedArgs", "DistContext", "MaskedMoments", "NullLogger", "RunningStatsSync",
           "distributed_context", "end_worker", "init_distributed", "launched_by_torchrun", "record",
           "RANK_SEED_STRIDE"]

RANK_SEED_STRIDE = 1_000_003
"""Rank r seeds python / numpy / torch with ``seed + r * RANK_SEED_STRIDE`` (rank 0: ``seed``)."""

LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
"""What torchrun sets for every worker; ``RANK`` or ``WORLD_SIZE`` present means a distributed launch."""

_REDUCE_OPS = ("sum", "mean", "max", "min")
_FAILURE_KEY = "rltrain/failed/{}"


class NullLogger:
    """Stands in for :class:`rltrain.logger.Logger` on ranks other than 0: every call does nothing."""

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        pass

    def progress(self, iterations: int = 1, **postfix: float) -> None:
        pass

    def write(self, message: str) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class MaskedMoments:
    """Global statistics of a masked tensor over every rank: float64 tensors on the device, scalars
    or one entry per minibatch.

    ``total = sum(m x)``, ``total_sq = sum(m x^2)``, ``count = sum(m)``; ``mean`` and ``std``
    (population: ``sqrt(total_sq / count - mean^2)``) are 0 where ``count`` is 0.
    ``denominator = max(count, 1) / world_size``: a rank's ``sum_local(m x) / denominator`` is
    W times its share of the global masked mean, so DDP's mean of the ranks' gradients is the
    gradient of the global masked mean.
    """

    total: torch.Tensor
    total_sq: torch.Tensor
    count: torch.Tensor
    mean: torch.Tensor
    std: torch.Tensor
    denominator: torch.Tensor

    @classmethod
    def from_sums(cls, sums: torch.Tensor, world_size: int) -> "MaskedMoments":
        """``sums``: ``[3, ...]`` = (sum m x, sum m x^2, sum m), already summed over ranks."""
        total, total_sq, count = sums.unbind(0)
        n = count.clamp_min(1.0)
        mean = total / n
        std = (total_sq / n - mean.square()).clamp_min(0.0).sqrt()
        return cls(total, total_sq, count, mean, std, n / world_size)

    def loss_terms(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``[..., 3]``: ``(mean, std, denominator)`` of each entry as ``dtype``, what a minibatch loss
        normalises its advantages with and divides its masked sums by
        (:func:`rltrain.losses.minibatch_moments`' order)."""
        return torch.stack([self.mean, self.std, self.denominator], -1).to(dtype)


class DistContext:
    """Where this process stands in the job (rank, world size, device) and the operations the
    trainers call; see the module docstring.  Build it with :func:`distributed_context`."""

    def __init__(self, *, rank: int = 0, world_size: int = 1, local_rank: int = 0, local_world_size: int = 1,
                 device: torch.device = torch.device("cpu"), backend: Optional[str] = None,
                 timeout_s: float = DistributedArgs.dist_timeout_s, store: Optional[dist.Store] = None):
        self.rank, self.world_size = rank, world_size
        self.local_rank, self.local_world_size = local_rank, local_world_size
        self.device, self.backend, self.timeout_s = device, backend, timeout_s
        self._store = store
        self._grad_timer: Optional[_GradAllReduceTimer] = None

    @classmethod
    def single_process(cls, cuda: bool, timeout_s: float = DistributedArgs.dist_timeout_s) -> "DistContext":
        """The context of a plain ``python`` run (no process group): what a trainer's ``main(args)``
        uses when called without one (tests, the speedup study)."""
        return cls(device=select_device(cuda), timeout_s=timeout_s)

    # ---------------------------------------------------------------- where this process stands
    @property
    def is_distributed(self) -> bool:
        """A process group exists (launched by torchrun, even with one rank)."""
        return self.backend is not None

    @property
    def has_peers(self) -> bool:
        """Other ranks exist.  With one rank (``torchrun --nproc-per-node 1``) there is nothing to average
        or gather: the model is not wrapped in DDP and the collectives return this rank's values without
        a call, so such a run costs what a plain one does."""
        return self.is_distributed and self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that logs and writes checkpoints."""
        return self.rank == 0

    def __repr__(self) -> str:
        where = f"rank {self.rank}/{self.world_size}, {self.backend}" if self.is_distributed else "single process"
        return f"DistContext({where}, device {self.device})"

    def describe(self) -> str:
        """One line for the run log."""
        if not self.is_distributed:
            return "single process"
        return (f"{self.world_size} rank(s) on {self.backend} ({self.local_world_size} on this node), "
                f"collective timeout {self.timeout_s:g}s")

    # ---------------------------------------------------------------- sharing the work
    def local_num_envs(self, num_envs: int, flag: str = "--num-envs") -> int:
        """This rank's share of a global environment count; ConfigError unless the world size divides it."""
        if num_envs < self.world_size or num_envs % self.world_size:
            raise ConfigError(f"{flag} {num_envs} is the global count over {self.world_size} ranks and must be "
                              f"a positive multiple of it (each rank steps {flag} / world size environments)")
        return num_envs // self.world_size

    def rank_args(self, args: Any) -> Any:
        """This rank's share of a trainer's flags (a dataclass, already validated): ``--num-envs`` and
        ``--total-timesteps`` are global, so the copy has ``num_envs / W`` environments and
        ``total_timesteps // W`` steps (the same number of iterations as the whole run), and EnvPool
        threads ``cores_per_rank()`` where ``--num-threads`` is 0; every other flag sizes one rank's
        work as it does one process's (env groups, actors, minibatches per epoch, ...).  The copy is
        validated again, so a flag that fits the whole run but not a rank's share is a ConfigError
        naming it.  A run of one rank (plain or under torchrun) gets ``args`` itself."""
        if self.world_size == 1:
            return args
        local = dataclasses.replace(args, num_envs=self.local_num_envs(args.num_envs),
                                    total_timesteps=args.total_timesteps // self.world_size)
        if hasattr(local, "num_threads") and not local.num_threads:
            local = dataclasses.replace(local, num_threads=self.cores_per_rank())
        try:
            validate(local)
        except ConfigError as e:
            raise ConfigError(f"{e} (on each of the {self.world_size} ranks: --num-envs {args.num_envs} and "
                              f"--total-timesteps {args.total_timesteps} are global, each rank runs --num-envs "
                              f"{local.num_envs} and --total-timesteps {local.total_timesteps})") from None
        return local

    def rank_seed(self, seed: int) -> int:
        """Seed of this rank's python / numpy / torch generators; rank 0 keeps ``seed``."""
        return seed + RANK_SEED_STRIDE * self.rank

    def env_seed(self, seed: int, seeds_per_rank: int) -> int:
        """First environment seed of this rank: ``seed + rank * seeds_per_rank``.

        EnvPool seeds environment i with ``seed + i``; with ``seeds_per_rank`` = this rank's
        environment count the ranks together step the environments of one process holding all
        of them, and no two ranks step an identically seeded environment."""
        return seed + self.rank * seeds_per_rank

    def cores_per_rank(self) -> int:
        """This process's share of the node's cores (torch / EnvPool threads), at least 1."""
        return max(1, num_cores() // self.local_world_size)

    # ---------------------------------------------------------------- gradients
    def wrap_model(self, module: nn.Module) -> nn.Module:
        """``DistributedDataParallel(module)`` when other ranks exist (rank 0's weights are broadcast
        now), else ``module`` itself.  Call the result once per backward, through ``forward``."""
        if not self.has_peers:
            return module
        ddp = DistributedDataParallel(module, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        if self._grad_timer is None:
            self._grad_timer = _GradAllReduceTimer()
        ddp.register_comm_hook(None, self._grad_timer.hook)
        return ddp

    @contextmanager
    def timed_backward(self, timer, phase: str = "update/backward", allreduce_phase: Optional[str] = None):
        """Time the enclosed ``loss.backward()`` as ``phase`` plus, under DDP, ``allreduce_phase``
        (default ``<group>/allreduce``): from the moment the last gradient bucket is handed to
        the all-reduce to the end of backward, i.e. the communication the compute did not hide."""
        if self._grad_timer is None:
            with timer.phase(phase):
                yield
            return
        allreduce_phase = allreduce_phase or f"{phase.split('/', 1)[0]}/allreduce"
        grad_timer = self._grad_timer
        start = timer.mark()
        grad_timer.begin(timer)
        try:
            yield
        finally:
            end = timer.mark()
            split = grad_timer.end()
            split = end if split is None else split
            timer.add_interval(phase, start, split)
            timer.add_interval(allreduce_phase, split, end)

    # ---------------------------------------------------------------- global statistics
    def all_reduce(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """A reduced copy of ``tensor`` (``op``: sum, mean, max, min) over ranks; no host sync."""
        if op not in _REDUCE_OPS:
            raise ValueError(f"op must be one of {_REDUCE_OPS}, got {op!r}")
        out = tensor.detach().clone()
        if self.has_peers:
            red = {"sum": dist.ReduceOp.SUM, "mean": dist.ReduceOp.SUM,
                   "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[op]
            dist.all_reduce(out, op=red)
            if op == "mean":
                out = out / self.world_size
        return out

    def masked_moments(self, x: torch.Tensor, mask: torch.Tensor,
                       index: Optional[torch.Tensor] = None) -> MaskedMoments:
        """:class:`MaskedMoments` of ``x`` where ``mask`` (bool or 0/1) over every rank, in one
        all-reduce.  ``index`` (``[K, B]`` positions into the flattened ``x``, e.g. all minibatches
        of all epochs) gives one entry per row; without it, one over the whole tensor."""
        if x.shape != mask.shape:
            raise ValueError(f"x {tuple(x.shape)} and mask {tuple(mask.shape)} must have the same shape")
        x64, m64 = x.detach().to(torch.float64), mask.detach().to(torch.float64)
        if index is None:
            x64, m64 = x64.reshape(-1), m64.reshape(-1)
        else:
            x64, m64 = x64.reshape(-1)[index], m64.reshape(-1)[index]
        xm = x64 * m64
        sums = torch.stack([xm.sum(-1), (xm * x64).sum(-1), m64.sum(-1)])
        return MaskedMoments.from_sums(self.all_reduce(sums, "sum"), self.world_size)

    def gather_scalars(self, values: Mapping[str, float]) -> Dict[str, List[Optional[float]]]:
        """Every rank's value of each key (index = rank; None where that rank has no such key), in
        one collective (``all_gather_object``).  Pass floats; a key of some ranks only (a phase that
        did not run) is allowed, but report sums and counts rather than means of unequal parts."""
        local = {k: float(v) for k, v in values.items()}
        per_rank: List[Any] = [None] * self.world_size
        if self.has_peers:
            dist.all_gather_object(per_rank, local)
        else:
            per_rank[0] = local
        keys = dict.fromkeys(k for d in per_rank for k in d)  # union, in first-seen order
        return {k: [d.get(k) for d in per_rank] for k in keys}

    def reduce_scalars(self, values: Mapping[str, float], ops: Optional[Mapping[str, str]] = None,
                       default: str = "mean") -> Dict[str, float]:
        """``{key: op over the ranks that have it}`` with ``ops[key]`` (sum, mean, max, min;
        ``default`` for the others), in one collective (:meth:`gather_scalars`)."""
        ops = dict(ops or {})
        for key, op in [*ops.items(), ("default", default)]:
            if op not in _REDUCE_OPS:
                raise ValueError(f"reduce_scalars: op for {key!r} must be one of {_REDUCE_OPS}, got {op!r}")
        reduce = {"sum": sum, "mean": lambda v: sum(v) / len(v), "max": max, "min": min}
        return {k: reduce[ops.get(k, default)]([x for x in v if x is not None])
                for k, v in self.gather_scalars(values).items()}

    def running_stats_sync(self, rms) -> "RunningStatsSync":
        """A :class:`RunningStatsSync` for ``rms`` (after it has its starting state, e.g. after resume)."""
        return RunningStatsSync(self, rms)

    def check_replicas(self, module: nn.Module) -> None:
        """Collective: raise RuntimeError unless ``module``'s parameters and buffers are bitwise equal to
        rank 0's on every rank (DDP keeps them so; a difference means the replicas diverged).  One
        all-gather of the flattened state; nothing without other ranks."""
        if not self.has_peers:
            return
        tensors = [t.detach().reshape(-1).to(torch.float64) for t in (*module.parameters(), *module.buffers())]
        flat = torch.cat(tensors) if tensors else torch.zeros(0, dtype=torch.float64, device=self.device)
        gathered = [torch.empty_like(flat) for _ in range(self.world_size)]
        dist.all_gather(gathered, flat)
        differ = [r for r, other in enumerate(gathered) if not torch.equal(other, gathered[0])]
        if differ:
            raise RuntimeError(f"the model's parameters on rank(s) {differ} differ from rank 0's: the replicas "
                               f"diverged (every update must go through the DDP-wrapped model)")

    # ---------------------------------------------------------------- rank 0 and checkpoints
    def broadcast_object(self, obj: Any) -> Any:
        """Rank 0's ``obj`` (picklable) on every rank, e.g. the run folder it created."""
        if not self.has_peers:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        if self.is_distributed:
            dist.barrier()

    def save_checkpoint(self, path: str | Path, shared: Optional[Dict[str, Any]],
                        rank_state: Dict[str, Any]) -> Optional[Path]:
        """Collective: gather each rank's ``rank_state`` (moved to CPU) and have rank 0 write
        ``{**shared, "world_size": W, "rank_states": [state of rank 0, ...]}`` atomically.
        ``shared`` (model, optimizer, counters: equal on every rank) is only read on rank 0.
        Returns the path on rank 0, None elsewhere.  A single process writes ``{**shared,
        **rank_state}``, the checkpoint of a run without torchrun (their keys must not overlap)."""
        if self.is_distributed:
            states: Optional[List[Any]] = [None] * self.world_size if self.is_main else None
            dist.gather_object(_to_cpu(rank_state), states, dst=0)
        if not self.is_main:
            return None
        if shared is None:
            raise ValueError("save_checkpoint: rank 0 needs the shared state")
        if "rank_states" in shared or "world_size" in shared:
            raise ValueError("save_checkpoint: 'rank_states' and 'world_size' are reserved keys")
        if not self.is_distributed:
            overlap = sorted(set(shared) & set(rank_state))
            if overlap:
                raise ValueError(f"save_checkpoint: keys {overlap} are both shared and per rank")
            return save_checkpoint({**shared, **rank_state}, path)
        return save_checkpoint({**shared, "world_size": self.world_size, "rank_states": states}, path)

    def load_checkpoint(self, path: str | Path, map_location: Any = None) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """``(shared, this rank's state)`` from a checkpoint of :meth:`save_checkpoint`, read by
        every rank.  A checkpoint without ``rank_states`` (single-process format) is its own
        rank state.  ConfigError if it cannot be read (:func:`rltrain.checkpoint.load_checkpoint` names the
        file and what is wrong with it) or was saved by a different number of ranks."""
        ckpt = load_checkpoint(path, map_location=self.device if map_location is None else map_location)
        states = ckpt.pop("rank_states", None)
        saved = ckpt.pop("world_size", 1)
        if saved != self.world_size:
            raise ConfigError(f"--resume {path}: the checkpoint holds the state of {saved} rank(s); resume it "
                              f"with {saved} (torchrun --nnodes * --nproc-per-node), not {self.world_size}")
        return ckpt, (ckpt if states is None else states[self.rank])

    # ---------------------------------------------------------------- end of the job
    def close(self) -> None:
        """Leave the process group (after a run that ended normally).  Every rank first waits for the
        others: rank 0 serves the rendezvous store, and a rank still talking to it when rank 0's process
        exits can abort at its own exit."""
        if self.is_distributed and dist.is_initialized():
            self.barrier()
            dist.destroy_process_group()

    def report_failure(self, exc: BaseException) -> None:
        """Publish this rank's error in the rendezvous store and add a note to ``exc`` naming the
        ranks that reported another error before it (or saying that none did)."""
        if self._store is None or self.world_size == 1:
            return
        now = time.time()
        mine = f"{type(exc).__name__}: {exc}"[:2000]
        others: List[Tuple[float, int, str]] = []
        try:
            self._store.set_timeout(datetime.timedelta(seconds=2))
            self._store.set(_FAILURE_KEY.format(self.rank), json.dumps({"time": now, "error": mine}))
            for r in range(self.world_size):
                key = _FAILURE_KEY.format(r)
                if r != self.rank and self._store.check([key]):
                    report = json.loads(self._store.get(key))
                    others.append((report["time"], r, report["error"]))
        except Exception:  # the store went with a dead rank: nothing to add
            return
        earlier = sorted(o for o in others if o[0] <= now and o[2] != mine)  # not the error all ranks raise together
        if earlier:
            note = "\n".join(f"rank {r} failed {now - t:.1f}s before rank {self.rank}: {err}" for t, r, err in earlier)
        elif _is_collective_failure(exc):
            note = (f"rank {self.rank} of {self.world_size}: a collective failed and no other rank had reported an "
                    f"error: a peer was killed, lost its connection or stopped taking part for --dist-timeout-s "
                    f"{self.timeout_s:g}s (the launcher's summary names the rank that exited first)")
        else:
            return
        if hasattr(exc, "add_note"):  # Python >= 3.11; tracebacks and torchrun's summary show notes
            exc.add_note(note)


class RunningStatsSync:
    """Merges the ranks' :class:`envs.RunningMeanStd` updates since the last call, so every rank
    ends up with the statistics of all ranks' data (as one process that saw it all).

    In raw moments ``(n, n mean, n (var + mean^2))``, which add: each rank contributes what it
    added since the common base, ``global = base + sum_r (local_r - base)``.  The constructor
    broadcasts rank 0's statistics (the common base); call the instance once per iteration,
    on every rank.  Without other ranks it does nothing."""

    def __init__(self, ctx: DistContext, rms):
        self.ctx, self.rms = ctx, rms
        if ctx.has_peers:
            moments = _raw_moments(rms)
            dist.broadcast(moments, src=0)
            _set_raw_moments(rms, moments)
            self._base = moments
        else:
            self._base = None

    def __call__(self) -> None:
        if self._base is None:
            return
        moments = self._base + self.ctx.all_reduce(_raw_moments(self.rms) - self._base, "sum")
        _set_raw_moments(self.rms, moments)
        self._base = moments


def _raw_moments(rms) -> torch.Tensor:
    """``[n, n mean..., n (var + mean^2)...]`` (float64, flat) of a running mean/std."""
    n = rms.count.to(torch.float64).reshape(1)
    mean, var = rms.mean.to(torch.float64).reshape(-1), rms.var.to(torch.float64).reshape(-1)
    return torch.cat([n, n * mean, n * (var + mean.square())])


def _set_raw_moments(rms, moments: torch.Tensor) -> None:
    d = rms.mean.numel()
    n = moments[0]
    mean = moments[1:1 + d] / n
    var = (moments[1 + d:] / n - mean.square()).clamp_min(0.0)
    rms.count.copy_(n)
    rms.mean.copy_(mean.view_as(rms.mean))
    rms.var.copy_(var.view_as(rms.var))


class _GradAllReduceTimer:
    """DDP communication hook: the plain averaging all-reduce, plus a timer mark when each
    gradient bucket is handed over (the last one splits backward compute from exposed
    communication, see :meth:`DistContext.timed_backward`)."""

    def __init__(self):
        self._timer = None
        self._last_ready = None

    def hook(self, state, bucket):
        if self._timer is not None:
            self._last_ready = self._timer.mark()
        return allreduce_hook(state, bucket)

    def begin(self, timer) -> None:
        self._timer, self._last_ready = timer, None

    def end(self):
        last, self._timer, self._last_ready = self._last_ready, None, None
        return last


def _is_collective_failure(exc: BaseException) -> bool:
    """Whether ``exc`` comes from a collective (torch's own error types, or Gloo / NCCL messages)."""
    if isinstance(exc, getattr(dist, "DistError", ())):
        return True
    return isinstance(exc, RuntimeError) and any(w in str(exc) for w in ("gloo", "Gloo", "NCCL", "nccl", "c10d"))


def _to_cpu(obj: Any) -> Any:
    """``obj`` with every tensor moved to the CPU (dicts, lists and tuples walked)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def end_worker(ctx: DistContext) -> None:
    """After a normal end of a worker of a distributed run (``ctx.close()`` has left the process group),
    end the process at once with status 0: standard streams and logging flushed, the interpreter's
    teardown skipped.  In that teardown a 2-rank Gloo run's worker occasionally aborted after finishing
    its work ('terminate called without an active exception', exit -6), and torchrun then reports the
    whole job as failed; the run's files are closed by then.  Nothing happens in a single process."""
    if not ctx.is_distributed:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    logging.shutdown()
    os._exit(0)


def launched_by_torchrun(environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether this process is a worker of a distributed launch (``RANK`` or ``WORLD_SIZE`` is set)."""
    environ = os.environ if environ is None else environ
    return "RANK" in environ or "WORLD_SIZE" in environ


def _launch_env(environ: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    """torchrun's variables as ints / strings, None for a plain launch; ConfigError if inconsistent."""
    if not launched_by_torchrun(environ):
        return None
    missing = [v for v in LAUNCH_VARIABLES if v not in environ]
    if missing:
        raise ConfigError(f"a distributed launch needs the variables {', '.join(LAUNCH_VARIABLES)} (torchrun sets "
                          f"them); missing: {', '.join(missing)}. Launch with torchrun, or unset RANK and "
                          f"WORLD_SIZE for a single-process run")
    out: Dict[str, Any] = {"MASTER_ADDR": environ["MASTER_ADDR"]}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT"):
        if name in environ:
            try:
                out[name] = int(environ[name])
            except ValueError:
                raise ConfigError(f"environment variable {name}={environ[name]!r} is not an integer") from None
    out.setdefault("LOCAL_WORLD_SIZE", out["LOCAL_RANK"] + 1)
    if not 0 <= out["RANK"] < out["WORLD_SIZE"] or not 0 <= out["LOCAL_RANK"] < out["LOCAL_WORLD_SIZE"]:
        raise ConfigError(f"inconsistent launch variables RANK={out['RANK']} WORLD_SIZE={out['WORLD_SIZE']} "
                          f"LOCAL_RANK={out['LOCAL_RANK']} LOCAL_WORLD_SIZE={out['LOCAL_WORLD_SIZE']}")
    return out


def init_distributed(*, cuda: bool, backend: str = "auto", timeout_s: float = DistributedArgs.dist_timeout_s,
                     environ: Optional[Mapping[str, str]] = None) -> DistContext:
    """A :class:`DistContext` for this process: single-process without torchrun's variables,
    else this rank joined to the process group.  Prefer :func:`distributed_context`, which also
    reports failures and leaves the group at the end.

    ``cuda``: use GPUs if present (``--cuda``); ``backend``: auto / nccl / gloo
    (``--dist-backend``); ``timeout_s``: collective timeout (``--dist-timeout-s``)."""
    if backend not in ("auto", "nccl", "gloo"):
        raise ConfigError(f"--dist-backend must be auto, nccl or gloo, got {backend!r}")
    if not timeout_s > 0:
        raise ConfigError(f"--dist-timeout-s must be > 0, got {timeout_s}")
    launch = _launch_env(os.environ if environ is None else environ)
    if launch is None:
        return DistContext(device=select_device(cuda), timeout_s=timeout_s)

    use_cuda = cuda and torch.cuda.is_available()
    if backend == "nccl" and not use_cuda:
        why = "--no-cuda was given" if not cuda else "torch sees no CUDA device"
        raise ConfigError(f"--dist-backend nccl needs CUDA, but {why}; use --dist-backend gloo (or auto)")
    local_rank, local_world = launch["LOCAL_RANK"], launch["LOCAL_WORLD_SIZE"]
    if use_cuda:
        gpus = torch.cuda.device_count()
        if local_world > gpus:
            raise ConfigError(f"{local_world} ranks on this node (torchrun --nproc-per-node) but {gpus} CUDA "
                              f"device(s): start at most {gpus} per node, or pass --no-cuda to run on CPUs (Gloo)")
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    backend = ("nccl" if use_cuda else "gloo") if backend == "auto" else backend

    timeout = datetime.timedelta(seconds=timeout_s)
    store, rank, world_size = next(dist.rendezvous("env://", timeout=timeout))
    store.set_timeout(timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=world_size, timeout=timeout,
                            device_id=device if backend == "nccl" else None)
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank, local_world_size=local_world,
                       device=device, backend=backend, timeout_s=timeout_s, store=store)


@contextmanager
def distributed_context(*, cuda: bool, backend: str = "auto", timeout_s: float = DistributedArgs.dist_timeout_s,
                        environ: Optional[Mapping[str, str]] = None) -> Iterator[DistContext]:
    """:func:`init_distributed`; an exception inside is reported to the other ranks
    (:meth:`DistContext.report_failure`) and re-raised; a normal end leaves the process group."""
    ctx = init_distributed(cuda=cuda, backend=backend, timeout_s=timeout_s, environ=environ)
    try:
        yield ctx
    except Exception as e:
        ctx.report_failure(e)
        raise  # no destroy_process_group: it can block on a broken NCCL communicator
    ctx.close()
