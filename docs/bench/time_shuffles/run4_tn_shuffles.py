"""[T, N] tiles with and without time shuffles (shuffles_time patched to allow [T, N])."""
import json, multiprocessing, sys, time
VARIANT = sys.argv[1]


def patch():
    import kernels._launch as KL
    if VARIANT == "tnshuffle":
        KL.shuffles_time = lambda config, time_contiguous, dtype: not time_contiguous and dtype.is_floating_point and config.block_t > 1


def L(bt, bn, w):
    from kernels import LaunchConfig
    return LaunchConfig(bt, bn, w, True)


def P(bt, bn, w, s=3):
    from kernels import LaunchConfig
    return LaunchConfig(bt, bn, w, False, s)


def plan():
    tn = [L(16, 64, 1), L(16, 128, 1), L(32, 128, 1), L(8, 128, 1), L(16, 256, 2), L(32, 64, 1), L(8, 32, 1)]
    return [
        (("gae", 8192, 4096, "tn", "f32"), tn),
        (("retrace", 8192, 4096, "tn", "f32"), tn),
        (("vtrace", 8192, 4096, "tn", "f32"), tn + [P(16, 16, 2), P(16, 128, 1), P(32, 128, 1)]),
        (("gae", 512, 8192, "tn", "f32"), tn),
    ]


def worker(tasks):
    patch()
    sys.path.insert(0, "scripts")
    import tune_kernels as TK
    return TK._compile_worker(tasks)


if __name__ == "__main__":
    t0 = time.time()
    p = plan()
    tasks = [(*c, k) for c, ks in p for k in ks]
    if sys.argv[2] == "compile":
        with multiprocessing.get_context("spawn").Pool(8) as pool:
            bad = [b for part in pool.map(worker, [tasks[i::8] for i in range(8)]) for b in part]
        print(VARIANT, f"compiled {len(tasks)} in {time.time() - t0:.0f}s, failed {bad[:2]}", flush=True)
        sys.exit()
    patch()
    import torch
    sys.path.insert(0, "scripts")
    import tune_kernels as TK, bench_kernels as B
    opts = TK.parse_args([])
    copy = B.copy_bandwidth("cuda", 2 * 2**30, 5, 20)
    with open(sys.argv[3], "a") as out:
        for cell, ks in p:
            rec = TK.tune_cell(cell, ks, copy, opts)
            rec["variant"] = VARIANT
            out.write(json.dumps(rec) + "\n")
            print(VARIANT, cell[:4], "def %.1f |" % (rec["default_us"] or -1), " ".join("%.1f:%s/%s/%s/%s" % (t["us"], t["config"]["block_t"], t["config"]["block_n"], t["config"]["num_warps"], "L" if t["config"]["lookback"] else t["config"]["num_stages"]) for t in rec["top"]),
                  "| fails", [f["status"][:40] for f in rec["failed"]][:2], flush=True)
            torch.cuda.empty_cache()
