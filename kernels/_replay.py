"""Replay an estimator call whose arguments look like an earlier call's, skipping the Python work.

Everything an estimator does in Python before its kernel runs (checking the arguments, choosing
the block shape, working out the kernel's integer arguments, finding the compiled kernel) depends
only on each argument's *metadata*: for a tensor its type, shape, strides, dtype, device and data
pointer modulo 16; for anything else its type and value. It never reads a tensor's values. So a
call whose arguments match an earlier successful call in all of that would pass the same checks
and launch the same compiled kernel with the same integer arguments; only the data pointers
differ. :func:`replayable` keeps, per estimator, a *plan* for each such signature (output shapes,
the kernel's argument list, the compiled launcher) and replays it: allocate the outputs, put the
new pointers in, launch. A signature never seen before, or any argument the key cannot describe,
takes the estimator's ordinary path, which also raises every error, so bad input is reported
exactly as before.

A plan is only made from a call that did exactly one kernel launch through a
:class:`~kernels._direct_launch.DirectLauncher` whose tensors are all, by identity, the call's own
tensor arguments, its returned outputs or the launch's scratch buffers (so CPU calls, the
interpreter, ``T = 0`` and calls that pass one tensor object for two parameters never make one).
"""

from __future__ import annotations

import functools
import threading
from typing import Callable, NamedTuple, Optional

import torch

from kernels._direct_launch import CompiledLaunch, launch_hooks_active

_MAX_PLANS = 256  # per estimator; a training loop uses a handful of signatures


class Launch(NamedTuple):
    """One kernel launch as :func:`kernels._launch.launch` made it, for building a plan."""

    compiled: CompiledLaunch
    programs: int
    args: tuple  # the kernel's runtime arguments (tensors, ints, floats) in signature order
    scratch: tuple  # ((tensor, zeroed), ...): buffers the launch allocated (look-back workspace, flags)


_state = threading.local()  # .launches: the launches of the call being recorded on this thread


def is_recording() -> bool:
    return getattr(_state, "launches", None) is not None


def record(launch: Launch) -> None:
    """Called by a kernel launch while :func:`replayable` is recording a call on this thread."""
    _state.launches.append(launch)


def _signature(args: tuple, kwargs: dict) -> tuple:
    """The metadata of a call's arguments (see the module docstring): the keyword names, then one
    entry per argument value. Written out in one loop (no function call per argument): this and the
    dictionary lookup are a replayed call's first microseconds of host time."""
    key = [tuple(kwargs)]
    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            key.append((type(value), value.shape, value.stride(), value.dtype, value.device, value.data_ptr() & 15))
        else:
            key.append((type(value), value))  # unhashable values raise where the key is looked up
    return tuple(key)


class _Plan:
    """A recorded launch with its tensors replaced by where to find them: ``slots`` holds
    ``(argument index, source, key)`` with source 0 = positional argument, 1 = keyword argument,
    2 = output, 3 = scratch buffer. Holds no tensor, so it keeps no memory alive."""

    __slots__ = ("compiled", "programs", "template", "slots", "outputs", "scratch", "single", "device")

    def __init__(self, launch: Launch, slots: tuple, outs: list, single: bool):
        self.compiled, self.programs = launch.compiled, launch.programs
        self.template = tuple(0 if isinstance(a, torch.Tensor) else a for a in launch.args)
        self.slots = slots
        self.outputs = tuple((o.shape, o.dtype) for o in outs)
        self.scratch = tuple((t.shape, t.dtype, zeroed) for t, zeroed in launch.scratch)
        self.single = single
        self.device = outs[0].device

    def __call__(self, args: tuple, kwargs: dict):
        outs = self.new_outputs()
        device = self.device
        scratch = [(torch.zeros if zeroed else torch.empty)(shape, dtype=dtype, device=device)
                   for shape, dtype, zeroed in self.scratch]
        self.compiled.launch(self.programs, self.kernel_arguments(args, kwargs, outs, scratch))
        return outs[0] if self.single else tuple(outs)

    def new_outputs(self) -> list:
        """This call's outputs (new tensors of the recorded shapes and dtypes)."""
        return [torch.empty(shape, dtype=dtype, device=self.device) for shape, dtype in self.outputs]

    def kernel_arguments(self, args: tuple, kwargs: dict, outs: list, scratch: list) -> list:
        """The recorded argument list with the data pointers of this call's tensors put in."""
        sources = (args, kwargs, outs, scratch)
        full = list(self.template)
        for slot, source, key in self.slots:
            full[slot] = sources[source][key].data_ptr()
        return full


def _make_plan(args: tuple, kwargs: dict, result, launches: list) -> Optional[_Plan]:
    if len(launches) != 1:
        return None
    launch = launches[0]
    outs = [result] if isinstance(result, torch.Tensor) else list(result) if isinstance(result, tuple) else None
    if outs is None or not all(isinstance(o, torch.Tensor) and o.is_contiguous() for o in outs):
        return None
    inputs = [(0, i, a) for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    inputs += [(1, k, v) for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
    candidates = inputs + [(2, i, o) for i, o in enumerate(outs)]
    candidates += [(3, i, t) for i, (t, _) in enumerate(launch.scratch)]
    if len({id(t) for _, _, t in candidates}) != len(candidates):
        return None  # one object in two roles: which parameter a slot reads would be ambiguous
    by_id = {id(t): (source, key) for source, key, t in candidates}
    slots = []
    for slot, value in enumerate(launch.args):
        if isinstance(value, torch.Tensor):
            if id(value) not in by_id:
                return None
            slots.append((slot, *by_id[id(value)]))
    return _Plan(launch, tuple(slots), outs, isinstance(result, torch.Tensor))


def replayable(estimator: Callable) -> Callable:
    """Wrap a public estimator so that calls with a known argument signature replay a plan."""
    plans: dict = {}

    @functools.wraps(estimator)
    def call(*args, **kwargs):
        try:
            key = _signature(args, kwargs)
            plan = plans.get(key)
        except Exception:  # noqa: BLE001 - an argument the key cannot describe: the ordinary path judges it
            key = plan = None
        if plan is not None and not launch_hooks_active():
            try:
                return plan(args, kwargs)
            except TypeError:  # the C launcher rejected the arguments before launching: nothing ran
                plans.pop(key, None)
                return estimator(*args, **kwargs)
        if key is None or is_recording():
            return estimator(*args, **kwargs)
        _state.launches = launches = []
        try:
            result = estimator(*args, **kwargs)
        finally:
            _state.launches = None
        plan = _make_plan(args, kwargs, result, launches)
        if plan is not None:
            if len(plans) >= _MAX_PLANS:
                plans.clear()
            plans[key] = plan
        return result

    call.plans = plans
    return call
