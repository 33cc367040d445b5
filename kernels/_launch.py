"""Block shapes for the fused kernels, and the launch of one estimator's kernel.

Without look-back a program owns ``block_n`` environments and walks time in chunks of ``block_t``
steps (``cdiv(N, block_n)`` programs); with look-back every ``[block_t, block_n]`` tile is a program
(``cdiv(T, block_t) * cdiv(N, block_n)`` of them). ``LaunchConfig`` can be passed explicitly
(benchmarks, and the ``sequential`` baseline, which is the same kernel with ``block_t=1``);
otherwise :func:`choose_config` picks one from the shape.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import torch

from kernels._direct_launch import DirectLauncher
from kernels._triton import INTERPRET, tl, triton


@dataclass(frozen=True)
class LaunchConfig:
    """Block shape of a fused kernel launch.

    ``lookback=False``: a program owns ``block_n`` environments and walks all of time in chunks of
    ``block_t`` steps. ``lookback=True``: a program owns one ``[block_t, block_n]`` tile and gets its
    carry-in from the earlier tiles by decoupled look-back, so long sequences of few environments
    still fill the GPU (a single-chunk problem needs no look-back and launches without it).
    """

    block_t: int
    block_n: int
    num_warps: int = 4
    lookback: bool = False

    def __post_init__(self):
        for name in ("block_t", "block_n"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise ValueError(f"LaunchConfig.{name} must be a power of two, got {value}")


@lru_cache(maxsize=4096)
def choose_config(T: int, N: int, time_contiguous: bool) -> LaunchConfig:
    """Default block shape for a ``[T, N]`` problem.

    ``time_contiguous`` is true for ``[N, T]`` storage (time is the stride-1 axis): then longer time
    chunks and fewer environments per program keep the loads contiguous. Short sequences fit in one
    chunk (no look-back); longer ones are split into tiles joined by look-back so that the whole GPU
    works even when there are few environments.
    """
    t_pow2 = triton.next_power_of_2(max(T, 1))
    n_pow2 = triton.next_power_of_2(N)
    if INTERPRET:  # the interpreter's cost is per program and per chunk: use big tiles
        return LaunchConfig(min(128, t_pow2), min(64, n_pow2), lookback=True)
    if time_contiguous:
        return LaunchConfig(min(128, t_pow2), min(16, n_pow2), lookback=True)
    if T <= 256:
        return LaunchConfig(t_pow2, min(n_pow2, max(16, 2048 // t_pow2)))
    return LaunchConfig(64, min(32, n_pow2), lookback=True)


def launch(kernel, batch, config: Optional[LaunchConfig], tensors: tuple, coefficients: tuple, **constexprs) -> None:
    """Launch an estimator kernel: its tensor arguments, the look-back workspace, sizes, coefficients.

    ``config=None`` takes :func:`choose_config`'s block shape for the problem; ``tensors[:3]`` is
    the first input's ``(tensor, stride_t, stride_n)``, which says whether time is contiguous.

    Every fused kernel takes ``(*tensors, ws, flags, T, N, *coefficients)`` followed by its
    constexprs and ``ACC``, ``BLOCK_T``, ``BLOCK_N``, ``LOOKBACK``. With look-back, ``flags`` holds
    the ticket counter and one zeroed flag per tile, and ``ws`` three ``[num_chunks, N]`` planes.
    The launch goes through the kernel's :class:`~kernels._direct_launch.DirectLauncher`.
    """
    T, N = batch.T, batch.N
    if config is None:
        config = choose_config(T, N, tensors[1] == 1 and N > 1)
    num_chunks = triton.cdiv(T, config.block_t)
    n_blocks = triton.cdiv(N, config.block_n)
    lookback = config.lookback and num_chunks > 1
    if lookback:
        flags = torch.zeros(1 + num_chunks * n_blocks, dtype=torch.int32, device=batch.device)
        ws = torch.empty(3 * num_chunks * N, dtype=batch.compute_dtype, device=batch.device)
        programs = num_chunks * n_blocks
    else:
        flags = ws = tensors[0]
        programs = n_blocks
    launcher = _LAUNCHERS.get(kernel)
    if launcher is None:
        launcher = _LAUNCHERS[kernel] = DirectLauncher(kernel)
    constexprs.update(ACC=accumulator(batch.compute_dtype), BLOCK_T=config.block_t, BLOCK_N=config.block_n,
                      LOOKBACK=lookback)
    launcher(programs, batch.device, (*tensors, ws, flags, T, N, *coefficients), constexprs, config.num_warps)


_LAUNCHERS: dict = {}  # kernel -> its DirectLauncher


def accumulator(dtype: torch.dtype):
    """The Triton dtype the kernels accumulate in: float64 for float64 inputs, else float32."""
    return tl.float64 if dtype == torch.float64 else tl.float32


_FLOAT32_MAX = 3.4028234663852886e38


@lru_cache(maxsize=1024)
def scalars(*values: float) -> tuple[float, ...]:
    """Each Python float as two float32 kernel arguments ``(hi, lo)`` with ``hi + lo == value``.

    Triton passes Python floats as float32; float64 inputs must be computed with float64
    coefficients, so the kernel rebuilds each one as ``hi + lo`` in its accumulator type
    (``_scan.scalar``): exact to about 2^-48 relative, and free in the float32 case.
    """
    out = []
    for value in values:
        value = max(-_FLOAT32_MAX, min(_FLOAT32_MAX, value))  # only huge clipping thresholds are clamped
        hi = struct.unpack("f", struct.pack("f", value))[0]
        if abs(hi) > _FLOAT32_MAX:  # rounded up past float32's range
            hi = math.copysign(_FLOAT32_MAX, value)
        out += [hi, value - hi]
    return tuple(out)
