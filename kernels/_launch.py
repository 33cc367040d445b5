"""Block shapes for the fused kernels, and the launch of one estimator's kernel.

Without look-back a program owns ``block_n`` environments and walks time in chunks of ``block_t``
steps (``cdiv(N, block_n)`` programs); with look-back every ``[block_t, block_n]`` tile is a program
(``cdiv(T, block_t) * cdiv(N, block_n)`` of them). ``LaunchConfig`` can be passed explicitly
(benchmarks, and the ``sequential`` baseline, which is the same kernel with ``block_t=1``);
otherwise :func:`choose_config` picks one from the shape.

Figures in this package's comments are H200 measurements; *experiment log, "section"* names the
section of the kernels' experiment log that holds each (``docs/perf.md``, "Experiment log").
"""

from __future__ import annotations

import importlib
import struct
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple, Optional

import torch

from kernels import _async_walk, _explicit_layout, _replay, _scan
from kernels._direct_launch import DirectLauncher
from kernels._triton import INTERPRET, runs_gluon, tl, triton


@dataclass(frozen=True)
class LaunchConfig:
    """Block shape of a fused kernel launch.

    ``lookback=False``: a program owns ``block_n`` environments and walks all of time in chunks of
    ``block_t`` steps. ``lookback=True``: a program owns one ``[block_t, block_n]`` tile and gets its
    carry-in from the earlier tiles by decoupled look-back, so long sequences of few environments
    still fill the GPU (a single-chunk problem needs no look-back and launches without it).

    ``num_stages > 1`` software-pipelines a program's walk over time (``tl.range(num_stages=...)``):
    the loads of the next ``num_stages - 1`` chunks are in flight while a chunk is scanned, so a
    few programs per multiprocessor can keep the memory busy. A look-back tile is one chunk and
    ignores it.

    ``latest_first``: a reverse-time kernel holds each tile's steps latest first, so the tile is
    scanned forward (``_scan``: Triton's reverse scan mirrors every lane of the warp by shuffles).
    Ignored where a tile's steps exchange values by warp shuffles (:func:`shuffles_time`), which
    need them in time order.

    ``thread_runs``: a ``[T, N]`` tile gives each thread a run of consecutive steps
    (:func:`time_threads`), scanned within the thread before one map per thread crosses threads
    (``_scan.scan_thread_runs``). Ignored for ``[N, T]`` storage.

    ``explicit_layout``: the kernel's explicit-layout twin (``kernels._explicit_layout``, Gluon; a
    GPU only) holds a whole ``[T, N]`` sequence (``T <= block_t``) in one tile of ``num_warps``
    warps along time, each thread a run of steps of ``block_n * time_threads / 32`` environments.

    ``persistent``: with ``lookback``, the kernel's persistent twin (:func:`persistent_twin_of`) in
    this many programs per multiprocessor, launched cooperatively (the driver starts them all at
    once, or refuses). Each program walks the tiles ``pid, pid + G, ...`` of ``G`` programs and
    loads its next tile while it scans, looks back for and stores the current one (``[T, N]``
    tiles in thread runs of a reverse kernel, latest first). 0: one tile per program.

    ``env_runs_of_four``: a ``[T, N]`` tile of 16-bit floats gives each thread runs of 4 consecutive
    environments (8-byte vectors) instead of 8 (16-byte), as a float32 tile does, so half as many
    lanes lie along environments and twice as many steps along each thread's run. The 8-byte copies
    cannot bypass the L1 and take twice the addresses, so it pays only in some walks (experiment log,
    "The bf16 walks four environments per thread"). Ignored for ``[N, T]`` storage and 32-bit floats.
    With ``async_walk`` it sets the walk's layout alone (its copies stay 16-byte): each thread four
    environments, twice the lanes along time (V-trace's, "V-trace's async walks").

    ``async_walk``: the kernel's async-walk twin (``kernels._async_walk``, Gluon; a GPU only): a
    ``[T, N]`` walk (no look-back) whose ``num_warps`` warps lie side by side along the program's
    ``block_n`` environments, each thread a run of steps of one 16-byte vector of them (with
    ``env_runs_of_four``, four environments), fed through a ring of ``num_stages`` chunks in shared
    memory by asynchronous copies (``num_stages >= 2``).
    """

    block_t: int
    block_n: int
    num_warps: int = 4
    lookback: bool = False
    num_stages: int = 1
    latest_first: bool = False
    thread_runs: bool = False
    explicit_layout: bool = False
    persistent: int = 0
    env_runs_of_four: bool = False
    async_walk: bool = False

    def __post_init__(self):
        for name in ("block_t", "block_n"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise ValueError(f"LaunchConfig.{name} must be a power of two, got {value}")
        if self.num_stages < 1:
            raise ValueError(f"LaunchConfig.num_stages must be at least 1, got {self.num_stages}")
        if self.persistent < 0:
            raise ValueError(f"LaunchConfig.persistent must be at least 0, got {self.persistent}")
        if self.persistent and not (self.lookback and self.thread_runs):
            raise ValueError("LaunchConfig.persistent walks look-back tiles in thread runs: needs lookback and "
                             "thread_runs")
        if self.env_runs_of_four and (self.explicit_layout or self.persistent):
            raise ValueError("LaunchConfig.env_runs_of_four is a layout of the Triton kernels' tiles: not with "
                             "explicit_layout or persistent")
        if self.async_walk and (self.lookback or self.explicit_layout or self.thread_runs or self.persistent
                                or self.num_stages < 2):
            raise ValueError("LaunchConfig.async_walk is a walk in a layout of its own: no lookback, explicit_layout, "
                             "thread_runs or persistent, and num_stages >= 2")
        if self.explicit_layout:
            threads = _explicit_layout.time_threads(self.block_t, self.num_warps)
            if self.lookback or self.num_stages > 1:
                raise ValueError("LaunchConfig.explicit_layout holds a whole sequence: no lookback, num_stages 1")
            if self.block_t < threads * self.num_warps or self.block_n * threads < 32:
                raise ValueError(f"LaunchConfig.explicit_layout needs block_t >= {threads * self.num_warps} and "
                                 f"block_n >= {32 // threads} on {self.num_warps} warps, got "
                                 f"{self.block_t} x {self.block_n}")


# Time-contiguous tile lengths (steps) that lie in one warp (Triton lays 16-byte vectors of consecutive
# steps, 32 threads along time), by the byte size of the float inputs: the lengths at which moving
# values between steps by warp shuffles measured faster than without (H200, experiment log).
SHUFFLE_BLOCK_TS = {4: (128,), 2: (128, 256)}

# Elements (N times T rounded up to a power of two, and to at least 128) from which [T, N] sequences of
# 33-256 steps are walked in 16-step chunks instead of held in one tile per program (H200, experiment log).
SHORT_WALKS_FROM = 2**21
# V-trace's float32 [T, N] walks below 8192 environments are 32 wide on four warps from here, 16 wide
# below. 64 x 16 tiles fell from 77% of the copy at 6144 environments (384 programs) to 53-55% at
# 6352-6656 (397-416: more than three per multiprocessor of the H200); 32 x 32 ran 1.27-1.38x faster
# from 6352 to 8176 and 0.88x at 6144 (experiment log, "Successor values from thread runs, V-trace's
# wide walks").
WIDE_WALKS_FROM = 6352
# Environment counts whose float32 [T, N] sequences of more than 256 steps (GAE, Retrace, lambda and
# discounted returns, in 16-aligned rows) are walked 32 environments wide on four warps, three chunks
# deep, instead of in two-warp look-back tiles: 120-132 programs, one per multiprocessor of the H200.
# 1.09-1.17x from 3840 to 4224 environments (Retrace, lambda and discounted returns 1.12-1.16x at
# 4096); 0.79-0.86x at 4240, whose 133rd program waits for a second wave; 0.99-1.00x at 3072-3584
# (experiment log, "Successor values from thread runs, V-trace's wide walks").
ONE_WAVE_WALKS = (3840, 4224)
# Environment counts from which GAE's, Retrace's, lambda and discounted returns' float32 [T, N]
# sequences of more than 256 steps take the walks they take from 8192 (the others: from 8192), in
# 16-aligned rows: at 7680-8000 environments 1.10-1.25x over their two-warp look-back tiles (GAE
# 1.10-1.15x, Retrace 1.12-1.15x, lambda returns 1.24-1.25x, discounted returns 1.19-1.20x); GAE
# 1.04-1.09x at 8176, 1.03-1.05x at 7168 and 0.94x at 6144 (experiment log, "Successor values from
# thread runs, V-trace's wide walks").
FLOAT32_WALKS_FROM = 7680
# Multiprocessors of the H200. Block shapes of one or two programs per multiprocessor are chosen
# where their programs fill whole waves (``fills_waves``).
MULTIPROCESSORS = 132
# The share of their waves that programs must fill for ``fills_waves``: V-trace's float32 [T, N] walks
# from 8192 environments 64 x 64 on eight warps (one program per multiprocessor: 255 registers) ran
# 1.05-1.12x faster than 32 x 32 on two at 8192, 8448, 16384 and 32768 environments (0.97-1.00 of
# their waves; 8192 x 4096: 207.5 -> 188.2 us, 84% -> 92% of the copy), 0.71x at 10240 (0.61) and
# 0.79x at 12288 (0.73) (experiment log, "Instructions per element, V-trace's walks by waves").
FULL_WAVES = 0.95

# Environment counts strictly between which eligibility traces' and episodic sums' float32 [T, N] walks
# take 32 x 32 tiles on two warps, three chunks deep, instead of 32 x 64 on four warps four deep: on the
# H200 1.07-1.17x at 17408-28672 environments, 0.89-0.94x at 16384 (whose 64-wide programs fill their
# waves), 0.99-1.03x at 30720, 0.90-1.06x from 32768 in 64 x 32 tiles (experiment log, "The light kernels'
# walks from 16384 to 30720 environments").
LIGHT_TWO_WARP_WALKS = (16384, 30720)

# Elements (N times T) up to which the 16-bit [T, N] walks of kernels with ``four_env_walks`` take 64 x 32
# tiles four environments per thread: 1.01-1.29x over 64 x 64 on four warps eight per thread on the H200
# from 8192 to 32768 environments, 0.91-1.01x beyond (experiment log, "The bf16 walks four environments
# per thread").
FOUR_ENV_WALKS_UP_TO = 2**25


@lru_cache(maxsize=4096)
def choose_config(T: int, N: int, time_contiguous: bool, wide_scan: bool = False, itemsize: int = 4,
                  pipelined_walks: bool = True, light_steps: bool = False, latest_first: bool = False,
                  successor_rows: bool = False, long_run_tiles: bool = False, deep_walks: bool = False,
                  one_env_walks: bool = False, paired_rows: bool = False, narrow_short_tiles: bool = False,
                  sixteen_warp_rows: bool = False, short_look_back_tiles: bool = False,
                  one_column_triton_tiles: bool = False, aligned_rows: bool = True, explicit_short_tiles: bool = False,
                  eight_warp_short_tiles: tuple = (), unaligned_whole_tiles: tuple = (),
                  unaligned_look_back_tile: Optional[tuple] = None,
                  persistent_look_back_tile: Optional[tuple] = None, four_env_walks: int = 0,
                  async_walks: tuple = ()) -> LaunchConfig:
    """Default block shape for a ``[T, N]`` problem, from block-shape sweeps on an H200
    (``scripts/tune_kernels.py``; method and current results in ``docs/perf.md``).

    ``time_contiguous`` is true for ``[N, T]`` storage (time is the stride-1 axis); ``wide_scan``
    for kernels that scan four values per step instead of two (V-trace), which favour smaller tiles
    (except ``[N, T]`` rows of 128 steps, where the kernel takes the extra values by shuffles);
    ``itemsize`` the byte size of the float inputs; ``pipelined_walks`` false for kernels whose long
    ``[N, T]`` walks over many environments ran faster unpipelined (lambda returns, discounted
    returns, ``linear_scan``: from 4096 environments, f32 and bf16; experiment log, "Profiles and
    unpipelined walks"); ``light_steps`` for kernels that read one float and one flag and write one
    float per step (eligibility traces, episodic sums), whose fixed per-tile costs weigh more per
    byte, so they keep longer tiles to more environments (experiment log, "Acquire loads, and tiles
    for the light kernels"); ``latest_first`` for kernels with reverse walks, whose ``[T, N]`` tiles
    then hold their steps latest first (``LaunchConfig.latest_first``; experiment log, "Tiles latest
    first"); ``successor_rows`` for kernels that also load each step's successor (a second tile one
    step later: GAE, V-trace, Retrace), whose longer walk tiles spill registers (unless
    ``deep_walks``); ``long_run_tiles`` for kernels whose float32 look-back tiles in thread runs
    measured faster 64 steps long than 32, and whose walks from 4096 environments beat look-back
    tiles (``linear_scan``, eligibility traces, episodic sums); ``deep_walks`` for kernels whose
    float32 ``[T, N]`` walks measured faster pipelined four chunks deep in 64-environment tiles
    (GAE, eligibility traces, episodic sums); ``one_env_walks`` for kernels whose float32 ``[N, T]``
    walks below 4096 environments measured faster one environment per one-warp program, four chunks
    deep (``linear_scan``; experiment log, "Odd lengths"); ``paired_rows`` for kernels whose float32
    ``[N, T]`` rows of 65-256 steps measured faster two environments per one-warp program from
    :func:`paired_rows_from` elements (GAE, V-trace, Retrace, lambda and discounted returns;
    experiment log, "Thread quarters"); ``narrow_short_tiles`` for kernels whose float32 ``[T, N]``
    tiles of 33-256 steps measured faster 8 environments wide than 16 up to 8191 environments,
    inputs from DRAM (Retrace, discounted returns; experiment log, "Short time-major sequences"), and
    whose float32 look-back tiles of longer sequences below 4096 environments measured faster 16
    environments wide than 32 (:func:`_longer_tiles_below_4096_envs`);
    ``sixteen_warp_rows`` for kernels whose float32 ``[N, T]`` rows of 2049-4096 steps, from 128 to
    511 environments, measured faster one per program on 16 warps than on 8 (GAE, V-trace;
    experiment log, "Sixteen-warp rows"); ``short_look_back_tiles`` for kernels whose float32
    ``[T, N]`` sequences of 129-256 steps from 4096 to 8192 environments measured faster in 64 x 32
    four-warp look-back tiles than held whole (Retrace; experiment log, "Look-back tiles for short
    sequences, and bf16 tiles"); ``one_column_triton_tiles`` for kernels whose float32 ``[T, N]``
    sequences of at least 65536 steps over 16 environments (one column of look-back tiles) measured
    slower in every thread-run tile tried (Retrace: :func:`_few_env_run_tile`); ``aligned_rows`` false when the rows of a ``[T, N]`` tile
    start a number of elements apart that is not a multiple of 16 (e.g. N = 8200): Triton then
    cannot vectorize the loads, and the pipelined walks below ran 3.7-7.2x slower than look-back
    tiles in float32 (H200, experiment log, "Deep walks"), so such problems take look-back tiles;
    ``explicit_short_tiles`` for kernels with an explicit-layout twin (all of them), whose short ``[T, N]``
    sequences then take :func:`_explicit_short_tile` where it gives one, on eight warps where
    ``eight_warp_short_tiles`` says, and in rows not 16 elements apart on the warps
    ``unaligned_whole_tiles`` gives (the caller says whether the twin can run: ``estimator_config``);
    ``unaligned_look_back_tile``, ``(block_t, block_n, num_warps, below)``: the look-back tile in
    thread runs of the kernel's float32 ``[T, N]`` sequences of more than 256 steps and 2^20 elements
    from 512 to ``below`` environments in rows not 16 elements apart (:func:`_unaligned_look_back_tile`);
    ``persistent_look_back_tile``, ``(block_t, block_n, num_warps, programs per multiprocessor, from,
    below)``: the persistent look-back tile (``LaunchConfig.persistent``) of the kernel's float32 ``[T, N]``
    sequences in 16-aligned rows where :func:`_persistent_look_back_tile` takes it; ``four_env_walks``,
    warps: for kernels whose 16-bit ``[T, N]`` walks up to ``FOUR_ENV_WALKS_UP_TO`` elements measured
    faster in 64 x 32 tiles on that many warps four environments per thread (lambda returns four,
    discounted returns two; experiment log, "The bf16 walks four environments per thread");
    ``async_walks``, ``((block_t, block_n, stages, from, to environments[, warps, four_envs]), ...)``
    (:class:`AsyncWalkRange`): for kernels with an
    async-walk twin (``kernels._async_walk``; the caller says whether it can run: ``estimator_config``), the ranges
    of environments whose 16-bit ``[T, N]`` walks take it, in which tile (:func:`_async_walk_tile`).

    * ``[N, T]``, T <= 256: short contiguous rows of a few environments, one warp per program, or
      one warp per environment in 128-step rows (whose steps then exchange values by shuffles);
      with ``wide_scan`` (16- and 32-bit floats), rows of 65-256 steps in 128-step tiles, one
      environment per program from 2^20 elements (T rounded up to a power of two); float32 with
      ``paired_rows``: two environments on one warp from ``paired_rows_from`` elements.
    * ``[N, T]``, longer: programs walk time without look-back while there are enough
      environments to fill the GPU, pipelined three chunks deep: 2 environments x 128 steps (256
      for 16-bit floats) from 2048 environments up (float32 with ``light_steps``: 1 environment x
      256 steps on two warps; 16-bit floats with ``light_steps``: from 4096; without
      ``pipelined_walks``, from 4096 environments: one environment per one-warp program,
      unpipelined; float32 with ``one_env_walks``, from 1024 to 4095 environments: one environment
      per one-warp program, four chunks deep; float32 with ``wide_scan``, from 2048: one environment
      per one-warp program, three chunks deep), one environment x 512 steps from 512; fewer
      environments walk long unpipelined chunks (one per program up to 4096 steps, on at most 8
      warps; float32 with ``sixteen_warp_rows``: 16), and few environments with long sequences use
      look-back tiles of one environment (2048 steps and 4 warps; 1024 and 2 for V-trace).
    * ``[T, N]``, T <= 256, 16- and 32-bit floats: tiles in thread runs holding the whole
      sequence: up to 16 steps 16 environments wide and 17-32 steps 8 wide, on one warp (each twice
      as wide from 16384 environments); 33-256 steps on four warps, 16 environments wide from 4096
      environments (float32 with ``narrow_short_tiles``: 8192), 8 below; 16-bit floats of 17-128
      steps twice as wide from 8192 environments; tiles of 65-128 steps 8 wide in Triton's layout
      instead of thread runs; tiles of 33-64 steps as :func:`_tiles_of_64_steps` says (most in
      Triton's layout). From ``SHORT_WALKS_FROM`` elements (T rounded up to at least 128; rows
      16-aligned), 33-256 steps are walked in 16 x 32 one-warp tiles, three chunks deep
      (experiment log, "Short time-major sequences"); float32 with ``short_look_back_tiles``: 129-256
      steps from 4096 environments to ``SHORT_WALKS_FROM`` elements in 64 x 32 look-back tiles on
      four warps, in thread runs. 64-bit floats: the whole sequence
      per program in tiles of ~1024 elements.
    * ``[T, N]``, longer, from 8192 environments (16-bit and 32-bit floats, ``aligned_rows``; float32
      without ``wide_scan`` or ``long_run_tiles`` from ``FLOAT32_WALKS_FROM``):
      programs walk time without look-back, pipelined three chunks deep, in tiles whose threads
      hold runs of consecutive steps (``thread_runs``): 64 x 64 on four warps, 32 x 32 on two with
      ``wide_scan`` and for float32 with ``successor_rows`` (experiment log, "Thread runs"); float32
      with ``wide_scan``: 64 x 64 on eight warps where those programs, one per multiprocessor,
      ``fills_waves``; 16-bit floats with ``wide_scan``: 64 x 32 on four warps while those programs,
      two per multiprocessor, take one wave (8192-8448 environments on the H200), four environments
      per thread (``env_runs_of_four``); 16-bit floats with ``four_env_walks`` up to
      ``FOUR_ENV_WALKS_UP_TO`` elements: 64 x 32 on that many warps, four environments per thread; float32
      with ``deep_walks``: four chunks deep, 64 x 64 on four warps (32 x 64 from 16384 environments;
      experiment log, "Deep walks"); 16-bit floats with ``long_run_tiles`` but not ``light_steps``: four
      chunks deep, 128 x 64 on four warps (experiment log, "Look-back tiles for short sequences, and
      bf16 tiles"); 16-bit floats with ``light_steps``: 128 x 32 on two warps (experiment log, "The
      light kernels' bf16 walks"). 16-bit floats with ``async_walks``, in their ranges of environments:
      the async-walk twin in the range's tile (:func:`_async_walk_tile`).
    * ``[T, N]``, longer, float32 with ``wide_scan`` from 2048 to 8191 environments, ``aligned_rows``
      (where its persistent look-back tiles do not take them): walks three chunks deep in thread
      runs, 64 x 16 on four warps (experiment log, "Look-back tiles for short sequences, and bf16
      tiles"), 32 x 32 from ``WIDE_WALKS_FROM`` environments.
    * ``[T, N]``, longer, float32 from 3840 to 4224 environments (``ONE_WAVE_WALKS``), ``aligned_rows``,
      not ``wide_scan``, ``long_run_tiles`` nor ``light_steps`` (GAE, Retrace, lambda and discounted
      returns) where :func:`_longer_tiles_below_4096_envs` gives none: walks three chunks deep in
      thread runs, 64 x 32 on four warps, one program per multiprocessor.
    * ``[T, N]``, longer, from 4096 environments with ``long_run_tiles`` (16-bit and 32-bit floats,
      ``aligned_rows``): walks four chunks deep in thread runs, 128 x 32 on four warps (128 x 16
      for float32 with ``light_steps``; experiment log, "Deep walks").
    * ``[T, N]``, longer, float32 from 512 environments in rows not 16 elements apart: the kernel's
      ``unaligned_look_back_tile`` where it has one.
    * ``[T, N]``, longer, float32 of 2^22 elements in 16-aligned rows, in the range of environments
      of the kernel's ``persistent_look_back_tile`` where it has one (GAE and discounted returns 512
      to 3839, V-trace 2048 to 3583): that tile.
    * ``[T, N]``, longer, float32 from 512 to 4095 environments, not V-trace: longer tiles where
      :func:`_longer_tiles_below_4096_envs` gives them (GAE, Retrace, discounted returns below 1024
      environments or up to 2^20 elements; the others up to 4095 environments).
    * ``[T, N]``, longer, from 512 environments (the rest): two-warp look-back tiles in thread runs
      for float32, 32 x 32 (64 x 32 with ``long_run_tiles``; not from 4096 environments with
      ``light_steps``; experiment log, "Thread runs"); 16-bit floats in 16-aligned rows where
      :func:`_half_float_look_back_tiles` gives them (two- and four-warp tiles in thread runs, four
      environments per thread for ``linear_scan``'s);
      otherwise small one-warp look-back tiles,
      16 x 64 from 2048 environments and 32 x 32 below (32 x 32 throughout with ``light_steps``,
      32 x 64 for their 16-bit floats). V-trace takes two-warp 16 x 32 tiles (float64 from 8192
      environments with ``aligned_rows``: a pipelined 32 x 16 walk). Fewer environments take long
      look-back tiles (16 environments wide, so they look back a window of tiles at a time:
      ``_scan``), in thread runs for 16- and 32-bit floats from 16 environments
      (:func:`_wide_scan_run_tile`, :func:`_few_env_run_tile`; the ``long_run_tiles`` kernels' 16-bit
      ones four environments per thread).
    * ``[T, N]`` tiles of reverse walks hold their steps latest first (``latest_first``).
    """
    explicit = (_explicit_short_tile(T, N, itemsize, aligned_rows, wide_scan, narrow_short_tiles, light_steps,
                                     eight_warp_short_tiles, unaligned_whole_tiles, successor_rows)
                if explicit_short_tiles and not time_contiguous else None)
    if explicit is not None:
        return explicit
    config = _block_shape(T, N, time_contiguous, wide_scan, itemsize, pipelined_walks, light_steps, successor_rows,
                          long_run_tiles, deep_walks, one_env_walks, paired_rows, narrow_short_tiles,
                          sixteen_warp_rows, short_look_back_tiles, one_column_triton_tiles, aligned_rows,
                          unaligned_look_back_tile, persistent_look_back_tile, four_env_walks, async_walks)
    return in_step_order(config, time_contiguous, latest_first)


def _explicit_short_tile(T: int, N: int, itemsize: int, aligned_rows: bool, wide_scan: bool,
                         narrow_short_tiles: bool, light_steps: bool,
                         eight_warp_short_tiles: tuple, unaligned_whole_tiles: tuple,
                         successor_rows: bool) -> Optional[LaunchConfig]:
    """A whole ``[T, N]`` sequence per four-warp tile in an explicit layout (``LaunchConfig.explicit_layout``)
    where that measured faster than the Triton kernels' tiles (H200, float32 and bf16, inputs from
    DRAM; experiment log, "Explicit layouts"): up to 32 steps two environments per thread (not 8
    steps below 128 environments); 33-256 steps in 16-aligned rows short of the walks
    (:func:`held_whole_before_the_walks`), four environments per thread from 2048 environments and two below (on
    four warps: two for 129-256 steps with ``narrow_short_tiles``; none for 129-256 steps with
    ``wide_scan``, whose tiles measured slower or spilled), and 16-bit floats of 65-256 steps eight from
    8192 environments (16-byte vectors, as float32's four; not ``wide_scan``; experiment log, "Eight
    environments per thread, the short tiles' edges"); in other rows two per thread at 33-64 steps, and with
    ``light_steps`` at 129-256 steps and at 65-128 from 2048 environments. ``None`` elsewhere.

    In 16-aligned rows, tiles that ``eight_warp_short_tiles`` lists take eight warps along time
    instead of four, half the steps per thread (V-trace, Retrace, discounted returns; GAE; lambda
    returns' float32 below 4096 environments; experiment log, "Eight-warp short tiles", and "Eight
    environments per thread, the short tiles' edges" for GAE from 4096 and 16-bit lambda returns): its entries are
    ``(itemsize, length, fewer environments than)``, the length T rounded up to a power of two, the
    bound ``None`` for any. So do float32 sequences of 129-255 steps not a multiple of 16 with
    ``light_steps``. Eight-warp tiles hold four environments per thread from 2048 environments and
    two below (16-bit floats' eight from 8192, as above), ``wide_scan`` and ``narrow_short_tiles`` alike.

    In rows not 16 elements apart, float32 sequences take tiles of two environments per thread where
    ``unaligned_whole_tiles`` has an entry for them (:func:`_unaligned_tile_warps`)."""
    t_pow2 = max(8, triton.next_power_of_2(T))
    listed = any((size, length) == (itemsize, t_pow2) and (below is None or N < below)
                 for size, length, below in eight_warp_short_tiles)
    partial_light_tile = light_steps and itemsize == 4 and t_pow2 == 256 and T % 16 != 0
    unaligned_warps = None if aligned_rows or itemsize != 4 else _unaligned_tile_warps(T, t_pow2, N,
                                                                                       unaligned_whole_tiles)
    eight_warps = (aligned_rows and (listed or partial_light_tile)) or unaligned_warps == 8
    if T > 256 or itemsize not in (2, 4) or (wide_scan and t_pow2 == 256 and not eight_warps):
        return None
    if t_pow2 <= 32:
        return explicit_tile(T, 2) if N >= 128 or t_pow2 > 8 else None
    if aligned_rows and held_whole_before_the_walks(N, t_pow2, itemsize, wide_scan, light_steps, successor_rows):
        wide = N >= 2048 and (eight_warps or not (narrow_short_tiles and t_pow2 == 256))
        sixteen_byte_runs = itemsize == 2 and t_pow2 >= 128 and N >= 8192 and not wide_scan
        return explicit_tile(T, 8 if sixteen_byte_runs else 4 if wide else 2, 8 if eight_warps else 4)
    if unaligned_warps:
        return explicit_tile(T, 2, unaligned_warps)
    unaligned = not aligned_rows and (t_pow2 == 64 or (light_steps and (t_pow2 == 256 or N >= 2048)))
    return explicit_tile(T, 2) if unaligned else None


def _unaligned_tile_warps(T: int, t_pow2: int, N: int, unaligned_whole_tiles: tuple) -> Optional[int]:
    """The warps of the explicit-layout tile, two environments per thread, that holds a float32 ``[T, N]``
    sequence in rows not 16 elements apart whole, or ``None`` (the Triton tiles): from the first entry
    ``(most steps, from this many environments, warps)`` of ``unaligned_whole_tiles`` whose tile length
    (its most steps rounded up to a power of two) is ``t_pow2``, T's, and that takes T steps and N environments.
    Measured over the Triton tiles on an H200: 129-256 steps on eight warps, GAE 1.60-3.32x and Retrace
    0.96-1.91x at any width, V-trace 1.33-2.10x from 5000 environments (experiment log, "Eight environments
    per thread, the short tiles' edges"); 65-128 steps, Retrace on eight warps 1.12-1.80x at any width;
    GAE's 65-90 steps on four warps from 4096 environments 1.11-1.80x (96-100 steps lost 0.97-0.98x from
    16390 environments; experiment log, "Successor values in rows not 16 elements apart, persistent
    look-back tiles")."""
    return next((warps for most, least, warps in unaligned_whole_tiles
                 if triton.next_power_of_2(most) == t_pow2 and T <= most and N >= least), None)


def held_whole_before_the_walks(N: int, t_pow2: int, itemsize: int, wide_scan: bool, light_steps: bool,
                                successor_rows: bool) -> bool:
    """Whether 16-aligned ``[T, N]`` sequences of 33-256 steps (T rounded up to ``t_pow2``) are held
    whole in explicit-layout tiles rather than walked: below ``SHORT_WALKS_FROM`` elements (as it
    counts them), twice that for 16-bit floats (half the bytes) and for ``light_steps`` kernels, whose
    whole-sequence tiles measured 1.07-1.77x faster than the walks up to there (H200; not
    ``wide_scan``: V-trace's 16-bit tiles lost to its walks there); float32 129-256 steps also at the
    bound (8192 environments), where the walks have only 256 one-warp programs (lambda and discounted
    returns, ``linear_scan`` 1.05-1.34x; not ``successor_rows``: GAE 0.94-1.07x, Retrace 1.00-1.04x,
    V-trace 0.81x). experiment log, "Eight environments per thread, the short tiles' edges"."""
    walks_from = SHORT_WALKS_FROM * (2 if light_steps or (itemsize == 2 and not wide_scan) else 1)
    elements = N * max(t_pow2, 128)
    at_bound = t_pow2 == 256 and itemsize == 4 and not (successor_rows or light_steps) and elements == walks_from
    return elements < walks_from or at_bound


def explicit_tile(T: int, envs_per_thread: int, num_warps: int = 4) -> LaunchConfig:
    """The ``LaunchConfig.explicit_layout`` tile holding a whole ``T``-step sequence (``block_t``: T
    rounded up to a power of two, at least 8) whose threads hold ``envs_per_thread`` environments."""
    block_t = max(8, triton.next_power_of_2(T))
    env_threads = 32 // _explicit_layout.time_threads(block_t, num_warps)
    return LaunchConfig(block_t, envs_per_thread * env_threads, num_warps, explicit_layout=True)


def in_step_order(config: LaunchConfig, time_contiguous: bool, latest_first: bool) -> LaunchConfig:
    """``config`` with its steps in the order the kernel's tiles hold them: ``[T, N]`` tiles of
    kernels with reverse walks (``latest_first``) latest first, the others in time order."""
    return replace(config, latest_first=True) if latest_first and not time_contiguous else config


def _block_shape(T: int, N: int, time_contiguous: bool, wide_scan: bool, itemsize: int, pipelined_walks: bool,
                 light_steps: bool, successor_rows: bool, long_run_tiles: bool, deep_walks: bool,
                 one_env_walks: bool, paired_rows: bool, narrow_short_tiles: bool, sixteen_warp_rows: bool,
                 short_look_back_tiles: bool, one_column_triton_tiles: bool, aligned_rows: bool,
                 unaligned_look_back_tile: Optional[tuple], persistent_look_back_tile: Optional[tuple],
                 four_env_walks: int, async_walks: tuple) -> LaunchConfig:
    """:func:`choose_config`'s block shape, before the order of a tile's rows."""
    t_pow2 = triton.next_power_of_2(max(T, 1))
    n_pow2 = triton.next_power_of_2(N)
    if INTERPRET:  # the interpreter's cost is per program and per chunk: use big tiles
        return LaunchConfig(min(128, t_pow2), min(64, n_pow2), lookback=True)
    if time_contiguous:
        if T <= 256:  # tiles of ~512 elements (~128 for V-trace), and at least ~256 programs
            if paired_rows and itemsize == 4 and t_pow2 >= 128 and N * t_pow2 >= paired_rows_from(wide_scan,
                                                                                                   successor_rows):
                return LaunchConfig(128, 2, num_warps=1)
            if wide_scan and itemsize <= 4 and t_pow2 >= 128:  # y_{t+1} by shuffles in 128-step tiles
                block_n = 1 if N * t_pow2 >= 2**20 else max(1, min(4, n_pow2 // 256))
                return LaunchConfig(128, block_n, num_warps=block_n)
            block_t = min(t_pow2, 64 if wide_scan else 128)
            block_n = max(1, min((128 if wide_scan else 512) // block_t, n_pow2 // 256))
            return LaunchConfig(block_t, block_n, num_warps=block_n if block_t == 128 else 1)
        if light_steps and itemsize == 4 and N >= 2048:
            return LaunchConfig(256, 1, num_warps=2, num_stages=3)
        if one_env_walks and itemsize == 4 and 1024 <= N < 4096:
            return LaunchConfig(128, 1, num_warps=1, num_stages=4)
        if wide_scan and itemsize == 4 and N >= 2048:
            return LaunchConfig(128, 1, num_warps=1, num_stages=3)
        if N >= (4096 if light_steps else 2048):
            block_t = max(SHUFFLE_BLOCK_TS.get(itemsize, (128,)))  # the longest tile that shuffles
            if pipelined_walks or N < 4096:
                return LaunchConfig(block_t, 2, num_warps=2, num_stages=3)
            return LaunchConfig(block_t, 1, num_warps=1)
        if N >= 512:
            return LaunchConfig(min(t_pow2, 512), 1, num_warps=4, num_stages=3)
        if N >= 128 or T <= 2048:
            block_t = min(t_pow2, 4096)
            most_warps = 16 if sixteen_warp_rows and itemsize == 4 else 8
            return LaunchConfig(block_t, 1, num_warps=min(most_warps, block_t // 256))
        return LaunchConfig(1024, 1, num_warps=2, lookback=True) if wide_scan else LaunchConfig(2048, 1, 4, True)
    if T <= 256 and itemsize <= 4:
        if short_look_back_tiles and itemsize == 4 and t_pow2 == 256 and 4096 <= N and N * t_pow2 <= SHORT_WALKS_FROM:
            return LaunchConfig(64, 32, num_warps=4, lookback=True, thread_runs=True)
        if t_pow2 >= 64 and aligned_rows and N * max(t_pow2, 128) >= SHORT_WALKS_FROM:
            return LaunchConfig(16, 32, num_warps=1, num_stages=3, thread_runs=True)
        if t_pow2 >= 64:
            block_n, warps = (16 if N >= (8192 if narrow_short_tiles and itemsize == 4 else 4096) else 8), 4
        else:
            block_n, warps = (16 if t_pow2 <= 16 else 8) * (2 if N >= 16384 else 1), 1
        if itemsize == 2 and 32 <= t_pow2 <= 128 and N >= 8192:
            block_n *= 2  # as many bytes per tile as float32's
        if t_pow2 == 64:
            block_n, in_runs = _tiles_of_64_steps(N, itemsize, block_n, wide_scan, light_steps, long_run_tiles)
        else:
            in_runs = not (t_pow2 == 128 and block_n == 8)  # there Triton's layout measured faster (experiment log)
        return LaunchConfig(t_pow2, block_n, num_warps=warps, thread_runs=in_runs)
    if T <= 32:
        return LaunchConfig(t_pow2, 32, num_warps=1)
    if T <= 256:
        return LaunchConfig(t_pow2, max(8, 1024 // t_pow2), num_warps=4)
    walks_from = FLOAT32_WALKS_FROM if itemsize == 4 and not (wide_scan or long_run_tiles) else 8192
    if N >= walks_from and itemsize <= 4 and aligned_rows:
        async_walk = _async_walk_tile(N, itemsize, async_walks)
        if async_walk is not None:
            return async_walk
        narrow = half_empty_second_wave(triton.cdiv(N, 64))
        if deep_walks and itemsize == 4:
            if narrow:
                return LaunchConfig(64, 32, num_warps=4, num_stages=3, thread_runs=True)
            if light_steps and LIGHT_TWO_WARP_WALKS[0] < N < LIGHT_TWO_WARP_WALKS[1]:
                return LaunchConfig(32, 32, num_warps=2, num_stages=3, thread_runs=True)
            return LaunchConfig(32 if N >= 16384 else 64, 64, num_warps=4, num_stages=4, thread_runs=True)
        if wide_scan and itemsize == 4 and fills_waves(triton.cdiv(N, 64), 1):
            return LaunchConfig(64, 64, num_warps=8, num_stages=3, thread_runs=True)
        if wide_scan and itemsize == 2 and triton.cdiv(N, 32) <= 2 * MULTIPROCESSORS:
            return LaunchConfig(64, 32, num_warps=4, num_stages=3, thread_runs=True, env_runs_of_four=True)
        if wide_scan or (successor_rows and itemsize == 4):
            return LaunchConfig(32, 32, num_warps=2, num_stages=3, thread_runs=True)
        if light_steps and itemsize == 2:
            return LaunchConfig(128, 32, num_warps=2, num_stages=3, thread_runs=True)
        if long_run_tiles and itemsize == 2:
            return LaunchConfig(128, 64, num_warps=4, num_stages=4, thread_runs=True)
        if four_env_walks and itemsize == 2 and N * T <= FOUR_ENV_WALKS_UP_TO:
            return LaunchConfig(64, 32, num_warps=four_env_walks, num_stages=3, thread_runs=True,
                                env_runs_of_four=True)
        if narrow and not long_run_tiles and (itemsize == 4 or successor_rows):
            return LaunchConfig(64, 32, num_warps=4 if itemsize == 4 else 2, num_stages=3, thread_runs=True)
        return LaunchConfig(64, 64, num_warps=4, num_stages=3, thread_runs=True)
    run_tile = _below_16_env_run_tile(T, N, itemsize, wide_scan, long_run_tiles) or (
        _wide_scan_run_tile(T, N, itemsize, aligned_rows) if wide_scan else
        _few_env_run_tile(T, N, itemsize, aligned_rows, successor_rows, long_run_tiles, one_column_triton_tiles))
    if run_tile is not None:
        return run_tile
    if N >= 512:
        unaligned = _unaligned_look_back_tile(N * t_pow2, N, itemsize, aligned_rows, unaligned_look_back_tile)
        if unaligned is not None:
            return unaligned
        persistent = _persistent_look_back_tile(N * t_pow2, N, itemsize, aligned_rows, persistent_look_back_tile)
        if persistent is not None:
            return persistent
        if itemsize == 4 and N < 4096 and not wide_scan:
            longer = _longer_tiles_below_4096_envs(T, N, successor_rows, narrow_short_tiles, long_run_tiles,
                                                   light_steps, aligned_rows)
            if longer is not None:
                return longer
        one_wave = ONE_WAVE_WALKS[0] <= N <= ONE_WAVE_WALKS[1]
        if one_wave and itemsize == 4 and aligned_rows and not (wide_scan or long_run_tiles or light_steps):
            return LaunchConfig(64, 32, num_warps=4, num_stages=3, thread_runs=True)
        if itemsize == 2 and aligned_rows:
            half = _half_float_look_back_tiles(N, wide_scan, successor_rows, long_run_tiles, light_steps)
            if half is not None:
                return half
        if wide_scan and itemsize == 4 and N >= 2048 and aligned_rows:
            if N >= WIDE_WALKS_FROM:
                return LaunchConfig(32, 32, num_warps=4, num_stages=3, thread_runs=True)
            return LaunchConfig(64, 16, num_warps=4, num_stages=3, thread_runs=True)
        if wide_scan:
            walk = N >= 8192 and aligned_rows
            return LaunchConfig(32, 16, num_warps=2, num_stages=3) if walk else LaunchConfig(16, 32, 2, True)
        if long_run_tiles and N >= 4096 and itemsize <= 4 and aligned_rows:
            block_n = 16 if light_steps and itemsize == 4 else 32
            return LaunchConfig(128, block_n, num_warps=4, num_stages=4, thread_runs=True)
        if itemsize == 4 and not (light_steps and N >= 4096):
            return LaunchConfig(64 if long_run_tiles else 32, 32, num_warps=2, lookback=True, thread_runs=True)
        if light_steps:
            return LaunchConfig(32, 64 if itemsize == 2 else 32, num_warps=1, lookback=True)
        if N >= 2048:
            return LaunchConfig(16, 64, num_warps=1, lookback=True)
        return LaunchConfig(32, 32, num_warps=1, lookback=True)
    block_n = min(16, n_pow2)
    if wide_scan:
        return LaunchConfig(256, block_n, 8, True) if T >= 65536 else LaunchConfig(128, block_n, 2, True)
    return LaunchConfig(512 if T >= 65536 else 256, block_n, num_warps=4, lookback=True)


class AsyncWalkRange(NamedTuple):
    """One range of an estimator's ``ASYNC_WALKS``: 16-bit ``[T, N]`` walks of ``first`` to ``last``
    environments take the async-walk twin in ``block_t`` x ``block_n`` tiles on ``num_warps`` warps,
    ``stages`` chunks in shared memory, each thread one 16-byte vector of environments or, with
    ``four_envs``, four of them (``LaunchConfig.env_runs_of_four``). Written as a plain tuple in that
    order, the last two optional."""

    block_t: int
    block_n: int
    stages: int
    first: int
    last: int
    num_warps: int = 4
    four_envs: bool = False

    def config(self) -> LaunchConfig:
        return LaunchConfig(self.block_t, self.block_n, num_warps=self.num_warps, num_stages=self.stages,
                            env_runs_of_four=self.four_envs, async_walk=True)


def async_walk_ranges(async_walks: tuple) -> list:
    """A kernel's ``ASYNC_WALKS`` as :class:`AsyncWalkRange` s."""
    return [AsyncWalkRange(*rule) for rule in async_walks]


def _async_walk_tile(N: int, itemsize: int, async_walks: tuple) -> Optional[LaunchConfig]:
    """The async-walk tile (``LaunchConfig.async_walk``) of a kernel's 16-bit ``[T, N]`` walk where one of
    its ``async_walks`` ranges (:class:`AsyncWalkRange`) holds ``N``. The ranges follow the programs per
    multiprocessor a depth leaves room for (GAE's buffers take 32 KB a stage in 64 x 64 tiles: four
    stages hold one program per multiprocessor, two stages three) and how many waves the programs fill,
    but which tile and depth run fast is measured (experiment log, "Walks fed through shared memory", "Async
    walks for lambda returns, discounted returns and Retrace", "V-trace's async walks")."""
    if itemsize != 2:
        return None
    for rule in async_walk_ranges(async_walks):
        if rule.first <= N <= rule.last:
            return rule.config()
    return None


def _below_16_env_run_tile(T: int, N: int, itemsize: int, wide_scan: bool,
                           long_run_tiles: bool) -> Optional[LaunchConfig]:
    """Look-back tiles in thread runs for ``[T, N]`` sequences of at least 65536 steps below 16
    environments, 16- and 32-bit floats:

    * one environment: 1024 x 1 on four warps, every kernel;
    * eight: 1024 x 8 on eight warps, every kernel;
    * 9-15: 16 wide on four warps, every kernel but V-trace (``wide_scan``): 512 steps for the
      ``long_run_tiles`` kernels (1.09-1.18x; 256 ran 0.95-1.18x), else 256; GAE's 512 x 16 tiles
      in Triton's layout, in these rows not 16 elements apart, had taken 10x longer;
    * V-trace at 2-4 environments: 512 steps on four warps.

    H200, inputs from DRAM, against the tiles before (256 or 512 steps of ``next_power_of_2(N)`` on
    four warps in Triton's layout, V-trace 256 on eight): 1.55x over the sweep's 80 cells
    (1.03-11.35x), 1.64x over 47 held-out cells (1.02-11.26x; GAE 12 x 120000 314.5 -> 28.0 us);
    experiment log, "A wider look-back window for one column, look-back tiles below 16 environments".
    ``None`` elsewhere: fewer steps, 5-7 environments (0.62-0.80x with 1024 x 8 at 6 x 30000), the
    other kernels at 2-4 (0.91-1.49x with 1024 steps), V-trace at 9-15 (0.86-1.61x), 64-bit floats."""
    if itemsize not in (2, 4) or N >= 16 or T < 65536:
        return None
    if N == 1:
        return LaunchConfig(1024, 1, num_warps=4, lookback=True, thread_runs=True)
    if N == 8:
        return LaunchConfig(1024, 8, num_warps=8, lookback=True, thread_runs=True)
    if N > 8 and not wide_scan:
        return LaunchConfig(512 if long_run_tiles else 256, 16, num_warps=4, lookback=True, thread_runs=True)
    if N <= 4 and wide_scan:
        return LaunchConfig(512, triton.next_power_of_2(N), num_warps=4, lookback=True, thread_runs=True)
    return None


def _wide_scan_run_tile(T: int, N: int, itemsize: int, aligned_rows: bool) -> Optional[LaunchConfig]:
    """V-trace's (``wide_scan``) look-back tiles in thread runs for ``[T, N]`` sequences of more than
    256 steps where it does not walk, their successor values from the runs (``successors_from_runs``):

    * 16- and 32-bit floats from 16 to 511 environments: 16 wide on four warps, 256 steps where the
      tiles make one column (at most 16 environments), 128 where they make more;
    * in 16-aligned rows 128 x 32 on four warps: float32 from 257 steps and 512 to 2047 environments
      (walks from there), 16-bit floats from 513 steps and 512 to 8191 environments (from 2048:
      1.15-1.43x over two-warp 16 x 32 tiles, experiment log, "Look-back tiles from 512 to 8191
      environments").

    H200, inputs from DRAM, against the tiles before (two-warp 16 x 32 and 128 x 16 in Triton's
    layout, 256 x 16 on eight from 65536 steps, bf16 64 x 16 on two): 1.04-2.51x on 30 cells, bf16
    0.93x at 300 x 1024 (experiment log, "V-trace's look-back tiles in thread runs, captured calls"). ``None``
    elsewhere: 64-bit floats, fewer than 16 environments, and rows not 16 elements apart from 512
    environments, where 256 x 16 tiles ran 0.58-0.97x (float32's: :func:`_unaligned_look_back_tile`)."""
    if itemsize not in (2, 4) or N < 16:
        return None
    if N < 512:
        return LaunchConfig(256 if N <= 16 else 128, 16, num_warps=4, lookback=True, thread_runs=True)
    if N < (2048 if itemsize == 4 else 8192) and aligned_rows and T > (256 if itemsize == 4 else 512):
        return LaunchConfig(128, 32, num_warps=4, lookback=True, thread_runs=True)
    return None


def _few_env_run_tile(T: int, N: int, itemsize: int, aligned_rows: bool, successor_rows: bool,
                      long_run_tiles: bool, one_column_triton_tiles: bool) -> Optional[LaunchConfig]:
    """The look-back tiles in thread runs, 16 environments wide, of the kernels without ``wide_scan``
    (V-trace's: :func:`_wide_scan_run_tile`) for ``[T, N]`` sequences of more than 256 steps from 16 to
    511 environments, 16- and 32-bit floats:

    * one column of tiles (16 environments) from 65536 steps: 1024 steps on eight warps, fewer tiles to
      look back over; not float32 with ``one_column_triton_tiles`` (Retrace: 0.82-0.89x in every tile tried);
    * else four warps, as many steps as measured best for each kernel: ``long_run_tiles``
      (``linear_scan``, eligibility traces, episodic sums) 512 from 4096 steps in 16-aligned rows, else
      256;
      ``successor_rows`` (GAE, Retrace) float32 128, 16-bit floats 256 in 16-aligned rows and 128 in
      others; lambda and discounted returns 256.

    H200, inputs from DRAM, against 256 x 16 (512 x 16 from 65536 steps) four-warp tiles in Triton's
    layout: 1.28x over the sweep's 161 cells (0.96-9.24x), 1.24x over 110 held-out cells (0.97-2.00x;
    16 x 2^20 GAE 192.0 -> 147.1 us); experiment log, "The other kernels' look-back tiles in thread runs".
    The ``long_run_tiles`` kernels' 16-bit tiles hold four environments per thread (1.03-1.11x at 16
    and 64 environments; experiment log, "The bf16 walks four environments per thread").
    ``None`` for 64-bit floats and fewer than 16 environments."""
    if itemsize not in (2, 4) or not 16 <= N < 512:
        return None
    four = long_run_tiles and itemsize == 2
    if N <= 16 and T >= 65536:
        if itemsize == 4 and one_column_triton_tiles:
            return None
        return LaunchConfig(1024, 16, num_warps=8, lookback=True, thread_runs=True, env_runs_of_four=four)
    if long_run_tiles:
        steps = 512 if aligned_rows and T >= 4096 else 256
    elif successor_rows:
        steps = 256 if itemsize == 2 and aligned_rows else 128
    else:
        steps = 256
    return LaunchConfig(steps, 16, num_warps=4, lookback=True, thread_runs=True, env_runs_of_four=four)


def fills_waves(programs: int, per_multiprocessor: int) -> bool:
    """Whether ``programs`` programs, ``per_multiprocessor`` at a time on each of the H200's
    ``MULTIPROCESSORS``, fill at least ``FULL_WAVES`` of the waves they take."""
    slots = MULTIPROCESSORS * per_multiprocessor
    return programs >= FULL_WAVES * slots * triton.cdiv(programs, slots)


def half_empty_second_wave(programs: int) -> bool:
    """Whether ``programs`` programs, one at a time on each of the H200's ``MULTIPROCESSORS``, take a
    second wave and leave at least half of it empty.

    Where the ``[T, N]`` walks' 64-environment programs from 8192 environments do (8449-12672
    environments), float32 GAE, lambda and discounted returns and the light kernels walk 64 x 32 on
    four warps, bf16 GAE and Retrace on two: 1.08-1.34x at 8704-12288 environments on the H200; at
    13312 (a second wave 58% full) 0.91-1.03x, at 20480 (a third 42% full) 0.93-1.04x (experiment log,
    "Walks that fill their waves")."""
    return MULTIPROCESSORS < programs <= MULTIPROCESSORS * 3 // 2


def _unaligned_look_back_tile(elements: int, N: int, itemsize: int, aligned_rows: bool,
                              tile: Optional[tuple]) -> Optional[LaunchConfig]:
    """The kernel's ``tile`` (``UNALIGNED_LOOK_BACK_TILE``: ``(block_t, block_n, num_warps, below)``)
    as a look-back tile in thread runs, for float32 ``[T, N]`` sequences of more than 256 steps and
    2^20 ``elements`` (N times T rounded up to a power of two) in rows not 16 elements apart, from 512
    environments to ``below``; ``None`` elsewhere or without one. In such rows Triton loads no
    vectors, and the tiles that won in 16-aligned rows lost there. H200, inputs from DRAM, against the
    tiles before (experiment log, "Look-back tiles from 512 to 8191 environments"; sweep at 600 and
    1000 environments, held out at 520, 900, 1800 and 2600):

    * V-trace 128 x 16 below 1024 environments: 1.09-1.24x over its two-warp 16 x 32 tiles (0.91x
      at 2600);
    * Retrace 128 x 32: 1.01-1.10x over 128 x 16 and two-warp 32 x 32;
    * lambda returns 128 x 32: 1.00-1.17x over two-warp 32 x 32;
    * discounted returns 256 x 16: 1.11-1.54x (7000 x 520 50.8 -> 34.7 us);
    * eligibility traces and episodic sums 512 x 32 on eight warps: 1.07-1.20x over 128 x 32;
    * ``linear_scan`` 128 x 16 below 1024 environments: 1.02-1.11x (0.95x at 2600);
    * GAE none: its 128 x 16 tiles won."""
    if tile is None or aligned_rows or itemsize != 4 or elements <= 2**20:
        return None
    block_t, block_n, warps, below = tile
    if not 512 <= N < below:
        return None
    return LaunchConfig(block_t, block_n, num_warps=warps, lookback=True, thread_runs=True)


def _tiles_of_64_steps(N: int, itemsize: int, block_n: int, wide_scan: bool, light_steps: bool,
                       long_run_tiles: bool) -> tuple[int, bool]:
    """Width and layout (``thread_runs`` or Triton's) of the four-warp ``[T, N]`` tiles holding
    33-64 steps, given ``block_n``, the width of the tiles of 65-256 steps (H200, inputs from DRAM;
    experiment log, "Tiles of 33-64 steps")."""
    if wide_scan:  # V-trace
        return block_n, block_n == 32
    if not long_run_tiles:  # GAE, Retrace, lambda and discounted returns
        return (16 if N >= 8192 else 8), False
    if itemsize == 2 and light_steps and N < 8192:  # eligibility traces and episodic sums
        return 8, False
    if itemsize == 2 and not light_steps and N >= 2048:  # linear_scan
        return 32, True
    return block_n, True


def _persistent_look_back_tile(elements: int, N: int, itemsize: int, aligned_rows: bool,
                               tile: Optional[tuple]) -> Optional[LaunchConfig]:
    """The kernel's ``tile`` (``PERSISTENT_LOOK_BACK_TILE``: ``(block_t, block_n, num_warps, programs
    per multiprocessor, from, below)``) as a persistent look-back tile in thread runs
    (``LaunchConfig.persistent``), for float32 ``[T, N]`` sequences of more than 256 steps and at
    least 2^22 ``elements`` (N times T rounded up to a power of two) in 16-aligned rows from ``from``
    to ``below`` environments; ``None`` elsewhere or without one. A program loads its next tile
    while it scans and looks back for the current one, so the tile's load from DRAM no longer waits
    behind its look-back (H200, inputs from DRAM, against the tiles without it; experiment log,
    "Hiding the look-back tiles' load latency", "Persistent look-back tiles for V-trace, Retrace and
    discounted returns"):

    * GAE, 128 x 32 on four warps, two per multiprocessor, 512 to 3839 environments (where
      ``ONE_WAVE_WALKS`` start): 1.04-1.16x on five swept cells, 1.01-1.12x on eight held out;
    * discounted returns, the same: 1.03-1.12x swept, 1.01-1.10x held out;
    * V-trace, 64 x 32 on four warps, two per multiprocessor, 2048 to 3583 environments, where it
      walks: 1.05-1.37x on eight cells; 0.89-1.01x from 3584, 0.96-1.11x from 512 to 2047 (its
      128 x 32 look-back tiles stay).

    Retrace and lambda returns have no twin: none of their tiles won (0.87-0.97x, 0.94-1.00x)."""
    if tile is None or not aligned_rows or itemsize != 4 or elements < 2**22:
        return None
    block_t, block_n, warps, per_multiprocessor, from_n, below_n = tile
    if not from_n <= N < below_n:
        return None
    return LaunchConfig(block_t, block_n, num_warps=warps, lookback=True, thread_runs=True,
                        persistent=per_multiprocessor)


def _longer_tiles_below_4096_envs(T: int, N: int, successor_rows: bool, narrow_short_tiles: bool,
                                  long_run_tiles: bool, light_steps: bool,
                                  aligned_rows: bool) -> Optional[LaunchConfig]:
    """Float32 ``[T, N]`` block shape for sequences of more than 256 steps from 512 to 4095
    environments where tiles longer than the two-warp 32-step look-back tiles measured faster (H200,
    inputs from DRAM; experiment log, "Longer tiles below 4096 environments"); ``None`` where those
    stay. Not called for V-trace, whose longer tiles lost where N or T is not a power of two.
    ``elements`` is N times T rounded up to a power of two.

    * GAE, Retrace, discounted returns (``successor_rows`` or ``narrow_short_tiles``): 128 x 16
      look-back tiles on four warps below 1024 environments or up to 2^20 elements.
    * The others: sequences of up to 1024 steps and 2^20 elements whole, one program per 8
      environments on 8 warps (with ``light_steps`` only in 16-aligned rows); else look-back tiles,
      32 wide on four warps with ``long_run_tiles`` (``linear_scan``, eligibility traces, episodic
      sums), 256 steps in 16-aligned rows (1.01-1.07x over 128, experiment log, "Look-back tiles from
      512 to 8191 environments") and 128 in others, 256 x 32 on eight for lambda returns in
      16-aligned rows.

    Every tile holds its steps in thread runs."""
    t_pow2 = triton.next_power_of_2(T)
    elements = N * t_pow2
    if successor_rows or narrow_short_tiles:
        if N < 1024 or elements <= 2**20:
            return LaunchConfig(128, 16, num_warps=4, lookback=True, thread_runs=True)
        return None
    if t_pow2 <= 1024 and elements <= 2**20 and (aligned_rows or not light_steps):
        return LaunchConfig(t_pow2, 8, num_warps=8, thread_runs=True)
    if long_run_tiles:
        return LaunchConfig(256 if aligned_rows else 128, 32, num_warps=4, lookback=True, thread_runs=True)
    return LaunchConfig(256, 32, num_warps=8, lookback=True, thread_runs=True) if aligned_rows else None


def _half_float_look_back_tiles(N: int, wide_scan: bool, successor_rows: bool,
                                long_run_tiles: bool, light_steps: bool) -> Optional[LaunchConfig]:
    """16-bit float ``[T, N]`` block shape for sequences of more than 256 steps from 512
    environments in 16-aligned rows, below the walks, where look-back tiles in thread runs of about
    float32's bytes measured faster than the one-warp 16- and 32-step tiles (H200, inputs from
    DRAM; experiment log, "Look-back tiles for short sequences, and bf16 tiles" and "Look-back tiles
    from 512 to 8191 environments"); ``None`` where those stay.

    * ``long_run_tiles`` (``linear_scan``, eligibility traces, episodic sums): 256 x 32 on four
      warps below 4096 environments (walks from there; 0.99-1.25x over 64 x 64 on two), four
      environments per thread without ``light_steps`` (``linear_scan``: 1.05-1.07x; experiment log, "The
      bf16 walks four environments per thread").
    * V-trace (``wide_scan``), up to 512 steps: 64 x 16 on two warps below 2048 environments (its
      longer sequences: :func:`_wide_scan_run_tile`).
    * GAE and Retrace (``successor_rows``): 128 x 32 on four warps below 4096 environments (from
      2048: 1.02-1.20x over one-warp 16 x 64 tiles; 0.92-0.96x at 7168).
    * Lambda and discounted returns: 128 x 32 on four warps (walks from 8192 environments)."""
    if long_run_tiles:
        return (LaunchConfig(256, 32, num_warps=4, lookback=True, thread_runs=True, env_runs_of_four=not light_steps)
                if N < 4096 else None)
    if wide_scan:
        return LaunchConfig(64, 16, num_warps=2, lookback=True, thread_runs=True) if N < 2048 else None
    if successor_rows and N >= 4096:
        return None
    return LaunchConfig(128, 32, num_warps=4, lookback=True, thread_runs=True)


def paired_rows_from(wide_scan: bool, successor_rows: bool) -> int:
    """Elements (N times T rounded up to a power of two) from which ``paired_rows`` kernels take
    short float32 ``[N, T]`` rows two environments per one-warp program: each thread then holds 8
    steps of two rows, more independent work per warp where there are enough rows to fill the chip
    (H200, experiment log, "Thread quarters"). Sooner the more work a step carries: V-trace (four
    environments on four warps before: 4096 x 128 4.2 -> 3.9 us, 8192 x 128 7.3 -> 5.8), kernels
    that load each step's successor, then the others (32768 x 128: discounted returns 16.7 -> 15.4)."""
    return 2**19 if wide_scan else 2**21 if successor_rows else 2**22


def time_threads(config: LaunchConfig, itemsize: int) -> int:
    """How many threads hold a ``[T, N]`` tile's rows: the lanes and warps along time of the blocked
    layout Triton gives it (16-byte vectors of ``16 // itemsize`` environments per thread, at most 4
    with ``env_runs_of_four``, lanes along environments first, then along time; warps likewise). Each
    thread holds every ``time_threads``-th row, so with rows in thread runs
    (``_scan.thread_run_position``) it holds ``block_t // time_threads`` consecutive steps."""
    vector = min(16 // itemsize, 4) if config.env_runs_of_four else 16 // itemsize
    per_thread = max(1, min(vector, config.block_n, config.block_t * config.block_n // (32 * config.num_warps)))
    lanes_n = min(32, config.block_n // per_thread)
    warps_n = max(1, min(config.num_warps, config.block_n // (per_thread * lanes_n)))
    return min(config.block_t, 32 // lanes_n * (config.num_warps // warps_n))


def shuffles_time(config: LaunchConfig, time_contiguous: bool, compute_dtype: torch.dtype, itemsize: int) -> bool:
    """Whether the kernel moves values between a tile's time steps by warp shuffles (``SHUFFLE_TIME``
    in ``_scan``): only where the tile's time axis lies in one warp (``SHUFFLE_BLOCK_TS`` steps, and
    no more warps than environments), for float32 accumulation. Measured on an H200 at 8192 x 4096
    ``[N, T]``: GAE 189 -> 169 us; with time across warps or across the threads of ``[T, N]`` tiles
    the shuffles lose (V-trace 4096 x 128 in 128 x 1 tiles on two warps: 10.3 us, on one: 5.6)."""
    return (time_contiguous and compute_dtype == torch.float32
            and config.block_t in SHUFFLE_BLOCK_TS.get(itemsize, ()) and config.num_warps <= config.block_n)


@lru_cache(maxsize=None)
def kernel_traits(estimator: str, form: Optional[str] = None) -> dict:
    """``choose_config``'s keyword arguments that describe ``estimator``'s kernel: its module's
    ``WIDE_SCAN`` (default false), ``PIPELINED_WALKS`` (default true), ``LIGHT_STEPS``,
    ``LATEST_FIRST``, ``SUCCESSOR_ROWS``, ``LONG_RUN_TILES``, ``DEEP_WALKS``, ``ONE_ENV_WALKS``,
    ``PAIRED_ROWS``, ``NARROW_SHORT_TILES``, ``SIXTEEN_WARP_ROWS``, ``SHORT_LOOK_BACK_TILES`` and
    ``ONE_COLUMN_TRITON_TILES`` (default false); ``FOUR_ENV_WALKS`` (default 0);
    ``EIGHT_WARP_SHORT_TILES``, ``UNALIGNED_WHOLE_TILES``, ``UNALIGNED_LOOK_BACK_TILE`` and
    ``PERSISTENT_LOOK_BACK_TILE`` (default none); ``ASYNC_WALKS`` (default none); ``explicit_short_tiles`` when its
    kernel ``_<estimator>_kernel`` has an explicit-layout twin (``_explicit_layout.twin_of``).
    ``form`` names one of the module's ``FORMS``: overrides of those traits for a form of its kernel that
    some calls launch (V-trace's that stores ``vs - V`` as ``pg_adv``); ``None`` means its ``DEFAULT_FORM``,
    the form a call with the default arguments launches (a module without forms: its traits as they are).
    Not to be mutated (cached)."""
    module = importlib.import_module(f"kernels.{estimator}")
    form = form or getattr(module, "DEFAULT_FORM", None)
    return {**_module_traits(module, estimator), **(module.FORMS[form] if form else {})}


def _module_traits(module, estimator: str) -> dict:
    """:func:`kernel_traits` from the module's own attributes."""
    return {"wide_scan": getattr(module, "WIDE_SCAN", False),
            "pipelined_walks": getattr(module, "PIPELINED_WALKS", True),
            "light_steps": getattr(module, "LIGHT_STEPS", False),
            "latest_first": getattr(module, "LATEST_FIRST", False),
            "successor_rows": getattr(module, "SUCCESSOR_ROWS", False),
            "long_run_tiles": getattr(module, "LONG_RUN_TILES", False),
            "deep_walks": getattr(module, "DEEP_WALKS", False),
            "one_env_walks": getattr(module, "ONE_ENV_WALKS", False),
            "paired_rows": getattr(module, "PAIRED_ROWS", False),
            "narrow_short_tiles": getattr(module, "NARROW_SHORT_TILES", False),
            "sixteen_warp_rows": getattr(module, "SIXTEEN_WARP_ROWS", False),
            "short_look_back_tiles": getattr(module, "SHORT_LOOK_BACK_TILES", False),
            "one_column_triton_tiles": getattr(module, "ONE_COLUMN_TRITON_TILES", False),
            "eight_warp_short_tiles": getattr(module, "EIGHT_WARP_SHORT_TILES", ()),
            "unaligned_whole_tiles": getattr(module, "UNALIGNED_WHOLE_TILES", ()),
            "unaligned_look_back_tile": getattr(module, "UNALIGNED_LOOK_BACK_TILE", None),
            "persistent_look_back_tile": getattr(module, "PERSISTENT_LOOK_BACK_TILE", None),
            "four_env_walks": getattr(module, "FOUR_ENV_WALKS", 0),
            "async_walks": getattr(module, "ASYNC_WALKS", ()),
            "explicit_short_tiles": getattr(module, f"_{estimator}_kernel", None) in _explicit_layout.TWINS}


def time_is_contiguous(stride_t: int, N: int) -> bool:
    """Whether a launch whose first input has time stride ``stride_t`` reads ``[N, T]`` storage (time the
    stride-1 axis; one environment counts as ``[T, N]``)."""
    return stride_t == 1 and N > 1


def rows_are_aligned(row_stride: int) -> bool:
    """Whether a tile's rows start a multiple of 16 elements apart (``choose_config``'s
    ``aligned_rows``): Triton specializes integer arguments divisible by 16, and only then knows it
    may load a row's elements as vectors."""
    return row_stride % 16 == 0


def estimator_config(estimator: str, T: int, N: int, time_contiguous: bool, itemsize: int,
                     aligned_rows: bool = True, async_walks: bool = True, form: Optional[str] = None) -> LaunchConfig:
    """The block shape ``kernels.<estimator>`` launches with ``config=None``: :func:`choose_config`
    with the :func:`kernel_traits` of its module in ``form`` (``None``: a call with the default
    arguments; the benchmark reports the same), explicit layouts and async walks only where Gluon kernels
    run (``EXPLICIT_LAYOUTS``); ``launch`` derives ``aligned_rows`` from the first input's row stride, and
    asks again without ``async_walks`` for inputs the async walk cannot copy (:func:`async_walk_misfit`)."""
    traits = kernel_traits(estimator, form)
    return choose_config(T, N, time_contiguous, itemsize=itemsize, aligned_rows=aligned_rows,
                         **dict(traits, explicit_short_tiles=traits["explicit_short_tiles"] and EXPLICIT_LAYOUTS,
                                async_walks=traits["async_walks"] if EXPLICIT_LAYOUTS and async_walks else ()))


def launch(kernel, batch, config: Optional[LaunchConfig], tensors: tuple, coefficients: tuple,
           form: Optional[str] = None, **constexprs) -> None:
    """Launch an estimator kernel: its tensor arguments, the look-back workspace, sizes, coefficients.

    ``config=None`` takes the :func:`estimator_config` of the module that defines ``kernel``, in the
    kernel's ``form`` (:func:`kernel_traits`);
    ``tensors[:3]`` is the first input's ``(tensor, stride_t, stride_n)``, which says whether time
    is contiguous and whether a tile's rows start a multiple of 16 elements apart (``aligned_rows``).

    Every fused kernel takes ``(*tensors, ws, flags, T, N, *coefficients)`` followed by its
    constexprs and ``ACC``, ``BLOCK_T``, ``BLOCK_N``, ``LOOKBACK``, ``NUM_STAGES``, ``SHUFFLE_TIME``,
    ``LATEST_FIRST``, ``TIME_THREADS``; kernels that declare ``ENV_RUNS_OF_FOUR`` (the Triton kernels;
    ``LaunchConfig.env_runs_of_four``) or ``RUN_SUCCESSORS`` (:func:`successors_from_runs`) get them
    too. ``LOOKBACK`` is 0 without look-back, else the walk's window (:func:`lookback_window`).
    With look-back, ``flags`` holds one zeroed flag per tile, and ``ws`` three
    ``[num_chunks, N]`` planes; with ``LaunchConfig.persistent`` the kernel's persistent twin walks
    the tiles in :func:`persistent_programs` programs (at most one per tile), launched cooperatively.
    The launch goes through the kernel's :class:`~kernels._direct_launch.DirectLauncher`.
    """
    T, N = batch.T, batch.N
    time_contiguous = time_is_contiguous(tensors[1], N)
    itemsize = batch.out_dtype.itemsize
    estimator = kernel.fn.__module__.rpartition(".")[2]
    aligned_rows = rows_are_aligned(tensors[2] if time_contiguous else tensors[1])
    chosen = config is None
    if chosen:
        config = estimator_config(estimator, T, N, time_contiguous, itemsize, aligned_rows=aligned_rows, form=form)
    if config.async_walk:
        problem = async_walk_misfit(kernel, batch, time_contiguous, config, tensors)
        if problem is None:
            kernel = _async_walk.TWINS[kernel]
        elif chosen:
            config = estimator_config(estimator, T, N, time_contiguous, itemsize, aligned_rows, async_walks=False,
                                      form=form)
        else:
            raise ValueError(f"LaunchConfig.async_walk: {problem}")
    num_chunks = triton.cdiv(T, config.block_t)
    n_blocks = triton.cdiv(N, config.block_n)
    lookback = config.lookback and num_chunks > 1
    twin = _persistent_twin(kernel, time_contiguous, config, itemsize) if config.persistent else None
    persistent = lookback and twin is not None
    if lookback:
        flags = torch.zeros(num_chunks * n_blocks, dtype=torch.int32, device=batch.device)
        ws = torch.empty(3 * num_chunks * N, dtype=batch.compute_dtype, device=batch.device)
        programs = num_chunks * n_blocks
        if persistent:
            kernel = twin
            programs = min(programs, persistent_programs(batch.device, config.persistent))
    else:
        flags = ws = tensors[0]
        programs = n_blocks
    if config.explicit_layout:
        kernel = _explicit_twin(kernel, batch, time_contiguous, config)
    launcher = _LAUNCHERS.get(kernel)
    if launcher is None:
        launcher = _LAUNCHERS[kernel] = DirectLauncher(kernel, cooperative=persistent)
    shuffle_time = shuffles_time(config, time_contiguous, batch.compute_dtype, itemsize)
    constexprs.update(ACC=accumulator(batch.compute_dtype), BLOCK_T=config.block_t, BLOCK_N=config.block_n,
                      LOOKBACK=lookback_window(config.block_n, n_blocks, num_chunks) if lookback else 0,
                      NUM_STAGES=1 if lookback else config.num_stages,
                      SHUFFLE_TIME=16 // itemsize if shuffle_time else 0,
                      LATEST_FIRST=config.latest_first and not shuffle_time,
                      TIME_THREADS=_time_threads(config, time_contiguous, itemsize))
    if "ENV_RUNS_OF_FOUR" in kernel.arg_names:
        constexprs.update(ENV_RUNS_OF_FOUR=config.env_runs_of_four and not time_contiguous)
    if "RUN_SUCCESSORS" in kernel.arg_names:
        constexprs.update(RUN_SUCCESSORS=successors_from_runs(config, itemsize, lookback, aligned_rows,
                                                              kernel_traits(estimator)["wide_scan"]))
    args = (*tensors, ws, flags, T, N, *coefficients)
    compiled = launcher(programs, batch.device, args, constexprs, config.num_warps)
    if compiled is not None and _replay.is_recording():
        scratch = ((flags, True), (ws, False)) if lookback else ()
        _replay.record(_replay.Launch(compiled, programs, args, scratch))


_LAUNCHERS: dict = {}  # kernel -> its DirectLauncher
PERSISTENT_TWINS: dict = {}  # kernel -> its persistent twin (``LaunchConfig.persistent``)


# Registers the decorated kernel as a persistent twin: the same arguments, the look-back tiles walked
# by ``LaunchConfig.persistent`` programs per multiprocessor.
persistent_twin_of = _scan.twin_registrar(PERSISTENT_TWINS)


def _persistent_twin(kernel, time_contiguous: bool, config: LaunchConfig, itemsize: int):
    """``kernel``'s persistent twin for a ``LaunchConfig.persistent`` launch, or a ``ValueError``
    naming what the problem lacks: the twin takes each run's successor from the run's own thread
    (``_scan.successors_from_loaded``), so a tile's time must lie across more than one thread."""
    twin = PERSISTENT_TWINS.get(kernel)
    if twin is None:
        raise ValueError(f"LaunchConfig.persistent: {kernel.fn.__name__} has no persistent kernel")
    if time_contiguous or not config.latest_first:
        raise ValueError("LaunchConfig.persistent walks [T, N] tiles held latest first: needs time_dim=0 and "
                         "latest_first")
    if _time_threads(config, time_contiguous, itemsize) < 2:
        raise ValueError(f"LaunchConfig.persistent needs a tile's steps spread over more than one thread: "
                         f"{config.block_t} x {config.block_n} on {config.num_warps} warps has one along time")
    return twin


def persistent_programs(device: torch.device, per_multiprocessor: int) -> int:
    """How many programs a persistent launch starts: ``per_multiprocessor`` on each multiprocessor
    of a GPU; one where programs run one after another (the interpreter, the CPU), which then walks
    every tile in order."""
    if INTERPRET or device.type != "cuda":
        return 1
    index = device.index if device.index is not None else torch.cuda.current_device()
    return _multiprocessors(index) * per_multiprocessor


@lru_cache(maxsize=None)
def _multiprocessors(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


# Whether launches may take explicit-layout twins: Gluon kernels run on NVIDIA GPUs, not in the interpreter.
EXPLICIT_LAYOUTS = runs_gluon(torch.device("cuda"))


def _explicit_twin(kernel, batch, time_contiguous: bool, config: LaunchConfig):
    """``kernel``'s explicit-layout twin for a ``LaunchConfig.explicit_layout`` launch, or a
    ``ValueError`` naming what the problem lacks."""
    twin = _explicit_layout.TWINS.get(kernel)
    if twin is None:
        raise ValueError(f"LaunchConfig.explicit_layout: {kernel.fn.__name__} has no explicit-layout kernel")
    if not runs_gluon(batch.device):
        raise ValueError("LaunchConfig.explicit_layout runs on a GPU only (not the interpreter, not the CPU)")
    if time_contiguous or batch.T > config.block_t:
        raise ValueError(f"LaunchConfig.explicit_layout holds a whole [T, N] sequence: needs time_dim=0 and "
                         f"T <= block_t, got T = {batch.T}, block_t = {config.block_t}"
                         + (" with time_dim=1" if time_contiguous else ""))
    return twin


def async_walk_misfit(kernel, batch, time_contiguous: bool, config: LaunchConfig, tensors: tuple) -> Optional[str]:
    """Why ``kernel``'s async-walk twin cannot take this problem in ``config`` (``None`` if it can):
    no twin, not a GPU, ``[N, T]`` storage, a block shape without whole 16-byte vectors per thread,
    or series its copies cannot move (``_async_walk.misfit``)."""
    if kernel not in _async_walk.TWINS:
        return f"{kernel.fn.__name__} has no async-walk kernel"
    if not runs_gluon(batch.device):
        return "it runs on a GPU only (not the interpreter, not the CPU)"
    if time_contiguous:
        return "it walks [T, N] tiles: needs time_dim=0"
    threads = _time_threads(config, False, batch.out_dtype.itemsize)
    if not threads or config.block_t % threads:
        return (f"{config.block_t} x {config.block_n} on {config.num_warps} warps is not whole "
                f"{async_walk_vector_bytes(config)}-byte vectors of environments per thread and whole runs of steps")
    return _async_walk.misfit(kernel.arg_names, tensors, batch.N)


def async_walk_vector_bytes(config: LaunchConfig) -> int:
    """Bytes of environments each thread of an async walk reads in one step: 16, or 8 with
    ``env_runs_of_four`` (four 16-bit floats)."""
    return 8 if config.env_runs_of_four else 16


def _time_threads(config: LaunchConfig, time_contiguous: bool, itemsize: int) -> int:
    """The kernels' ``TIME_THREADS``: threads along time of a tile in thread runs, in an explicit layout
    or in an async walk."""
    if config.async_walk:
        return _async_walk.time_threads(config.block_n, config.num_warps, itemsize, async_walk_vector_bytes(config))
    if config.explicit_layout:
        return _explicit_layout.time_threads(config.block_t, config.num_warps)
    return time_threads(config, itemsize) if config.thread_runs and not time_contiguous else 1


def successors_from_runs(config: LaunchConfig, itemsize: int, lookback: bool, aligned_rows: bool = True,
                         wide_scan: bool = False) -> bool:
    """``RUN_SUCCESSORS`` for the kernels that declare it (GAE, V-trace): whether a tile in thread
    runs takes each step's successor value from the thread's own run instead of a second tile
    (``_scan.successor_in_runs``; it has an effect only where ``TIME_THREADS > 1``). Measured on an
    H200 (experiment log, "Successor values from thread runs, V-trace's wide walks"): 1-8% faster in
    one-warp walks, four-warp look-back tiles and 16-bit walks; slower in look-back tiles under four
    warps (3-6%) and in GAE's float32 64 x 64 walks (8192 x 4096: 151 -> 231 us, three or four
    chunks deep), which ``choose_config`` walks four deep: those keep the second tile. So do the
    whole-sequence tiles at most 16 environments wide of kernels without ``wide_scan`` (GAE) in rows
    not 16 elements apart (``aligned_rows`` false, :func:`rows_are_aligned`), which ran 1.46-2.20x
    slower from the runs; GAE's 32-wide bf16 tiles there ran 1.12-1.15x faster from them, V-trace's
    tiles 1.0-1.4x, GAE's look-back tiles 1.03x (experiment log, "Successor values in rows not 16
    elements apart")."""
    if lookback:
        return config.num_warps >= 4
    if not (aligned_rows or wide_scan) and config.block_n <= 16:
        return False
    return itemsize < 4 or config.num_stages < 4


# Look-back tiles at most this many environments wide walk back over their predecessors a window
# of tiles at a time: their flags in one polled vector, then the aggregates they need in one tile
# load. Wider tiles walk back one tile at a time, which measured faster for them (their walks are
# short, and a window costs a [window, block_n] load and scan per step). A window of 8 beat 16 and
# 32 where the tiles share the GPU with other columns of environments; a single column, whose walks
# cross every tile in flight, is faster with more (experiment log, "A wider look-back window for one
# column, look-back tiles below 16 environments").
WINDOWED_LOOKBACK_MAX_N = 16
LOOKBACK_WINDOW = 8
ONE_COLUMN_LOOKBACK_WINDOW = 32
ONE_COLUMN_WINDOW_FROM_TILES = 32  # with 8-16 tiles the wider window lost 1-12%


def lookback_window(block_n: int, n_blocks: int, num_chunks: int) -> int:
    """The kernels' ``LOOKBACK`` of a look-back launch: how many predecessor tiles a tile's walk
    polls and composes per step (1: one at a time), for tiles ``block_n`` environments wide in
    ``n_blocks`` columns of ``num_chunks`` tiles."""
    if block_n > WINDOWED_LOOKBACK_MAX_N:
        return 1
    if n_blocks == 1 and num_chunks >= ONE_COLUMN_WINDOW_FROM_TILES:
        return ONE_COLUMN_LOOKBACK_WINDOW
    return LOOKBACK_WINDOW


def accumulator(dtype: torch.dtype):
    """The Triton dtype the kernels accumulate in: float64 for float64 inputs, else float32."""
    return tl.float64 if dtype == torch.float64 else tl.float32


@lru_cache(maxsize=1024)
def scalars(*values: float) -> tuple[int, ...]:
    """Each Python float as two int32 kernel arguments: the high and low halves of its float64 bits.

    Triton passes Python floats as float32, which would round float64 coefficients and flush those
    below float32's range to zero; the kernels rebuild each value bit for bit from its halves
    (``_scan.scalar``) and round it once to their accumulator type. The halves are declared
    ``do_not_specialize`` (``_scan.coefficient_kernel``), so new values never recompile a kernel.
    """
    out = []
    for value in values:
        bits = struct.unpack("<q", struct.pack("<d", value))[0]
        out += [bits >> 32, ((bits & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000]
    return tuple(out)
