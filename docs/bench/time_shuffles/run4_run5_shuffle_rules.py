"""Where time shuffles pay: run4 ([T, N] tiles with and without them) and run5 (256-step [N, T] tiles
with them, f32 and bf16, against the 128-step rule of the time). Usage: EXPERIMENT VARIANT MODE [OUT],
EXPERIMENT tn|bf16, VARIANT base|patched (shuffles_time replaced), MODE compile|time.
The kernels' shuffles_time then took (config, time_contiguous, dtype)."""
import json, multiprocessing, sys, time
EXPERIMENT, VARIANT = sys.argv[1], sys.argv[2]
ARGS = sys.argv[3:]


def patch():
    import torch, kernels._launch as KL
    if VARIANT == "patched" and EXPERIMENT == "tn":
        KL.shuffles_time = lambda config, time_contiguous, dtype: not time_contiguous and dtype.is_floating_point and config.block_t > 1
    if VARIANT == "patched" and EXPERIMENT == "bf16":
        KL.shuffles_time = lambda config, time_contiguous, dtype: time_contiguous and config.block_t in (128, 256) and dtype == torch.float32


def L(bt, bn, w):
    from kernels import LaunchConfig
    return LaunchConfig(bt, bn, w, True)


def P(bt, bn, w, s=3):
    from kernels import LaunchConfig
    return LaunchConfig(bt, bn, w, False, s)


def plan():
    if EXPERIMENT == "bf16":
        k = [P(128, 2, 2), P(256, 2, 2), P(256, 1, 1), P(256, 2, 4), P(256, 4, 4), P(128, 4, 4)]
        return [((e, 8192, 4096, "nt", d), k) for d in ("bf16", "f32") for e in ("gae", "vtrace", "retrace")]
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
    if ARGS[0] == "compile":
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
    with open(ARGS[1], "a") as out:
        for cell, ks in p:
            rec = TK.tune_cell(cell, ks, copy, opts)
            rec["variant"] = VARIANT
            out.write(json.dumps(rec) + "\n")
            print(VARIANT, cell[:4], "def %.1f |" % (rec["default_us"] or -1), " ".join("%.1f:%s/%s/%s/%s" % (t["us"], t["config"]["block_t"], t["config"]["block_n"], t["config"]["num_warps"], "L" if t["config"]["lookback"] else t["config"]["num_stages"]) for t in rec["top"]),
                  "| fails", [f["status"][:40] for f in rec["failed"]][:2], flush=True)
            torch.cuda.empty_cache()
