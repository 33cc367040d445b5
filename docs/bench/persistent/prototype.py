"""Prototype: persistent look-back tiles for GAE ``[T, N]`` (float32), measured against the kernels.

Each program walks the tiles ``pid, pid + G, pid + 2G, ...`` (``G`` programs, all resident at once:
``G`` is the number of SMs times the programs that fit on one, from the compiled kernel's registers
and shared memory), in a software-pipelined ``tl.range`` loop (``NUM_STAGES``), so the loads of its
next tiles are in flight while it scans a tile and looks back for its carry. The tile's carry comes
from decoupled look-back as in the kernels (``_scan.scan_chunk`` with ``LOOKBACK``). Tiles are
numbered chunk-major in walking order, so a tile waits only on tiles of smaller number, which
belong to resident programs that reach them first.

  python docs/bench/persistent/prototype.py OUT.json [warm]
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


@_scan.coefficient_kernel
def _gae_persistent_kernel(r_ptr, v_ptr, term_ptr, trunc_ptr, boot_ptr, adv_ptr, ret_ptr, ws, flags, T, N,
                           gamma_hi, gamma_lo, lam_hi, lam_lo, ACC: tl.constexpr, BLOCK_T: tl.constexpr,
                           BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr, TIME_THREADS: tl.constexpr,
                           SUCCESSOR_THREADS: tl.constexpr, LB: tl.constexpr = True):  # LB=False: no look-back (wrong answers; for builds only)
    gamma = _scan.scalar(gamma_hi, gamma_lo, ACC)
    lam = _scan.scalar(lam_hi, lam_lo, ACC)
    num_chunks = tl.cdiv(T, BLOCK_T)
    n_blocks = tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), num_chunks * n_blocks, tl.num_programs(0), num_stages=NUM_STAGES):
        chunk = tile // n_blocks
        block = tile % n_blocks
        n = block * BLOCK_N + tl.arange(0, BLOCK_N)
        n_ok = n < N
        t = _scan.chunk_rows(chunk, num_chunks, T, BLOCK_T, True, True, TIME_THREADS)
        mask = (t[:, None] < T) & n_ok[None, :]
        r = _scan.load_tile(r_ptr, t, n, N, 1, mask, ACC)
        v = _scan.load_tile(v_ptr, t, n, N, 1, mask, ACC)
        terminated = _scan.load_flags(term_ptr, t, n, N, 1, mask)
        done = terminated | _scan.load_flags(trunc_ptr, t, n, N, 1, mask)
        bootstrap = _scan.load_env(boot_ptr, n, 1, n_ok & (chunk == 0), ACC)
        v_succ = _scan.successor_rows(v, v_ptr, chunk, num_chunks, t, n, N, 1, n_ok, T, ACC, BLOCK_T, 0, True,
                                      SUCCESSOR_THREADS)
        v_after = tl.where(t[:, None] == T - 1, bootstrap[None, :], v_succ)
        alpha, beta = _gae_pairs(r, v, v_after, terminated, done, mask, gamma, lam, ACC)
        adv, _ = _scan.scan_chunk(alpha, beta, tl.zeros([BLOCK_N], ACC), chunk, block, T, N, ws, flags, BLOCK_T,
                                  BLOCK_N, True, LB, 1, 0, True, TIME_THREADS)
        _scan.store_tile(adv_ptr, adv, t, n, N, 1, mask)
        _scan.store_tile(ret_ptr, adv + v, t, n, N, 1, mask)


SMS = torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 1
_COMPILED = {}


def persistent_gae(block_t, block_n, warps, stages, thread_runs, per_sm):
    """``f(args, kwargs) -> (adv, ret)`` for ``bench_kernels``' GAE inputs ``[T, N]`` (float32)."""
    cfg = LaunchConfig(block_t, block_n, warps, True, 1, True, thread_runs)
    time_threads = _launch.time_threads(cfg, 4) if thread_runs else 1
    constexprs = dict(ACC=tl.float32, BLOCK_T=block_t, BLOCK_N=block_n, NUM_STAGES=stages, TIME_THREADS=time_threads,
                      SUCCESSOR_THREADS=time_threads if _launch.successors_from_runs(cfg, 4, True) else 1,
                      num_warps=warps)
    gamma_lam = _launch.scalars(0.99, 0.95)

    def call(args, kw):
        r, v, term, boot = args
        trunc = kw["truncated"]
        T, N = r.shape
        num_chunks, n_blocks = triton.cdiv(T, block_t), triton.cdiv(N, block_n)
        flags = torch.zeros(num_chunks * n_blocks, dtype=torch.int32, device=r.device)
        ws = torch.empty(3 * num_chunks * N, dtype=torch.float32, device=r.device)
        adv, ret = torch.empty_like(r), torch.empty_like(r)
        key = (block_t, block_n, warps, stages, time_threads)
        programs = min(num_chunks * n_blocks, SMS * per_sm)
        if per_sm > 1:
            compiled = _COMPILED.get(key)
            if compiled is None:
                compiled = _gae_persistent_kernel.warmup(
                    r, v, term.view(torch.uint8), trunc.view(torch.uint8), boot, adv, ret, ws, flags, T, N,
                    *gamma_lam, **constexprs, grid=(1,))
                compiled._init_handles()
                _COMPILED[key] = compiled
            fits = min(65536 // ((compiled.n_regs + 7) // 8 * 8 * 32 * warps), (227 * 1024) // max(1, compiled.metadata.shared),
                       64 // warps)
            if fits < per_sm:
                raise RuntimeError(f"only {fits} programs fit an SM ({compiled.n_regs} regs, "
                                   f"{compiled.metadata.shared} B shared)")
        _gae_persistent_kernel[(programs,)](
            r, v, term.view(torch.uint8), trunc.view(torch.uint8), boot, adv, ret, ws, flags, T, N, *gamma_lam,
            **constexprs)
        return adv, ret

    return call


CELLS = ((16, 1048576), (512, 8192), (2048, 2048))
# (block_t, block_n, warps, pipeline stages, thread runs, programs per SM)
VARIANTS = [(512, 16, 4, 1, False, 1), (512, 16, 4, 1, False, 2), (128, 16, 4, 1, True, 1), (128, 16, 4, 1, True, 2),
            (128, 16, 4, 1, True, 3)]


def main(out: str, warm: bool) -> None:
    rows, start = [], time.time()
    for N, T in CELLS:
        calls = {"default": lambda a, kw: kernels.gae(*a, **kw)}
        for bt, bn, w, s, runs, k in VARIANTS:
            if bn <= N and bt < T:
                calls[f"p{bt}x{bn}w{w}s{s}{'r' if runs else ''}k{k}"] = persistent_gae(bt, bn, w, s, runs, k)
        nbytes = B.cell_bytes("gae", N, T, torch.float32)
        sets = 1 if warm else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        timer = (lambda f: 0.0) if warm else (lambda f: B.graph_us(f, "cuda", 0.0, calls=max(B.GRAPH_CALLS, sets)))
        times = B.checked_times(calls, "gae", N, T, "tn", "f32", 1 if warm else 2, 10, 50, timer=timer,
                                input_sets=sets)
        rows.append(dict(N=N, T=T, bytes=nbytes, sets=sets, times=times))
        best = sorted((min(v), k) for k, v in times.items() if all(isinstance(x, float) for x in v))
        print(f"{N}x{T} default={times['default']} best={best[:4]} "
              f"bad={[(k, v[0]) for k, v in times.items() if not isinstance(v[0], float)]}", flush=True)
        json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:3] == ["warm"])
