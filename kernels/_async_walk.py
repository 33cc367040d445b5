"""Walks fed through shared memory by asynchronous copies (Gluon; ``LaunchConfig.async_walk``).

A walk's program owns ``BLOCK_N`` environments of a ``[T, N]`` rollout and goes through all of time
in chunks of ``BLOCK_T`` steps, latest first, like the Triton walks (``_scan``). Its layout differs:
the warps lie side by side along environments, and in each warp every thread holds a run of
``BLOCK_T / TIME_THREADS`` consecutive steps of one 16-byte vector of environments (or of four of
them, ``LaunchConfig.env_runs_of_four``: twice the lanes along time)::

    row i of a chunk = step top - i        thread (j, e) of warp w: rows j * R .. j * R + R - 1,
                                           environments (w * ENV_THREADS + e) * VEC .. + VEC - 1

so a chunk's reverse scan never leaves its warp: each thread's run, then warp shuffles (no shared
memory, no barrier), and the carry into the next chunk is the chunk's last row, one shuffle away.

Lanes along time would read global memory in half sectors, a few bytes in flight per thread
(experiment log, "Explicit-layout walks": 0.65x). Here the inputs come through a ring of
``NUM_STAGES`` chunks in shared memory: each chunk's rows are copied by ``cp.async`` in a coalesced
layout (lanes along environments, whole 16-byte vectors), row ``i`` of the chunk's buffer holding
step ``top - i``, while the program scans the chunk ``NUM_STAGES - 1`` before it; the walk then
reads the buffer in its own layout, swizzled so that the lanes of one read fall on distinct banks.
One barrier a chunk: after it, this chunk's copies have landed and every thread has finished with
the buffer the next copies overwrite.

The copies move whole 16-byte vectors, so every series must have unit environment stride, rows and
data 16 bytes aligned (row strides a multiple of 16 elements), 16-bit floats and 1-byte flags, and
``N`` a multiple of 16 (``_launch`` checks, and takes the Triton walk where a problem does not fit).

How deep the ring should be, and how long a chunk, is measured, not derived: on the H200 with Triton
3.6 GAE's twin ran fast at one depth and as slow as the Triton walk at the next, its fast builds taking
167 registers and its slow ones 139 (experiment log, "Walks fed through shared memory"), and discounted
returns' twin, which copies the same bytes as lambda returns', ran at most 1.05x its Triton walk's speed
at 8192 environments in 64-step chunks and 1.49x in 128-step ones ("Async walks for
lambda returns, discounted returns and Retrace"); a change to a twin's code must measure its tiles
again.

An estimator with such a kernel registers it as the twin of its Triton kernel (:func:`twin_of`): the
same arguments, so ``_launch.launch`` takes the twin when the block shape says ``async_walk``. A twin
allocates a :func:`ring` per series, issues each chunk's :func:`copy_chunk` calls and :func:`commit`,
waits with :func:`wait_for_chunk`, reads its buffers in :func:`walk_layout` and scans each chunk from
the carry out of the one before it (:func:`scan_chunk`). A twin that needs each step's successor value
takes it from the tile itself (:func:`successor_rows`), and one that would hold many values through the
scan may read its buffers again after it (:func:`read_again`; V-trace's).
"""

from __future__ import annotations

from typing import Optional

from kernels import _explicit_layout, _scan
from kernels._triton import HAVE_GLUON, gl, gluon

if HAVE_GLUON:
    from triton.experimental.gluon.language.nvidia.ampere import async_copy

    # Triton 3.6 names them thread_barrier and async_copy_global_to_shared; later ones barrier and async_load.
    _barrier = getattr(gl, "thread_barrier", None) or gl.barrier
    _async_load = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared

TWINS: dict = {}  # Triton kernel -> its async-walk twin


twin_of = _scan.twin_registrar(TWINS)  # registers the decorated Gluon kernel as an async-walk twin


def twin_kernel(fn):
    """``gluon.jit`` for an async-walk twin: coefficients as ``_scan.coefficient_kernel`` takes them, and
    ``T`` not specialised (``T = 1`` as a constant crashed Triton 3.6's compiler, an LLVM assertion)."""
    return _scan.coefficient_kernel(fn, gluon.jit, unspecialised=("T",))


def time_threads(block_n: int, num_warps: int, itemsize: int, vector_bytes: int = 16) -> int:
    """Lanes of a warp along time in a walk of ``block_n`` environments on ``num_warps`` warps, each
    thread one ``vector_bytes`` vector of ``itemsize``-byte floats: 0 where that does not give whole
    vectors and a power-of-two number of lanes along environments."""
    env_threads, remainder = divmod(block_n * itemsize, vector_bytes * num_warps)
    return 32 // env_threads if not remainder and env_threads and 32 % env_threads == 0 else 0


FLOAT_ITEMSIZE = 2  # the one float width the walks were measured at (float32 gained nothing: experiment log)
FLAG_ITEMSIZE = 1


def misfit(arg_names: tuple, args: tuple, N: int) -> Optional[str]:
    """Why the series among a kernel's arguments (``X_ptr, s_X_t, s_X_n`` triples) cannot be copied as
    whole 16-byte vectors, or ``None`` if they can; absent series (placeholders with strides 0, 0)
    are skipped. Float series must hold 16-bit floats, flag series 1-byte flags."""
    if N % 16:
        return f"N = {N} is not a multiple of 16"
    for i, name in enumerate(arg_names[: len(args) - 2]):
        stem = name.removesuffix("_ptr")
        if not (name.endswith("_ptr") and tuple(arg_names[i + 1:i + 3]) == (f"s_{stem}_t", f"s_{stem}_n")):
            continue
        tensor, stride_t, stride_n = args[i:i + 3]
        if stride_t == 0 and stride_n == 0:
            continue
        flags = name in _scan.FLAG_POINTERS
        itemsize = FLAG_ITEMSIZE if flags else FLOAT_ITEMSIZE
        if tensor.element_size() != itemsize:
            return f"{stem}: {tensor.dtype} is not {'a 1-byte flag' if flags else 'a 16-bit float'} type"
        if stride_n != 1 or stride_t % 16 or tensor.data_ptr() % 16:
            return (f"{stem}: rows must be contiguous, 16 elements apart and 16-byte aligned (strides "
                    f"{stride_t}, {stride_n})")
    return None


@gluon.constexpr_function
def walk_layout(block_t: int, block_n: int, time_threads: int, num_warps: int):
    """The walk's layout of a ``[block_t, block_n]`` chunk (module docstring): in each warp
    ``time_threads`` lanes along time, each a run of ``block_t / time_threads`` steps of one vector of
    environments (the lanes left along environments share the warp's part of them); the warps side by
    side along environments."""
    env_lanes = 32 // time_threads
    return gl.BlockedLayout([block_t // time_threads, block_n // (env_lanes * num_warps)], [time_threads, env_lanes],
                            [1, num_warps], [1, 0])


@gluon.jit
def ring(dtype: gl.constexpr, NUM_STAGES: gl.constexpr, BLOCK_T: gl.constexpr, BLOCK_N: gl.constexpr,
         TIME_THREADS: gl.constexpr):
    """``NUM_STAGES`` chunk buffers ``[BLOCK_T, BLOCK_N]`` of ``dtype`` in shared memory, in 16-byte
    vectors along environments. A walk's read puts lanes ``j = 0, 1, ...`` on rows ``j * STEPS + s``
    (``STEPS = BLOCK_T / TIME_THREADS``): one swizzle phase per run of ``STEPS`` rows keeps them on
    distinct 16-byte columns."""
    VEC: gl.constexpr = min(128 // dtype.primitive_bitwidth, BLOCK_N)
    SWIZZLED: gl.constexpr = gl.SwizzledSharedLayout(VEC, BLOCK_T // TIME_THREADS, max(1, min(8, BLOCK_N // VEC)),
                                                     [1, 0])
    return gl.allocate_shared_memory(dtype, [NUM_STAGES, BLOCK_T, BLOCK_N], SWIZZLED)


@gluon.jit
def copy_chunk(smem, ptr, top, n0, T, N, stride_t, stride_n, SHIFT: gl.constexpr = 0):
    """Issue the asynchronous copies of ``ptr[top - i + SHIFT, n0 + j]`` into row ``i``, column ``j``
    of ``smem`` (a ``[BLOCK_T, BLOCK_N]`` buffer of a :func:`ring`; flags, bool or byte, as bytes),
    lanes along environments, one 16-byte vector each; none for steps outside ``[0, T)`` or
    environments from ``N`` (those elements are never read as data)."""
    VEC: gl.constexpr = min(128 // smem.dtype.primitive_bitwidth, smem.shape[1])
    LANES: gl.constexpr = min(32, smem.shape[1] // VEC)
    COPY: gl.constexpr = gl.BlockedLayout([1, VEC], [32 // LANES, LANES], [gl.num_warps(), 1], [1, 0])
    rows = gl.arange(0, smem.shape[0], layout=gl.SliceLayout(1, COPY))
    n = n0 + gl.arange(0, smem.shape[1], layout=gl.SliceLayout(0, COPY))
    t = top - rows + SHIFT
    mask = ((t >= 0) & (t < T))[:, None] & (n < N)[None, :]
    # bool tensors arrive as 1-bit pointers; their elements are bytes
    source = ptr.to(gl.pointer_type(smem.dtype), bitcast=True)
    pointers = source + (t.to(gl.int64) * stride_t)[:, None] + (n.to(gl.int64) * stride_n)[None, :]
    _async_load(smem, pointers, mask=mask)


@gluon.jit
def commit():
    """Close the copies issued since the last commit into one group (one per chunk, even empty)."""
    async_copy.commit_group()


@gluon.jit
def wait_for_chunk(NUM_STAGES: gl.constexpr):
    """Wait until this chunk's copies (issued ``NUM_STAGES - 1`` groups ago) have landed, and for every
    thread to get here: then the chunk is readable, and the buffer read in the previous chunk free."""
    async_copy.wait_group(NUM_STAGES - 2)
    _barrier()


@gluon.jit
def read_again():
    """A barrier before a chunk's buffers are read a second time: the compiler then reads them again
    instead of keeping the first read's values in registers (the buffers hold the chunk until the next
    :func:`wait_for_chunk`)."""
    _barrier()


@gluon.jit
def last_row(y):
    """Row ``BLOCK_T - 1`` of a walk tile (a chunk's earliest step) as a ``[BLOCK_N]`` vector: one warp
    shuffle per value, the chunk's time lying in one warp."""
    index = gl.full([1, y.shape[1]], y.shape[0] - 1, gl.int32, layout=y.type.layout)
    return gl.sum(gl.gather(y, index, 0), axis=0)


@gluon.jit
def successor_rows(y, before):
    """Each row's successor step in a walk tile ``y`` (latest first): row ``i`` gets row ``i - 1``, row 0
    ``before`` (a ``[BLOCK_N]`` vector: the step after the chunk's first). Every row of a thread's run
    but its first takes its neighbour in the same thread (``_explicit_layout``'s splits and joins, no
    data movement); each run's first row takes the last row of the run before it, one lane earlier
    (one warp shuffle per value)."""
    BLOCK_T: gl.constexpr = y.shape[0]
    BLOCK_N: gl.constexpr = y.shape[1]
    STEPS: gl.constexpr = y.type.layout.size_per_thread[0]
    RUNS: gl.constexpr = BLOCK_T // STEPS
    runs = gl.permute(gl.reshape(y, [RUNS, STEPS, BLOCK_N]), (0, 2, 1))  # runs[r, n, s]: row r * STEPS + s
    ends = _run_ends(runs)
    run = gl.arange(0, RUNS, layout=gl.SliceLayout(1, ends.type.layout))
    earlier = gl.gather(ends, gl.maximum(run - 1, 0)[:, None] + gl.zeros_like(ends).to(gl.int32), 0)
    firsts = gl.where((run == 0)[:, None], gl.convert_layout(before, gl.SliceLayout(0, ends.type.layout))[None, :],
                      earlier)
    shifted = gl.permute(_explicit_layout.shift_in(runs, firsts, STEPS), (0, 2, 1))
    return gl.convert_layout(gl.reshape(shifted, [BLOCK_T, BLOCK_N]), y.type.layout)


@gluon.jit
def _run_ends(runs):
    """``runs[:, :, STEPS - 1]`` of ``runs[r, n, s]`` (each run's last step), by splits."""
    if runs.shape[2] == 1:
        ends = gl.reshape(runs, [runs.shape[0], runs.shape[1]])
    else:
        _, odd = gl.split(gl.reshape(runs, [runs.shape[0], runs.shape[1], runs.shape[2] // 2, 2]))
        ends = _run_ends(odd)
    return ends


@gluon.jit
def scan_chunk(alpha, beta, carry):
    """A walk tile's values ``y = A + B carry`` from the carry into it (the value after its first row
    in scan order) and the carry out of it (its :func:`last_row`): the chunk's ``(alpha, beta)`` scanned
    inside its warps (``_explicit_layout.scan_tile``)."""
    A, B = _explicit_layout.scan_tile(alpha, beta)
    y = A + B * carry[None, :]
    return y, last_row(y)
