"""The memory floor of short ``[T, N]`` tiles (nineteenth session): how long a kernel takes that moves
an estimator's bytes in the explicit-layout tile its twin uses, without the estimator.

At 4096 x 128 ``[T, N]`` GAE took ~5.0 us of device time, V-trace ~6.5 and Retrace ~6.2, against
4.1, 4.8 and 5.1 in ``[N, T]`` (the same bytes); 5x ``compile`` needs V-trace at ~5.8 us and
Retrace at ~5.2. This script times, per cell, in one process, device time per call from a CUDA
graph whose calls each read their own input set (the sets cycle through four times the L2), two
rounds:

- ``copy w<envs>x<warps>``: a Gluon kernel in an explicit-layout tile
  (``_explicit_layout.whole_sequence_tile`` via ``_launch.explicit_tile``, and the twins' loads and
  stores: ``_scan.load_tile``, ``load_flags_full_width``, ``store_tile``) that reads the
  estimator's series (GAE: two float32 and two flag series, two outputs; V-trace: three and two,
  two outputs; Retrace: four and two, one output) with a few element-wise operations so that
  nothing is dead; tiles 8-64 environments wide on four warps and 16 wide on eight;
- ``copy+succ``: the same plus the twins' second load of the values one step later;
- ``copy+succ+scan``: the same plus the tile's scan (V-trace's carries ``x_{t+1}`` too:
  ``_explicit_layout.scan_tile_with_next``);
- ``nt_copy 2x1``: the same bytes in ``[N, T]`` rows (two environments per one-warp program, as the
  ``[N, T]`` kernels' paired rows);
- ``torch_copy``: ``Tensor.copy_`` of half the bytes (it reads and writes them);
- the estimators themselves (``kernels.<est>``, their own block shape), ``[T, N]`` and ``[N, T]``,
  each checked against the float64 reference first (the copies against PyTorch, but not the scans).

From the repository root:

  PYTHONPATH=. python docs/bench/eight_warps/copy_floor.py OUT.json
"""
import itertools
import json
import sys

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from kernels import _explicit_layout, _scan  # noqa: E402
from kernels._triton import gl, gluon, tl, triton  # noqa: E402

CELLS = [(4096, 128), (2048, 128), (8192, 128), (16384, 128), (4096, 64)]
ESTIMATORS = {"gae": (2, 2, 1), "vtrace": (3, 2, 2), "retrace": (4, 1, 1)}  # float inputs, outputs, scan kind


@gluon.jit
def _copy_tn(r_ptr, v_ptr, x_ptr, y_ptr, term_ptr, trunc_ptr, o0_ptr, o1_ptr, T, N, BLOCK_T: gl.constexpr,
             BLOCK_N: gl.constexpr, TIME_THREADS: gl.constexpr, FLOATS: gl.constexpr, OUTS: gl.constexpr,
             SUCC: gl.constexpr, SCAN: gl.constexpr):
    t, n, n_ok, mask = _explicit_layout.whole_sequence_tile(T, N, BLOCK_T, BLOCK_N, TIME_THREADS, True)
    r = _scan.load_tile(r_ptr, t, n, N, 1, mask, gl.float32)
    v = _scan.load_tile(v_ptr, t, n, N, 1, mask, gl.float32)
    terminated = _scan.load_flags_full_width(term_ptr, t, n, N, 1, mask)
    done = terminated | _scan.load_flags_full_width(trunc_ptr, t, n, N, 1, mask)
    alpha = r + gl.where(terminated, 0.0, 0.99 * v)
    if FLOATS >= 3:
        alpha = alpha * _scan.load_tile(x_ptr, t, n, N, 1, mask, gl.float32)
    if FLOATS >= 4:
        alpha = alpha - _scan.load_tile(y_ptr, t, n, N, 1, mask, gl.float32)
    if SUCC:
        alpha = alpha + _scan.load_tile(v_ptr, t + 1, n, N, 1, (t[:, None] + 1 < T) & n_ok[None, :], gl.float32)
    second = gl.where(done, 0.0, 0.95)
    if SCAN == 1:
        alpha, second = _explicit_layout.scan_tile(alpha, second)
    if SCAN == 2:  # V-trace's scan: x and x_{t+1}
        alpha, second = _explicit_layout.scan_tile_with_next(alpha, second)
    _scan.store_tile(o0_ptr, alpha, t, n, N, 1, mask)
    if OUTS == 2:
        _scan.store_tile(o1_ptr, second + v, t, n, N, 1, mask)


@triton.jit
def _copy_nt(r_ptr, v_ptr, x_ptr, y_ptr, term_ptr, trunc_ptr, o0_ptr, o1_ptr, T, N, BLOCK_T: tl.constexpr,
             BLOCK_N: tl.constexpr, FLOATS: tl.constexpr, OUTS: tl.constexpr):
    n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    t = tl.arange(0, BLOCK_T)
    mask = (n[:, None] < N) & (t[None, :] < T)
    offs = n[:, None].to(tl.int64) * T + t[None, :]
    r = tl.load(r_ptr + offs, mask=mask, other=0.0)
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    terminated = tl.load(term_ptr + offs, mask=mask, other=0) != 0
    done = terminated | (tl.load(trunc_ptr + offs, mask=mask, other=0) != 0)
    alpha = r + tl.where(terminated, 0.0, 0.99 * v)
    if FLOATS >= 3:
        alpha = alpha * tl.load(x_ptr + offs, mask=mask, other=0.0)
    if FLOATS >= 4:
        alpha = alpha - tl.load(y_ptr + offs, mask=mask, other=0.0)
    tl.store(o0_ptr + offs, alpha, mask=mask)
    if OUTS == 2:
        tl.store(o1_ptr + offs, tl.where(done, 0.0, 0.95) + v, mask=mask)


def copy_sets(N: int, T: int, floats: int, count: int) -> list[dict]:
    """``count`` input sets (and outputs) of the copy kernels; the same flat tensors serve both layouts."""
    sets = []
    for i in range(count):
        g = torch.Generator(device="cuda").manual_seed(i)
        f = lambda: torch.randn(T * N, generator=g, device="cuda")  # noqa: E731
        b = lambda p: torch.rand(T * N, generator=g, device="cuda") < p  # noqa: E731
        s = dict(r=f(), v=f(), term=b(0.05), trunc=b(0.02), o0=torch.empty(T * N, device="cuda"),
                 o1=torch.empty(T * N, device="cuda"))
        s["x"] = f() if floats >= 3 else s["r"]
        s["y"] = f() if floats >= 4 else s["r"]
        sets.append(s)
    return sets


def copy_check(s: dict, floats: int, outs: int, layout: str, N: int, T: int, succ: bool) -> None:
    """A copy's outputs (not the scan's) against PyTorch's: a copy that moved the wrong bytes is not timed."""
    shape = (T, N) if layout == "tn" else (N, T)
    r, v, term, trunc = (s[k].view(shape) for k in ("r", "v", "term", "trunc"))
    alpha = r + torch.where(term, 0.0, 0.99 * v)
    if floats >= 3:
        alpha = alpha * s["x"].view(shape)
    if floats >= 4:
        alpha = alpha - s["y"].view(shape)
    if succ:
        alpha = alpha + torch.cat([v[1:], torch.zeros_like(v[:1])])
    torch.testing.assert_close(s["o0"].view(shape), alpha, rtol=1e-5, atol=1e-5)
    if outs == 2:
        torch.testing.assert_close(s["o1"].view(shape), torch.where(trunc | term, 0.0, 0.95) + v)


def copy_calls(N: int, T: int, floats: int, outs: int, scan: int) -> dict:
    """Label -> ``f(set)`` for every copy variant of a cell (``scan``: the estimator's kind, 1 or 2)."""
    block_t = max(8, triton.next_power_of_2(T))
    calls = {}

    def tn(envs_per_thread, warps, succ, scan_kind):
        c = kernels._launch.explicit_tile(T, envs_per_thread, warps)
        tt = _explicit_layout.time_threads(block_t, warps)
        grid = (triton.cdiv(N, c.block_n),)
        return lambda s: _copy_tn[grid](s["r"], s["v"], s["x"], s["y"], s["term"], s["trunc"], s["o0"], s["o1"], T,
                                        N, block_t, c.block_n, tt, floats, outs, succ, scan_kind, num_warps=warps)

    for ept, warps in ((2, 4), (4, 4), (4, 8), (8, 4), (16, 4)):
        tag = f"w{kernels._launch.explicit_tile(T, ept, warps).block_n}x{warps}"
        calls[f"copy {tag}"] = tn(ept, warps, False, 0)
        if (ept, warps) in ((2, 4), (4, 4)):
            calls[f"copy+succ {tag}"] = tn(ept, warps, True, 0)
            calls[f"copy+succ+scan {tag}"] = tn(ept, warps, True, scan)
    calls["nt_copy 2x1"] = lambda s: _copy_nt[(triton.cdiv(N, 2),)](
        s["r"], s["v"], s["x"], s["y"], s["term"], s["trunc"], s["o0"], s["o1"], T, N, block_t, 2, floats, outs,
        num_warps=1)
    return calls


def graph_time(fn, sets: list) -> float:
    cycle = itertools.cycle(sets)
    return B.graph_us(lambda: fn(next(cycle)), "cuda", 0.0, calls=max(B.GRAPH_CALLS, len(sets)))


def main(out_path: str) -> None:
    copy_gbs = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
    print(f"copy {copy_gbs:.0f} GB/s", flush=True)
    rows = []
    for (N, T), (est, (floats, outs, scan)) in itertools.product(CELLS, ESTIMATORS.items()):
        nbytes = B.cell_bytes(est, N, T, torch.float32)
        n_sets = B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        times = {}
        for layout in ("tn", "nt"):  # the estimator, checked against the reference first
            fn = getattr(kernels, est)
            t = B.checked_times({est: lambda a, kw, fn=fn: fn(*a, **kw)}, est, N, T, layout, "f32", 2, 10, 50,
                                timer=lambda f: B.graph_us(f, "cuda", 0.0, calls=max(B.GRAPH_CALLS, n_sets)),
                                input_sets=n_sets)
            times[f"{est} {layout}"] = t[est]
        sets = copy_sets(N, T, floats, n_sets)
        flat = [(torch.empty(nbytes // 8, device="cuda"), torch.empty(nbytes // 8, device="cuda")) for _ in sets]
        for _ in range(2):  # two rounds, interleaved
            for label, fn in copy_calls(N, T, floats, outs, scan).items():
                for s in sets[:2]:
                    fn(s)
                if "scan" not in label:
                    copy_check(sets[0], floats, outs, "nt" if label.startswith("nt") else "tn", N, T, "succ" in label)
                times.setdefault(label, []).append(graph_time(fn, sets))
            times.setdefault("torch_copy", []).append(graph_time(lambda p: p[1].copy_(p[0]), flat))
        row = dict(estimator=est, N=N, T=T, sets=n_sets, bytes=nbytes, copy_gbs=copy_gbs, times=times)
        rows.append(row)
        fmt = lambda v: "/".join(f"{x:.2f}" if isinstance(x, float) else str(x)[:40] for x in v)  # noqa: E731
        print(f"{est} {N}x{T} sets={n_sets} " + "  ".join(f"{k}={fmt(v)}" for k, v in times.items()), flush=True)
        del sets, flat
        torch.cuda.empty_cache()
    json.dump(rows, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
