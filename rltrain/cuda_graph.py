"""A function of fixed tensors, recorded once as a CUDA graph and replayed without launch overhead.

A rollout step of a small policy is a few dozen kernels of microseconds each; launched one by one from
Python they cost more host time than the device spends on them.  :class:`CapturedCall` runs ``fn`` a few
times on a side stream (warm-up: lazy initialisation, cuDNN / cuBLAS workspaces), records one call with
``torch.cuda.graph`` and from then on replays the recording: one launch per call.  The recording keeps
the addresses of every tensor ``fn`` touched: inputs must be written in place (``copy_``) and outputs are
the tensors ``fn`` returned during the recording, overwritten by each replay.  Parameters updated in
place (optimizer steps, ``load_state_dict``, ``copy_``) are seen by the next replay without recording
again.  Random numbers are best drawn outside, into an input (see :mod:`rltrain.policy_step`).

Each call is recorded on a stream of its own.  PyTorch keys cuBLAS workspaces by (handle, stream), and
a recording bakes the workspace's address into the graph; ``torch.cuda.graph`` without a stream records
every graph of the process on one shared stream, so all of them would share one workspace.  Two such
graphs replayed at once on two streams (IMPALA's actor threads) then write into the same workspace,
and cuBLAS kernels that keep counters there (split-K / stream-K GEMMs) can wait for ever: an H100 run
with two actors stalled inside the actors' next synchronisation (pytorch/pytorch#193402 describes the
sharing).

Where there is no CUDA device (or ``enabled=False``) the call is simply ``fn()``.

:class:`GraphedStep` records a whole training step -- loss, backward, gradient clipping, optimizer
step -- the same way (PPO's ``--graph-update``): with small minibatches (the Atari preset's 2048
frames) its few hundred launches cost more than their arithmetic.  It follows PyTorch's whole-network
capture recipe (CUDA semantics notes, "whole-network capture"): the step sets the gradients to None
before its backward, so each replay writes them afresh; the optimizer is capturable with a tensor learning rate,
which a scheduler fills in place (:func:`capturable_adam`) or the step itself adapts
(:mod:`rltrain.adaptive_lr`); the warm-up steps are undone.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import torch

from rltrain.adaptive_lr import tensor_learning_rate

__all__ = ["CapturedCall", "GraphedStep", "capturable_adam"]


class CapturedCall:
    """``call()`` runs ``fn()``: replayed from a CUDA graph on CUDA, eagerly elsewhere.

    ``result`` holds ``fn``'s return value from the recording (static tensors a replay overwrites) or,
    when eager, from the latest call.  Record before other threads use the device: the recording is
    global (``torch.cuda.graph``'s default), so another thread's allocation during it would fail.
    """

    def __init__(self, fn: Callable[[], Any], device: torch.device | str, enabled: bool = True,
                 warmup: int = 2, pool: Optional[Any] = None):
        self.fn = fn
        self.device = torch.device(device)
        self.graph: Optional["torch.cuda.CUDAGraph"] = None
        self.result: Any = None
        if enabled and self.device.type == "cuda":
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                for _ in range(warmup):
                    fn()
            torch.cuda.current_stream(self.device).wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, pool=pool, stream=side):  # own workspace: module docstring
                self.result = fn()

    @property
    def captured(self) -> bool:
        return self.graph is not None

    def __call__(self) -> Any:
        if self.graph is not None:
            self.graph.replay()
        else:
            self.result = self.fn()
        return self.result


def capturable_adam(params: Iterable[torch.nn.Parameter], lr: float, eps: float,
                    device: torch.device | str) -> torch.optim.Adam:
    """Fused Adam whose step a CUDA graph can record: the learning rate a device tensor (a scheduler's
    new value reaches the replayed step), the step count on the device."""
    return torch.optim.Adam(params, lr=torch.tensor(lr, device=device), eps=eps, fused=True, capturable=True)


class GraphedStep:
    """``step(rows) -> outputs`` on a minibatch's rows, recorded at the first call and replayed after.

    ``call(source, index)`` gathers ``source[k][index]`` for every key into fixed row buffers
    (``index_select(..., out=)``) and runs ``step`` on them: a :class:`CapturedCall` replay on CUDA, an
    eager call elsewhere.  ``step`` sets the gradients to None before its backward (``zero_grad(
    set_to_none=True)``), so the recorded backward writes them afresh at each replay.  Outputs of a
    replay are overwritten by the next one: copy what must outlive it.  Recording runs warm-up steps,
    which update ``params`` and ``optimizer``; their values are put back afterwards (in place: the graph
    holds their addresses), so a run takes the same steps with and without the graph.
    """

    def __init__(self, step: Callable[[Dict[str, torch.Tensor]], Any], params: Iterable[torch.nn.Parameter],
                 optimizer: torch.optim.Optimizer, device: torch.device | str):
        self.step, self.params, self.optimizer = step, list(params), optimizer
        self.device = torch.device(device)
        self.rows: Dict[str, torch.Tensor] = {}
        self.call: Optional[CapturedCall] = None

    def __call__(self, source: Dict[str, torch.Tensor], index: torch.Tensor) -> Any:
        if self.call is None:
            self.rows = {key: x[index] for key, x in source.items()}
            self.call = self._record()
        else:
            for key, buf in self.rows.items():
                torch.index_select(source[key], 0, index, out=buf)
        return self.call()

    def _record(self) -> CapturedCall:
        if self.device.type != "cuda":
            return CapturedCall(lambda: self.step(self.rows), self.device, enabled=False)
        self._make_capturable()
        params = [p.detach().clone() for p in self.params]
        state = {id(t): t.clone() for s in self.optimizer.state.values() for t in s.values() if torch.is_tensor(t)}
        hyper = [(group, key, value.clone()) for group in self.optimizer.param_groups
                 for key, value in group.items() if key != "params" and torch.is_tensor(value)]
        call = CapturedCall(lambda: self.step(self.rows), self.device, warmup=3)
        self._undo_warmup(params, state, hyper)
        return call

    def _make_capturable(self) -> None:
        """What a checkpoint of an unrecorded run loads back (a float learning rate, ``capturable``
        off, step counts on the host), made recordable: a float learning rate would be recorded as a
        constant and the scheduler's later values never reach the replays."""
        tensor_learning_rate(self.optimizer, self.device)
        for group in self.optimizer.param_groups:
            group["capturable"] = True
        for s in self.optimizer.state.values():
            if torch.is_tensor(s.get("step")) and s["step"].device != self.device:
                s["step"] = s["step"].to(self.device, torch.float32)

    @torch.no_grad()
    def _undo_warmup(self, params: List[torch.Tensor], state: Dict[int, torch.Tensor],
                     hyper: List[Tuple[dict, str, torch.Tensor]]) -> None:
        """Parameters and the optimizer state that existed before the warm-up get their values back;
        state the warm-up created is zeroed, as a fresh optimizer's (Adam: step 0, moments 0); tensor
        hyperparameters of the parameter groups (a learning rate the step itself adapts,
        :mod:`rltrain.adaptive_lr`) get theirs back too."""
        for p, saved in zip(self.params, params):
            p.copy_(saved)
        for s in self.optimizer.state.values():
            for t in s.values():
                if torch.is_tensor(t):
                    t.copy_(state[id(t)]) if id(t) in state else t.zero_()
        for group, key, saved in hyper:
            group[key].copy_(saved)
