"""One estimator call captured in a CUDA graph, replayed on demand.

A training loop calls an estimator on the same rollout buffers every update. Captured once, each
later call is one graph launch: no argument validation, output allocation or Triton launcher on the
host (at 4096 x 128 on an H200 host: 17-43 us eager, 3-5 us replayed; experiment log, "Captured
calls")::

    call = kernels.capture(kernels.gae, rewards, values, terminated, bootstrap, truncated=truncated,
                           gamma=0.99, lam=0.95)
    ...                                 # write this update's rollout into the same tensors, in place
    advantages, returns = call()        # the same output tensors every call, overwritten

The semantics are a CUDA graph's: a replay reads the tensors the call was captured with, at their
addresses, so new data must be written into them in place (``buffer[t] = ...``, ``bootstrap.copy_(...)``),
never bound to new tensors; scalars are fixed at capture; each call overwrites the outputs it returns,
so clone what must outlive the next call. Arguments are validated once, at capture.

On the CPU (and under Triton's interpreter) there is no graph: a call runs the estimator again and
copies its result into the same output tensors, so code written against a captured call behaves the
same on every device.
"""

from __future__ import annotations

from typing import Callable, Union

import torch

from kernels._triton import INTERPRET

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
        device = tensors[0].device
        self._graph = None
        if device.type == "cuda" and not INTERPRET:
            self._graph, self.outputs = _capture_on(device, lambda: fn(*args, **kwargs))
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
    replays it on the tensors given here and returns the same output tensors each time (module
    docstring)."""
    return CapturedCall(fn, *args, **kwargs)


def _capture_on(device: torch.device, call: Callable[[], Outputs]):
    """``(graph, outputs)`` of ``call`` captured on ``device``. A first call on a side stream
    validates the arguments, compiles the kernel and records its replay plan outside the capture."""
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
