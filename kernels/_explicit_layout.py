"""Short time-major sequences held whole in one tile whose layout the kernel sets itself (Gluon).

A ``[T, N]`` rollout is contiguous along environments, so Triton lays a loaded tile out with
consecutive environments in each thread and along the lanes: time then crosses threads at every
step, and a scan over it moves the tile through shared memory several times (GAE's 128 x 16 tile:
13 barriers). Here the kernel chooses the layout instead: each thread holds a run of consecutive
steps of a few consecutive environments (``[steps, envs]`` per thread, the environments as one
vector load), ``time_threads`` lanes of a warp and every warp lie along time, the other lanes along
environments::

    steps per thread = BLOCK_T / (time_threads * warps)    envs per thread = BLOCK_N * time_threads / 32

The reverse-time scan ``A_t = alpha_t + beta_t A_{t+1}`` over the whole sequence is then each
thread's run, a few warp shuffles, and one exchange between warps. The tile holds its steps latest
first (row ``i`` is step ``BLOCK_T - 1 - i``), so the scan runs forward (Triton's reverse scan
mirrors the lanes of each warp by shuffles); a forward scan's tile holds them in time order. A
tile is one program: ``T <= BLOCK_T``.

An estimator with such a kernel registers it as the *twin* of its Triton kernel
(:func:`twin_of`): the same arguments, so ``_launch.launch`` takes the twin when the block shape
says ``explicit_layout``. Gluon kernels run on a GPU only (``_triton.runs_gluon``).
"""

from __future__ import annotations

from kernels import _scan
from kernels._triton import gl, gluon

TWINS: dict = {}  # Triton kernel -> its explicit-layout twin


twin_of = _scan.twin_registrar(TWINS)  # registers the decorated Gluon kernel as an explicit-layout twin


def twin_kernel(fn):
    """``gluon.jit`` for an explicit-layout twin (coefficients as in ``_scan.coefficient_kernel``)."""
    return _scan.coefficient_kernel(fn, gluon.jit)


def time_threads(block_t: int, num_warps: int) -> int:
    """Lanes of a warp along time in an explicit-layout tile: 8 (so a warp reads 4 rows of 32-byte
    runs of environments), fewer in tiles of under 16 steps per warp, whose threads keep 2 steps."""
    return max(1, min(8, block_t // (2 * num_warps)))


@gluon.jit
def whole_sequence_tile(T, N, BLOCK_T: gl.constexpr, BLOCK_N: gl.constexpr, TIME_THREADS: gl.constexpr,
                        REVERSE: gl.constexpr):
    """Steps ``t`` (in scan order: latest first when ``REVERSE``) and environments ``n`` of this
    program's tile in the layout the module docstring describes, with ``n < N`` and the tile's mask
    (``t < T`` and ``n < N``)."""
    WARPS: gl.constexpr = gl.num_warps()
    ENV_THREADS: gl.constexpr = 32 // TIME_THREADS
    layout: gl.constexpr = gl.BlockedLayout([BLOCK_T // (TIME_THREADS * WARPS), BLOCK_N // ENV_THREADS],
                                            [TIME_THREADS, ENV_THREADS], [WARPS, 1], [1, 0])
    rows = gl.arange(0, BLOCK_T, layout=gl.SliceLayout(1, layout))
    if REVERSE:
        t = BLOCK_T - 1 - rows
    else:
        t = rows
    n = gl.program_id(0) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
    n_ok = n < N
    return t, n, n_ok, (t[:, None] < T) & n_ok[None, :]


@gluon.jit
def load_step(ptr, step, stride_t, n, stride_n, n_ok, DTYPE: gl.constexpr):
    """``ptr[step, n]`` for the tile's environments ``n`` as ``DTYPE`` (``_scan.load_env`` of one
    step; the step's offset in 64 bits, as ``_scan.wide`` gives it to the Triton kernels)."""
    steps = gl.zeros_like(n).to(gl.int64) + step
    return _scan.load_env(ptr + steps * stride_t, n, stride_n, n_ok, DTYPE)


@gluon.jit
def successor_tile(x, ptr, t, n, T, N, stride_t, stride_n, BLOCK_T: gl.constexpr, BLOCK_N: gl.constexpr,
                   TIME_THREADS: gl.constexpr, DTYPE: gl.constexpr):
    """``ptr[t + 1, n]`` (0 from ``t + 1 = T`` on and where ``n >= N``) for a latest-first
    :func:`whole_sequence_tile` ``x`` that holds ``ptr[t, n]`` as ``DTYPE`` (loaded with its mask).

    Row ``i`` of such a tile is step ``BLOCK_T - 1 - i``, and each thread holds the rows of a run,
    so every step of a run but its first has its successor in the same thread, one row earlier: it is
    taken from the thread's own registers (splits and joins of the run, no data movement), and only
    the first step's successor is loaded, one row per thread instead of a second tile."""
    WARPS: gl.constexpr = gl.num_warps()
    STEPS: gl.constexpr = BLOCK_T // (TIME_THREADS * WARPS)
    if STEPS == 1:
        succ = _scan.load_tile(ptr, t + 1, n, stride_t, stride_n, (t[:, None] + 1 < T) & (n < N)[None, :], DTYPE)
    else:
        RUNS: gl.constexpr = BLOCK_T // STEPS
        runs = gl.permute(gl.reshape(x, [RUNS, STEPS, BLOCK_N]), (0, 2, 1))  # runs[r, n, s]: row r * STEPS + s
        per_run: gl.constexpr = gl.SliceLayout(2, runs.type.layout)  # one step of each run
        run_t = BLOCK_T - 1 - gl.arange(0, RUNS, layout=gl.SliceLayout(1, per_run)) * STEPS  # each run's first step
        run_n = gl.program_id(0) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, per_run))
        after_run = _scan.load_tile(ptr, run_t + 1, run_n, stride_t, stride_n,
                                    (run_t[:, None] + 1 < T) & (run_n < N)[None, :], DTYPE)
        shifted = gl.permute(shift_in(runs, after_run, STEPS), (0, 2, 1))
        succ = gl.convert_layout(gl.reshape(shifted, [BLOCK_T, BLOCK_N]), x.type.layout)
    return succ


@gluon.jit
def shift_in(runs, first, STEPS: gl.constexpr):
    """``y[r, n, s] = runs[r, n, s - 1]``, ``y[r, n, 0] = first[r, n]``: each run moved one step on,
    by splitting it into even and odd steps (``y``'s even steps are the odd steps shifted, its odd
    steps the even ones)."""
    RUNS: gl.constexpr = runs.shape[0]
    BLOCK_N: gl.constexpr = runs.shape[1]
    if STEPS == 1:
        moved = gl.reshape(first, [RUNS, BLOCK_N, 1])
    else:
        even, odd = gl.split(gl.reshape(runs, [RUNS, BLOCK_N, STEPS // 2, 2]))
        shifted = gl.convert_layout(shift_in(odd, first, STEPS // 2), even.type.layout)
        moved = gl.reshape(gl.join(shifted, even), [RUNS, BLOCK_N, STEPS])
    return moved


@gluon.jit
def scan_tile(alpha, beta):
    """The inclusive maps ``(A, B)`` of a :func:`whole_sequence_tile` in scan order: for a reverse
    scan ``A_t = alpha_t + beta_t A_{t+1}`` from ``A_T = 0`` and ``B_t`` the product of ``beta``
    from t to the end, so ``A_t + B_t y_T`` starts from ``y_T`` (forward scans alike)."""
    return gl.associative_scan((alpha, beta), 0, _scan.affine_then)


@gluon.jit
def scan_tile_with_next(alpha, beta):
    """``(A, E)`` of a reverse :func:`whole_sequence_tile` from ``A_T = 0``: ``A_t`` as in
    :func:`scan_tile` and ``E_t = A_{t+1}`` (``_scan.affine_then_with_previous``'s exclusive map)."""
    A, _, E, _ = gl.associative_scan((alpha, beta, gl.zeros_like(alpha), gl.full_like(beta, 1.0)), 0,
                                     _scan.affine_then_with_previous)
    return A, E

