"""The walk over time: which chunks a program owns, and the scan of one chunk with its carry.

A program owns ``BLOCK_N`` environments and walks time in chunks of ``BLOCK_T`` steps (``LOOKBACK``
0), or owns one ``[BLOCK_T, BLOCK_N]`` tile whose carry-in comes from the earlier tiles by decoupled
look-back (``LOOKBACK``: the look-back window, ``kernels.scan.lookback``). Each chunk's pairs are
scanned on chip with ``affine_then``; the value carried in from the previous chunk is then applied,
``y = A + B * carry``, and the chunk's last row in scan order becomes the next carry. With thread
runs (``RUN > 1``, rows from ``chunk_times``) a chunk is scanned in two levels (``scan_runs``).
"""

from __future__ import annotations

from kernels._triton import tl, triton
from kernels.scan.lookback import carry_in
from kernels.scan.tiles import affine_then, edge_row


@triton.jit
def affine_then_with_previous(a1, b1, e1, f1, a2, b2, e2, f2):
    """``affine_then`` on the inclusive maps, plus each element's exclusive map ``(e, f)``: the
    composition of every map strictly before it in scan order. A lone element is ``(alpha, beta, 0,
    1)``; combining keeps the later element's exclusive map composed after the earlier part."""
    return a2 + b2 * a1, b1 * b2, e2 + f2 * a1, f2 * b1


@triton.jit
def _as_runs(x, RUN: tl.constexpr):
    """A ``[BLOCK_T, BLOCK_N]`` tile in thread runs as ``[RUN, BLOCK_T // RUN, BLOCK_N]``: axis 0 walks
    one thread's run (``run_position``), axis 1 the runs; no data moves."""
    return tl.reshape(x, [RUN, x.shape[0] // RUN, x.shape[1]])


@triton.jit
def _runs_before(A, B, BACKWARD: tl.constexpr):
    """For scanned runs ``(A, B)`` (``[RUN, runs, BLOCK_N]``), the composition ``(E, F)`` of every run
    before each run in scan order (the identity for the first), as ``[1, runs, BLOCK_N]``: each run's
    whole map is its edge step (no data leaves the thread), then one map per run crosses threads."""
    k = tl.arange(0, A.shape[0])[:, None, None]
    edge = 0 if BACKWARD else A.shape[0] - 1
    whole_a = tl.sum(tl.where(k == edge, A, 0.0), axis=0)
    whole_b = tl.sum(tl.where(k == edge, B, 0.0), axis=0)
    none_a = tl.zeros_like(whole_a)
    _, _, E, F = tl.associative_scan((whole_a, whole_b, none_a, none_a + 1.0), 0, affine_then_with_previous,
                                     reverse=BACKWARD)
    return E[None, :, :], F[None, :, :]


@triton.jit
def scan_runs(alpha, beta, BACKWARD: tl.constexpr, RUN: tl.constexpr):
    """``tl.associative_scan((alpha, beta), 0, affine_then, reverse=BACKWARD)`` over the positions of a
    tile's rows (``run_position``): each thread scans its own run of ``RUN`` steps ``(A_k, B_k)``, the
    runs' whole maps are scanned across threads, and the map ``(E, F)`` of the runs before a run
    precedes each of its steps: ``(A_k + B_k E, B_k F)``. ``RUN == 1``: the plain scan."""
    if RUN == 1:
        return tl.associative_scan((alpha, beta), 0, affine_then, reverse=BACKWARD)
    A, B = tl.associative_scan((_as_runs(alpha, RUN), _as_runs(beta, RUN)), 0, affine_then, reverse=BACKWARD)
    E, F = _runs_before(A, B, BACKWARD)
    return tl.reshape(A + B * E, alpha.shape), tl.reshape(B * F, alpha.shape)


@triton.jit
def scan_runs_with_previous(alpha, beta, BACKWARD: tl.constexpr, RUN: tl.constexpr):
    """``scan_runs`` that also returns each step's exclusive map (``affine_then_with_previous``): the
    run's own exclusive map ``(e_k, f_k)`` preceded by the runs before it, ``(e_k + f_k E, f_k F)``."""
    if RUN == 1:
        none_a = tl.zeros_like(alpha)
        return tl.associative_scan((alpha, beta, none_a, none_a + 1.0), 0, affine_then_with_previous,
                                   reverse=BACKWARD)
    a, b = _as_runs(alpha, RUN), _as_runs(beta, RUN)
    none_a = tl.zeros_like(a)
    A, B, e, f = tl.associative_scan((a, b, none_a, none_a + 1.0), 0, affine_then_with_previous, reverse=BACKWARD)
    E, F = _runs_before(A, B, BACKWARD)
    return (tl.reshape(A + B * E, alpha.shape), tl.reshape(B * F, alpha.shape), tl.reshape(e + f * E, alpha.shape),
            tl.reshape(f * F, alpha.shape))


@triton.jit
def program_chunks(T, N, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, LOOKBACK: tl.constexpr):
    """``(block, first_chunk, end_chunk, num_chunks)`` of this program: its column of environments
    and the chunks it walks (all of them; with look-back its one tile, numbered chunk-major)."""
    num_chunks = tl.cdiv(T, BLOCK_T)
    if LOOKBACK:
        tile = tl.program_id(0)
        n_blocks = tl.cdiv(N, BLOCK_N)
        first = tile // n_blocks
        return tile % n_blocks, first, first + 1, num_chunks
    return tl.program_id(0), 0, num_chunks, num_chunks


@triton.jit
def _carried(A, B, carry, chunk, block, T, N, ws, flags, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
             BACKWARD: tl.constexpr, LOOKBACK: tl.constexpr):
    """The carry into a chunk scanned into ``(A, B)``: the walk's ``carry``, or found by look-back."""
    if LOOKBACK:
        carry = carry_in(edge_row(A, BACKWARD), edge_row(B, BACKWARD), carry, chunk, block, T, N, ws, flags,
                         BLOCK_T, BLOCK_N, LOOKBACK)
    return carry


@triton.jit
def scan_chunk(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr,
               REVERSE: tl.constexpr, LATEST_FIRST: tl.constexpr, LOOKBACK: tl.constexpr, NUM_STAGES: tl.constexpr,
               RUN: tl.constexpr):
    """Solve one chunk whose rows are ``chunk_times(..., REVERSE, LATEST_FIRST, RUN)``: ``(y, carry_out)``.

    ``alpha, beta`` are the tile's pairs, the identity ``(0, 1)`` where masked; ``carry`` the value
    carried in (with look-back: the recurrence's initial value). The carry-out is the chunk's last row
    in scan order, a reduction across the tile's threads, which a look-back tile (its carry-out is
    published by ``carry_in``) and an unpipelined walk's last chunk skip (returning ``carry``): a tile
    holding a whole short sequence reduces nothing. Pipelined walks keep it (a branch in their loop
    costs more than it saves)."""
    BACKWARD: tl.constexpr = REVERSE and not LATEST_FIRST  # scanned last row to first
    A, B = scan_runs(alpha, beta, BACKWARD, RUN)
    carry = _carried(A, B, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, BACKWARD, LOOKBACK)
    y = A + B * carry[None, :]
    if LOOKBACK:
        return y, carry
    if NUM_STAGES == 1:
        carry_out = carry
        if chunk + 1 < tl.cdiv(T, BLOCK_T):
            carry_out = edge_row(y, BACKWARD)
        return y, carry_out
    return y, edge_row(y, BACKWARD)


@triton.jit
def scan_chunk_with_next(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T: tl.constexpr,
                         BLOCK_N: tl.constexpr, LATEST_FIRST: tl.constexpr, LOOKBACK: tl.constexpr, RUN: tl.constexpr):
    """Reverse ``scan_chunk`` that also returns ``y_{t+1}`` for every row (``carry`` after the last
    step of the chunk): ``(y, y_next, carry_out)``, from the scan's exclusive maps. Walks keep the
    carry-out's reduction in every chunk."""
    BACKWARD: tl.constexpr = not LATEST_FIRST
    A, B, E, F = scan_runs_with_previous(alpha, beta, BACKWARD, RUN)
    carry = _carried(A, B, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, BACKWARD, LOOKBACK)
    y = A + B * carry[None, :]
    if LOOKBACK:
        return y, E + F * carry[None, :], carry
    return y, E + F * carry[None, :], edge_row(y, BACKWARD)
