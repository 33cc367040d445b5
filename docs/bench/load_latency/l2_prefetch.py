"""Prototype: the kernels' one-tile look-back grid, each program first prefetching into the L2 the
tile of the program ``AHEAD`` ids later, for GAE ``[T, N]`` (float32).

A look-back program holds one tile: it loads it, scans it, looks back and stores, and a later wave's
program starts with a load from DRAM. Here every program starts by issuing ``prefetch.global.L2``
for each row of its inputs in tile ``pid + AHEAD`` (one instruction per row and input, no
registers held), so that when that program starts, about ``AHEAD`` programs later, its loads hit the
L2. DRAM traffic is unchanged; what moves is when it happens. ``AHEAD = 0`` is the kernel itself.

The kernel is ``kernels.gae._gae_kernel``'s look-back path (``[T, N]`` contiguous, truncations, no
``next_values``) with the prefetch added; block shapes and constexprs are the kernels' own.

  python docs/bench/load_latency/l2_prefetch.py OUT.json
"""
import json
import sys
import time

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from kernels import _launch, _scan  # noqa: E402
from kernels._triton import tl, triton  # noqa: E402
from kernels.gae import _gae_pairs  # noqa: E402


@triton.jit
def _prefetch_rows(ptr, tile, total, n_blocks, num_chunks, T, N, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr):
    """``prefetch.global.L2`` of the first byte of each row of tile ``tile`` of a contiguous
    ``[T, N]`` input (a row of ``BLOCK_N`` elements lies in one or two 128-byte lines)."""
    chunk = tile // n_blocks
    rows = _scan.chunk_start(chunk, num_chunks, BLOCK_T, True) + tl.arange(0, BLOCK_T)
    ok = (rows < T) & (tl.zeros_like(rows) + tile < total)
    where = ptr + rows.to(tl.int64) * N + (tile % n_blocks) * BLOCK_N
    where = tl.where(ok, where, ptr)
    return tl.inline_asm_elementwise("prefetch.global.L2 [$1];\n\tmov.u32 $0, 0;", "=r,l", [where], dtype=tl.int32,
                                     is_pure=False, pack=1)


@_scan.coefficient_kernel
def _gae_ahead_kernel(r_ptr, v_ptr, term_ptr, trunc_ptr, boot_ptr, adv_ptr, ret_ptr, ws, flags, T, N, AHEAD,
                      gamma_hi, gamma_lo, lam_hi, lam_lo, ACC: tl.constexpr, BLOCK_T: tl.constexpr,
                      BLOCK_N: tl.constexpr, LOOKBACK: tl.constexpr, LATEST_FIRST: tl.constexpr,
                      TIME_THREADS: tl.constexpr, RUN_SUCCESSORS: tl.constexpr):
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    block, first, end, num_chunks = _scan.tile_schedule(T, N, BLOCK_T, BLOCK_N, LOOKBACK)
    n_blocks = tl.cdiv(N, BLOCK_N)
    if AHEAD > 0:
        later = tl.program_id(0) + AHEAD
        total = num_chunks * n_blocks
        _prefetch_rows(r_ptr, later, total, n_blocks, num_chunks, T, N, BLOCK_T, BLOCK_N)
        _prefetch_rows(v_ptr, later, total, n_blocks, num_chunks, T, N, BLOCK_T, BLOCK_N)
        _prefetch_rows(term_ptr, later, total, n_blocks, num_chunks, T, N, BLOCK_T, BLOCK_N)
        _prefetch_rows(trunc_ptr, later, total, n_blocks, num_chunks, T, N, BLOCK_T, BLOCK_N)
    n = block * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < N
    bootstrap = _scan.load_env(boot_ptr, n, 1, n_ok, ACC)
    carry = tl.zeros([BLOCK_N], ACC)
    for chunk in tl.range(first, end, num_stages=1):
        t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, True, LATEST_FIRST, TIME_THREADS)
        mask = (t[:, None] < T) & n_ok[None, :]
        r = _scan.load_tile(r_ptr, t, n, N, 1, mask, ACC)
        v = _scan.load_tile(v_ptr, t, n, N, 1, mask, ACC)
        terminated = _scan.load_flags(term_ptr, t, n, N, 1, mask)
        done = terminated | _scan.load_flags(trunc_ptr, t, n, N, 1, mask)
        v_succ = _scan.successor_rows(v, v_ptr, chunk, num_chunks, t, n, N, 1, n_ok, T, ACC, BLOCK_T, 0, LATEST_FIRST,
                                      TIME_THREADS if RUN_SUCCESSORS else 1)
        v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :], v_succ)
        alpha, beta = _gae_pairs(r, v, v_after, terminated, done, mask, gamma, lam, ACC)
        adv, carry = _scan.scan_chunk(alpha, beta, carry, chunk, block, T, N, ws, flags, BLOCK_T, BLOCK_N, True,
                                      LOOKBACK, 1, 0, LATEST_FIRST, TIME_THREADS)
        _scan.store_tile(adv_ptr, adv, t, n, N, 1, mask)
        _scan.store_tile(ret_ptr, adv + v, t, n, N, 1, mask)


LAST = {}  # the last launch's compiled kernel
SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 1


def ahead_gae(ahead, config=None):
    """``f(args, kwargs) -> (adv, ret)`` for ``bench_kernels``' GAE inputs ``[T, N]`` (float32) in the
    kernels' block shape (or ``config``), prefetching ``ahead`` programs on."""
    gamma_lam = _launch.scalars(0.99, 0.95)

    def call(args, kw):
        r, v, term, boot = args
        trunc = kw["truncated"]
        T, N = r.shape
        c = config or B.default_config("gae", N, T, "tn", torch.float32)
        num_chunks, n_blocks = triton.cdiv(T, c.block_t), triton.cdiv(N, c.block_n)
        assert c.lookback and num_chunks > 1, c
        flags = torch.zeros(num_chunks * n_blocks, dtype=torch.int32, device=r.device)
        ws = torch.empty(3 * num_chunks * N, dtype=torch.float32, device=r.device)
        adv, ret = torch.empty_like(r), torch.empty_like(r)
        LAST["compiled"] = _gae_ahead_kernel[(num_chunks * n_blocks,)](
            r, v, term.view(torch.uint8), trunc.view(torch.uint8), boot, adv, ret, ws, flags, T, N, ahead, *gamma_lam,
            ACC=tl.float32, BLOCK_T=c.block_t, BLOCK_N=c.block_n,
            LOOKBACK=_launch.lookback_window(c.block_n, n_blocks, num_chunks), LATEST_FIRST=c.latest_first,
            TIME_THREADS=_launch._time_threads(c, False, 4),
            RUN_SUCCESSORS=_launch.successors_from_runs(c, 4, True, _launch.rows_are_aligned(N)),
            num_warps=c.num_warps)
        return adv, ret

    return call


CELLS = ((512, 8192), (2048, 2048), (1024, 4096), (16, 1048576), (2048, 8192), (1000, 4500), (3000, 2600))
AHEAD_PER_SM = (0, 2, 4, 8, 12, 16, 24, 32)


def prefetch_count() -> None:
    """Print the number of ``prefetch.global.L2`` in the compiled kernel's PTX (0 if Triton dropped them)."""
    args, kw = B.make_inputs("gae", 512, 8192, "tn", torch.float32, "cuda", 0)
    ahead_gae(1)(args, kw)
    print(f"prefetch.global.L2 in the PTX: {LAST['compiled'].asm['ptx'].count('prefetch.global.L2')}", flush=True)


def main(out: str) -> None:
    rows, start = [], time.time()
    copy_gbs = B.copy_bandwidth("cuda", 2 * 2**30, 25, 100)
    print(f"copy {copy_gbs:.0f} GB/s", flush=True)
    for N, T in CELLS:
        calls = {"default": lambda a, kw: kernels.gae(*a, **kw)}
        calls.update({f"ahead{k}": ahead_gae(k * SMS) for k in AHEAD_PER_SM})
        nbytes = B.cell_bytes("gae", N, T, torch.float32)
        sets = B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        times = B.checked_times(calls, "gae", N, T, "tn", "f32", 2, 10, 50,
                                timer=lambda f: B.graph_us(f, "cuda", 0.0, calls=max(B.GRAPH_CALLS, sets)),
                                input_sets=sets)
        floor = nbytes / copy_gbs / 1e3
        rows.append(dict(N=N, T=T, bytes=nbytes, sets=sets, copy_gbs=copy_gbs,
                         config=B.config_label(B.default_config("gae", N, T, "tn", torch.float32)), times=times))
        line = " ".join(f"{k} {min(v):.1f} ({100 * floor / min(v):.0f}%)" if all(isinstance(x, float) for x in v)
                        else f"{k} {v[0]}" for k, v in times.items())
        print(f"{N}x{T}: {line}", flush=True)
        json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    if sys.argv[2:3] == ["count"]:
        prefetch_count()
    main(sys.argv[1])
