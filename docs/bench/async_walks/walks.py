"""Walks fed by asynchronous copies through shared memory (thirty-seventh session; a prototype, GAE
`[T, N]`, not in `kernels/`).

The bf16 walks from 8192 environments run one four-warp program per multiprocessor (one warp per
scheduler, issue slots 36% busy, 2.6 cycles per issued instruction; `../bf16_walks/ncu/det4.txt`),
and a chunk's scan crosses warps through shared memory (15 barriers a chunk). The thirty-fifth
session's Gluon walk put each warp's lanes along time (a chunk's scan inside its warp, no barrier)
but loaded straight from global memory, half sectors per lane, two chunks deep in registers: 0.65x
(`../gluon_walks/`). Here the same in-warp walk takes its inputs from a ring of ``STAGES`` chunks in
shared memory, filled by ``cp.async`` copies in a coalesced layout (lanes along environments, full
sectors) with each chunk's rows stored latest first, and read back in the walk's layout (lanes
along time, a swizzle that keeps the lanes of one instruction on distinct banks): one barrier a
chunk, and ``STAGES - 1`` chunks of copies in flight without registers. ``v_{t+1}`` is copied as a
second tile (rows one step later, from the L2).

  PYTHONPATH=. python docs/bench/async_walks/walks.py check I K                 # share I of K, against float64
  PYTHONPATH=. python docs/bench/async_walks/walks.py sweep warm I K            # compile share I of K
  PYTHONPATH=. python docs/bench/async_walks/walks.py sweep time OUT.json       # device time, graphs
"""
import json
import sys

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from kernels import _scan, reference  # noqa: E402

# Triton 3.6 names them thread_barrier and async_copy_global_to_shared.
_barrier = getattr(gl, "thread_barrier", None) or gl.barrier
_async_load = getattr(async_copy, "async_load", None) or async_copy.async_copy_global_to_shared


@gluon.jit
def _copy_chunk(smem, ptr, top, n0, T, N, stride_t, SHIFT: gl.constexpr, layout: gl.constexpr,
                BLOCK_T: gl.constexpr, BLOCK_N: gl.constexpr):
    """Issue the copies of rows ``t = top - i + SHIFT`` (row ``i`` of ``smem``) of ``ptr``, environments
    ``n0 ..``; nothing for ``t`` outside ``[0, T)`` or ``n >= N`` (those rows are not read as data)."""
    rows = gl.arange(0, BLOCK_T, layout=gl.SliceLayout(1, layout))
    n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
    t = top - rows + SHIFT
    mask = ((t >= 0) & (t < T))[:, None] & (n < N)[None, :]
    pointers = ptr + (t.to(gl.int64) * stride_t)[:, None] + n[None, :]
    _async_load(smem, pointers, mask=mask)


@gluon.jit
def _copy_inputs(r_s, v_s, vn_s, te_s, tr_s, r_ptr, v_ptr, term_ptr, trunc_ptr, chunk, num_chunks, n0, T, N,
                 stride_t, STAGES: gl.constexpr, FCOPY: gl.constexpr, BCOPY: gl.constexpr,
                 BLOCK_T: gl.constexpr, BLOCK_N: gl.constexpr):
    """The copies of walk chunk ``chunk`` (latest first) into its stage, as one group; an empty group
    past the last chunk, so that the group count stays one per chunk."""
    if chunk < num_chunks:
        stage = chunk % STAGES
        top = T - 1 - chunk * BLOCK_T
        _copy_chunk(r_s.index(stage), r_ptr, top, n0, T, N, stride_t, 0, FCOPY, BLOCK_T, BLOCK_N)
        _copy_chunk(v_s.index(stage), v_ptr, top, n0, T, N, stride_t, 0, FCOPY, BLOCK_T, BLOCK_N)
        _copy_chunk(vn_s.index(stage), v_ptr, top, n0, T, N, stride_t, 1, FCOPY, BLOCK_T, BLOCK_N)
        _copy_chunk(te_s.index(stage), term_ptr, top, n0, T, N, stride_t, 0, BCOPY, BLOCK_T, BLOCK_N)
        _copy_chunk(tr_s.index(stage), trunc_ptr, top, n0, T, N, stride_t, 0, BCOPY, BLOCK_T, BLOCK_N)
    async_copy.commit_group()


@gluon.jit
def _last_row(y):
    """Row ``BLOCK_T - 1`` (a chunk's earliest step) as a ``[BLOCK_N]`` vector (lane shuffles)."""
    index = gl.full([1, y.shape[1]], y.shape[0] - 1, gl.int32, layout=y.type.layout)
    return gl.sum(gl.gather(y, index, 0), axis=0)


def gae_async_walk(r_ptr, v_ptr, term_ptr, trunc_ptr, boot_ptr, adv_ptr, ret_ptr, T, N, stride_t, gamma, lam,
                   BLOCK_T: gl.constexpr, BLOCK_N: gl.constexpr, TIME_THREADS: gl.constexpr, VEC: gl.constexpr,
                   STAGES: gl.constexpr, SWIZZLE: gl.constexpr):
    """GAE over ``[T, N]`` rows ``stride_t`` apart (unit environment stride): program ``p`` walks
    environments ``p * BLOCK_N ..`` through all of time, ``BLOCK_T`` steps a chunk, latest first."""
    WARPS: gl.constexpr = gl.num_warps()
    ENV_THREADS: gl.constexpr = 32 // TIME_THREADS
    STEPS: gl.constexpr = BLOCK_T // TIME_THREADS
    WALK: gl.constexpr = gl.BlockedLayout([STEPS, VEC], [TIME_THREADS, ENV_THREADS], [1, WARPS], [1, 0])
    F_LANES_N: gl.constexpr = min(32, BLOCK_N // VEC)
    FCOPY: gl.constexpr = gl.BlockedLayout([1, VEC], [32 // F_LANES_N, F_LANES_N], [WARPS, 1], [1, 0])
    B_VEC: gl.constexpr = min(16, BLOCK_N)
    B_LANES_N: gl.constexpr = min(32, BLOCK_N // B_VEC)
    BCOPY: gl.constexpr = gl.BlockedLayout([1, B_VEC], [32 // B_LANES_N, B_LANES_N], [WARPS, 1], [1, 0])
    # A warp's instruction reads rows j * STEPS + s of its lanes j: one swizzle phase per run keeps them
    # on distinct 16-byte columns.
    FSMEM: gl.constexpr = gl.SwizzledSharedLayout(VEC, STEPS, min(8, BLOCK_N // VEC) if SWIZZLE else 1, [1, 0])
    BSMEM: gl.constexpr = gl.SwizzledSharedLayout(B_VEC, STEPS, max(1, min(8, BLOCK_N // B_VEC)) if SWIZZLE else 1,
                                                  [1, 0])
    FT: gl.constexpr = r_ptr.dtype.element_ty
    BT: gl.constexpr = term_ptr.dtype.element_ty
    r_s = gl.allocate_shared_memory(FT, [STAGES, BLOCK_T, BLOCK_N], FSMEM)
    v_s = gl.allocate_shared_memory(FT, [STAGES, BLOCK_T, BLOCK_N], FSMEM)
    vn_s = gl.allocate_shared_memory(FT, [STAGES, BLOCK_T, BLOCK_N], FSMEM)
    te_s = gl.allocate_shared_memory(BT, [STAGES, BLOCK_T, BLOCK_N], BSMEM)
    tr_s = gl.allocate_shared_memory(BT, [STAGES, BLOCK_T, BLOCK_N], BSMEM)

    n0 = gl.program_id(0) * BLOCK_N
    num_chunks = gl.cdiv(T, BLOCK_T)
    for chunk in gl.static_range(STAGES - 1):
        _copy_inputs(r_s, v_s, vn_s, te_s, tr_s, r_ptr, v_ptr, term_ptr, trunc_ptr, chunk, num_chunks, n0, T, N,
                     stride_t, STAGES, FCOPY, BCOPY, BLOCK_T, BLOCK_N)

    rows = gl.arange(0, BLOCK_T, layout=gl.SliceLayout(1, WALK))
    n = n0 + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, WALK))
    n_ok = n < N
    bootstrap = gl.load(boot_ptr + n, mask=n_ok, other=0).to(gl.float32)
    carry = gl.zeros([BLOCK_N], gl.float32, layout=gl.SliceLayout(0, WALK))
    offsets = n[None, :].to(gl.int64)
    for chunk in range(0, num_chunks):
        async_copy.wait_group(STAGES - 2)
        _barrier()  # every thread's copies of this chunk landed; every thread done with the last stage
        _copy_inputs(r_s, v_s, vn_s, te_s, tr_s, r_ptr, v_ptr, term_ptr, trunc_ptr, chunk + STAGES - 1, num_chunks,
                     n0, T, N, stride_t, STAGES, FCOPY, BCOPY, BLOCK_T, BLOCK_N)
        stage = chunk % STAGES
        r = r_s.index(stage).load(WALK).to(gl.float32)
        v = v_s.index(stage).load(WALK).to(gl.float32)
        v_next = vn_s.index(stage).load(WALK).to(gl.float32)
        terminated = te_s.index(stage).load(WALK) != 0
        done = terminated | (tr_s.index(stage).load(WALK) != 0)
        t = T - 1 - chunk * BLOCK_T - rows
        v_after = gl.where(terminated, 0.0, gl.where((t == T - 1)[:, None], bootstrap[None, :], v_next))
        alpha = r + gamma * v_after - v
        beta = gl.where(done, 0.0, gamma * lam)
        A, Bm = gl.associative_scan((alpha, beta), 0, _scan.affine_then)
        adv = A + Bm * carry[None, :]
        carry = _last_row(adv)
        mask = (t >= 0)[:, None] & n_ok[None, :]
        at = (t.to(gl.int64) * stride_t)[:, None] + offsets
        gl.store(adv_ptr + at, adv.to(FT), mask=mask)
        gl.store(ret_ptr + at, (adv + v).to(FT), mask=mask)


# T = 1, specialised as a constant, crashes Triton 3.6's compiler (an LLVM assertion); the walks take
# T > 256 only. The form without T's specialisation is timed against it (`specialised.log`).
gae_async_walk_unspecialised = gluon.jit(gae_async_walk, do_not_specialize=["T"])
gae_async_walk = gluon.jit(gae_async_walk)


def time_threads(block_n: int, num_warps: int, itemsize: int) -> int:
    """Lanes along time when each thread holds one 16-byte vector of environments (0 if not whole)."""
    env_threads, remainder = divmod(block_n * itemsize, 16 * num_warps)
    return 32 // env_threads if not remainder and env_threads and 32 % env_threads == 0 else 0


def gae_async(rewards, values, terminated, bootstrap_value, *, truncated, gamma=0.99, lam=0.95, time_dim=0,
              block_t=64, block_n=64, num_warps=4, stages=3, swizzle=True, specialise_t=True):
    """``kernels.gae`` for contiguous ``[T, N]`` inputs through :func:`gae_async_walk`."""
    assert time_dim == 0 and rewards.is_contiguous() and values.is_contiguous()
    T, N = rewards.shape
    itemsize = rewards.element_size()
    threads = time_threads(block_n, num_warps, itemsize)
    if not threads or block_t % threads:
        raise ValueError(f"{block_t}x{block_n}w{num_warps}: not whole 16-byte vectors and runs")
    adv, ret = torch.empty_like(rewards), torch.empty_like(rewards)
    as_bytes = (lambda x: x.view(torch.uint8) if x.dtype == torch.bool else x)
    kernel = gae_async_walk if specialise_t else gae_async_walk_unspecialised
    LAST_LAUNCH[:] = [kernel[(triton.cdiv(N, block_n),)](
        rewards, values, as_bytes(terminated), as_bytes(truncated), bootstrap_value, adv, ret, T, N, N,
        float(gamma), float(lam), block_t, block_n, threads, 16 // itemsize, stages, swizzle, num_warps=num_warps)]
    return adv, ret


LAST_LAUNCH: list = []  # the compiled kernel of the last launch (its registers, spills, shared memory)


def label_of(block_t, block_n, num_warps, stages, swizzle=True, specialise_t=True):
    return (f"async {block_t}x{block_n}w{num_warps}s{stages}" + ("" if swizzle else "-plain")
            + ("" if specialise_t else "-anyT"))


def parse(label):
    shape, stages = label.split()[1].split("-")[0].split("s")
    bt_bn, warps = shape.split("w")
    block_t, block_n = bt_bn.split("x")
    return int(block_t), int(block_n), int(warps), int(stages), "-plain" not in label, "-anyT" not in label


def call_of(label):
    block_t, block_n, warps, stages, swizzle, specialise_t = parse(label)
    return lambda a, kw: gae_async(*a, **kw, block_t=block_t, block_n=block_n, num_warps=warps, stages=stages,
                                   swizzle=swizzle, specialise_t=specialise_t)


BF16_TILES = [(64, 64, 4, 3), (64, 64, 4, 4), (64, 64, 4, 6), (128, 64, 4, 2), (128, 64, 4, 3), (128, 64, 8, 3),
              (64, 64, 8, 4), (64, 32, 2, 4), (64, 32, 4, 4), (128, 32, 4, 3), (64, 64, 4, 4, False),
              (64, 64, 4, 5), (32, 64, 4, 6), (64, 32, 2, 6)]
F32_TILES = [(64, 64, 4, 3), (32, 64, 4, 4), (64, 64, 8, 3), (64, 32, 4, 4), (128, 32, 4, 3), (32, 32, 2, 4),
             (64, 64, 4, 3, False), (32, 64, 4, 4, False)]
# The first sweep: 8192 x 4096 and 16384 x 2048 (`sweep_1.log`); the second over the walks' range.
FIRST = [(64, 64, 4, 3), (64, 64, 4, 4), (64, 64, 4, 6), (128, 64, 4, 2), (128, 64, 4, 3), (128, 64, 8, 3),
         (64, 64, 8, 4), (64, 32, 2, 4), (64, 32, 4, 4), (128, 32, 4, 3)]
SECOND = [(64, 64, 4, 3), (64, 64, 4, 4), (64, 64, 4, 5), (128, 64, 4, 2), (64, 32, 2, 4), (64, 32, 2, 6),
          (32, 64, 4, 6), (64, 64, 4, 4, False)]
# The third: how many programs a multiprocessor holds (shared memory: 32 KB a 64 x 64 stage) against waves.
WAVE_TILES = [(64, 64, 4, 2), (64, 64, 4, 3), (64, 64, 4, 4), (32, 64, 4, 4), (32, 64, 4, 6)]
WAVE_ENVS = (8192, 9216, 10240, 12288, 14336, 16384, 20480, 24576, 32768)
# T specialised (as the kernels are) or not (the waves run), two to four stages.
SPECIALISED = [(64, 64, 4, s, True, spec) for s in (2, 3, 4) for spec in (True, False)]
PLANS = {"sweep": [(N, T, "bf16", [label_of(*c) for c in FIRST]) for N, T in ((8192, 4096), (16384, 2048))]
         + [(8192, 4096, "f32", [label_of(*c) for c in F32_TILES[:6]])],
         "range": [(N, T, "bf16", [label_of(*c) for c in SECOND])
                   for N, T in ((8192, 4096), (16384, 2048), (32768, 1024), (8192, 1024), (10240, 2048),
                                (12288, 2048), (8192, 8192), (20480, 1024))]
         + [(N, T, "f32", [label_of(*c) for c in F32_TILES]) for N, T in ((8192, 4096), (16384, 2048))],
         "waves": [(N, T, "bf16", [label_of(*c) for c in WAVE_TILES]) for N in WAVE_ENVS for T in (1024, 2048, 4096)
                   if N * T <= 2**26]
         + [(N, T, "f32", [label_of(*c) for c in F32_TILES[:6]]) for N, T in ((8192, 4096), (16384, 2048),
                                                                               (32768, 1024))],
         "specialised": [(N, T, "bf16", [label_of(*c) for c in SPECIALISED]) for N, T in ((8192, 4096), (16384, 2048),
                                                                                           (20480, 1024))]}


def check(share: int = 0, shares: int = 1) -> None:
    """Every tile of the sweep (share ``share`` of ``shares``) against the float64 reference on odd
    shapes (partial chunks, partial programs) and one the sweep's cells specialise alike (filling the
    compile cache), float32 and bf16; prints the relative errors and fails on a wrong one."""
    jobs = [(dname, tile) for dname, tiles in (("f32", F32_TILES), ("bf16", BF16_TILES)) for tile in tiles]
    for dname, tile in jobs[share::shares]:
        for T, N in ((37, 16), (64, 64), (1000, 80), (777, 1040), (4096, 256)):
            args, kw = B.make_inputs("gae", N, T, "tn", B.DTYPES[dname], "cuda", T * N)
            up = [x.double() if x.is_floating_point() else x for x in args]
            ref = reference.gae(*up, truncated=kw["truncated"], gamma=kw.get("gamma", 0.99), lam=kw.get("lam", 0.95))
            out = call_of(label_of(*tile))(args, kw)
            err = max(((o.double() - r).norm() / r.norm().clamp_min(1e-30)).item() for o, r in zip(out, ref))
            ok = err < (1e-5 if dname == "f32" else 1e-2)
            k = LAST_LAUNCH[0]
            print(f"{dname} {label_of(*tile)} registers {getattr(k, 'n_regs', '?')} spills "
                  f"{getattr(k, 'n_spills', '?')} shared {getattr(k.metadata, 'shared', '?')}")
            print(f"{dname} {T}x{N} {label_of(*tile)} rel err {err:.1e} {'ok' if ok else 'WRONG'}", flush=True)
            if not ok:  # where: the first wrong (t, n) of each output, and the share of wrong elements
                for o, r in zip(out, ref):
                    bad = ((o.double() - r).abs() > 1e-2 * (1 + r.abs())).nonzero()
                    print(f"   wrong {len(bad) / r.numel():.2f}, first {bad[:3].tolist()}", flush=True)


def sweep_time(cells, out_path: str, warm: bool = False, share: int = 0, shares: int = 1) -> None:
    copy_gbs = 0.0 if warm else B.copy_bandwidth("cuda", 2**30, 25, 200)
    print(f"copy {copy_gbs:.0f} GB/s", flush=True)
    rows = []
    for i, (N, T, dname, labels) in enumerate(cells):
        if warm and i % shares != share:
            continue
        nbytes = B.cell_bytes("gae", N, T, B.DTYPES[dname])
        sets = 1 if warm else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        calls = {"default": lambda a, kw: kernels.gae(*a, **kw)} | {label: call_of(label) for label in labels}
        timer = (lambda f: 0.0) if warm else (lambda f: B.graph_us(f, "cuda", 0.0, calls=max(B.GRAPH_CALLS, sets)))
        times = B.checked_times(calls, "gae", N, T, "tn", dname, 1 if warm else 2, 10, 50, timer=timer,
                                input_sets=sets)
        rows.append(dict(estimator="gae", N=N, T=T, dtype=dname, bytes=nbytes, copy_gbs=copy_gbs, times=times))
        for label, t in times.items():
            best = min((x for x in t if isinstance(x, float)), default=None)
            pct = f"{nbytes / best / 1e3 / copy_gbs:5.0%}" if best and copy_gbs else "  -  "
            print(f"gae {N}x{T} {dname} {label:24s} {'/'.join(str(x)[:8] for x in t)} {pct}", flush=True)
        if not warm:
            json.dump(rows, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    if sys.argv[1] == "check":
        check(*map(int, sys.argv[2:4]))
    elif sys.argv[2] == "warm":
        sweep_time(PLANS[sys.argv[1]], "", True, int(sys.argv[3]), int(sys.argv[4]))
    else:
        sweep_time(PLANS[sys.argv[1]], sys.argv[3])
