"""Host microseconds of the pieces of a replayed call, in one process (the twentieth session).

    python docs/bench/host_overhead/variants.py [--N 4096 --T 128]

The argument signature and plan lookup as the kernels before this session wrote it (one helper call
per argument, keyword entries after the positional ones) and as now (one loop, no helper); two
outputs allocated apart and as slices of one buffer (unbound, indexed). Wall time per call of
back-to-back calls, as ``scripts/probe_host_overhead.py`` measures it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import kernels  # noqa: E402
from kernels import _replay  # noqa: E402
from scripts.probe_host_overhead import per_call_us, probe_shape, rollout  # noqa: E402


def signature_before(args: tuple, kwargs: dict) -> tuple:
    return tuple(map(describe_before, args)) + tuple((name, describe_before(v)) for name, v in kwargs.items())


def describe_before(value):
    if isinstance(value, torch.Tensor):
        return (type(value), value.shape, value.stride(), value.dtype, value.device, value.data_ptr() & 15)
    hash(value)
    return (type(value), value)


def main(argv=None):
    T, N = probe_shape(argv, __doc__.splitlines()[0])
    case = rollout(T, N)
    r, v, term, trunc, boot = (case[k] for k in ("r", "v", "term", "trunc", "boot"))
    args, kwargs = (r, v, term, boot), {"truncated": trunc, "gamma": 0.99}
    before = {signature_before(args, kwargs): 1}
    now = {_replay._signature(args, kwargs): 1}
    print(f"signature + lookup, before: {per_call_us(lambda: before.get(signature_before(args, kwargs))):.2f} us")
    print(f"signature + lookup, now: {per_call_us(lambda: now.get(_replay._signature(args, kwargs))):.2f} us")
    empty = lambda *shape: torch.empty(shape, device="cuda")  # noqa: E731
    print(f"one output: {per_call_us(lambda: empty(T, N)):.2f} us")
    print(f"two outputs apart: {per_call_us(lambda: (empty(T, N), empty(T, N))):.2f} us")
    print(f"two outputs, one buffer unbound: {per_call_us(lambda: empty(2, T, N).unbind(0)):.2f} us")

    def indexed():
        buffer = empty(2, T, N)
        return buffer[0], buffer[1]

    print(f"two outputs, one buffer indexed: {per_call_us(indexed):.2f} us")
    gae = lambda: kernels.gae(r, v, term, boot, truncated=trunc)  # noqa: E731
    gae()
    print(f"gae {N}x{T} replayed: {per_call_us(gae):.2f} us")


if __name__ == "__main__":
    main()
