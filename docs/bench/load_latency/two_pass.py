"""Prototype: two-pass segments for GAE ``[T, N]`` (float32), measured against the kernels.

A program owns ``BLOCK_N`` environments over one *segment* of ``CHUNKS`` chunks of ``BLOCK_T`` steps.
Pass 1 walks the segment and composes its aggregate map (the segment's reverse recurrence as one
``y -> a + b * y``), reading the inputs from DRAM; the segment then finds its carry by decoupled
look-back over the earlier segments (``_scan``'s walks, one flag per segment, not per tile); pass 2
walks the segment again with that carry, reading the same inputs, which the L2 still holds when the
segments in flight fit it, and writes the outputs. Both passes are software-pipelined ``tl.range``
loops (``STAGES``): the look-back's spin loops lie between them, not inside, so the pipeliner can
load the next chunks while a chunk is scanned, which one-tile look-back programs cannot do.

DRAM traffic stays one read of each input and one write of each output while the segments in flight
fit the L2; the price is a second scan of every tile and a second read from the L2.

Segments are numbered in walking order, segment-major (``pid = segment * n_blocks + block``), so a
segment only waits on smaller program ids, all started before it.

  python docs/bench/load_latency/two_pass.py OUT.json [warm]
  python -c 'import two_pass as p; p.async_copies(); p.main(OUT, False, CELLS, PER_SM)'  # (from its folder)
"""
import json
import sys
import time

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from kernels import LaunchConfig, _launch, _scan  # noqa: E402
from kernels._triton import tl, triton  # noqa: E402
from kernels.gae import _gae_pairs  # noqa: E402


@triton.jit
def _load(ptr, t, n, N, mask, ACC: tl.constexpr, POLICY: tl.constexpr):
    return tl.load(_scan.tile_pointers(ptr, t, n, N, 1), mask=mask, other=0, eviction_policy=POLICY).to(ACC)


@triton.jit
def _load_flags(ptr, t, n, N, mask, POLICY: tl.constexpr):
    rows = _scan.in_runs_of_four(t)
    cols = _scan.in_runs_of_four(n)
    return tl.load(_scan.tile_pointers(ptr, rows, cols, N, 1), mask=mask, other=0, eviction_policy=POLICY) != 0


@triton.jit
def _tile_pairs(r_ptr, v_ptr, term_ptr, trunc_ptr, bootstrap, chunk, num_chunks, T, N, n, n_ok, gamma, lam,
                ACC: tl.constexpr, BLOCK_T: tl.constexpr, TIME_THREADS: tl.constexpr, RUN_SUCCESSORS: tl.constexpr,
                POLICY: tl.constexpr):
    """GAE's ``(alpha, beta)`` of one chunk (latest first, in thread runs), with its values, rows and mask."""
    t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, True, True, TIME_THREADS)
    mask = (t[:, None] < T) & n_ok[None, :]
    r = _load(r_ptr, t, n, N, mask, ACC, POLICY)
    v = _load(v_ptr, t, n, N, mask, ACC, POLICY)
    terminated = _load_flags(term_ptr, t, n, N, mask, POLICY)
    done = terminated | _load_flags(trunc_ptr, t, n, N, mask, POLICY)
    v_succ = _scan.successor_rows(v, v_ptr, chunk, num_chunks, t, n, N, 1, n_ok, T, ACC, BLOCK_T, 0, True,
                                  TIME_THREADS if RUN_SUCCESSORS else 1)
    v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :], v_succ)
    alpha, beta = _gae_pairs(r, v, v_after, terminated, done, mask, gamma, lam, ACC)
    return alpha, beta, v, t, mask


@triton.jit
def _segment_carry(agg_a, agg_b, seg, block, num_segs, n_blocks, N, ws, flags, n, n_ok, WINDOW: tl.constexpr):
    """The value carried into segment ``seg`` (decoupled look-back over segments, as ``_scan.carry_in``
    over tiles): publish the aggregate, walk back to a known carry, publish the carry out."""
    my_flag = _scan._flag(flags, seg, n_blocks, block)
    carry = tl.zeros_like(agg_a)
    if seg > 0:
        _scan._store_plane(ws, 0, agg_a, seg, num_segs, n, n_ok, N)
        _scan._store_plane(ws, 1, agg_b, seg, num_segs, n, n_ok, N)
        _scan._raise_flag(my_flag, 1)
        if WINDOW > 1:
            carry = _scan._walk_by_window(ws, flags, seg, block, n_blocks, num_segs, n, n_ok, N, agg_a, WINDOW)
        else:
            carry = _scan._walk_one_by_one(ws, flags, seg, block, n_blocks, num_segs, n, n_ok, N, agg_a)
    _scan._store_plane(ws, 2, agg_a + agg_b * carry, seg, num_segs, n, n_ok, N)
    _scan._raise_flag(my_flag, 2)
    return carry


@_scan.coefficient_kernel
def _gae_two_pass_kernel(r_ptr, v_ptr, term_ptr, trunc_ptr, boot_ptr, adv_ptr, ret_ptr, ws, flags, T, N, CHUNKS,
                         gamma_hi, gamma_lo, lam_hi, lam_lo, ACC: tl.constexpr, BLOCK_T: tl.constexpr,
                         BLOCK_N: tl.constexpr, STAGES: tl.constexpr, TIME_THREADS: tl.constexpr,
                         RUN_SUCCESSORS: tl.constexpr, WINDOW: tl.constexpr, FIRST_POLICY: tl.constexpr,
                         SECOND_POLICY: tl.constexpr):
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    num_chunks = tl.cdiv(T, BLOCK_T)
    num_segs = tl.cdiv(num_chunks, CHUNKS)
    n_blocks = tl.cdiv(N, BLOCK_N)
    seg = tl.program_id(0) // n_blocks
    block = tl.program_id(0) % n_blocks
    n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < N
    bootstrap = _scan.load_env(boot_ptr, n, 1, n_ok, ACC)
    first = seg * CHUNKS
    end = tl.minimum(first + CHUNKS, num_chunks)
    agg_a = tl.zeros([BLOCK_N], ACC)
    agg_b = agg_a + 1.0
    for chunk in tl.range(first, end, num_stages=STAGES):
        alpha, beta, _, _, _ = _tile_pairs(r_ptr, v_ptr, term_ptr, trunc_ptr, bootstrap, chunk, num_chunks, T, N, n,
                                           n_ok, gamma, lam, ACC, BLOCK_T, TIME_THREADS, RUN_SUCCESSORS, FIRST_POLICY)
        A, Bm = _scan._scan_maps(alpha, beta, BLOCK_T, False, 0, TIME_THREADS, False)
        a = _scan.edge_row(A, BLOCK_T, False, 0)
        b = _scan.edge_row(Bm, BLOCK_T, False, 0)
        agg_a = a + b * agg_a
        agg_b = agg_b * b
    carry = _segment_carry(agg_a, agg_b, seg, block, num_segs, n_blocks, N, ws, flags, n, n_ok, WINDOW)
    for chunk in tl.range(first, end, num_stages=STAGES):
        alpha, beta, v, t, mask = _tile_pairs(r_ptr, v_ptr, term_ptr, trunc_ptr, bootstrap, chunk, num_chunks, T, N,
                                              n, n_ok, gamma, lam, ACC, BLOCK_T, TIME_THREADS, RUN_SUCCESSORS,
                                              SECOND_POLICY)
        adv, carry = _scan.scan_chunk(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True, 0,
                                      STAGES, 0, True, TIME_THREADS)
        _scan.store_tile(adv_ptr, adv, t, n, N, 1, mask)
        _scan.store_tile(ret_ptr, adv + v, t, n, N, 1, mask)


SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 1


def chunks_per_segment(T, N, block_t, block_n, per_sm, sms=None):
    """Chunks per segment so that the grid has about ``per_sm`` programs per SM."""
    num_chunks, n_blocks = triton.cdiv(T, block_t), triton.cdiv(N, block_n)
    segments = max(1, min(num_chunks, triton.cdiv((sms or SMS) * per_sm, n_blocks)))
    return triton.cdiv(num_chunks, segments)


def two_pass_gae(block_t, block_n, warps, stages, thread_runs, per_sm, hints, window=1, chunks=None):
    """``f(args, kwargs) -> (adv, ret)`` for ``bench_kernels``' GAE inputs ``[T, N]`` (float32)."""
    cfg = LaunchConfig(block_t, block_n, warps, False, stages, True, thread_runs)
    time_threads = _launch.time_threads(cfg, 4) if thread_runs else 1
    constexprs = dict(ACC=tl.float32, BLOCK_T=block_t, BLOCK_N=block_n, STAGES=stages, TIME_THREADS=time_threads,
                      RUN_SUCCESSORS=_launch.successors_from_runs(cfg, 4, False), WINDOW=window,
                      FIRST_POLICY="evict_last" if hints else "", SECOND_POLICY="evict_first" if hints else "",
                      num_warps=warps)
    gamma_lam = _launch.scalars(0.99, 0.95)

    def call(args, kw):
        r, v, term, boot = args
        trunc = kw["truncated"]
        T, N = r.shape
        per_segment = chunks or chunks_per_segment(T, N, block_t, block_n, per_sm)
        segments, n_blocks = triton.cdiv(triton.cdiv(T, block_t), per_segment), triton.cdiv(N, block_n)
        flags = torch.zeros(segments * n_blocks, dtype=torch.int32, device=r.device)
        ws = torch.empty(3 * segments * N, dtype=torch.float32, device=r.device)
        adv, ret = torch.empty_like(r), torch.empty_like(r)
        _gae_two_pass_kernel[(segments * n_blocks,)](
            r, v, term.view(torch.uint8), trunc.view(torch.uint8), boot, adv, ret, ws, flags, T, N, per_segment,
            *gamma_lam, **constexprs)
        return adv, ret

    return call


CELLS = ((512, 8192), (2048, 2048), (1024, 4096), (16, 1048576), (2048, 8192), (8192, 4096))
# (block_t, block_n, warps, pipeline stages, thread runs)
TILES = [(64, 64, 4, 4, True), (64, 32, 4, 3, True), (32, 32, 2, 3, True), (128, 32, 4, 2, True),
         (64, 16, 2, 3, True), (256, 16, 4, 2, True), (512, 16, 4, 2, True)]
PER_SM = (1, 2, 4)


def variants(N, T, per_sm=PER_SM):
    for bt, bn, w, s, runs in TILES:
        if bn > N or bt * 2 > T or (N >= 512) != (bn >= 32):
            continue
        for k in per_sm:
            for hints in (True, False):
                window = 8 if bn <= 16 else 1
                yield f"t{bt}x{bn}w{w}s{s}k{k}{'h' if hints else ''}", two_pass_gae(bt, bn, w, s, runs, k, hints, window)


def async_copies() -> None:
    """Print, per tile of ``TILES``, the ``cp.async`` and ``ld.global`` counts of the compiled kernel's PTX:
    whether the pipeliner loads the next chunks of the passes' loops."""
    args, kw = B.make_inputs("gae", 512, 1024, "tn", torch.float32, "cuda", 0)
    r, v, term, boot = args
    out = torch.empty_like(r)
    flags = torch.zeros(64, dtype=torch.int32, device="cuda")
    for bt, bn, w, s, runs in TILES:
        cfg = LaunchConfig(bt, bn, w, False, s, True, runs)
        tt = _launch.time_threads(cfg, 4) if runs else 1
        compiled = _gae_two_pass_kernel.warmup(
            r, v, term.view(torch.uint8), kw["truncated"].view(torch.uint8), boot, out, out, out, flags, 1024, 512, 2,
            *_launch.scalars(0.99, 0.95), ACC=tl.float32, BLOCK_T=bt, BLOCK_N=bn, STAGES=s, TIME_THREADS=tt,
            RUN_SUCCESSORS=_launch.successors_from_runs(cfg, 4, False), WINDOW=1, FIRST_POLICY="",
            SECOND_POLICY="", num_warps=w, grid=(1,))
        compiled._init_handles()
        ptx = compiled.asm["ptx"]
        print(f"t{bt}x{bn}w{w}s{s}: cp.async {ptx.count('cp.async.cg') + ptx.count('cp.async.ca')}, "
              f"ld.global {ptx.count('ld.global')}, shared {compiled.metadata.shared} B, regs {compiled.n_regs}",
              flush=True)


def main(out: str, warm: bool, cells=CELLS, per_sm=PER_SM) -> None:
    rows, start = [], time.time()
    copy_gbs = B.copy_bandwidth("cuda", 2 * 2**30, 25, 100)
    print(f"copy {copy_gbs:.0f} GB/s", flush=True)
    for N, T in cells:
        calls = {"default": lambda a, kw: kernels.gae(*a, **kw)}
        calls.update(variants(N, T, per_sm))
        nbytes = B.cell_bytes("gae", N, T, torch.float32)
        sets = 1 if warm else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        timer = (lambda f: 0.0) if warm else (lambda f: B.graph_us(f, "cuda", 0.0, calls=max(B.GRAPH_CALLS, sets)))
        times = B.checked_times(calls, "gae", N, T, "tn", "f32", 1 if warm else 2, 10, 50, timer=timer,
                                input_sets=sets)
        floor = nbytes / copy_gbs / 1e3
        rows.append(dict(N=N, T=T, bytes=nbytes, sets=sets, copy_gbs=copy_gbs, times=times))
        ok = sorted((min(v), k) for k, v in times.items() if all(isinstance(x, float) for x in v))
        best = ", ".join(f"{k} {us:.1f} ({100 * floor / us:.0f}%)" for us, k in ok[:5] if us)
        d = min(times["default"]) if all(isinstance(x, float) for x in times["default"]) else None
        print(f"{N}x{T} default={d and f'{d:.1f} ({100 * floor / d:.0f}%)'} best: {best} "
              f"bad={[(k, v[0]) for k, v in times.items() if not isinstance(v[0], float)]}", flush=True)
        json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:3] == ["warm"])
