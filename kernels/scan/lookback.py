"""Chunked carry across programs: the value carried into a tile by decoupled look-back.

With look-back every ``[BLOCK_T, BLOCK_N]`` tile is its own program, so long sequences of few
environments still fill the GPU. Tiles are numbered in walking order (chunk-major, ``program_id``),
so a tile waits only for tiles of smaller number, which the GPU started before it (programs start
in increasing id order; CUB's single-pass scan assumes the same), and the interpreter, which runs
programs one after another in that order, finds every predecessor done.

A tile publishes its aggregate map (flag 1), walks back over its predecessors composing their
aggregates until one has published its carried-out value (flag 2), then publishes its own carried-out
value (flag 2). ``ws`` holds three ``[num_chunks, N]`` planes (aggregate alpha, aggregate beta,
carried-out value) and ``flags`` one zeroed int32 per tile. ``WINDOW`` predecessors are polled and
composed per step of the walk (1: one at a time, polled by every thread with an acquire load).
"""

from __future__ import annotations

import torch

from kernels._triton import INTERPRET, tl, triton
from kernels.scan.tiles import affine_then, edge_row, wide

# The interpreter and AMD GPUs have no PTX: they poll with an atomic instead of an acquire load.
_POLL_BY_ACQUIRE_LOAD = tl.constexpr(not INTERPRET and torch.version.hip is None)


@triton.jit
def _plane(ws, slot, chunk, num_chunks, N):
    """Where ``ws[slot, chunk, :]`` starts (``chunk`` a scalar or a vector of tiles)."""
    return ws + (wide(slot) * num_chunks + chunk) * N


@triton.jit
def _read(ws, slot, chunk, num_chunks, n, n_ok, N):
    return tl.load(_plane(ws, slot, chunk, num_chunks, N) + n, mask=n_ok, other=0.0, cache_modifier=".cg")


@triton.jit
def _publish(ws, flag, slot, values, chunk, num_chunks, n, n_ok, N, state):
    """Write this tile's plane ``slot``, make it visible, then set its flag to ``state``."""
    tl.store(_plane(ws, slot, chunk, num_chunks, N) + n, values, mask=n_ok)
    tl.debug_barrier()
    tl.atomic_xchg(flag, state, sem="release")


@triton.jit
def _poll(flag):
    """The flag at a scalar pointer, read with acquire semantics by every thread."""
    if _POLL_BY_ACQUIRE_LOAD:
        return tl.inline_asm_elementwise("ld.global.acquire.gpu.b32 $0, [$1];", "=r,l", [flag], dtype=tl.int32,
                                         is_pure=False, pack=1)
    return tl.atomic_add(flag, 0, sem="acquire")


@triton.jit
def _walk_one_by_one(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, like):
    """The carry into tile ``chunk``: predecessors' aggregates composed newest first, one at a time."""
    acc_a = tl.zeros_like(like)
    acc_b = acc_a + 1.0
    carry = acc_a
    j = chunk - 1
    searching = True
    while searching:
        flag = flags + wide(j) * n_blocks + block
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
def _window(flags, hi, block, n_blocks, WINDOW: tl.constexpr):
    """Tiles ``hi - WINDOW + 1 .. hi`` (ascending) and their flags; before the first tile, 2."""
    j = hi - WINDOW + 1 + tl.arange(0, WINDOW)
    state = tl.atomic_add(flags + wide(j) * n_blocks + block, 0, mask=j >= 0, sem="acquire")
    state = tl.where(j >= 0, state, 2)
    known = tl.max(tl.where(state == 2, j, -1), axis=0)  # the newest tile with a carried-out value
    unpublished = tl.max(((j > known) & (state == 0)).to(tl.int32), axis=0)
    return j, known, unpublished


@triton.jit
def _walk_by_window(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, like, WINDOW: tl.constexpr):
    """The carry into tile ``chunk``, ``WINDOW`` predecessors per step: wait until every one newer than
    the newest known carried-out value has published its aggregate, compose them with one scan, and
    stop at the known value or move one window back."""
    acc_a = tl.zeros_like(like)
    acc_b = acc_a + 1.0
    carry = acc_a
    hi = chunk - 1
    searching = True
    while searching:
        j, known, unpublished = _window(flags, hi, block, n_blocks, WINDOW)
        while unpublished > 0:
            j, known, unpublished = _window(flags, hi, block, n_blocks, WINDOW)
        use = (j > known)[:, None] & n_ok[None, :]
        a = tl.load(_plane(ws, 0, j, num_chunks, N)[:, None] + n[None, :], mask=use, other=0.0, cache_modifier=".cg")
        b = tl.load(_plane(ws, 1, j, num_chunks, N)[:, None] + n[None, :], mask=use, other=1.0, cache_modifier=".cg")
        a, b = tl.associative_scan((a, b), 0, affine_then)  # oldest first
        acc_a = acc_a + acc_b * edge_row(a, False)
        acc_b = acc_b * edge_row(b, False)
        if known > hi - WINDOW:
            carry = acc_a + acc_b * _read(ws, 2, known, num_chunks, n, n_ok, N)
            searching = False
        else:
            hi -= WINDOW
    return carry


@triton.jit
def carry_in(agg_a, agg_b, carry, chunk, block, T, N, ws, flags, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
             WINDOW: tl.constexpr):
    """The value carried into tile ``(chunk, block)`` whose aggregate map is ``(agg_a, agg_b)``;
    ``carry`` is the recurrence's initial value (the first tile's carry-in)."""
    num_chunks = tl.cdiv(T, BLOCK_T)
    n_blocks = tl.cdiv(N, BLOCK_N)
    n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < N
    flag = flags + wide(chunk) * n_blocks + block
    if chunk > 0:
        tl.store(_plane(ws, 0, chunk, num_chunks, N) + n, agg_a, mask=n_ok)
        _publish(ws, flag, 1, agg_b, chunk, num_chunks, n, n_ok, N, 1)  # both halves, then flag 1
        if WINDOW > 1:
            carry = _walk_by_window(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a, WINDOW)
        else:
            carry = _walk_one_by_one(ws, flags, chunk, block, n_blocks, num_chunks, n, n_ok, N, agg_a)
    _publish(ws, flag, 2, agg_a + agg_b * carry, chunk, num_chunks, n, n_ok, N, 2)
    return carry
