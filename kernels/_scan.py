"""The scan engine shared by every fused estimator.

Every estimator is the first-order linear recurrence ``y_t = alpha_t + beta_t * y_prev``, where
``y_prev`` is ``y_{t+1}`` for a backward (reverse) recurrence and ``y_{t-1}`` for a forward one.
The pair ``(alpha_t, beta_t)`` is the affine map ``y -> alpha_t + beta_t * y``, and composing maps
is associative: applying ``(a1, b1)`` first and then ``(a2, b2)`` is

    (a1, b1) then (a2, b2) = (a2 + b2 * a1, b1 * b2),

so a tile of pairs is solved by ``tl.associative_scan`` with that one operator, in either direction.

Tiling: a program owns ``BLOCK_N`` environments (the contiguous axis of a time-major rollout, so loads
coalesce) and walks time in chunks of ``BLOCK_T`` steps. Each chunk is scanned on chip, then the
value carried in from the previous chunk is applied: ``y = A + B * carry``. The chunk's edge value
becomes the next carry. Any T works, register use is bounded by the tile, and each input element is
read once and each output element written once.

Masked rows (past the end of time) are the identity map ``(0, 1)``, so they never disturb real rows.

``SHUFFLE_TIME`` (a constexpr chosen on the host, ``_launch.shuffles_time``): 0, or where a tile's
time axis lies in one warp the number of consecutive steps each thread holds (16 bytes of inputs).
Values then move between its rows by warp shuffles (``tl.gather``) instead of a reduction
(``edge_row``), a second load of the same data one row later (``successor_rows``) or a scan of four
values instead of two (``scan_chunk_with_next``). 128-step float32 tiles (``IN_QUARTERS``) are
handled as four registers per thread (``thread_quarters``): a shift by one step or an edge row moves
one register per value across lanes, and a reverse scan composes each thread's steps first, then
one map per lane without Triton's lane mirroring (``scan_thread_steps_first``); 256-step tiles of
16-bit floats (``IN_PAIRS``) as their even and odd steps, each in quarters (``step_pairs``).

``LATEST_FIRST`` (``LaunchConfig.latest_first``): a reverse walk's tile holds its steps latest
first, so the tile is scanned forward, first row to last. Triton lowers a reverse scan with lane
mirroring shuffles before and after it, for every value of the tile, whether or not the scan's
axis lies across lanes (PTX for sm_90: 128 of GAE's 400 shuffles per 32 x 32 ``[T, N]`` tile).

``TIME_THREADS`` (``LaunchConfig.thread_runs``, ``_launch.time_threads``): a ``[T, N]`` tile's rows
are given time steps such that each of the ``TIME_THREADS`` threads along time holds a run of
consecutive steps (``thread_run_position``), and the tile is scanned in two levels: each thread's
run, then one map per thread across threads (``scan_thread_runs``).
"""

from __future__ import annotations

import inspect

import torch

from kernels._triton import INTERPRET, tl, triton


@triton.jit
def affine_then(a1, b1, a2, b2):
    """(a1, b1) then (a2, b2): the composition of two affine maps, the scan's operator."""
    return a2 + b2 * a1, b1 * b2


@triton.jit
def affine_then_with_previous(a1, b1, e1, f1, a2, b2, e2, f2):
    """``affine_then`` on the inclusive maps, plus the exclusive map of each scanned element.

    ``(e, f)`` is the composition of every map strictly *before* an element in scan order, i.e. for
    a reverse scan the map that yields ``y_{t+1}`` from the carry. A lone element starts as
    ``(alpha, beta, 0, 1)``; combining keeps the exclusive map of the later-in-scan element composed
    with the inclusive map of the earlier part. Associative, like ``affine_then``.
    """
    return a2 + b2 * a1, b1 * b2, e2 + f2 * a1, f2 * b1


def coefficient_kernel(fn, jit=triton.jit, unspecialised: tuple = ()):
    """``triton.jit`` (or another ``jit``: ``gluon.jit``) for an estimator kernel whose
    ``*_hi``/``*_lo`` arguments carry a coefficient's bits (``_launch.scalars``): they are not
    specialised on their values, so any coefficient reuses the compiled kernel; nor are the
    arguments named in ``unspecialised``."""
    halves = [name for name in inspect.signature(fn).parameters if name.endswith(("_hi", "_lo"))]
    return jit(fn, do_not_specialize=[*halves, *unspecialised])


def twin_registrar(twins: dict):
    """``twin_of(kernel)``, a decorator that registers the decorated kernel in ``twins`` as
    ``kernel``'s twin (the same arguments; ``_launch.launch`` takes it where the block shape says)."""

    def twin_of(kernel):
        def register(twin):
            twins[kernel] = twin
            return twin

        return register

    return twin_of


@triton.jit
def scalar(hi, lo, DTYPE: tl.constexpr):
    """A float coefficient from the two halves of its float64 bits (``_launch.scalars``), in ``DTYPE``."""
    bits = (hi.to(tl.int64) << 32) | (lo.to(tl.int64) & 0xFFFFFFFF)
    return bits.to(tl.float64, bitcast=True).to(DTYPE)


# Whether fast_exp may use the GPU's 2^x instruction (not in the interpreter, which cannot run PTX).
_GPU_EXP = tl.constexpr(not INTERPRET)


@triton.jit
def fast_exp(x):
    """``e^x``. In float32 on the GPU ``2^(x log2 e)`` by one ``ex2.approx.ftz`` (relative error about
    2^-22; results below 2^-126 flush to 0) instead of ``tl.exp``'s six instructions, which keep such
    results as denormals (sm_90 SASS of V-trace's bf16 walks: 1254 -> 1198 instructions per chunk);
    ``tl.exp`` in float64 and in the interpreter."""
    if _GPU_EXP and x.dtype == tl.float32:
        return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x * 1.4426950408889634],
                                         dtype=tl.float32, is_pure=True, pack=1)
    return tl.exp(x)


@triton.jit
def wide(index):
    """A scalar index as int64, so that ``index * stride`` cannot overflow."""
    return tl.zeros((), tl.int64) + index


@triton.jit
def chunk_start(chunk, num_chunks, BLOCK_T: tl.constexpr, REVERSE: tl.constexpr):
    """First time index of the ``chunk``-th chunk in walking order; reverse walks from the end."""
    if REVERSE:
        return (num_chunks - 1 - chunk) * BLOCK_T
    return chunk * BLOCK_T


@triton.jit
def chunk_rows(chunk, num_chunks, T, BLOCK_T: tl.constexpr, REVERSE: tl.constexpr, LATEST_FIRST: tl.constexpr,
               TIME_THREADS: tl.constexpr):
    """Time indices of the rows of the ``chunk``-th chunk: ascending, or descending for a reverse
    walk ``LATEST_FIRST``; with ``TIME_THREADS > 1``, in thread runs (``thread_run_position``)."""
    start = chunk_start(chunk, num_chunks, BLOCK_T, REVERSE)
    position = thread_run_position(BLOCK_T, TIME_THREADS)
    if REVERSE and LATEST_FIRST:
        return start + (BLOCK_T - 1 - position)
    return start + position


@triton.jit
def persistent_walk(T, N, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr):
    """A persistent twin's walk (``_launch.persistent_twin_of``): ``(num_chunks, n_blocks, tiles,
    first, step)``; program ``p`` of ``G`` takes the look-back tiles ``first = p, p + G, ...`` below
    ``tiles``, numbered chunk by chunk in walking order (``persistent_tile``)."""
    num_chunks = tl.cdiv(T, BLOCK_T)
    n_blocks = tl.cdiv(N, BLOCK_N)
    return num_chunks, n_blocks, num_chunks * n_blocks, tl.program_id(0), tl.num_programs(0)


@triton.jit
def persistent_tile(tile, tiles, n_blocks, num_chunks, T, N, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
                    TIME_THREADS: tl.constexpr):
    """Look-back tile ``tile`` of a persistent twin's walk (``_launch.persistent_twin_of``), chunk by
    chunk of a reverse walk, its rows latest first in thread runs: ``(chunk, block, t, n, n_ok,
    mask)``; from ``tile >= tiles`` on, the walk's end, ``n_ok`` and ``mask`` are all false, so a
    program may issue the loads of a next tile it will not take."""
    chunk = tile // n_blocks
    block = tile % n_blocks
    n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = (n < N) & (tl.zeros_like(n) + tile < tiles)
    t = chunk_rows(chunk, num_chunks, T, BLOCK_T, True, True, TIME_THREADS)
    return chunk, block, t, n, n_ok, (t[:, None] < T) & n_ok[None, :]


@triton.jit
def thread_run_position(BLOCK_T: tl.constexpr, TIME_THREADS: tl.constexpr):
    """The position in the chunk of each tile row: the row itself, or with ``TIME_THREADS > 1``
    row ``k * TIME_THREADS + j`` at position ``j * R + k`` (``R = BLOCK_T // TIME_THREADS``).

    A tile's rows are spread over ``TIME_THREADS`` threads (lanes and warps along time) in turn:
    row i belongs to thread ``i % TIME_THREADS``. So each thread holds R consecutive steps, and
    ``scan_thread_runs`` scans them within the thread."""
    row = tl.arange(0, BLOCK_T)
    if TIME_THREADS > 1:
        return (row % TIME_THREADS) * (BLOCK_T // TIME_THREADS) + row // TIME_THREADS
    return row


@triton.jit
def tile_pointers(ptr, t, n, stride_t, stride_n):
    """``ptr[t, n]`` for a ``[BLOCK_T, BLOCK_N]`` tile: a pointer per row plus an offset per column,
    so each element costs one 64-bit add (the products are per row and per column)."""
    rows = ptr + t.to(tl.int64) * stride_t
    return rows[:, None] + (n.to(tl.int64) * stride_n)[None, :]


@triton.jit
def load_tile(ptr, t, n, stride_t, stride_n, mask, DTYPE: tl.constexpr):
    """Load a ``[BLOCK_T, BLOCK_N]`` tile of a time-major view, converted to ``DTYPE``; 0 where masked."""
    return tl.load(tile_pointers(ptr, t, n, stride_t, stride_n), mask=mask, other=0).to(DTYPE)


@triton.jit
def tile_envs(block, N, BLOCK_N: tl.constexpr, ENV_RUNS_OF_FOUR: tl.constexpr):
    """The environments ``n = block * BLOCK_N ...`` of a tile and ``n < N``. With ``ENV_RUNS_OF_FOUR``
    (``_launch.LaunchConfig.env_runs_of_four``) ``n`` is known to the compiler as contiguous in runs
    of 4 only, so that every tile loaded or stored through it holds 4 consecutive environments per
    thread (flags: ``load_flags``'s ``ENVS_IN_RUNS``); ``n < N`` is taken from the plain indices."""
    plain = block * BLOCK_N + tl.arange(0, BLOCK_N)
    n = in_runs_of_four(plain) if ENV_RUNS_OF_FOUR else plain
    return n, plain < N


@triton.jit
def in_runs_of_four(index):
    """``index`` itself, but known to the compiler as contiguous in runs of 4 only."""
    return index // 4 * 4 + index % 4


# The kernels' arguments that point to series of 0/1 flags (``load_flags``); the others point to floats.
FLAG_POINTERS = ("term_ptr", "trunc_ptr", "done_ptr", "flag_ptr")


@triton.jit
def load_flags(ptr, t, n, stride_t, stride_n, mask, FULL_WIDTH: tl.constexpr = False,
               ENVS_IN_RUNS: tl.constexpr = False):
    """Load a tile of 0/1 flags (bool viewed as uint8, integer or float) as booleans.

    The indices are given as runs of four (``in_runs_of_four``), so each thread loads 4 consecutive
    flags, as it does 4 consecutive float32 values: the flag tile then has the float tiles' layout,
    where wider byte loads need a layout change through shared memory (H200, GAE 8192 x 4096
    ``[T, N]``: 262 -> 215 us; experiment log, "Flag loads"). ``FULL_WIDTH``: the load as wide as the
    compiler can make it instead (``load_flags_full_width``). ``ENVS_IN_RUNS``: ``n`` is in runs of
    four already (``tile_envs``) and is taken as it is: the compiler cannot see runs of four in
    runs of four, and would load every flag alone."""
    if FULL_WIDTH:
        return load_flags_full_width(ptr, t, n, stride_t, stride_n, mask)
    if ENVS_IN_RUNS:
        return load_flags_full_width(ptr, in_runs_of_four(t), n, stride_t, stride_n, mask)
    return load_flags_full_width(ptr, in_runs_of_four(t), in_runs_of_four(n), stride_t, stride_n, mask)


@triton.jit
def load_flags_full_width(ptr, t, n, stride_t, stride_n, mask):
    """``load_flags`` with the load as wide as the compiler can make it (faster for Retrace's tiles
    in time order)."""
    return tl.load(tile_pointers(ptr, t, n, stride_t, stride_n), mask=mask, other=0) != 0


@triton.jit
def store_tile(ptr, value, t, n, stride_t, stride_n, mask):
    tl.store(tile_pointers(ptr, t, n, stride_t, stride_n), value.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def load_env(ptr, n, stride, mask, DTYPE: tl.constexpr):
    """Load one value per environment (``bootstrap_value``, ``initial``, one time step of a series)
    as a ``[BLOCK_N]`` vector."""
    return tl.load(ptr + n.to(tl.int64) * stride, mask=mask, other=0).to(DTYPE)


@triton.jit
def edge_row(y, BLOCK_T: tl.constexpr, BACKWARD: tl.constexpr, SHUFFLE_TIME: tl.constexpr):
    """The row of a scanned tile that carries into the next chunk: the last in scan order, i.e. the
    first row when the tile was scanned ``BACKWARD``, else the last."""
    edge = 0 if BACKWARD else BLOCK_T - 1
    if SHUFFLE_TIME == IN_QUARTERS:
        y0, _, _, y3 = thread_quarters(y)
        return lane_value(y0, 0) if BACKWARD else lane_value(y3, 31)
    if SHUFFLE_TIME == IN_PAIRS and BLOCK_T == 256:
        even, odd = step_pairs(y)
        return edge_row(even, 128, True, IN_QUARTERS) if BACKWARD else edge_row(odd, 128, False, IN_QUARTERS)
    if SHUFFLE_TIME:
        return tl.reshape(tl.gather(y, tl.zeros([1, y.shape[1]], tl.int32) + edge, 0), [y.shape[1]])
    rows = tl.arange(0, BLOCK_T)
    return tl.sum(tl.where(rows[:, None] == edge, y, 0.0), axis=0)


@triton.jit
def successor_rows(
    x, ptr, chunk, num_chunks, t, n, stride_t, stride_n, n_ok, T, DTYPE: tl.constexpr, BLOCK_T: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr, LATEST_FIRST: tl.constexpr, TIME_THREADS: tl.constexpr,
):
    """``ptr[t + 1, n]`` for every row ``t`` of a reverse walk's chunk (0 from ``t + 1 = T`` on), as ``DTYPE``.

    ``x`` is the chunk's own tile of ``ptr`` (rows ``t``). With ``SHUFFLE_TIME`` every row but the
    last is taken from ``x`` one row down, and only the row after the chunk is loaded; in thread
    runs held latest first (``TIME_THREADS > 1``, ``LATEST_FIRST``) from each thread's own run
    (``successor_in_runs``); otherwise the shifted tile is loaded (``x`` is then unused, and its
    load can be dropped by the compiler: pass ``TIME_THREADS = 1`` where ``x`` is loaded for this
    alone)."""
    if SHUFFLE_TIME:
        after = chunk_start(chunk, num_chunks, BLOCK_T, True) + BLOCK_T
        after_ok = n_ok & (tl.zeros_like(n) + after < T)
        return rows_up(x, load_env(ptr + wide(after) * stride_t, n, stride_n, after_ok, DTYPE), BLOCK_T, SHUFFLE_TIME)
    if TIME_THREADS > 1 and LATEST_FIRST:
        return successor_in_runs(x, ptr, t, n, stride_t, stride_n, n_ok, T, DTYPE, TIME_THREADS)
    return load_tile(ptr, t + 1, n, stride_t, stride_n, (t[:, None] + 1 < T) & n_ok[None, :], DTYPE)


@triton.jit
def successor_in_runs(x, ptr, t, n, stride_t, stride_n, n_ok, T, DTYPE: tl.constexpr, TIME_THREADS: tl.constexpr):
    """``successor_rows`` of a latest-first tile ``x`` in thread runs (``thread_run_position``).

    Step ``k`` of thread ``j``'s run is at position ``j * R + k``, latest first, so its successor is
    step ``k - 1`` of the same run for every ``k`` but 0: those come from the thread's own
    registers (``_shift_in``, no data moves), and only the successors of the runs' first steps
    (rows ``0 .. TIME_THREADS - 1``) are loaded, one row per thread instead of a second tile: the
    second tile's load masked to those rows, a mask fixed per register, so ``ptxas`` drops the
    other rows' loads (a pipelined walk still issues them, as zero-filling copies: no reads).
    (``_explicit_layout.shift_in`` is the same move for Gluon tiles, whose joins need their
    layouts made equal.)"""
    loaded = first_step_successors(ptr, t, n, stride_t, stride_n, n_ok, T, DTYPE, TIME_THREADS)
    return successors_from_loaded(x, loaded, TIME_THREADS)


@triton.jit
def first_step_successors(ptr, t, n, stride_t, stride_n, n_ok, T, DTYPE: tl.constexpr, TIME_THREADS: tl.constexpr):
    """The loads of :func:`successor_in_runs`: ``ptr[t + 1, n]`` in the rows of the runs' first steps
    (``0 .. TIME_THREADS - 1``), 0 in the others (and from ``t + 1 = T`` on)."""
    first_steps = (tl.arange(0, t.shape[0]) < TIME_THREADS)[:, None]
    return load_tile(ptr, t + 1, n, stride_t, stride_n, first_steps & (t[:, None] + 1 < T) & n_ok[None, :], DTYPE)


@triton.jit
def successors_from_loaded(x, loaded, TIME_THREADS: tl.constexpr):
    """:func:`successor_in_runs` of ``x`` from its :func:`first_step_successors` ``loaded``: every
    step's successor from the thread's own run, the runs' first steps' from ``loaded``."""
    first_steps = (tl.arange(0, x.shape[0]) < TIME_THREADS)[:, None]
    runs = tl.permute(_as_runs(x, TIME_THREADS), (1, 2, 0))  # runs[j, n, k]: step k of thread j's run
    shifted = _shift_in(runs, tl.zeros([runs.shape[0], runs.shape[1]], runs.dtype))
    return tl.where(first_steps, loaded, tl.reshape(tl.permute(shifted, (2, 0, 1)), x.shape))


@triton.jit
def _shift_in(runs, first):
    """``y[j, n, k] = runs[j, n, k - 1]`` and ``y[j, n, 0] = first[j, n]``: each run moved one step
    on, by splitting it into even and odd steps (``y``'s even steps are the odd steps shifted, its
    odd steps the even ones)."""
    STEPS: tl.constexpr = runs.shape[2]
    if STEPS == 1:
        moved = tl.reshape(first, runs.shape)
    else:
        even, odd = tl.split(tl.reshape(runs, [runs.shape[0], runs.shape[1], STEPS // 2, 2]))
        moved = tl.reshape(tl.join(_shift_in(odd, first), even), runs.shape)
    return moved


@triton.jit
def rows_up(x, edge, BLOCK_T: tl.constexpr, SHUFFLE_TIME: tl.constexpr):
    """Tile ``x`` moved up one row: row ``i`` holds ``x[i + 1]``, the last row ``edge``. Warp
    shuffles where the tile's time axis lies in one warp (``SHUFFLE_TIME``); in quarters
    (``IN_QUARTERS``, ``IN_PAIRS``) only each thread's first step crosses lanes, one shuffle per value."""
    if SHUFFLE_TIME == IN_QUARTERS:
        x0, x1, x2, x3 = thread_quarters(x)
        return from_thread_quarters(x1, x2, x3, lanes_up(x0, edge))
    if SHUFFLE_TIME == IN_PAIRS and BLOCK_T == 256:
        even, odd = step_pairs(x)
        return from_step_pairs(odd, rows_up(even, edge, 128, IN_QUARTERS))
    rows = tl.arange(0, BLOCK_T)
    down = tl.gather(x, tl.minimum(rows + 1, BLOCK_T - 1)[:, None] + tl.zeros_like(x).to(tl.int32), 0)
    return tl.where(rows[:, None] == BLOCK_T - 1, edge[None, :], down)


@triton.jit
def tile_schedule(T, N, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, LOOKBACK: tl.constexpr):
    """Which environments and chunks this program owns: ``(block, first_chunk, end_chunk, num_chunks)``.

    The program's environments are ``block * BLOCK_N + arange(BLOCK_N)``.

    Without look-back a program owns ``BLOCK_N`` environments for all of time. With look-back it
    owns one ``[BLOCK_T, BLOCK_N]`` tile, numbered in walking order (chunk-major), so a tile only
    ever waits for tiles with smaller program ids. The GPU starts a grid's programs in increasing
    id order, so those were all started before it: no deadlock. CUB's single-pass scan makes the
    same assumption (tile index = block index). A ticket counter handed out by an atomic would not
    need it, but cost every tile an L2 round trip before its first load: 5-12% of a look-back
    kernel's time on an H200, in either layout (experiment log, "Look-back tiles without a ticket").
    """
    num_chunks = tl.cdiv(T, BLOCK_T)
    if LOOKBACK:
        tile = tl.program_id(0)
        n_blocks = tl.cdiv(N, BLOCK_N)
        first = tile // n_blocks
        return tile % n_blocks, first, first + 1, num_chunks
    return tl.program_id(0), 0, num_chunks, num_chunks


@triton.jit
def _plane_row(ws, slot, chunk, num_chunks, N):
    """Where ``ws[slot, chunk, :]`` starts in the look-back workspace (``slot`` 0: aggregate alpha,
    1: aggregate beta, 2: carried-out value; ``chunk`` a scalar or a vector of tiles)."""
    return ws + (wide(slot) * num_chunks + chunk) * N


@triton.jit
def _flag(flags, chunk, n_blocks, block):
    """The flag of tile ``(chunk, block)`` (a scalar or a vector of chunks)."""
    return flags + wide(chunk) * n_blocks + block


@triton.jit
def _store_plane(ws, slot, values, chunk, num_chunks, n, n_ok, N):
    """Write one per-environment vector of this tile to ``ws[slot, chunk]``."""
    tl.store(_plane_row(ws, slot, chunk, num_chunks, N) + n, values, mask=n_ok)


@triton.jit
def _raise_flag(flag, state):
    """Make this tile's stores so far visible, then set its flag to ``state`` (1 or 2)."""
    tl.debug_barrier()
    tl.atomic_xchg(flag, state, sem="release")


# A one-by-one walk polls its predecessor's flag with an acquire load (``ld.acquire.gpu``) by
# every thread rather than an atomic read-modify-write by one thread whose result is then broadcast
# through shared memory: wide look-back tiles 1-4% faster on an H200 (experiment log, "Acquire
# loads"). Triton's interpreter and AMD GPUs have no PTX: they poll with the atomic.
POLL_BY_ACQUIRE_LOAD = tl.constexpr(not INTERPRET and torch.version.hip is None)


@triton.jit
def _poll(flag):
    """The flag at the scalar pointer ``flag``, read with acquire semantics by every thread, so that
    each thread's later loads see what the flag's tile wrote before raising it.

    Only for one flag read by all threads: polled as a vector, each thread would acquire only the
    flags it holds, and its loads of another tile's aggregate would not be ordered after that
    tile's flag (the windowed walk polls with an atomic, whose result reaches the other threads
    through a barrier)."""
    if POLL_BY_ACQUIRE_LOAD:
        return tl.inline_asm_elementwise("ld.global.acquire.gpu.b32 $0, [$1];", "=r,l", [flag], dtype=tl.int32,
                                         is_pure=False, pack=1)
    return tl.atomic_add(flag, 0, sem="acquire")


@triton.jit
def _window_states(flags, hi, block, n_blocks, WINDOW: tl.constexpr):
    """Tiles ``hi - WINDOW + 1 .. hi`` of this column of environments (ascending) and their flags;
    positions before the first tile read as 2 (a known value), so a walk stops there."""
    j = hi - WINDOW + 1 + tl.arange(0, WINDOW)
    exists = j >= 0
    state = tl.atomic_add(_flag(flags, j, n_blocks, block), 0, mask=exists, sem="acquire")
    return j, tl.where(exists, state, 2)


@triton.jit
def _nearest_known(j, state):
    """The newest tile of the window whose carried-out value is known, and whether any tile newer
    than it has not yet published its aggregate."""
    known = tl.max(tl.where(state == 2, j, -1), axis=0)
    unpublished = tl.max(((j > known) & (state == 0)).to(tl.int32), axis=0)
    return known, unpublished


@triton.jit
def _window_planes(ws, j, use, num_chunks, n, n_ok, N):
    """The aggregate maps of the window's tiles ``use`` as ``[WINDOW, BLOCK_N]`` tiles; the identity
    map elsewhere."""
    mask = use[:, None] & n_ok[None, :]
    alpha_rows = _plane_row(ws, 0, j, num_chunks, N)[:, None] + n[None, :]
    beta_rows = _plane_row(ws, 1, j, num_chunks, N)[:, None] + n[None, :]
    a = tl.load(alpha_rows, mask=mask, other=0.0, cache_modifier=".cg")
    b = tl.load(beta_rows, mask=mask, other=1.0, cache_modifier=".cg")
    return a, b


@triton.jit
def identity_map(like):
    """The affine map ``y -> y`` as ``(alpha, beta) = (0, 1)`` vectors shaped like ``like``."""
    zero = tl.zeros_like(like)
    return zero, zero + 1.0


@triton.jit
def _walk_one_by_one(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a):
    """The carry into tile ``chunk``: compose its predecessors' aggregates one at a time, newest
    first, waiting for each flag, until one has a known carried-out value."""
    acc_a, acc_b = identity_map(agg_a)
    carry = acc_a
    j = chunk - 1
    searching = True
    while searching:
        flag = _flag(flags, j, n_blocks, block)
        state = _poll(flag)
        while state == 0:
            state = _poll(flag)
        if state == 2:
            carry = acc_a + acc_b * _read(ws, 2, j, num_chunks, n, n_ok, N)
            searching = False
        else:
            acc_a = acc_a + acc_b * _read(ws, 0, j, num_chunks, n, n_ok, N)
            acc_b = acc_b * _read(ws, 1, j, num_chunks, n, n_ok, N)
            j -= 1
    return carry


@triton.jit
def _walk_by_window(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a, WINDOW: tl.constexpr):
    """The carry into tile ``chunk``, ``WINDOW`` predecessors per step: poll their flags
    until every one newer than the newest with a known carried-out value has published its
    aggregate, compose those aggregates with one scan, and stop at the known value, or move one
    window further back."""
    acc_a, acc_b = identity_map(agg_a)
    carry = acc_a
    hi = chunk - 1
    searching = True
    while searching:
        j, state = _window_states(flags, hi, block, n_blocks, WINDOW)
        known, unpublished = _nearest_known(j, state)
        while unpublished > 0:
            j, state = _window_states(flags, hi, block, n_blocks, WINDOW)
            known, unpublished = _nearest_known(j, state)
        win_a, win_b = _window_planes(ws, j, j > known, num_chunks, n, n_ok, N)
        scanned_a, scanned_b = tl.associative_scan((win_a, win_b), 0, affine_then)  # oldest first
        acc_a = acc_a + acc_b * edge_row(scanned_a, WINDOW, False, False)
        acc_b = acc_b * edge_row(scanned_b, WINDOW, False, False)
        if known > hi - WINDOW:
            carry = acc_a + acc_b * _read(ws, 2, known, num_chunks, n, n_ok, N)
            searching = False
        else:
            hi -= WINDOW
    return carry


@triton.jit
def carry_in(A, B, carry, chunk, block, T, N, ws, flags, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
             BACKWARD: tl.constexpr, SHUFFLE_TIME: tl.constexpr, WINDOW: tl.constexpr):
    """The values carried into and out of this tile; the first found by decoupled look-back.

    ``(A, B)`` is the tile's scanned maps (``BACKWARD``: last row to first) and ``carry`` the
    recurrence's initial value. The tile first publishes its aggregate map (flag 1), then walks back
    over its predecessors in walking order, composing their aggregates until it meets one whose
    carried-out value is known (flag 2), and finally publishes its own carried-out value (flag 2).
    The first tile only does the last step. ``WINDOW`` is how many predecessors the walk polls and
    composes per step, 1 for one tile at a time (``_launch.lookback_window`` chooses). ``ws`` holds
    three ``[num_chunks, N]`` planes: aggregate alpha, aggregate beta, carried-out value; ``flags``
    one flag per tile.
    """
    num_chunks = tl.cdiv(T, BLOCK_T)
    n_blocks = tl.cdiv(N, BLOCK_N)
    n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < N
    agg_a = edge_row(A, BLOCK_T, BACKWARD, SHUFFLE_TIME)
    agg_b = edge_row(B, BLOCK_T, BACKWARD, SHUFFLE_TIME)
    my_flag = _flag(flags, chunk, n_blocks, block)
    if chunk > 0:
        _store_plane(ws, 0, agg_a, chunk, num_chunks, n, n_ok, N)
        _store_plane(ws, 1, agg_b, chunk, num_chunks, n, n_ok, N)
        _raise_flag(my_flag, 1)  # only once both halves of the aggregate are written
        if WINDOW > 1:
            carry = _walk_by_window(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a, WINDOW)
        else:
            carry = _walk_one_by_one(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a)
    carry_out = agg_a + agg_b * carry
    _store_plane(ws, 2, carry_out, chunk, num_chunks, n, n_ok, N)
    _raise_flag(my_flag, 2)
    return carry, carry_out


@triton.jit
def _read(ws, slot, chunk, num_chunks, n, n_ok, N):
    return tl.load(_plane_row(ws, slot, chunk, num_chunks, N) + n, mask=n_ok, other=0.0, cache_modifier=".cg")


@triton.jit
def _apply_carry(A, B, carry, chunk, block, T, N, ws, flags, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
                 BACKWARD: tl.constexpr, LOOKBACK: tl.constexpr, SHUFFLE_TIME: tl.constexpr,
                 LAST_CARRIES_NOTHING: tl.constexpr = False):
    """``y = A + B * carry_in`` for a scanned chunk ``(A, B)`` (``BACKWARD``: scanned last row to
    first): returns ``(y, carry_in, carry_out)``.

    ``carry`` is the value carried in from the previous chunk; with look-back (``LOOKBACK`` > 0, the
    walk's window) it is the recurrence's initial value and the true carry-in is found from the
    earlier tiles (``carry_in``). ``LAST_CARRIES_NOTHING``: a walk's last chunk skips its carry-out
    (the edge row, a reduction across the tile's threads) and returns ``carry`` in its place; a tile
    that holds the whole sequence then reduces nothing.
    """
    if LOOKBACK:
        carry, carry_out = carry_in(A, B, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, BACKWARD,
                                    SHUFFLE_TIME, LOOKBACK)
        y = A + B * carry[None, :]
    else:
        y = A + B * carry[None, :]
        if LAST_CARRIES_NOTHING:
            carry_out = carry
            if chunk + 1 < tl.cdiv(T, BLOCK_T):
                carry_out = edge_row(y, BLOCK_T, BACKWARD, SHUFFLE_TIME)
        else:
            carry_out = edge_row(y, BLOCK_T, BACKWARD, SHUFFLE_TIME)
    return y, carry, carry_out


# ``SHUFFLE_TIME`` of a 128-step float32 tile whose time lies in one warp: each thread holds 4
# consecutive steps, so the tile is handled in quarters (``thread_quarters``): shifts by one step
# and edge rows move one register per value across lanes, and reverse scans go thread steps first.
IN_QUARTERS = tl.constexpr(4)
# ``SHUFFLE_TIME`` of a 16-bit float tile whose time lies in one warp: each thread holds 8 consecutive
# steps; 256-step tiles are handled as pairs of steps (``step_pairs``), whose halves are in quarters.
IN_PAIRS = tl.constexpr(8)


@triton.jit
def step_pairs(x):
    """A ``[256, BLOCK_N]`` tile as its even and odd steps ``x[2i]``, ``x[2i + 1]`` (``[128, BLOCK_N]``
    each). A 256-step tile whose time lies in one warp with 8 consecutive steps per thread (16-bit
    floats) then holds 4 consecutive steps of each half per thread: both halves are in quarters
    (``thread_quarters``), and splitting moves no data."""
    return tl.split(tl.permute(tl.reshape(x, [128, 2, x.shape[1]]), (0, 2, 1)))


@triton.jit
def from_step_pairs(even, odd):
    """The ``[256, BLOCK_N]`` tile whose even and odd steps (``step_pairs``) are ``even`` and ``odd``."""
    return tl.reshape(tl.permute(tl.join(even, odd), (0, 2, 1)), [256, even.shape[1]])


@triton.jit
def scan_step_pairs_backward(alpha, beta):
    """``tl.associative_scan((alpha, beta), 0, affine_then, reverse=True)`` of a ``[256, BLOCK_N]``
    tile in pairs of steps (``IN_PAIRS``), in three levels.

    Each pair's map (its odd step, then its even one) is scanned backward in quarters
    (``scan_thread_steps_first``): that is each even step's inclusive map ``P_i``. An odd step's is
    its own map preceded by the pairs after it, ``P_{i+1}`` (the identity after the last pair),
    moved up one pair by one shuffle per value."""
    even_a, odd_a = step_pairs(alpha)
    even_b, odd_b = step_pairs(beta)
    pair_a, pair_b = affine_then(odd_a, odd_b, even_a, even_b)
    P_a, P_b = scan_thread_steps_first(pair_a, pair_b, True)
    none_a = tl.zeros([P_a.shape[1]], P_a.dtype)  # the identity map after the last pair
    after_a = rows_up(P_a, none_a, 128, IN_QUARTERS)
    after_b = rows_up(P_b, none_a + 1.0, 128, IN_QUARTERS)
    A_odd, B_odd = affine_then(after_a, after_b, odd_a, odd_b)
    return from_step_pairs(P_a, A_odd), from_step_pairs(P_b, B_odd)


@triton.jit
def thread_quarters(x):
    """A ``[128, BLOCK_N]`` tile as its four interleaved quarters ``x[4i + k]``, k = 0..3
    (``[32, BLOCK_N]`` each). A 128-step float32 tile whose time lies in one warp holds 4
    consecutive steps per thread, so each quarter is one register per thread and splitting moves
    no data."""
    steps = tl.permute(tl.reshape(x, [32, 2, 2, x.shape[1]]), (0, 3, 1, 2))  # [32, BLOCK_N, j, k]: x[4i + 2j + k]
    even, odd = tl.split(steps)
    x0, x2 = tl.split(even)
    x1, x3 = tl.split(odd)
    return x0, x1, x2, x3


@triton.jit
def from_thread_quarters(x0, x1, x2, x3):
    """The ``[128, BLOCK_N]`` tile whose quarters (``thread_quarters``) are ``x0 .. x3``."""
    steps = tl.join(tl.join(x0, x2), tl.join(x1, x3))  # [32, BLOCK_N, j, k]
    return tl.reshape(tl.permute(steps, (0, 2, 3, 1)), [128, x0.shape[1]])


@triton.jit
def lane_shifted(q, SHIFT: tl.constexpr):
    """Quarter ``q`` (``[32, BLOCK_N]``, one value per lane) as seen ``SHIFT`` lanes on: lane ``i``
    gets lane ``i + SHIFT``'s value (one warp shuffle per value), and whether that lane exists."""
    lane = tl.arange(0, 32)[:, None] + tl.zeros_like(q).to(tl.int32)
    source = lane + SHIFT
    exists = (source >= 0) & (source < 32)
    return tl.gather(q, tl.minimum(tl.maximum(source, 0), 31), 0), exists


@triton.jit
def lanes_up(q, edge):
    """Quarter ``q`` moved down the lanes: lane ``i`` holds lane ``i + 1``'s value, lane 31 ``edge``
    (``[BLOCK_N]``)."""
    moved, exists = lane_shifted(q, 1)
    return tl.where(exists, moved, edge[None, :])


@triton.jit
def lane_value(q, LANE: tl.constexpr):
    """Lane ``LANE``'s value of quarter ``q`` (``[32, BLOCK_N]``) as a ``[BLOCK_N]`` vector: one
    warp shuffle (a reduction would take five)."""
    return tl.reshape(tl.gather(q, tl.zeros([1, q.shape[1]], tl.int32) + LANE, 0), [q.shape[1]])


@triton.jit
def scan_lanes(a, b, REVERSE: tl.constexpr):
    """Inclusive scan of one map per lane (``[32, BLOCK_N]``) across the warp, in scan order (lane
    31 first when ``REVERSE``): five Hillis-Steele steps, each composing a lane's map with the one
    ``d`` lanes earlier in scan order, fetched by a warp shuffle. ``tl.associative_scan`` with
    ``reverse=True`` would also mirror every lane before and after."""
    for level in tl.static_range(5):
        earlier_a, exists = lane_shifted(a, (1 << level) if REVERSE else -(1 << level))
        earlier_b, _ = lane_shifted(b, (1 << level) if REVERSE else -(1 << level))
        before_a, before_b = affine_then(earlier_a, earlier_b, a, b)
        a = tl.where(exists, before_a, a)
        b = tl.where(exists, before_b, b)
    return a, b


@triton.jit
def scan_thread_steps_first(alpha, beta, REVERSE: tl.constexpr):
    """``tl.associative_scan((alpha, beta), 0, affine_then, reverse=REVERSE)`` of a ``[128, BLOCK_N]``
    tile in quarters (``IN_QUARTERS``: time in one warp, 4 consecutive float32 steps per thread),
    in two levels.

    Each thread composes its own 4 steps elementwise (inclusive maps ``(A_k, B_k)`` in scan order,
    and the thread's whole map); the warp scans the 32 whole maps (``scan_lanes``, without lane
    mirroring); the map of the threads before a thread in scan order, ``(E_a, E_b)`` (identity for
    the first), then precedes every step: ``(A_k + B_k E_a, B_k E_b)``. Triton's reverse scan
    mirrors every register of both values across the warp before and after scanning: V-trace's
    128-step tile, sm_90 SASS, 31 shuffles with it, 15 with this (experiment log, "Thread quarters").
    """
    a0, a1, a2, a3 = thread_quarters(alpha)
    b0, b1, b2, b3 = thread_quarters(beta)
    if REVERSE:
        A3, B3 = a3, b3
        A2, B2 = affine_then(A3, B3, a2, b2)
        A1, B1 = affine_then(A2, B2, a1, b1)
        A0, B0 = affine_then(A1, B1, a0, b0)
        whole_a, whole_b = A0, B0
    else:
        A0, B0 = a0, b0
        A1, B1 = affine_then(A0, B0, a1, b1)
        A2, B2 = affine_then(A1, B1, a2, b2)
        A3, B3 = affine_then(A2, B2, a3, b3)
        whole_a, whole_b = A3, B3
    S_a, S_b = scan_lanes(whole_a, whole_b, REVERSE)
    E_a, exists = lane_shifted(S_a, 1 if REVERSE else -1)  # the thread just before in scan order
    E_b, _ = lane_shifted(S_b, 1 if REVERSE else -1)
    E_a = tl.where(exists, E_a, 0.0)
    E_b = tl.where(exists, E_b, 1.0)
    A = from_thread_quarters(A0 + B0 * E_a, A1 + B1 * E_a, A2 + B2 * E_a, A3 + B3 * E_a)
    B = from_thread_quarters(B0 * E_b, B1 * E_b, B2 * E_b, B3 * E_b)
    return A, B


@triton.jit
def _run_edges(A, B, BACKWARD: tl.constexpr):
    """The whole map of each thread run of ``[R, TIME_THREADS, BLOCK_N]`` scanned runs: their last
    step in scan order, ``[TIME_THREADS, BLOCK_N]`` (no data leaves the thread)."""
    k = tl.arange(0, A.shape[0])[:, None, None]
    edge = 0 if BACKWARD else A.shape[0] - 1
    return tl.sum(tl.where(k == edge, A, 0.0), axis=0), tl.sum(tl.where(k == edge, B, 0.0), axis=0)


@triton.jit
def _runs_before(A, B, BACKWARD: tl.constexpr):
    """For each thread run of scanned runs ``(A, B)``, the composition ``(E, F)`` of the runs before
    it in scan order (the identity for the first), as ``[1, TIME_THREADS, BLOCK_N]``."""
    whole_a, whole_b = _run_edges(A, B, BACKWARD)
    none_a, none_b = identity_map(whole_a)
    _, _, E, F = tl.associative_scan((whole_a, whole_b, none_a, none_b), 0, affine_then_with_previous,
                                     reverse=BACKWARD)
    return E[None, :, :], F[None, :, :]


@triton.jit
def _as_runs(x, TIME_THREADS: tl.constexpr):
    """A ``[BLOCK_T, BLOCK_N]`` tile as ``[R, TIME_THREADS, BLOCK_N]``: axis 0 walks one thread's
    run (``thread_run_position``); no data moves."""
    return tl.reshape(x, [x.shape[0] // TIME_THREADS, TIME_THREADS, x.shape[1]])


@triton.jit
def scan_thread_runs(alpha, beta, BACKWARD: tl.constexpr, TIME_THREADS: tl.constexpr):
    """``tl.associative_scan((alpha, beta), 0, affine_then, reverse=BACKWARD)`` of a tile whose rows
    are in thread runs (``thread_run_position``), in two levels.

    Each thread scans its own run of R steps ``(A_k, B_k)``; the threads then scan their runs'
    whole maps, and the map ``(E, F)`` of the runs before a run precedes each of its steps:
    ``(A_k + B_k E, B_k F)``. Only the second level crosses threads: one map per thread instead of
    R (GAE's 16 x 64 one-warp tile: 24 shuffles instead of 344, sm_90 PTX)."""
    a, b = _as_runs(alpha, TIME_THREADS), _as_runs(beta, TIME_THREADS)
    A, B = tl.associative_scan((a, b), 0, affine_then, reverse=BACKWARD)
    E, F = _runs_before(A, B, BACKWARD)
    return tl.reshape(A + B * E, alpha.shape), tl.reshape(B * F, alpha.shape)


@triton.jit
def scan_thread_runs_with_previous(alpha, beta, BACKWARD: tl.constexpr, TIME_THREADS: tl.constexpr):
    """``scan_thread_runs`` that also returns each step's exclusive map (``affine_then_with_previous``):
    the run's own exclusive map ``(e_k, f_k)`` preceded by the runs before it: ``(e_k + f_k E, f_k F)``."""
    a, b = _as_runs(alpha, TIME_THREADS), _as_runs(beta, TIME_THREADS)
    none_a, none_b = identity_map(a)
    A, B, e, f = tl.associative_scan((a, b, none_a, none_b), 0, affine_then_with_previous, reverse=BACKWARD)
    E, F = _runs_before(A, B, BACKWARD)
    return (tl.reshape(A + B * E, alpha.shape), tl.reshape(B * F, alpha.shape), tl.reshape(e + f * E, alpha.shape),
            tl.reshape(f * F, alpha.shape))


@triton.jit
def _scan_maps(alpha, beta, BLOCK_T: tl.constexpr, BACKWARD: tl.constexpr, SHUFFLE_TIME: tl.constexpr,
               TIME_THREADS: tl.constexpr, THREAD_STEPS_FIRST: tl.constexpr):
    """The tile's inclusive maps ``(A, B)``, scanned last row to first when ``BACKWARD``: tiles in
    quarters (``IN_QUARTERS``) by ``scan_thread_steps_first`` when scanned backward, and with
    ``THREAD_STEPS_FIRST`` forward too (faster for ``linear_scan``; Triton's forward scan mirrors
    nothing, and eligibility traces and episodic sums ran 9-16% slower with the two-level one: H200,
    experiment log, "Thread quarters"); 256-step tiles in pairs of steps (``IN_PAIRS``) by ``scan_step_pairs_backward``
    when scanned backward; tiles in thread runs by ``scan_thread_runs``."""
    if SHUFFLE_TIME == IN_QUARTERS and (BACKWARD or THREAD_STEPS_FIRST):
        return scan_thread_steps_first(alpha, beta, BACKWARD)
    if SHUFFLE_TIME == IN_PAIRS and BLOCK_T == 256 and BACKWARD:
        return scan_step_pairs_backward(alpha, beta)
    if TIME_THREADS > 1:
        return scan_thread_runs(alpha, beta, BACKWARD, TIME_THREADS)
    return tl.associative_scan((alpha, beta), 0, affine_then, reverse=BACKWARD)


@triton.jit
def scan_chunk(
    alpha,
    beta,
    carry,
    chunk,
    block,
    T,
    N,
    ws,
    flags,
    BLOCK_T: tl.constexpr,
    BLOCK_N: tl.constexpr,
    REVERSE: tl.constexpr,
    LOOKBACK: tl.constexpr,
    NUM_STAGES: tl.constexpr,
    SHUFFLE_TIME: tl.constexpr,
    LATEST_FIRST: tl.constexpr,
    TIME_THREADS: tl.constexpr,
    THREAD_STEPS_FIRST: tl.constexpr = False,
):
    """Solve one chunk, whose rows are ``chunk_rows(..., REVERSE, LATEST_FIRST, TIME_THREADS)``:
    returns its ``y`` and the value it carries into the next chunk (``carry``: see ``_apply_carry``).
    ``THREAD_STEPS_FIRST``: forward scans of tiles in quarters too (``_scan_maps``).

    Unpipelined walks (``NUM_STAGES == 1``) in tiles of at most 256 steps whose carry-out is a
    reduction across the tile's threads (no ``SHUFFLE_TIME``) skip it in their last chunk
    (``LAST_CARRIES_NOTHING``), so a tile holding a whole short sequence reduces nothing (H200,
    short ``[T, N]`` tiles: 1.02-1.11x, Retrace 8192 x 32 1.32x; experiment log, "The last chunk's
    carry"). Pipelined walks and tiles of more steps keep the reduction (the branch measured up to 8%
    slower there), as does V-trace's ``scan_chunk_with_next`` (6-30% slower with it)."""
    backward: tl.constexpr = REVERSE and not LATEST_FIRST  # scanned last row to first
    A, B = _scan_maps(alpha, beta, BLOCK_T, backward, SHUFFLE_TIME, TIME_THREADS, THREAD_STEPS_FIRST)
    last_carries_nothing: tl.constexpr = NUM_STAGES == 1 and BLOCK_T <= 256 and SHUFFLE_TIME == 0
    y, carry, carry_out = _apply_carry(A, B, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, backward,
                                       LOOKBACK, SHUFFLE_TIME, last_carries_nothing)
    return y, carry_out


@triton.jit
def scan_chunk_with_next(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T: tl.constexpr,
                         BLOCK_N: tl.constexpr, LOOKBACK: tl.constexpr, SHUFFLE_TIME: tl.constexpr,
                         LATEST_FIRST: tl.constexpr, TIME_THREADS: tl.constexpr):
    """Reverse ``scan_chunk`` (rows ``chunk_rows(..., True, LATEST_FIRST, TIME_THREADS)``) that also
    returns ``y_{t+1}`` for every row (the carry at the chunk end). Where the tile's time lies in
    one warp (``SHUFFLE_TIME``, rows in time order) ``y_{t+1}`` is ``y`` moved up one row by warp
    shuffles; otherwise the scan carries each row's predecessor map too (four values, not two)."""
    backward: tl.constexpr = not LATEST_FIRST
    if SHUFFLE_TIME:
        A, B = _scan_maps(alpha, beta, BLOCK_T, backward, SHUFFLE_TIME, TIME_THREADS, False)
        y, carry, carry_out = _apply_carry(A, B, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, backward,
                                           LOOKBACK, SHUFFLE_TIME)
        return y, rows_up(y, carry, BLOCK_T, SHUFFLE_TIME), carry_out
    if TIME_THREADS > 1:
        A, B, E, F = scan_thread_runs_with_previous(alpha, beta, backward, TIME_THREADS)
    else:
        before_a, before_b = identity_map(alpha)  # nothing before a lone element yet
        A, B, E, F = tl.associative_scan((alpha, beta, before_a, before_b), 0, affine_then_with_previous,
                                         reverse=backward)
    y, carry, carry_out = _apply_carry(A, B, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, backward,
                                       LOOKBACK, SHUFFLE_TIME)
    return y, E + F * carry[None, :], carry_out
