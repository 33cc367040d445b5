"""Prototype timing: the Gluon GAE against kernels.gae on short [T, N] cells (device time, inputs from DRAM).

  python proto/bench_gluon.py OUT.json            # time every cell
  python proto/bench_gluon.py /dev/null warm I     # compile and check cell I only
"""
import json, os, sys, time
sys.path.append("scripts"); sys.path.append("docs/bench/explicit_layout/prototype")
import bench_kernels as B
import kernels
import gluon_gae as G

CELLS = [(128, 4096, "f32"), (128, 2048, "f32"), (128, 8192, "f32"), (128, 32768, "f32"), (64, 4096, "f32"),
         (256, 4096, "f32"), (32, 8192, "f32"), (16, 32768, "f32"), (8, 32768, "f32"),
         (200, 3000, "f32"), (128, 4096, "bf16")]


def variants(bt, dt):
    out = {}
    for spt_n in ((4, 8) if dt == "bf16" else (2, 4)):
        for tpw in ((1, 2, 4, 8, 16, 32) if bt <= 32 else (4, 8, 16, 32)):
            for wt in (1, 2, 4):
                spt_t = bt // (tpw * wt)
                if spt_t < 1 or spt_t * tpw * wt != bt or spt_t * spt_n not in ((4, 8, 16, 32) if bt <= 32 else (8, 16, 32)):
                    continue
                for wn in (1, 2):
                    out[f"n{spt_n}t{tpw}x{wt}w{wn}"] = dict(spt_n=spt_n, tpw_t=tpw, wt=wt, warps=wn)
    if bt >= 128:
        out["n1t4x1w2"] = dict(spt_n=1, tpw_t=4, wt=1, warps=2)
    return out


def main():
    out = sys.argv[1]
    warm = sys.argv[2:3] == ["warm"]
    cells = [CELLS[int(sys.argv[3])]] if warm else CELLS
    rows = []
    copy = 0.0 if warm else B.copy_bandwidth("cuda", 2**30, 25, 200)
    print("copy GB/s", copy, flush=True)
    for T, N, dt in cells:
        bt = max(8, 1 << (T - 1).bit_length())
        calls = {"default": lambda a, kw: kernels.gae(*a, **kw)}
        for label, v in variants(bt, dt).items():
            calls[label] = lambda a, kw, v=v: G.gae(*a, **kw, **v)
        nbytes = B.cell_bytes("gae", N, T, B.DTYPES[dt])
        sets = 1 if warm else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        timer = (lambda f: 0.0) if warm else (lambda f: B.graph_us(f, "cuda", 0.0, calls=max(B.GRAPH_CALLS, sets)))
        t0 = time.time()
        times = B.checked_times(calls, "gae", N, T, "tn", dt, 1 if warm else 2, 10, 50, timer=timer, input_sets=sets)
        rows.append(dict(T=T, N=N, dtype=dt, sets=sets, bytes=nbytes, copy_gbs=copy, times=times))
        fmt = lambda v: "/".join(f"{x:.2f}" if isinstance(x, float) else str(x)[:60] for x in v)
        best = min((min(v), k) for k, v in times.items() if all(isinstance(x, float) for x in v))
        print(f"{T}x{N} {dt} ({time.time()-t0:.0f}s) best {best[1]} {best[0]:.2f}: " + "  ".join(f"{k}={fmt(v)}" for k, v in times.items()), flush=True)
        json.dump(rows, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
