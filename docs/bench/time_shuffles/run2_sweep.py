"""Block shapes around the 128-step shuffled [N, T] tiles: do_bench (tune_cell) + device-only graph time."""
import json, sys, time
sys.path.insert(0, "scripts")
import torch
import tune_kernels as TK, bench_kernels as B, kernels
from kernels import LaunchConfig


def L(bt, bn, w):
    return LaunchConfig(bt, bn, w, True)


def P(bt, bn, w, s=3):
    return LaunchConfig(bt, bn, w, False, s)


PLAN = [
    (("gae", 8192, 4096, "nt", "f32"), [P(128, 2, 2), P(128, 1, 1), P(128, 4, 4), P(128, 2, 2, 4)]),
    (("vtrace", 8192, 4096, "nt", "f32"), [P(128, 2, 2), P(128, 1, 1), P(128, 4, 4), P(128, 2, 2, 4), P(64, 4, 2)]),
    (("gae", 512, 8192, "nt", "f32"), [P(512, 1, 4), P(128, 1, 1), P(128, 1, 1, 4), P(128, 2, 2), L(128, 4, 4), L(128, 2, 2)]),
    (("vtrace", 512, 8192, "nt", "f32"), [P(512, 1, 4), P(128, 1, 1), P(128, 2, 2)]),
    (("retrace", 512, 8192, "nt", "f32"), [P(512, 1, 4), P(128, 1, 1), P(128, 2, 2)]),
    (("gae", 1024, 4096, "nt", "f32"), [P(512, 1, 4), P(128, 1, 1), P(128, 2, 2)]),
    (("gae", 2048, 2048, "nt", "f32"), [P(128, 2, 2), P(128, 1, 1), P(128, 4, 4)]),
    (("gae", 128, 4096, "nt", "f32"), [P(4096, 1, 8, 1), L(128, 1, 1), L(128, 2, 2), L(128, 4, 4), P(128, 1, 1), L(1024, 1, 4)]),
    (("vtrace", 128, 4096, "nt", "f32"), [P(4096, 1, 8, 1), L(128, 1, 1), L(128, 2, 2), L(128, 4, 4)]),
    (("gae", 16, 1048576, "nt", "f32"), [L(2048, 1, 8), L(128, 4, 4), L(128, 8, 4), L(128, 16, 8)]),
    (("gae", 4096, 128, "nt", "f32"), [P(128, 4, 1, 1), P(128, 2, 1, 1), P(128, 8, 2, 1), P(128, 4, 4, 1), P(128, 16, 4, 1)]),
    (("vtrace", 4096, 128, "nt", "f32"), [P(64, 2, 1, 1), P(128, 1, 1, 1), P(128, 2, 2, 1), P(128, 4, 4, 1)]),
]

if __name__ == "__main__":
    t0 = time.time()
    if sys.argv[1] == "compile":
        fails = TK.precompile(PLAN, 15)
        print(f"compiled {sum(len(k) for _, k in PLAN)} in {time.time() - t0:.0f}s, {len(fails)} failed {fails[:2]}", flush=True)
        sys.exit()
    opts = TK.parse_args([])
    copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
    print("copy", round(copy), flush=True)
    out = open(sys.argv[2], "w")
    for cell, ks in PLAN:
        rec = TK.tune_cell(cell, ks, copy, opts)
        args, kw = TK._inputs(*cell)
        fn = getattr(kernels, cell[0])
        graph = {}
        for k in [None, *ks]:
            g = B.graph_us(lambda: fn(*args, **kw, config=k), "cuda", 0.0)
            graph["default" if k is None else "%d/%d/%d/%s" % (k.block_t, k.block_n, k.num_warps, "L" if k.lookback else k.num_stages)] = g
            torch.cuda.empty_cache()
        rec["graph_us"] = graph
        out.write(json.dumps(rec) + "\n"); out.flush()
        d = rec["default"]
        print(cell[:4], "default %s/%s/%s/%s" % (d["block_t"], d["block_n"], d["num_warps"], "L" if d["lookback"] else d["num_stages"]),
              "do_bench %.1f" % (rec["default_us"] or -1), "|", " ".join("%.1f:%s/%s/%s/%s" % (t["us"], t["config"]["block_t"], t["config"]["block_n"], t["config"]["num_warps"], "L" if t["config"]["lookback"] else t["config"]["num_stages"]) for t in rec["top"]),
              "| graph", " ".join("%s=%.1f" % (k, v) for k, v in graph.items() if v), "| fail", [f["status"][:40] for f in rec["failed"]][:2], flush=True)
        del args, kw
        torch.cuda.empty_cache()
    print("done %.0fs" % (time.time() - t0))
