"""A launch of a fused kernel as data: ``LaunchConfig``, and the coefficients as kernel arguments."""

from __future__ import annotations

import struct
from dataclasses import asdict, dataclass
from functools import lru_cache

# The largest tile (block_t x block_n elements) a config may ask for: a program holds a handful of
# such tiles in registers.
MAX_TILE_ELEMENTS = 2**14
WARPS = (1, 2, 4, 8, 16)


@dataclass(frozen=True)
class LaunchConfig:
    """How a fused kernel is launched.

    ``lookback=False``: a program owns ``block_n`` environments and walks all of time in chunks of
    ``block_t`` steps, software-pipelined ``num_stages`` chunks deep (the loads of the next chunks are
    in flight while one is scanned). ``lookback=True``: a program owns one ``[block_t, block_n]`` tile
    and gets its carry-in from the earlier tiles by decoupled look-back (``kernels.scan.lookback``),
    so long sequences of few environments still fill the GPU; a problem of one chunk launches
    without it. ``num_warps``: warps per program. ``run``: consecutive time steps each thread holds
    (at most ``block_t``): with ``run > 1`` a tile's rows are dealt to the threads along time in
    turn, so each thread scans its run sequentially in registers, one map per run crosses threads,
    and each run is finished with its incoming carry (``kernels.scan.scan_runs``); it pays where
    Triton's layout gives each thread ``block_t / run`` rows of a ``[T, N]`` tile
    (``kernels.launch.heuristic.thread_run``). 1: one associative scan of the tile.
    """

    block_t: int
    block_n: int
    num_warps: int = 4
    lookback: bool = False
    num_stages: int = 1
    run: int = 1

    def __post_init__(self):
        for name in ("block_t", "block_n"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value & (value - 1):
                raise ValueError(f"LaunchConfig.{name} must be a power of two, got {value!r}")
        if self.block_t * self.block_n > MAX_TILE_ELEMENTS:
            raise ValueError(f"LaunchConfig.block_t x block_n must be at most {MAX_TILE_ELEMENTS} elements, got "
                             f"{self.block_t} x {self.block_n}")
        if self.num_warps not in WARPS:
            raise ValueError(f"LaunchConfig.num_warps must be one of {WARPS}, got {self.num_warps!r}")
        if not isinstance(self.lookback, bool):
            raise ValueError(f"LaunchConfig.lookback must be a bool, got {self.lookback!r}")
        if isinstance(self.num_stages, bool) or not isinstance(self.num_stages, int) or not 1 <= self.num_stages <= 8:
            raise ValueError(f"LaunchConfig.num_stages must be an int from 1 to 8, got {self.num_stages!r}")
        if (isinstance(self.run, bool) or not isinstance(self.run, int) or self.run < 1 or self.run & (self.run - 1)
                or self.run > self.block_t):
            raise ValueError(f"LaunchConfig.run must be a power of two from 1 to block_t ({self.block_t}), "
                             f"got {self.run!r}")

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def label(self) -> str:
        """``<block_t>x<block_n>w<warps>[+lookback][+<k>stages][+run<r>]`` (``scripts/bench_kernels.py``
        reads it back)."""
        return (f"{self.block_t}x{self.block_n}w{self.num_warps}" + ("+lookback" if self.lookback else "")
                + (f"+{self.num_stages}stages" if self.num_stages > 1 else "")
                + (f"+run{self.run}" if self.run > 1 else ""))


@lru_cache(maxsize=1024)
def scalars(*values: float) -> tuple[int, ...]:
    """Each Python float as two int32 kernel arguments: the high and low halves of its float64 bits.

    Triton passes Python floats as float32, which would round float64 coefficients and flush those
    below float32's range to zero; the kernels rebuild each value bit for bit (``kernels.scan.scalar``)
    and round it once to their accumulator type. The halves are not specialised on
    (``kernels.scan.coefficient_kernel``), so new values never recompile a kernel.
    """
    out = []
    for value in values:
        bits = struct.unpack("<q", struct.pack("<d", value))[0]
        out += [bits >> 32, ((bits & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000]
    return tuple(out)
