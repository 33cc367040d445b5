"""Launch a compiled Triton kernel without Triton's per-call Python binder.

``kernel[grid](*args)`` re-derives the argument specialisation (dtype, 16-byte alignment of every
pointer, ``== 1`` / divisible-by-16 of every integer) in Python on every call before it finds the
compiled kernel: tens of microseconds for a 30-argument kernel, which is most of the cost of a
short-sequence estimator call. :class:`DirectLauncher` does that lookup once per *exact* call
signature and afterwards hands the arguments straight to the compiled kernel's C launcher.

The cache key is strictly finer than Triton's specialisation (it holds every integer argument's
exact value, every pointer's offset modulo 16, every tensor's dtype, the constexprs, the warps and
the device), so a hit can only reuse a kernel compiled for identical specialisations. Floats are
not specialised by Triton and are not in the key. The first call of every key goes through
``kernel[grid]`` (which compiles if needed) and records the compiled kernel it returns.

Anything unexpected (a Triton whose compiled kernels lack ``run``/``function``/
``packed_metadata`` or whose launcher rejects the arguments, launch hooks installed by a profiler,
the interpreter) falls back to the ordinary ``kernel[grid](...)`` launch, which is always correct.
``RLTRAIN_TRITON_LAUNCH=1`` in the environment turns the direct launch off altogether.
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from typing import Callable, NamedTuple, Optional

import torch

from kernels._triton import HAVE_TRITON, INTERPRET, triton

_MAX_ENTRIES = 512  # distinct call signatures kept per kernel (a training loop uses a handful)


_RUNTIME_KNOBS = getattr(getattr(triton, "knobs", None), "runtime", None)


class CompiledLaunch(NamedTuple):
    """What a launch went through: the compiled kernel's C launcher and what it is called with."""

    run: Callable
    function: int
    metadata: object
    device_index: int
    constexpr_values: tuple

    def launch(self, programs: int, args: list) -> None:
        """Launch ``programs`` programs on the current stream of the kernel's device; ``args`` are the
        runtime arguments with every tensor replaced by its data pointer."""
        with device_scope(self.device_index):
            self.run(programs, 1, 1, current_stream(self.device_index), self.function, self.metadata, None, None,
                     None, *args, *self.constexpr_values)


def launch_hooks_active() -> bool:
    """True when a profiler has installed Triton launch enter/exit hooks (they need Triton's launch).

    Triton keeps ``None`` or an empty ``HookChain`` when no hook is set.
    """
    enter = getattr(_RUNTIME_KNOBS, "launch_enter_hook", None)
    exit_ = getattr(_RUNTIME_KNOBS, "launch_exit_hook", None)
    return (enter is not None and bool(getattr(enter, "calls", True))) or (
        exit_ is not None and bool(getattr(exit_, "calls", True)))


def current_stream(device_index: int) -> int:
    return triton.runtime.driver.active.get_current_stream(device_index)


def device_scope(index: int):
    """Make CUDA device ``index`` current for a launch (a no-op when it already is)."""
    return nullcontext() if torch.cuda.current_device() == index else torch.cuda.device(index)


class DirectLauncher:
    """Per-kernel cache of compiled kernels keyed by the exact call signature.

    ``args`` are the kernel's runtime arguments in signature order (tensors, ints, floats);
    ``constexprs`` are its trailing ``tl.constexpr`` parameters by name. The positions of tensor
    and integer arguments are fixed by the first call (every call site passes the same kinds in
    the same places; an absent optional tensor is replaced by a placeholder tensor).
    ``cooperative``: launch cooperatively (all programs resident at once, or the launch fails), a
    property of the compiled kernel that its C launcher keeps.
    """

    def __init__(self, kernel, cooperative: bool = False):
        self.kernel = kernel
        self.options = {"launch_cooperative_grid": True} if cooperative and not INTERPRET else {}
        self.entries: dict = {}
        self.tensor_pos: Optional[tuple[int, ...]] = None
        self.int_pos: tuple[int, ...] = ()
        self.constexpr_names: Optional[tuple[str, ...]] = None
        self.enabled = HAVE_TRITON and not INTERPRET and os.environ.get("RLTRAIN_TRITON_LAUNCH", "0") in ("", "0")

    def _learn_layout(self, args: tuple, constexprs: dict) -> None:
        params = getattr(self.kernel, "params", None)
        self.tensor_pos = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor))
        self.int_pos = tuple(i for i, a in enumerate(args) if type(a) is int)
        if params is None or len(params) != len(args) + len(constexprs):
            self.enabled = False
            return
        runtime, trailing = params[: len(args)], params[len(args):]
        if any(p.is_constexpr for p in runtime) or not all(p.is_constexpr for p in trailing):
            self.enabled = False
            return
        self.constexpr_names = tuple(p.name for p in trailing)
        if set(self.constexpr_names) != set(constexprs):
            self.enabled = False

    def __call__(self, programs: int, device: torch.device, args: tuple, constexprs: dict, num_warps: int):
        """Launch; returns the :class:`CompiledLaunch` used when this launcher knows it (``None``
        after a fallback launch)."""
        if self.tensor_pos is None:
            self._learn_layout(args, constexprs)
        if not self.enabled or launch_hooks_active():
            self._launch_through_triton(programs, device, args, constexprs, num_warps)
            return None
        index = device.index if device.index is not None else torch.cuda.current_device()
        pointers = [args[i].data_ptr() for i in self.tensor_pos]
        constexpr_values = tuple([constexprs[name] for name in self.constexpr_names])
        key = (
            index,
            num_warps,
            constexpr_values,
            tuple([args[i].dtype for i in self.tensor_pos]),
            tuple([p & 15 for p in pointers]),
            tuple([args[i] for i in self.int_pos]),
        )
        entry = self.entries.get(key)
        if entry is None:
            return self._record(key, programs, device, args, constexprs, num_warps, index, constexpr_values)
        full = list(args)
        for i, p in zip(self.tensor_pos, pointers):
            full[i] = p
        try:
            entry.launch(programs, full)
        except TypeError:  # the launcher parses its arguments before launching: nothing ran
            self.enabled = False
            self._launch_through_triton(programs, device, args, constexprs, num_warps)
            return None
        return entry

    def _record(self, key, programs, device, args, constexprs, num_warps, index,
                constexpr_values) -> Optional[CompiledLaunch]:
        compiled = self._launch_through_triton(programs, device, args, constexprs, num_warps)
        try:
            entry = CompiledLaunch(compiled.run, compiled.function, compiled.packed_metadata, index, constexpr_values)
        except AttributeError:  # a Triton whose compiled kernels look different: keep its own launch
            self.enabled = False
            return None
        if len(self.entries) >= _MAX_ENTRIES:
            self.entries.clear()
        self.entries[key] = entry
        return entry

    def _launch_through_triton(self, programs, device, args, constexprs, num_warps):
        scope = device_scope(device.index) if device.type == "cuda" and device.index is not None else nullcontext()
        with scope:
            return self.kernel[(programs,)](*args, **constexprs, num_warps=num_warps, **self.options)
