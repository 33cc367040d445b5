"""The fifteenth session's block shapes before and after, on the same inputs in one process:
``default`` (the kernels' choice) against ``old``, the block shape the rule before the change chose
(``old_rule.json``): float32 Retrace ``[T, N]`` sequences of 129-256 steps in 64 x 32 look-back
tiles, and bf16 ``[T, N]`` sequences of more than 256 steps in two- and four-warp look-back tiles of
about float32's bytes and (``linear_scan``, eligibility traces, episodic sums) four-chunk walks of
128 x 64. Cells: those of ``tiles.py`` and held-out ones whose counts of steps and environments are
not powers of two (some rows not 16-aligned). Only cells whose block shape changed are timed. Each
label is checked against the float64 reference first; device time per call of calls replayed from a
CUDA graph, each call reading its own input set (they cycle through four times the L2), two rounds
interleaved (from the repository root):

  PYTHONPATH=. python docs/bench/tn_lookback/before_after.py PLAN OUT.json [warm ESTIMATOR]

PLAN ``rules``: the above. PLAN ``vtrace_walks``: V-trace's float32 walks from 2048 to 8191
environments (``old_rule_vtrace.json``: the rules above, before the walks). The old rule was written
with the kernels before the change first on the path:

  PYTHONPATH=<checkout before>:<checkout before>/scripts python docs/bench/tn_lookback/before_after.py old-rule PLAN OUT"""
import itertools
import json
import sys
import time

sys.path.append("scripts")
sys.path.append("docs/bench/whole_tn")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402

F32_CELLS = [(256, 1024), (256, 2048), (256, 4096), (256, 8192), (200, 1500), (250, 3000), (160, 6000), (129, 8000),
             (180, 1100), (256, 8200), (200, 4096), (180, 5000), (250, 7000), (140, 4800), (256, 6000)]
BF16_CELLS = [(4096, 8192), (2048, 16384), (1024, 32768), (512, 16384), (4096, 4096), (2048, 2048), (8192, 2048),
              (1024, 4096), (512, 6000), (3000, 3000), (2000, 2500), (2500, 6000), (1000, 10000), (700, 20000),
              (2048, 8200), (2048, 512), (8192, 512), (4096, 1024), (2048, 1024), (1024, 1536), (3000, 704),
              (5000, 1200), (1500, 1904), (6000, 960), (2500, 1600), (1500, 2000), (600, 1000)]
VTRACE_CELLS = [(2048, 2048), (4096, 4096), (4096, 2048), (3000, 3008), (5000, 2048), (1500, 6000), (4096, 8000),
                (700, 4096), (300, 2048), (6000, 2560), (257, 4096), (2048, 2047)]
PLANS = {  # PLAN: cells (T, N, dtype) and the block shapes the rule before chose for them
    "rules": ([(T, N, "f32") for T, N in F32_CELLS] + [(T, N, "bf16") for T, N in BF16_CELLS],
              "docs/bench/tn_lookback/old_rule.json"),
    "vtrace_walks": ([(T, N, "f32") for T, N in VTRACE_CELLS], "docs/bench/tn_lookback/old_rule_vtrace.json"),
}


def default_label(est: str, T: int, N: int, dtype_name: str) -> str:
    return B.config_label(kernels._launch.estimator_config(est, T, N, False, B.DTYPES[dtype_name].itemsize,
                                                           aligned_rows=N % 16 == 0))


if __name__ == "__main__":
    if sys.argv[1] == "old-rule":
        kernels._launch.INTERPRET = False
        json.dump({f"{est} {T} {N} {d}": default_label(est, T, N, d) for est in B.SPECS
                   for T, N, d in PLANS[sys.argv[2]][0]}, open(sys.argv[3], "w"), indent=0)
        sys.exit()
    from sweep import dram_cell  # noqa: E402  (docs/bench/whole_tn/sweep.py)

    (CELLS, old_rule_file), out, warm = PLANS[sys.argv[1]], sys.argv[2], sys.argv[3:4] == ["warm"]
    only = sys.argv[4] if warm else None
    old_rule = json.load(open(old_rule_file))
    copy_gbs = 0.0 if warm else B.copy_bandwidth("cuda", 2**30, 25, 200)
    rows = []
    start = time.time()
    for (T, N, dtype_name), est in itertools.product(CELLS, B.SPECS):
        if only and est != only:
            continue
        labels = {"default": default_label(est, T, N, dtype_name), "old": old_rule[f"{est} {T} {N} {dtype_name}"]}
        if labels["old"] == labels["default"]:
            continue
        configs = {"default": None, "old": B.parse_config_label(labels["old"])}
        rows.append(dram_cell(est, T, N, configs, warm, copy_gbs, labels, dtype_name))
        if not warm:
            json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)
