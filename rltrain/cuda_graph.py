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
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

__all__ = ["CapturedCall"]


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
