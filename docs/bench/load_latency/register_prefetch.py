"""Prototype: persistent look-back tiles that load their next tile by hand, for GAE ``[T, N]`` (float32).

The twenty-fifth session's persistent prototype (``docs/bench/persistent/``) relied on Triton's
software pipeliner to load a program's next tile while it looks back for the current one's carry;
the look-back's spin loops stop the pipeliner, so nothing overlapped. Here the overlap is written
out: each program holds two tiles' inputs in registers, issues the loads of tile ``tile + G`` (its
next) before it scans tile ``tile`` and looks back, and hands them on through the loop. A global
load does not stall a thread until its value is used, so the next tile's loads are in flight during
the scan, the look-back and the stores. The successor values of the runs' first steps (one row per
thread) are loaded with the tile.

``G`` programs, all resident at once (checked against the compiled kernel's registers and shared
memory). Tiles are numbered chunk-major in walking order, so a tile waits only on tiles of smaller
number, which belong to resident programs that reach them first.

  python docs/bench/load_latency/register_prefetch.py OUT.json [cooperative]
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
def _tile_inputs(r_ptr, v_ptr, term_ptr, trunc_ptr, boot_ptr, tile, total, n_blocks, num_chunks, T, N,
                 ACC: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_N: tl.constexpr, TIME_THREADS: tl.constexpr):
    """Issue the loads of one tile (nothing where ``tile >= total``): rewards, values, terminated,
    done, the loaded successors of the runs' first steps, and the bootstrap values (first chunk)."""
    chunk = tile // n_blocks
    n = (tile % n_blocks) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = (n < N) & (tl.zeros_like(n) + tile < total)
    t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, True, True, TIME_THREADS)
    mask = (t[:, None] < T) & n_ok[None, :]
    r = _scan.load_tile(r_ptr, t, n, N, 1, mask, ACC)
    v = _scan.load_tile(v_ptr, t, n, N, 1, mask, ACC)
    terminated = _scan.load_flags(term_ptr, t, n, N, 1, mask)
    done = terminated | _scan.load_flags(trunc_ptr, t, n, N, 1, mask)
    first_steps = (tl.arange(0, BLOCK_T) < TIME_THREADS)[:, None]
    succ = _scan.load_tile(v_ptr, t + 1, n, N, 1, first_steps & (t[:, None] + 1 < T) & n_ok[None, :], ACC)
    bootstrap = _scan.load_env(boot_ptr, n, 1, n_ok & (tl.zeros_like(n) + chunk == 0), ACC)
    return r, v, terminated, done, succ, bootstrap


@triton.jit
def _successors(v, succ, TIME_THREADS: tl.constexpr):
    """``_scan.successor_in_runs`` with its loaded rows given: ``v[t + 1]`` for every row."""
    first_steps = (tl.arange(0, v.shape[0]) < TIME_THREADS)[:, None]
    runs = tl.permute(_scan._as_runs(v, TIME_THREADS), (1, 2, 0))
    shifted = _scan._shift_in(runs, tl.zeros([runs.shape[0], runs.shape[1]], runs.dtype))
    return tl.where(first_steps, succ, tl.reshape(tl.permute(shifted, (2, 0, 1)), v.shape))


@_scan.coefficient_kernel
def _gae_prefetch_kernel(r_ptr, v_ptr, term_ptr, trunc_ptr, boot_ptr, adv_ptr, ret_ptr, ws, flags, T, N,
                         gamma_hi, gamma_lo, lam_hi, lam_lo, ACC: tl.constexpr, BLOCK_T: tl.constexpr,
                         BLOCK_N: tl.constexpr, TIME_THREADS: tl.constexpr, WINDOW: tl.constexpr,
                         TICKETS: tl.constexpr):
    """``TICKETS``: a program takes its tiles from a counter (``flags[total]``, by atomic add) instead of
    ``pid, pid + G, ...``: a tile then waits only on tiles taken before it by running programs, so the
    programs need not all be resident."""
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    num_chunks = tl.cdiv(T, BLOCK_T)
    n_blocks = tl.cdiv(N, BLOCK_N)
    total = num_chunks * n_blocks
    if TICKETS:
        step = 0
        tile = tl.atomic_add(flags + total, 1, sem="relaxed")
    else:
        step = tl.num_programs(0)
        tile = tl.program_id(0)
    r, v, terminated, done, succ, bootstrap = _tile_inputs(r_ptr, v_ptr, term_ptr, trunc_ptr, boot_ptr, tile, total,
                                                           n_blocks, num_chunks, T, N, ACC, BLOCK_T, BLOCK_N,
                                                           TIME_THREADS)
    while tile < total:
        if TICKETS:
            later = tl.atomic_add(flags + total, 1, sem="relaxed")
        else:
            later = tile + step
        nr, nv, nterm, ndone, nsucc, nboot = _tile_inputs(r_ptr, v_ptr, term_ptr, trunc_ptr, boot_ptr, later, total,
                                                          n_blocks, num_chunks, T, N, ACC, BLOCK_T, BLOCK_N,
                                                          TIME_THREADS)
        chunk = tile // n_blocks
        block = tile % n_blocks
        n = block * BLOCK_N + tl.arange(0, BLOCK_N)
        t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, True, True, TIME_THREADS)
        mask = (t[:, None] < T) & (n < N)[None, :]
        v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :], _successors(v, succ, TIME_THREADS))
        alpha, beta = _gae_pairs(r, v, v_after, terminated, done, mask, gamma, lam, ACC)
        adv, _ = _scan.scan_chunk(alpha, beta, tl.zeros([BLOCK_N], ACC), chunk, block, T, N, ws, flags, BLOCK_T,
                                  BLOCK_N, True, WINDOW, 1, 0, True, TIME_THREADS)
        _scan.store_tile(adv_ptr, adv, t, n, N, 1, mask)
        _scan.store_tile(ret_ptr, adv + v, t, n, N, 1, mask)
        r, v, terminated, done, succ, bootstrap = nr, nv, nterm, ndone, nsucc, nboot
        tile = later


SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 1
_COMPILED = {}


def prefetch_gae(block_t, block_n, warps, per_sm, window=1, programs=None, tickets=False, cooperative=False):
    """``f(args, kwargs) -> (adv, ret)`` for ``bench_kernels``' GAE inputs ``[T, N]`` (float32), in tiles
    in thread runs; ``programs`` overrides ``SMs x per_sm`` (the interpreter runs one at a time);
    ``cooperative``: a cooperative launch (the driver starts all programs at once, or fails)."""
    cfg = LaunchConfig(block_t, block_n, warps, True, 1, True, True)
    constexprs = dict(ACC=tl.float32, BLOCK_T=block_t, BLOCK_N=block_n, TIME_THREADS=_launch.time_threads(cfg, 4),
                      WINDOW=window, TICKETS=tickets, num_warps=warps)
    gamma_lam = _launch.scalars(0.99, 0.95)

    def call(args, kw):
        r, v, term, boot = args
        trunc = kw["truncated"]
        T, N = r.shape
        num_chunks, n_blocks = triton.cdiv(T, block_t), triton.cdiv(N, block_n)
        flags = torch.zeros(num_chunks * n_blocks + 1, dtype=torch.int32, device=r.device)
        ws = torch.empty(3 * num_chunks * N, dtype=torch.float32, device=r.device)
        adv, ret = torch.empty_like(r), torch.empty_like(r)
        launch_args = (r, v, term.view(torch.uint8), trunc.view(torch.uint8), boot, adv, ret, ws, flags, T, N,
                       *gamma_lam)
        if programs is None and not tickets:
            key = (block_t, block_n, warps, window, tickets)
            compiled = _COMPILED.get(key)
            if compiled is None:
                compiled = _gae_prefetch_kernel.warmup(*launch_args, **constexprs, grid=(1,))
                compiled._init_handles()
                _COMPILED[key] = compiled
            regs = (compiled.n_regs + 7) // 8 * 8 * 32 * warps
            fits = min(65536 // regs, (227 * 1024) // max(1, compiled.metadata.shared), 64 // warps)
            if fits < per_sm:
                raise RuntimeError(f"only {fits} programs fit an SM ({compiled.n_regs} regs)")
        grid = programs or min(num_chunks * n_blocks, SMS * per_sm)
        _gae_prefetch_kernel[(grid,)](*launch_args, **constexprs, **({"launch_cooperative_grid": True} if cooperative else {}))
        return adv, ret

    return call


CELLS = ((512, 8192), (2048, 2048), (1024, 4096), (768, 6000), (1536, 3000), (2048, 8192), (3072, 2048),
         (512, 2048), (1024, 1024), (3000, 2600))
TILES = [(128, 32, 4), (128, 16, 4), (64, 32, 2), (256, 16, 4), (64, 64, 4), (64, 32, 4)]
PER_SM = (1, 2, 3, 4)


def variants(N, T):
    for bt, bn, w in TILES:
        if bn > N or bt * 2 > T:
            continue
        for k in PER_SM:
            for tickets in (False, True):
                yield f"p{bt}x{bn}w{w}k{k}{'t' if tickets else ''}", prefetch_gae(bt, bn, w, k, 1, tickets=tickets)


COOPERATIVE_CELLS = ((2048, 2048), (1024, 4096), (2048, 8192), (768, 6000))


def cooperative_variants(N, T):
    yield "p128x32w4k2", prefetch_gae(128, 32, 4, 2)
    yield "p128x32w4k2c", prefetch_gae(128, 32, 4, 2, cooperative=True)
    yield "p64x32w2k4c", prefetch_gae(64, 32, 2, 4, cooperative=True)


def main(out: str, cells=CELLS, cell_variants=variants) -> None:
    rows, start = [], time.time()
    copy_gbs = B.copy_bandwidth("cuda", 2 * 2**30, 25, 100)
    print(f"copy {copy_gbs:.0f} GB/s", flush=True)
    for N, T in cells:
        calls = {"default": lambda a, kw: kernels.gae(*a, **kw)}
        calls.update(cell_variants(N, T))
        nbytes = B.cell_bytes("gae", N, T, torch.float32)
        sets = B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        times = B.checked_times(calls, "gae", N, T, "tn", "f32", 2, 10, 50,
                                timer=lambda f: B.graph_us(f, "cuda", 0.0, calls=max(B.GRAPH_CALLS, sets)),
                                input_sets=sets)
        floor = nbytes / copy_gbs / 1e3
        rows.append(dict(N=N, T=T, bytes=nbytes, sets=sets, copy_gbs=copy_gbs, times=times))
        ok = sorted((min(v), k) for k, v in times.items() if all(isinstance(x, float) for x in v))
        best = ", ".join(f"{k} {us:.1f} ({100 * floor / us:.0f}%)" for us, k in ok[:6])
        print(f"{N}x{T} best: {best} bad={[(k, v[0]) for k, v in times.items() if not isinstance(v[0], float)]}",
              flush=True)
        json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    if sys.argv[2:3] == ["cooperative"]:
        main(sys.argv[1], COOPERATIVE_CELLS, cooperative_variants)
    else:
        main(sys.argv[1])
