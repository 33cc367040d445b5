"""PPO's rollouts, collected between updates (synchronous) or while the update runs (``--overlap-rollout``).

:class:`Rollouts` owns the :class:`rltrain.collector.RolloutCollector` and the storage the update
learns from (``buf``, ``bootstrap_value``, ``bootstrap_obs``).  A trainer's iteration ``k``::

    returns, lengths = rollouts.collect(timer, start_next=k < K)   # rollout k into buf
    ... GAE and update k on buf ...
    overlapped = rollouts.join(timer)    # the phases of rollout k+1, collected beside update k ({} if none)

**Synchronous** (the default): ``collect`` steps every env ``T`` times with the current parameters into
the collector's storage, which is ``buf`` itself; the envs wait while the device updates.  Exactly
on-policy; ``join`` has nothing to wait for.

**Overlapped**: the envs step rollout ``k+1`` while the update of rollout ``k`` runs, so an iteration
takes about ``max(rollout, update)`` instead of their sum (the Atari preset on an H100 host: a 1.3 s
rollout beside a 0.2 s update).  As in Cleanba (Huang et al., 2023, "Cleanba: A Reproducible and
Efficient Distributed Reinforcement Learning Platform"), the behaviour policy is one update stale:

* ``collect`` at iteration ``k`` hands rollout ``k`` over to ``buf`` (a copy of the collector's storage),
  then copies the agent's parameters *and buffers* -- those from before update ``k`` -- into the
  *acting copy* the collector acts with (``copy_`` in place: the policy step's CUDA graph keeps their
  addresses), and starts collecting rollout ``k+1`` into the collector's storage in a background thread;
* the main thread runs GAE and update ``k`` on ``buf`` meanwhile; the update never writes the acting
  copy, the collector never writes ``buf``;
* ``join`` waits for rollout ``k+1`` (phase ``rollout/wait``), which the next ``collect`` hands over.

What the update then learns from: rollout ``k+1``'s actions, their log-probabilities and the values
``V(s_t)``, ``V(s_T)`` all come from the acting copy, i.e. from the parameters before update ``k``.  PPO's
ratio ``pi_theta(a|s) / pi_behaviour(a|s)`` is taken against those stored log-probabilities, so at the
first minibatch of update ``k+1`` it is already the ratio of one update (``losses/old_approx_kl`` shows
it), and the clip bounds the step from the behaviour policy, not from the update's starting point; GAE
(``--advantage-recompute once``) uses the behaviour critic's values, the clipped value loss clips around
them.  ``epoch`` / ``minibatch`` recompute the targets with the current critic as usual.

**Which rollouts are stale.**  The first iteration of a process (a fresh run, or the first after a
``--resume``) is synchronous: its update records the CUDA graphs of ``--graph-update``, and a recording
must not meet another thread's device work (:class:`rltrain.cuda_graph.CapturedCall`).  Its second
iteration therefore also collects its rollout synchronously (on-policy) and starts the first background
rollout; from the third on, rollout ``k+1`` comes from the parameters before update ``k``.  The last
iteration starts no rollout: every rollout collected is learned from once, and ``--total-timesteps``
counts exactly the env steps taken.

**Threads and the state they own.**  During a background collection the collector thread owns the
envs, the collector's storage, the observation and reward normalisers (it updates their statistics)
and its own random generator (the actions' noise; seeded from the global generator when the run
starts or resumes, so a seed gives the same run, while the update's minibatch permutations keep the
global one to themselves).  The main thread touches none of them until ``join``; the trainer joins
before anything that reads them -- the readout, normaliser all-reduces across ranks, evaluation,
checkpoints.  A checkpoint therefore holds the parameters after update ``k`` and normaliser statistics
that have seen rollout ``k+1``; that rollout itself is not saved: a resumed run starts its episodes
afresh anyway (EnvPool's state cannot be saved) and collects its first rollout again.  An exception in
the collector thread is raised again in the main thread at ``join`` (the same exception, with the
collector's traceback); after a failure in the main thread :meth:`Rollouts.close` joins the
collection in flight (a rollout is ``T`` steps: it ends) before the exception goes on.  Under torchrun
each rank has its own collector thread; no collective runs in it.

**CUDA.**  The collector thread runs on a CUDA stream of its own (the policy step's graph replays, the
copies and the timer's events go to the current stream of the thread that issues them), so its
inference runs beside the update's kernels; the stream has a higher priority than the main one, so the
blocks of its small kernels are scheduled ahead of the update's waiting ones (the envs wait for the
actions; the update has the length of a rollout to finish).  The order between the two streams is set by stream
waits, never by a device-wide synchronisation: the collector's stream waits for the main stream's
work up to the hand-over (the copy out of the collector's storage and the parameter snapshot) before
its first step; at ``join`` the main stream waits for everything the collector queued, before the next
hand-over reads the storage or anything reads the normalisers.  On the CPU the same code runs in a
thread (PyTorch's CPU operators are thread-safe on distinct tensors), so the semantics are tested there.

**Cost.**  One device-to-device copy of the rollout per iteration into ``buf`` (Atari 1024 x 32: 231 MB
of frames, about 0.15 ms at an H100's 3 TB/s; memory for a second rollout) and one of the parameters,
timed as ``rollout/handoff``; two storages swapped instead would need every policy step recorded twice.
Between the end of rollout ``k+1`` and the start of rollout ``k+2`` the envs wait for the main thread's
readout, logging (and any evaluation or checkpoint) and the hand-over: a few ms of an iteration.
The main thread's host work (launching the update, the readout, logging) shares the interpreter and
the cores with the collector thread and EnvPool's workers: PyTorch operators release the GIL, so two
threads issuing small operators at the same time hand it back and forth at each one (on a 2-core CPU
host both threads then run several times slower; on a GPU host the update's launches are a few ms
when it is replayed from CUDA graphs, ``--graph-update``).

**Phases.**  The main thread's phases (``rollout/handoff``, ``rollout/wait``, ``ca``, ``update/*``; in
the synchronous iterations also the collection's ``rollout/*``) add up to the iteration's wall clock.
The background collection is timed by a :class:`~rltrain.timers.PhaseTimer` of its own with the
collector's phase names (``rollout/env``, ``rollout/inference``, ...); :meth:`Rollouts.join` returns them
for the overlapped block of the phase table and the ``perf/overlapped/...`` metrics
(:func:`rltrain.timers.overlapped_phases`).
"""

from __future__ import annotations

import contextlib
import copy
import threading
from typing import Dict, List, Optional, Tuple

import torch
import torch.nn as nn

from envs.groups import EnvGroups
from envs.normalize import ObsNormalizer, RewardNormalizer
from rltrain.collector import RolloutCollector
from rltrain.timers import PhaseTimer

__all__ = ["Rollouts", "copy_module_state"]

Episodes = Tuple[List[float], List[int]]


@torch.no_grad()
def copy_module_state(dst: nn.Module, src: nn.Module) -> None:
    """Every parameter and buffer of ``src`` into the same-named one of ``dst`` (``copy_``, in place:
    addresses a CUDA graph recorded stay valid).  Buffers count: one may hold running statistics the
    forward pass reads."""
    dst_tensors = {**dict(dst.named_parameters()), **dict(dst.named_buffers())}
    src_tensors = {**dict(src.named_parameters()), **dict(src.named_buffers())}
    if dst_tensors.keys() != src_tensors.keys():
        raise ValueError(f"the modules differ: {sorted(dst_tensors.keys() ^ src_tensors.keys())}")
    for name, tensor in dst_tensors.items():
        tensor.copy_(src_tensors[name])


class Rollouts:
    """See the module docstring.  ``overlap=False``: the synchronous collector as it always was (acting
    with ``agent`` itself, the default random generator, ``buf`` the collector's own storage)."""

    def __init__(self, envs: EnvGroups, agent: nn.Module, num_steps: int, device: torch.device | str, *,
                 overlap: bool = False, obs_norm: Optional[ObsNormalizer] = None,
                 rew_norm: Optional[RewardNormalizer] = None, capture: bool = True):
        self.agent, self.overlap, self.device = agent, overlap, torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:  # named for the collector thread
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.acting = copy.deepcopy(agent) if overlap else agent
        generator = None
        if overlap:  # the collector thread's own noise: the update's permutations keep the global generator
            generator = torch.Generator(device=self.device)
            generator.manual_seed(int(torch.randint(2**62, (1,)).item()))
        self.collector = RolloutCollector(envs, self.acting, num_steps, self.device, obs_norm=obs_norm,
                                          rew_norm=rew_norm, capture=capture, generator=generator)
        source = self.collector.storage
        self.storage = source.map(torch.zeros_like) if overlap else source  # [T + 1, N]: row T is s_T
        self.buf = self.storage.map(lambda x: x[:num_steps]) if overlap else self.collector.buf
        self.bootstrap_obs, self.bootstrap_value = self.storage.obs[num_steps], self.storage.values[num_steps]
        cuda = self.device.type == "cuda"
        # high priority: the envs wait for its actions, while the update has a rollout's time to finish
        self._stream = torch.cuda.Stream(self.device, priority=-1) if overlap and cuda else None
        self._timer = PhaseTimer(self.device)  # the background collection's phases
        self._collects = 0
        self._thread: Optional[threading.Thread] = None
        self._result: Optional[Episodes] = None
        self._error: Optional[BaseException] = None
        self._ready: Optional[Episodes] = None  # a background rollout joined, waiting to be handed over

    def collect(self, timer: PhaseTimer, *, start_next: bool) -> Episodes:
        """Rollout ``k`` into :attr:`buf`: the one collected in the background, else collected now (main
        thread, the collector's phases in ``timer``).  Overlapped: then starts rollout ``k+1`` in the
        background where ``start_next`` (not in the process's first iteration).  Returns the returns and
        lengths of the episodes that ended in rollout ``k``."""
        self._collects += 1
        if self._ready is not None:
            episodes, self._ready = self._ready, None
        else:
            if self.overlap:
                copy_module_state(self.acting, self.agent)
            with torch.inference_mode():
                episodes = self.collector.collect(timer)
        if self.overlap:
            with timer.phase("rollout/handoff"):
                self.storage.copy_(self.collector.storage)
                if start_next and self._collects > 1:
                    copy_module_state(self.acting, self.agent)  # the parameters before this iteration's update
                    self._start()
        return episodes

    def _start(self) -> None:
        if self._stream is not None:  # the hand-over's copies come first
            self._stream.wait_stream(torch.cuda.current_stream(self.device))
        self._result = self._error = None
        self._thread = threading.Thread(target=self._collect_in_background, args=(torch.get_num_threads(),),
                                        name="rollout-collector", daemon=True)
        self._thread.start()

    def _collect_in_background(self, torch_threads: int) -> None:
        try:
            # OpenMP's thread count is per thread: a new thread would parallelise its copies over every core,
            # beside EnvPool's workers (on the CPU, tens of times slower than with the trainer's --torch-threads)
            torch.set_num_threads(torch_threads)
            with contextlib.ExitStack() as stack:
                if self._stream is not None:
                    stack.enter_context(torch.cuda.device(self.device))  # a new thread starts on device 0
                    stack.enter_context(torch.cuda.stream(self._stream))
                stack.enter_context(torch.inference_mode())  # thread-local, like the stream
                self._result = self.collector.collect(self._timer)
        except BaseException as e:  # noqa: BLE001 -- every failure must reach the main thread
            self._error = e

    @property
    def in_flight(self) -> bool:
        """Whether a background collection was started and not joined yet."""
        return self._thread is not None

    def join(self, timer: PhaseTimer) -> Dict[str, float]:
        """Wait for the background rollout (phase ``rollout/wait``); its own phases (seconds by name), or
        ``{}`` where none is in flight.  An exception in the collector thread is raised here."""
        if self._thread is None:
            return {}
        with timer.phase("rollout/wait"):
            self._thread.join()
            if self._stream is not None:  # the storage and the normalisers are written before anyone reads them
                torch.cuda.current_stream(self.device).wait_stream(self._stream)
        self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            self._timer.read()  # what the failed rollout had timed
            raise error
        self._ready, self._result = self._result, None
        return self._timer.read()

    def close(self) -> None:
        """Join a collection still in flight (after an exception in the main thread), dropping its
        rollout and any error of its own; nothing runs in the background afterwards."""
        if self._thread is not None:
            self._thread.join()
            if self._stream is not None:
                torch.cuda.current_stream(self.device).wait_stream(self._stream)
            self._thread = self._result = self._error = self._ready = None
