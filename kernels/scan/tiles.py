"""Tiles of a rollout: which steps and environments a program holds, their loads and stores, and the
scan's operator on them (``affine_then``, ``edge_row``).

A tile is ``[BLOCK_T, BLOCK_N]``: rows are time steps ``t`` (in the order the tile is scanned, see
``chunk_times``), columns environments ``n``. Any strides work: a series is addressed as
``ptr + t * stride_t + n * stride_n``, so ``[T, N]``, ``[N, T]`` and strided views need no copy.
Masked elements (past the end of time or of the environments) load as 0 and are never stored.
"""

from __future__ import annotations

import inspect

from kernels._triton import INTERPRET, tl, triton


def coefficient_kernel(fn):
    """``triton.jit`` for an estimator kernel whose ``*_hi``/``*_lo`` arguments carry a coefficient's
    float64 bits (``kernels.launch.scalars``): they are not specialised on their values, so any
    coefficient reuses the compiled kernel."""
    halves = [name for name in inspect.signature(fn).parameters if name.endswith(("_hi", "_lo"))]
    return triton.jit(fn, do_not_specialize=halves)


@triton.jit
def scalar(hi, lo, DTYPE: tl.constexpr):
    """A float coefficient from the two halves of its float64 bits, rounded once to ``DTYPE``."""
    bits = (hi.to(tl.int64) << 32) | (lo.to(tl.int64) & 0xFFFFFFFF)
    return bits.to(tl.float64, bitcast=True).to(DTYPE)


# Whether fast_exp may use the GPU's 2^x instruction (not in the interpreter, which cannot run PTX).
_GPU_EXP = tl.constexpr(not INTERPRET)


@triton.jit
def fast_exp(x):
    """``e^x``: in float32 on the GPU one ``ex2.approx.ftz`` of ``x log2 e`` (relative error about
    2^-22, results below 2^-126 flush to 0) instead of ``tl.exp``'s longer sequence; ``tl.exp`` in
    float64 and in the interpreter."""
    if _GPU_EXP and x.dtype == tl.float32:
        return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x * 1.4426950408889634],
                                         dtype=tl.float32, is_pure=True, pack=1)
    return tl.exp(x)


@triton.jit
def wide(index):
    """A scalar index as int64, so that ``index * stride`` cannot overflow."""
    return tl.zeros((), tl.int64) + index


@triton.jit
def envs(block, N, BLOCK_N: tl.constexpr):
    """The environments ``n`` of column ``block`` of tiles, and ``n < N``."""
    n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    return n, n < N


@triton.jit
def run_position(BLOCK_T: tl.constexpr, RUN: tl.constexpr):
    """Each tile row's position in its chunk: the row itself, or with thread runs (``RUN > 1``
    consecutive steps per thread) row ``k * (BLOCK_T // RUN) + j`` at position ``j * RUN + k``.

    A ``[T, N]`` tile's rows are dealt to the threads along time in turn (row i to thread
    ``i % (BLOCK_T // RUN)``), so each of those threads holds ``RUN`` consecutive steps, which
    ``scan_runs`` scans within the thread (``kernels.launch.heuristic.thread_run``)."""
    row = tl.arange(0, BLOCK_T)
    if RUN > 1:
        return (row % (BLOCK_T // RUN)) * RUN + row // (BLOCK_T // RUN)
    return row


@triton.jit
def chunk_times(chunk, num_chunks, BLOCK_T: tl.constexpr, REVERSE: tl.constexpr, LATEST_FIRST: tl.constexpr,
                RUN: tl.constexpr):
    """Time steps of the rows of the ``chunk``-th chunk: the step at each row's ``run_position`` in
    walking order (a reverse walk starts at the end). Ascending, except in a reverse walk
    ``LATEST_FIRST``: descending, so the tile is scanned first row to last (Triton lowers a reverse
    scan with lane-mirroring shuffles of every value). Row 0 and the last row stay the chunk's
    first and last steps in scan order."""
    position = run_position(BLOCK_T, RUN)
    if REVERSE:
        start = (num_chunks - 1 - chunk) * BLOCK_T
        if LATEST_FIRST:
            return start + (BLOCK_T - 1 - position)
        return start + position
    return chunk * BLOCK_T + position


@triton.jit
def tile_mask(t, T, n_ok):
    """Which elements of the tile at steps ``t`` exist: ``0 <= t < T`` and ``n < N``."""
    return ((t >= 0) & (t < T))[:, None] & n_ok[None, :]


@triton.jit
def tile_pointers(ptr, t, n, stride_t, stride_n):
    """``ptr[t, n]``: a pointer per row plus an offset per column (one 64-bit add per element)."""
    rows = ptr + t.to(tl.int64) * stride_t
    return rows[:, None] + (n.to(tl.int64) * stride_n)[None, :]


@triton.jit
def load_tile(ptr, t, n, stride_t, stride_n, mask, DTYPE: tl.constexpr):
    """A tile of a float series, converted to ``DTYPE``; 0 where masked."""
    return tl.load(tile_pointers(ptr, t, n, stride_t, stride_n), mask=mask, other=0).to(DTYPE)


@triton.jit
def in_runs_of_four(index):
    """``index`` itself, but known to the compiler as contiguous in runs of 4 only."""
    return index // 4 * 4 + index % 4


@triton.jit
def load_flags(ptr, t, n, stride_t, stride_n, mask):
    """A tile of 0/1 flags (bool viewed as uint8, integer or float) as booleans; false where masked.

    The indices are given as runs of four, so each thread loads 4 consecutive flags as it loads 4
    consecutive float32 values: the flag tile gets the float tiles' layout instead of one that must
    be converted through shared memory."""
    pointers = tile_pointers(ptr, in_runs_of_four(t), in_runs_of_four(n), stride_t, stride_n)
    return tl.load(pointers, mask=mask, other=0) != 0


@triton.jit
def store_tile(ptr, value, t, n, stride_t, stride_n, mask):
    """Store a tile into a series, converted to the series' dtype."""
    tl.store(tile_pointers(ptr, t, n, stride_t, stride_n), value.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def load_env(ptr, n, stride, mask, DTYPE: tl.constexpr):
    """One value per environment (``bootstrap_value``, ``initial``) as a ``[BLOCK_N]`` vector."""
    return tl.load(ptr + n.to(tl.int64) * stride, mask=mask, other=0).to(DTYPE)


@triton.jit
def affine_then(a1, b1, a2, b2):
    """``(a1, b1)`` then ``(a2, b2)``: the composition of two affine maps ``y -> a + b y``."""
    return a2 + b2 * a1, b1 * b2


@triton.jit
def edge_row(y, BACKWARD: tl.constexpr):
    """The last row of a scanned tile in scan order (the first row when scanned ``BACKWARD``)."""
    edge = 0 if BACKWARD else y.shape[0] - 1
    rows = tl.arange(0, y.shape[0])
    return tl.sum(tl.where(rows[:, None] == edge, y, 0.0), axis=0)
