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
"""

from __future__ import annotations

from kernels._triton import tl, triton


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


@triton.jit
def scalar(hi, lo, DTYPE: tl.constexpr):
    """A float coefficient passed as two float32 halves (``_launch.scalars``), in ``DTYPE``."""
    return (tl.zeros((), DTYPE) + hi) + lo


@triton.jit
def wide(index):
    """A scalar index as int64, so that ``index * stride`` cannot overflow."""
    return tl.zeros((), tl.int64) + index


@triton.jit
def chunk_rows(chunk, num_chunks, T, BLOCK_T: tl.constexpr, REVERSE: tl.constexpr):
    """Time indices of the ``chunk``-th chunk in walking order; reverse walks from the end."""
    if REVERSE:
        start = (num_chunks - 1 - chunk) * BLOCK_T
    else:
        start = chunk * BLOCK_T
    return start + tl.arange(0, BLOCK_T)


@triton.jit
def load_tile(ptr, t, n, stride_t, stride_n, mask, DTYPE: tl.constexpr):
    """Load a ``[BLOCK_T, BLOCK_N]`` tile of a time-major view, converted to ``DTYPE``; 0 where masked."""
    offsets = t[:, None].to(tl.int64) * stride_t + n[None, :].to(tl.int64) * stride_n
    return tl.load(ptr + offsets, mask=mask, other=0).to(DTYPE)


@triton.jit
def load_flags(ptr, t, n, stride_t, stride_n, mask):
    """Load a tile of 0/1 flags (bool viewed as uint8, integer or float) as booleans."""
    offsets = t[:, None].to(tl.int64) * stride_t + n[None, :].to(tl.int64) * stride_n
    return tl.load(ptr + offsets, mask=mask, other=0) != 0


@triton.jit
def store_tile(ptr, value, t, n, stride_t, stride_n, mask):
    offsets = t[:, None].to(tl.int64) * stride_t + n[None, :].to(tl.int64) * stride_n
    tl.store(ptr + offsets, value.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def load_env(ptr, n, stride, mask, DTYPE: tl.constexpr):
    """Load one value per environment (``bootstrap_value``, ``initial``) as a ``[BLOCK_N]`` vector."""
    return tl.load(ptr + n.to(tl.int64) * stride, mask=mask, other=0).to(DTYPE)


@triton.jit
def edge_row(y, t, BLOCK_T: tl.constexpr, REVERSE: tl.constexpr):
    """The row of a scanned tile that carries into the next chunk: the first for reverse, else the last."""
    rows = tl.arange(0, BLOCK_T)
    edge = 0 if REVERSE else BLOCK_T - 1
    return tl.sum(tl.where(rows[:, None] == edge, y, 0.0), axis=0)


@triton.jit
def scan_chunk(alpha, beta, carry, t, BLOCK_T: tl.constexpr, REVERSE: tl.constexpr):
    """Solve one chunk given the value carried in; returns the chunk's ``y`` and the next carry."""
    A, B = tl.associative_scan((alpha, beta), 0, affine_then, reverse=REVERSE)
    y = A + B * carry[None, :]
    return y, edge_row(y, t, BLOCK_T, REVERSE)


@triton.jit
def scan_chunk_with_next(alpha, beta, carry, t, BLOCK_T: tl.constexpr):
    """Reverse ``scan_chunk`` that also returns ``y_{t+1}`` for every row (the carry at the chunk end)."""
    zero = tl.zeros_like(alpha)
    A, B, E, F = tl.associative_scan(
        (alpha, beta, zero, zero + 1.0), 0, affine_then_with_previous, reverse=True
    )
    y = A + B * carry[None, :]
    y_next = E + F * carry[None, :]
    return y, y_next, edge_row(y, t, BLOCK_T, True)
