"""The host's fast path: a validated call replayed for later calls that look the same, and ``capture``.

**Replay.** Everything an estimator does on the host before its kernel runs (checking arguments,
choosing the launch, Triton's argument binding and kernel lookup) depends only on each argument's
metadata: a tensor's type, shape, strides, dtype, device and data pointer modulo 16 (Triton's
alignment specialisation); anything else's type and value. :func:`replayable` keeps, per estimator,
a plan per such signature, made from a call that did exactly one kernel launch: the compiled
kernel, its argument list, and where each tensor argument comes from (an input, an output, a scratch
buffer). A later call with the same signature allocates the outputs and scratch and hands the
arguments straight to the compiled kernel's launcher. A new signature, or an argument the key
cannot describe, takes the ordinary path, which also raises every error. Only CUDA calls make plans
(not the CPU or the interpreter); launch hooks (a profiler's) turn replay off while installed;
``RLTRAIN_TRITON_LAUNCH=1`` turns it off altogether.

**Capture.** ``capture(fn, *args, **kwargs)`` records one call in a CUDA graph for a training loop
to replay on the same buffers: new data must be written into the captured tensors in place,
scalars are fixed at capture, and each call overwrites (and returns) the same outputs. On the CPU
and under the interpreter a call runs the estimator again and copies into the same outputs.
"""

from __future__ import annotations

import functools
import os
import threading
from contextlib import contextmanager, nullcontext
from typing import Callable, Optional, Union

import torch

from kernels._triton import HAVE_TRITON, INTERPRET, triton

_MAX_PLANS = 256  # per estimator; a training loop uses a handful of signatures
_ENABLED = HAVE_TRITON and not INTERPRET and os.environ.get("RLTRAIN_TRITON_LAUNCH", "0") in ("", "0")
_recording = threading.local()  # .launches: the launches of the call being recorded on this thread
_RUNTIME_KNOBS = getattr(getattr(triton, "knobs", None), "runtime", None)


def launch_hooks_active() -> bool:
    """True when a profiler has installed Triton launch hooks (they need Triton's own launch)."""
    hooks = [getattr(_RUNTIME_KNOBS, name, None) for name in ("launch_enter_hook", "launch_exit_hook")]
    return any(hook is not None and bool(getattr(hook, "calls", True)) for hook in hooks)


def launch(kernel, programs: int, device: torch.device, args: tuple, constexprs: dict, num_warps: int,
           scratch: tuple = ()) -> None:
    """``kernel[(programs,)](*args, **constexprs)``; recorded for a plan when a call is recording.
    ``scratch``: tensors allocated for this launch alone (zeroed when int32: look-back flags)."""
    with _on(_index(device)):
        compiled = kernel[(programs,)](*args, **constexprs, num_warps=num_warps)
    if getattr(_recording, "launches", None) is not None:
        trailing = [p.name for p in kernel.params[len(args):]]
        if sorted(trailing) == sorted(constexprs):  # the launcher takes the constexprs in signature order
            record(compiled, programs, args, tuple(constexprs[name] for name in trailing), scratch, device)


def record(compiled, programs: int, args: tuple, constexpr_values: tuple, scratch: tuple, device) -> None:
    """Note a launch (its compiled kernel, grid, arguments) for the plan of the call being recorded."""
    launches = getattr(_recording, "launches", None)
    if launches is not None:
        launches.append((compiled, programs, args, constexpr_values, scratch, device))


@contextmanager
def unrecorded():
    """Launches inside are left out of the plan of the call being recorded (launches that time
    candidate configs, ``kernels.launch.autotune``)."""
    launches, _recording.launches = getattr(_recording, "launches", None), None
    try:
        yield
    finally:
        _recording.launches = launches


def _index(device: torch.device) -> Optional[int]:
    if device.type != "cuda":
        return None
    return device.index if device.index is not None else torch.cuda.current_device()


def _current_stream(index: Optional[int]) -> int:
    return triton.runtime.driver.active.get_current_stream(index)


def _on(index: Optional[int]):
    """Make CUDA device ``index`` current for a launch (nothing when it is, or for ``None``)."""
    return nullcontext() if index is None or index == torch.cuda.current_device() else torch.cuda.device(index)


def _signature(args: tuple, kwargs: dict) -> tuple:
    key = [tuple(kwargs)]
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            key.append((type(value), value.shape, value.stride(), value.dtype, value.device, value.data_ptr() & 15))
        else:
            key.append((type(value), value))  # unhashable values raise where the key is looked up
    return tuple(key)


class _Plan:
    """A recorded launch with its tensors replaced by where to find them (``slots``: argument index,
    source: 0 positional, 1 keyword, 2 output, 3 scratch, and the key in that source). Holds no tensor."""

    def __init__(self, compiled, programs, args, constexpr_values, scratch, device, slots, outs, single):
        self.run = compiled.run
        self.function, self.metadata = compiled.function, compiled.packed_metadata
        self.programs, self.constexpr_values, self.slots, self.single = programs, constexpr_values, slots, single
        self.template = [0 if isinstance(a, torch.Tensor) else a for a in args]
        self.outputs = [(o.shape, o.dtype) for o in outs]
        self.scratch = [(t.shape, t.dtype) for t in scratch]
        self.device, self.index = device, _index(device)

    def __call__(self, args: tuple, kwargs: dict):
        device = self.device
        outs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in self.outputs]
        scratch = [(torch.zeros if dtype == torch.int32 else torch.empty)(shape, dtype=dtype, device=device)
                   for shape, dtype in self.scratch]
        sources = (args, kwargs, outs, scratch)
        full = list(self.template)
        for slot, source, key in self.slots:
            full[slot] = sources[source][key].data_ptr()
        with _on(self.index):
            self.run(self.programs, 1, 1, _current_stream(self.index), self.function, self.metadata, None, None, None,
                     *full, *self.constexpr_values)
        return outs[0] if self.single else tuple(outs)


def _make_plan(args: tuple, kwargs: dict, result, launches: list) -> Optional[_Plan]:
    if len(launches) != 1:
        return None
    compiled, programs, launch_args, constexpr_values, scratch, device = launches[0]
    outs = [result] if isinstance(result, torch.Tensor) else list(result) if isinstance(result, tuple) else None
    if outs is None or not all(isinstance(o, torch.Tensor) for o in outs):
        return None
    candidates = [(0, i, a) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    candidates += [(1, k, v) for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
    candidates += [(2, i, o) for i, o in enumerate(outs)] + [(3, i, t) for i, t in enumerate(scratch)]
    if len({id(t) for *_, t in candidates}) != len(candidates):
        return None  # one object in two roles: which parameter a slot reads would be ambiguous
    by_id = {id(t): (source, key) for source, key, t in candidates}
    slots = []
    for slot, value in enumerate(launch_args):
        if isinstance(value, torch.Tensor):
            if id(value) not in by_id:
                return None
            slots.append((slot, *by_id[id(value)]))
    try:
        return _Plan(compiled, programs, launch_args, constexpr_values, scratch, device, slots, outs,
                     isinstance(result, torch.Tensor))
    except AttributeError:  # a Triton whose compiled kernels look different: keep its own launch
        return None


def replayable(estimator: Callable) -> Callable:
    """Wrap a public estimator so that calls with a known argument signature replay a plan."""
    plans: dict = {}

    @functools.wraps(estimator)
    def call(*args, **kwargs):
        if not _ENABLED or getattr(_recording, "launches", None) is not None:
            return estimator(*args, **kwargs)
        try:
            key = _signature(args, kwargs)
            plan = plans.get(key)
        except Exception:  # noqa: BLE001 - an argument the key cannot describe: the ordinary path judges it
            return estimator(*args, **kwargs)
        if plan is not None and not launch_hooks_active():
            try:
                return plan(args, kwargs)
            except TypeError:  # the launcher rejected the arguments before launching: nothing ran
                plans.pop(key, None)
        _recording.launches = launches = []
        try:
            result = estimator(*args, **kwargs)
        finally:
            _recording.launches = None
        plan = _make_plan(args, kwargs, result, launches)
        if plan is not None:
            if len(plans) >= _MAX_PLANS:
                plans.clear()
            plans[key] = plan
        return result

    call.plans = plans
    return call


Outputs = Union[torch.Tensor, tuple]


class CapturedCall:
    """``fn(*args, **kwargs)`` captured for replay (module docstring); ``outputs`` are the tensors
    every call returns."""

    def __init__(self, fn: Callable, *args, **kwargs):
        if not callable(fn):
            raise TypeError(f"capture: fn must be an estimator (a callable), got {type(fn).__name__}")
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
        if not tensors:
            raise ValueError("capture: the call takes no tensors, so there is nothing to capture")
        self._fn, self._args, self._kwargs = fn, args, kwargs
        self._graph = None
        if tensors[0].device.type == "cuda" and not INTERPRET:
            self._graph, self.outputs = _capture_on(tensors[0].device, lambda: fn(*args, **kwargs))
        else:
            self.outputs = fn(*args, **kwargs)

    @property
    def graphed(self) -> bool:
        """Whether calls replay a CUDA graph (else they run the estimator again)."""
        return self._graph is not None

    def __call__(self) -> Outputs:
        if self._graph is not None:
            self._graph.replay()
        else:
            fresh = self._fn(*self._args, **self._kwargs)
            for out, new in zip(_as_tuple(self.outputs), _as_tuple(fresh)):
                out.copy_(new)
        return self.outputs


def capture(fn: Callable, *args, **kwargs) -> CapturedCall:
    """``fn(*args, **kwargs)`` (an estimator and its arguments) captured once; calling the result
    replays it on the tensors given here and returns the same output tensors each time."""
    return CapturedCall(fn, *args, **kwargs)


def _capture_on(device: torch.device, call: Callable[[], Outputs]):
    """``(graph, outputs)`` of ``call`` captured on ``device``, after a first call on a side stream
    (argument checks, compilation) outside the capture."""
    with torch.cuda.device(device):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            call()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        # thread_local: other threads (a trainer's actor threads) keep stepping their own streams
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            outputs = call()
    return graph, outputs


def _as_tuple(outputs: Outputs) -> tuple:
    return outputs if isinstance(outputs, tuple) else (outputs,)
