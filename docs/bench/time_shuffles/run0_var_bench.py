"""Kernel variants on the same cells: `compile VARIANT` fills the cache, `time VARIANT OUT` times.
The variant's kernels/ comes first on PYTHONPATH (set by the caller)."""
import json, sys, time
MODE, VARIANT = sys.argv[1], sys.argv[2]
sys.path.insert(0, "scripts")


def L(bt, bn, w):
    from kernels import LaunchConfig
    return LaunchConfig(bt, bn, w, True)


def P(bt, bn, w, s=3):
    from kernels import LaunchConfig
    return LaunchConfig(bt, bn, w, False, s)


def plan():
    p = [
        (("gae", 8192, 4096, "nt", "f32"), [P(128, 2, 2), P(256, 2, 4), P(128, 4, 4), P(64, 4, 2), P(256, 1, 2)]),
        (("gae", 8192, 4096, "tn", "f32"), [L(16, 64, 1), L(8, 32, 1), L(16, 32, 1), P(16, 16, 2), P(32, 32, 4)]),
        (("gae", 128, 4096, "nt", "f32"), [L(1024, 1, 4), L(512, 1, 4), L(256, 1, 2), L(2048, 1, 8), P(4096, 1, 8, 1), P(1024, 1, 4), P(512, 1, 4)]),
        (("gae", 128, 4096, "tn", "f32"), [L(256, 16, 4), L(128, 16, 2), L(64, 16, 1), L(32, 32, 1), L(64, 32, 2)]),
        (("gae", 512, 8192, "nt", "f32"), [P(512, 1, 4), P(256, 1, 2)]),
        (("gae", 4096, 128, "nt", "f32"), [P(128, 4, 4, 1), P(128, 8, 8, 1), P(128, 2, 2, 1)]),
        (("vtrace", 8192, 4096, "nt", "f32"), [P(64, 4, 2), P(128, 2, 2)]),
        (("retrace", 8192, 4096, "nt", "f32"), [P(128, 2, 2)]),
        (("lambda_returns", 8192, 4096, "tn", "f32"), [L(16, 64, 1)]),
        (("vtrace", 8192, 4096, "tn", "f32"), [P(16, 16, 2)]),
    ]
    if VARIANT in ("noshift", "gather", "gather_edgegather"):
        p = [c for c in p if c[0][0] == "gae"]
    return p


if __name__ == "__main__":
    import tune_kernels as TK
    t0 = time.time()
    p = plan()
    if MODE == "compile":
        fails = TK.precompile(p, int(sys.argv[3]))
        print(VARIANT, f"compiled {sum(len(k) for _, k in p)} in {time.time() - t0:.0f}s, failed {len(fails)} {fails[:2]}", flush=True)
        sys.exit()
    import torch, kernels, bench_kernels as B
    assert VARIANT == "base" or VARIANT in kernels.__file__, kernels.__file__
    opts = TK.parse_args([])
    copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
    out = open(sys.argv[3], "a")
    for cell, ks in p:
        if VARIANT == "noshift":  # wrong output by construction: timed only
            args, kw = TK._inputs(*cell)
            fn = getattr(kernels, cell[0])
            nbytes = B.cell_bytes(cell[0], cell[1], cell[2], B.DTYPES[cell[4]])
            top = []
            for k in [None, *ks]:
                us = B.time_us(lambda: fn(*args, **kw, config=k), "cuda", 5, 20)
                top.append(dict(config="default" if k is None else vars(k), us=us, frac_of_copy=nbytes / (us * 1e-6) / 1e9 / copy))
            rec = dict(estimator=cell[0], N=cell[1], T=cell[2], layout=cell[3], default_us=top[0]["us"], top=sorted(top[1:], key=lambda r: r["us"]), failed=[])
            del args, kw
        else:
            rec = TK.tune_cell(cell, ks, copy, opts)
        rec["variant"] = VARIANT
        rec["copy_gbs"] = copy
        out.write(json.dumps(rec) + "\n"); out.flush()
        line = " ".join("%.1f:%s/%s/%s/%s" % (t["us"], t["config"]["block_t"], t["config"]["block_n"], t["config"]["num_warps"], t["config"]["num_stages"] if not t["config"]["lookback"] else "L") for t in rec["top"])
        print(VARIANT, cell[:4], "def %.1f |" % (rec["default_us"] or -1), line, "| fail", [f["status"][:50] for f in rec["failed"]][:2], flush=True)
        torch.cuda.empty_cache()
    print(VARIANT, "done in %.0fs" % (time.time() - t0), flush=True)
