"""Prototype: `[T, N]` walks with one lane per environment and a chunk of C steps unrolled per loop
iteration (all of a chunk's loads issued before its dependent chain), GAE and V-trace. Timed against
the kernels' own block shape in the same process (bench_kernels.checked_times: float64 reference
first, then device time from a CUDA graph, inputs rotated through sets four times the L2).

  PYTHONPATH=. python docs/bench/lane_walks/proto.py in_step_order|rows_first OUT.json [ESTIMATORS DTYPES [warm]]
"""
import json
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402


@triton.jit
def _row(ptr, off, m, FLAG: tl.constexpr):
    """One step's row of ``ptr`` (a flag as a boolean, a float as float32)."""
    x = tl.load(ptr + off, mask=m, other=0)
    return (x != 0) if FLAG else x.to(tl.float32)


@triton.jit
def _step(top, k, N, n, n_ok):
    """Offsets and mask of step ``top - k`` of the program's environments (none before step 0)."""
    t = top - k
    return t.to(tl.int64) * N + n, n_ok & ((n * 0 + t) >= 0)


@triton.jit
def _chunk(floats, flags, top, N, n, n_ok, C: tl.constexpr):
    """Steps ``top, ..., top - C + 1`` of every input, all loaded before any is used: per input a
    tuple of ``C`` rows (the floats, then the flags)."""
    rows = ()
    for j in tl.static_range(len(floats) + len(flags)):
        steps = ()
        for k in tl.static_range(C):
            off, m = _step(top, k, N, n, n_ok)
            if j < len(floats):
                steps = steps + (_row(floats[j], off, m, False),)
            else:
                steps = steps + (_row(flags[j - len(floats)], off, m, True),)
        rows = rows + (steps,)
    return rows


@triton.jit
def _inputs(floats, flags, chunk, k, off, m, ROWS_FIRST: tl.constexpr):
    """Step ``k`` of the chunk, every input: from ``chunk`` (``ROWS_FIRST``), or loaded here, where the
    step uses them."""
    values = ()
    for j in tl.static_range(len(floats) + len(flags)):
        if ROWS_FIRST:
            values = values + (chunk[j][k],)
        elif j < len(floats):
            values = values + (_row(floats[j], off, m, False),)
        else:
            values = values + (_row(flags[j - len(floats)], off, m, True),)
    return values


@triton.jit
def _gae_lane(r_ptr, v_ptr, term_ptr, trunc_ptr, boot_ptr, adv_ptr, ret_ptr, T, N, gamma, lam,
              C: tl.constexpr, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr, ROWS_FIRST: tl.constexpr):
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < N
    v_after = tl.load(boot_ptr + n, mask=n_ok).to(tl.float32)
    adv = tl.zeros([BLOCK_N], tl.float32)
    floats, flags = (r_ptr, v_ptr), (term_ptr, trunc_ptr)
    for i in tl.range(0, tl.cdiv(T, C), num_stages=NUM_STAGES):
        top = T - 1 - i * C
        chunk = _chunk(floats, flags, top, N, n, n_ok, C if ROWS_FIRST else 0)
        for k in tl.static_range(C):
            off, m = _step(top, k, N, n, n_ok)
            r, v, term, trunc = _inputs(floats, flags, chunk, k, off, m, ROWS_FIRST)
            delta = r + gamma * tl.where(term, 0.0, v_after) - v
            adv = delta + tl.where(term | trunc, 0.0, gamma * lam) * adv
            tl.store(adv_ptr + off, adv.to(adv_ptr.dtype.element_ty), mask=m)
            tl.store(ret_ptr + off, (adv + v).to(ret_ptr.dtype.element_ty), mask=m)
            v_after = v


@triton.jit
def _vtrace_lane(r_ptr, v_ptr, lr_ptr, term_ptr, trunc_ptr, boot_ptr, vs_ptr, pg_ptr, T, N, gamma, lam,
                 rho_bar, c_bar, pg_rho_bar, C: tl.constexpr, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr,
                 ROWS_FIRST: tl.constexpr):
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = n < N
    v_after = tl.load(boot_ptr + n, mask=n_ok).to(tl.float32)
    diff = tl.zeros([BLOCK_N], tl.float32)
    floats, flags = (r_ptr, v_ptr, lr_ptr), (term_ptr, trunc_ptr)
    for i in tl.range(0, tl.cdiv(T, C), num_stages=NUM_STAGES):
        top = T - 1 - i * C
        chunk = _chunk(floats, flags, top, N, n, n_ok, C if ROWS_FIRST else 0)
        for k in tl.static_range(C):
            off, m = _step(top, k, N, n, n_ok)
            r, v, lr, term, trunc = _inputs(floats, flags, chunk, k, off, m, ROWS_FIRST)
            rho = tl.exp(lr)
            kept = tl.where(term | trunc, 0.0, diff)
            boot = r + gamma * tl.where(term, 0.0, v_after)
            q_term = gamma * tl.where(term, 0.0, v_after + lam * kept)
            diff = tl.minimum(rho, rho_bar) * (boot - v) + gamma * lam * tl.minimum(rho, c_bar) * kept
            tl.store(vs_ptr + off, (v + diff).to(vs_ptr.dtype.element_ty), mask=m)
            tl.store(pg_ptr + off, (tl.minimum(rho, pg_rho_bar) * (r + q_term - v)).to(pg_ptr.dtype.element_ty),
                     mask=m)
            v_after = v


def gae_lane(C, warps, stages, rows_first=True):
    def call(args, kw):
        r, v, term, boot = args
        T, N = r.shape
        adv, ret = torch.empty_like(r), torch.empty_like(r)
        bn = 32 * warps
        _gae_lane[(triton.cdiv(N, bn),)](r, v, term, kw["truncated"], boot, adv, ret, T, N, 0.99, 0.95,
                                         C=C, BLOCK_N=bn, NUM_STAGES=stages, ROWS_FIRST=rows_first, num_warps=warps)
        return adv, ret
    return call


def vtrace_lane(C, warps, stages, rows_first=True):
    def call(args, kw):
        r, v, lr, term, boot = args
        T, N = r.shape
        vs, pg = torch.empty_like(r), torch.empty_like(r)
        bn = 32 * warps
        _vtrace_lane[(triton.cdiv(N, bn),)](r, v, lr, term, kw["truncated"], boot, vs, pg, T, N, 0.99, 1.0,
                                            1.0, 1.0, 1.0, C=C, BLOCK_N=bn, NUM_STAGES=stages, ROWS_FIRST=rows_first, num_warps=warps)
        return vs, pg
    return call


LANE = {"gae": gae_lane, "vtrace": vtrace_lane}
CELLS = [(4096, 8192), (2048, 16384), (1024, 32768), (3000, 8256), (1024, 8192), (4096, 4096), (2048, 2048)]
# (steps per chunk, warps, stages) per version: loads where each step uses them, or a chunk's rows first
SHAPES = {"in_step_order": [(16, 1, 1), (32, 1, 1), (16, 2, 1), (32, 2, 1), (16, 4, 1), (16, 1, 2), (8, 1, 3), (16, 2, 2)],
          "rows_first": [(16, 1, 1), (32, 1, 1), (16, 2, 1), (32, 2, 1), (16, 4, 1), (16, 1, 2), (16, 2, 2), (32, 1, 2),
                         (8, 2, 3)]}


def main(version, out, ests="gae,vtrace", dts="f32,bf16", warm=False):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    rows = []
    copy = B.copy_bandwidth(device, 2**30, 25, 200) if device == "cuda" and not warm else 0.0
    for est in ests.split(","):
        for dt in dts.split(","):
            for T, N in CELLS if device == "cuda" else [(37, 70)]:
                calls = {"default": lambda a, kw, f=getattr(kernels, est): f(*a, **kw)}
                calls.update({f"lane{c}x{w}w{s}s": LANE[est](c, w, s, version == "rows_first")
                              for c, w, s in SHAPES[version]})
                nbytes = B.cell_bytes(est, N, T, B.DTYPES[dt])
                sets = 1 if warm else B.input_set_count(nbytes, device, l2_fills=4, most=200)
                start = time.time()
                timed = device == "cuda" and not warm
                timer = (lambda f: B.graph_us(f, device, 0.0, calls=max(B.GRAPH_CALLS, sets))) if timed else (lambda f: 0.0)
                times = B.checked_times(calls, est, N, T, "tn", dt, 2 if timed else 1, 10, 50,
                                        device=device, timer=timer, input_sets=sets)
                rows.append(dict(estimator=est, T=T, N=N, dtype=dt, bytes=nbytes, copy_gbs=copy, times=times))
                best = {k: min(x for x in v if isinstance(x, float)) if any(isinstance(x, float) for x in v) else v
                        for k, v in times.items()}
                line = " ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={str(v)[:40]}" for k, v in best.items())
                print(f"{est} {dt} {T}x{N} ({time.time() - start:.0f}s) {line}", flush=True)
                json.dump(rows, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *sys.argv[3:5], warm=sys.argv[5:6] == ["warm"])
