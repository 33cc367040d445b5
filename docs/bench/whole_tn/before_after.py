"""The longer float32 ``[T, N]`` tiles below 4096 environments (``_launch._longer_tiles_below_4096_envs``,
fourteenth session), before and after, on the same inputs in one process: ``default`` (the kernels'
choice) against ``old``, the block shape the rule before the change chose (``old_rule.json``). Cells:
PLAN ``mid``'s grid of ``sweep.py`` again, and held-out cells with counts of steps and environments
that are not powers of two (most rows not 16-aligned). Each label is checked against the float64
reference first; device time per call of calls replayed from a CUDA graph, each call reading its own
input set (they cycle through four times the L2), two rounds interleaved (from the repository root):

  PYTHONPATH=. python docs/bench/whole_tn/before_after.py OUT.json [warm ESTIMATOR]

``old_rule.json`` was written with the kernels before the change first on the path:

  PYTHONPATH=<checkout before>:<checkout before>/scripts python docs/bench/whole_tn/before_after.py old-rule OUT"""
import itertools
import json
import sys
import time

sys.path.append("scripts")
sys.path.append("docs/bench/whole_tn")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from sweep import MID_CELLS, dram_cell  # noqa: E402

HELD_OUT = [(700, 600), (3000, 768), (6000, 1500), (1000, 1000), (5000, 3000), (2048, 3072), (512, 1536), (1500, 520),
            (4096, 4000), (300, 2000), (8192, 700), (2000, 2047)]
CELLS = MID_CELLS + HELD_OUT
OLD_RULE = "docs/bench/whole_tn/old_rule.json"


def default_label(est: str, T: int, N: int) -> str:
    return B.config_label(kernels._launch.estimator_config(est, T, N, False, 4, aligned_rows=N % 16 == 0))


if sys.argv[1] == "old-rule":
    kernels._launch.INTERPRET = False
    json.dump({f"{est} {T} {N}": default_label(est, T, N) for est in B.SPECS for T, N in CELLS},
              open(sys.argv[2], "w"), indent=0)
    sys.exit()
OUT = sys.argv[1]
WARM = sys.argv[2:3] == ["warm"]
ONLY = sys.argv[3] if WARM else None
old_rule = json.load(open(OLD_RULE))
copy_gbs = 0.0 if WARM else B.copy_bandwidth("cuda", 2**30, 25, 200)
rows = []
start = time.time()
for (T, N), est in itertools.product(CELLS, B.SPECS):
    if ONLY and est != ONLY:
        continue
    labels = {"default": default_label(est, T, N), "old": old_rule[f"{est} {T} {N}"]}
    if labels["old"] == labels["default"]:
        continue
    configs = {"default": None, "old": B.parse_config_label(labels["old"])}
    rows.append(dram_cell(est, T, N, configs, WARM, copy_gbs, labels))
    if not WARM:
        json.dump(rows, open(OUT, "w"), indent=1)
print(f"done in {time.time() - start:.0f} s", flush=True)
