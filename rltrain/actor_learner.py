"""Actor threads, a bounded trajectory queue and parameter broadcast (IMPALA, one process).

* :class:`ParamServer` -- the learner publishes a snapshot of its parameters
  (every K updates) tagged with its update count (the *version*); actors pull
  it into their own policy copy when the version changed (one int read per
  step, a lock only when copying).
* :class:`Actor` -- a thread that steps an EnvPool env asynchronously
  (``async_reset`` / ``recv`` / ``send``), runs batched inference with its
  own policy copy (a :class:`rltrain.policy_step.PolicyStep`: one CUDA graph
  replay per step, recorded in the constructor, i.e. in the main thread
  before any thread runs), assembles per-env chains with
  :class:`envs.async_collector.TrajectoryAssembler` and puts finished
  :class:`~envs.async_collector.Trajectory` batches of ``out_width`` env
  columns on the queue.  Phase timings (``actor/env``, ``actor/inference``,
  ...) and episode statistics travel with each batch.
* :class:`ActorPool` -- starts the actors, hands batches to the learner
  (:meth:`ActorPool.get`, timing its wait), re-raises an actor's exception in
  the learner thread as :class:`ActorError` (with the actor's traceback) and
  shuts everything down without hanging (:meth:`ActorPool.close`); a Ctrl-C
  recorded by :class:`rltrain.interrupt.GracefulInterrupt` surfaces in
  :meth:`ActorPool.get` as ``KeyboardInterrupt``.

Policy lag: every row carries the version of the parameters that chose its
action; the learner's lag for a batch is ``updates_done - version``.  With
the queue bounded at ``Q`` items and a refresh every ``K`` updates the lag
is at most about ``Q + num_actors + K`` (items in the queue, one blocked put
per actor, the batch being learned) when a batch holds all of an actor's
envs; a narrower batch (``out_width < num_envs``) comes ``num_envs /
out_width`` times as often, so the lag counted in updates grows by that
factor while the lag in env steps stays the same.

Keeping the learner busy: an update's cost hardly depends on the batch width
on a GPU (a few dozen launches), while a batch of all the envs takes the
actors ``T * num_envs / env_SPS`` to fill -- with 4096 CartPole envs, T = 32
and 1.5M steps/s that is 87 ms for an update of a few ms, so the learner
would wait > 90 % of its time whatever the actors do.  A learner batch of
``B`` columns (``--learner-batch-envs``) arrives every ``T * B / env_SPS``.
"""

from __future__ import annotations

import contextlib
import queue as queue_mod
import sys
import threading
import time
import traceback
from collections import defaultdict
from typing import Any, Dict, List, Optional

import numpy as np
import torch
import torch.nn as nn

from envs.async_collector import Trajectory, TrajectoryAssembler
from envs.episode_stats import EpisodeStats
from envs.frame_stack import FrameStack
from rltrain.interrupt import GracefulInterrupt
from rltrain.policy_step import PolicyStep
from rltrain.rollout import HostToDevice
from rltrain.timers import PhaseTimer

__all__ = ["ActorError", "ParamServer", "Actor", "ActorPool"]


class ActorError(RuntimeError):
    """An actor thread failed; the message holds its traceback."""


class ParamServer:
    """Versioned parameter snapshot shared by the learner and the actors."""

    def __init__(self, model: nn.Module, version: int = 0):
        self._lock = threading.Lock()
        self._snap = {k: v.detach().clone() for k, v in model.state_dict().items()}
        self.version = version

    def publish(self, model: nn.Module, version: int) -> None:
        with self._lock, torch.no_grad():
            for k, v in model.state_dict().items():
                self._snap[k].copy_(v.detach(), non_blocking=True)
            _sync_stream(self._snap)  # the snapshot is complete before an actor (other stream) reads it
            self.version = version

    def pull(self, model: nn.Module, have: int) -> int:
        """Copy the snapshot into ``model`` if it is newer than version ``have``; returns the version held."""
        if self.version == have:
            return have
        with self._lock, torch.no_grad():
            for k, v in model.state_dict().items():
                v.copy_(self._snap[k], non_blocking=True)
            _sync_stream(self._snap)  # done reading before the learner may overwrite the snapshot
            return self.version


def _sync_stream(tensors: Dict[str, torch.Tensor]) -> None:
    t = next(iter(tensors.values()), None)
    if t is not None and t.is_cuda:
        torch.cuda.current_stream(t.device).synchronize()


class Actor(threading.Thread):
    """One actor thread; see the module docstring.

    ``envs`` is anything with EnvPool's async API: ``async_reset()``,
    ``recv() -> (obs, reward, terminated, truncated, info)`` with
    ``info["env_id"]`` (always ``batch_size`` envs: EnvPool's ``batch_size``,
    default ``num_envs``), ``send(action, env_id)``.  The env gets the sampled
    action as ``int32`` for discrete actions (``num_actions`` of them), clipped
    to ``[action_low, action_high]`` for continuous ones (``num_actions``
    dimensions).  ``out_width`` env columns make a
    learner batch (default ``num_envs``).  ``capture=False`` runs the policy
    step eagerly on CUDA too.  ``stack_frames`` (``EnvInfo.stack_on_device``): the env returns only
    the newest frame ``[1, H, W]`` of ``obs_shape`` ``[k, H, W]``; the actor stacks them
    (:class:`envs.frame_stack.FrameStack`)."""

    def __init__(self, actor_id: int, envs: Any, policy: nn.Module, params: ParamServer,
                 out: "queue_mod.Queue[Trajectory]", stop: threading.Event, *, num_envs: int,
                 num_steps: int, obs_shape, obs_dtype: torch.dtype, action_shape, action_dtype: torch.dtype,
                 device: torch.device, num_actions: int, batch_size: Optional[int] = None,
                 out_width: Optional[int] = None, discrete: bool = True, action_low: Optional[np.ndarray] = None,
                 action_high: Optional[np.ndarray] = None, capture: bool = True, stack_frames: bool = False):
        super().__init__(name=f"actor-{actor_id}", daemon=True)
        self.actor_id, self.envs, self.policy, self.params = actor_id, envs, policy, params
        self.out, self.stop, self.device = out, stop, torch.device(device)
        self.assembler = TrajectoryAssembler(num_envs, num_steps, obs_shape, obs_dtype, action_shape,
                                             action_dtype, device, out_width=out_width)
        self.batch_size = batch_size or num_envs
        self.step = PolicyStep(policy, self.batch_size, obs_shape, obs_dtype, self.device, discrete=discrete,
                               num_actions=num_actions, action_low=action_low, action_high=action_high,
                               with_value=False, capture=capture)
        B, env_shape = self.batch_size, tuple(obs_shape)
        self.stack = None
        if stack_frames:  # EnvPool sends each step's newest frame [1, H, W]; stacked here by env id
            env_shape = (1, *env_shape[1:])
            self.stack = FrameStack(num_envs, obs_shape, self.device, obs_dtype)
            self.frame = torch.zeros((B, *env_shape), dtype=obs_dtype, device=self.device)
            self.starts = torch.zeros(B, dtype=torch.bool, device=self.device)
            self.ids = torch.zeros(B, dtype=torch.long, device=self.device)
            self.starts_h2d = HostToDevice((B,), torch.bool, self.device)
            self.ids_h2d = HostToDevice((B,), torch.long, self.device)
        self.obs_h2d = HostToDevice((B, *env_shape), obs_dtype, self.device)
        self.ep_stats = EpisodeStats(num_envs)
        self.timer = PhaseTimer(device)
        self.error: Optional[BaseException] = None
        self.error_text = ""
        self.version = -1
        self.steps = 0
        self.queue_wait_s = 0.0

    def run(self) -> None:
        try:
            # on CUDA the actor has its own stream, so its inference does not queue behind the learner
            stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
            with torch.no_grad(), (torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()):
                self._loop()
        except BaseException as e:  # noqa: BLE001 -- every failure must reach the learner
            self.error, self.error_text = e, traceback.format_exc()
            self.stop.set()

    def _put(self, item: Trajectory) -> bool:
        t0 = time.perf_counter()
        try:
            while not self.stop.is_set():
                try:
                    self.out.put(item, timeout=0.05)
                    return True
                except queue_mod.Full:
                    continue
            return False
        finally:
            self.queue_wait_s += time.perf_counter() - t0

    def _loop(self) -> None:
        envs, timer, asm, step = self.envs, self.timer, self.assembler, self.step
        returns: List[float] = []
        lengths: List[int] = []
        t_last = time.perf_counter()
        steps_last = 0
        timer.mark()
        envs.async_reset()
        timer.lap("actor/env")
        while not self.stop.is_set():
            obs_np, rew_np, term_np, trunc_np, info = envs.recv()
            ids = np.asarray(info["env_id"], dtype=np.int64)
            if ids.shape[0] != self.batch_size:
                raise RuntimeError(f"recv returned {ids.shape[0]} envs, expected the EnvPool batch_size "
                                   f"{self.batch_size}")
            ended_ret, ended_len = self.ep_stats.step(rew_np, term_np, trunc_np, info, env_ids=ids)
            returns.extend(ended_ret.tolist())
            lengths.extend(ended_len.tolist())
            timer.lap("actor/env")
            if self.stack is None:
                obs = self.obs_h2d.into(obs_np, step.obs)
            else:
                starts = self.stack.starts(term_np, trunc_np, info, env_ids=ids)
                obs = self.stack.push(self.obs_h2d.into(obs_np, self.frame), self.starts_h2d.into(starts, self.starts),
                                      self.ids_h2d.into(ids, self.ids), out=step.obs)
            rtt = torch.from_numpy(np.stack([rew_np, term_np, trunc_np]).astype(np.float32)).to(
                self.device, non_blocking=True)
            done_batches = asm.observe(ids, obs, rtt[0], rtt[1] > 0, rtt[2] > 0)
            timer.lap("actor/assemble")
            for item in done_batches:
                item.episode_returns, item.episode_lengths = returns, lengths
                returns, lengths = [], []
                item.actor_secs = timer.read()
                now = time.perf_counter()
                item.actor_steps = self.steps - steps_last
                item.actor_secs["actor/wall"] = now - t_last
                item.actor_secs["actor/queue_wait"] = self.queue_wait_s
                item.actor_id = self.actor_id
                self.queue_wait_s, steps_last = 0.0, self.steps
                if self.device.type == "cuda":  # the batch is written before another stream reads it
                    torch.cuda.current_stream(self.device).synchronize()
                if not self._put(item):
                    return
                t_last = now
                timer.mark()  # the read ended the laps; the put's wait is counted in actor/queue_wait
            self.version = self.params.pull(self.policy, self.version)
            step()  # a_t ~ pi(.|s_t), log pi(a_t|s_t) on step.obs
            asm.act(ids, step.action, step.logprob, self.version)
            env_action = step.actions_to_host()
            timer.lap("actor/inference")
            envs.send(env_action, ids)
            timer.lap("actor/env")
            self.steps += ids.shape[0]


class ActorPool:
    """Starts the actors and serves their batches to the learner; see the module docstring.

    ``stall_timeout_s``: a :meth:`get` that waits this long for a batch while the actors are alive
    raises :class:`ActorError` with each actor's steps and the stack it is stuck in, so a stalled actor
    ends the run with a diagnosis instead of a learner waiting forever (``None``: wait forever)."""

    def __init__(self, actors: List[Actor], out: "queue_mod.Queue[Trajectory]", stop: threading.Event,
                 interrupt: Optional[GracefulInterrupt] = None, stall_timeout_s: Optional[float] = None):
        self.actors, self.queue, self.stop, self.interrupt = actors, out, stop, interrupt
        self.stall_timeout_s = stall_timeout_s
        self.started = False

    def start(self) -> None:
        for a in self.actors:
            a.start()
        self.started = True

    def check(self) -> None:
        """Raise :class:`ActorError` if an actor failed."""
        for a in self.actors:
            if a.error is not None:
                raise ActorError(f"actor {a.actor_id} failed: {a.error!r}\n{a.error_text}") from a.error

    def get(self, poll_s: float = 0.05) -> Trajectory:
        """The next batch (blocks); raises :class:`ActorError` if an actor failed.

        A Ctrl-C recorded by ``interrupt`` is raised here as ``KeyboardInterrupt``, outside the
        queue's locking (see :mod:`rltrain.interrupt`).
        """
        waited_since = time.monotonic()
        while True:
            if self.interrupt is not None:
                self.interrupt.check()
            self.check()
            try:
                item = self.queue.get(timeout=poll_s)
                item.record_stream()  # allocated on an actor stream, used on the learner's
                return item
            except queue_mod.Empty:
                if not any(a.is_alive() for a in self.actors):
                    self.check()
                    raise ActorError("all actors exited")
                if self.stall_timeout_s is not None and time.monotonic() - waited_since > self.stall_timeout_s:
                    raise ActorError(f"no trajectory batch from the actors in {self.stall_timeout_s:g} s "
                                     f"(--actor-timeout-s); where each actor is:\n{self.stacks()}")

    def stacks(self) -> str:
        """Each live actor's step count and current Python stack."""
        frames = sys._current_frames()
        out = []
        for a in self.actors:
            frame = frames.get(a.ident) if a.ident is not None else None
            stack = "".join(traceback.format_stack(frame)) if frame is not None else "  (not running)\n"
            out.append(f"actor {a.actor_id} ({a.steps} env steps):\n{stack}")
        return "".join(out)

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop and join the actors (drains the queue so no put blocks); never hangs."""
        self.stop.set()
        deadline = time.monotonic() + timeout_s
        for a in self.actors:
            if not a.is_alive():
                continue
            while a.is_alive() and time.monotonic() < deadline:
                self._drain()
                a.join(timeout=0.05)
        self._drain()

    def _drain(self) -> None:
        try:
            while True:
                self.queue.get_nowait()
        except queue_mod.Empty:
            pass


def summarize_actor_secs(items: List[Trajectory]) -> Dict[str, float]:
    """Sum the actor phase seconds carried by ``items``."""
    out: Dict[str, float] = defaultdict(float)
    for it in items:
        for k, v in it.actor_secs.items():
            out[k] += v
    return dict(out)
