"""bf16 ``[T, N]`` tiles four environments per thread (``LaunchConfig.env_runs_of_four``,
thirty-third session): the kernels' own block shape (``default``) against it with four environments
per thread (``own+envs4``) and candidate tiles with it, each checked against the float64 reference
first, then device time from a CUDA graph, two rounds, one process (``../run_successor/sweep.py``'s
``warm`` and ``time_all``). Cells N x T. PLAN ``walks``: V-trace, lambda and discounted returns'
walks from 8192 environments, 1024-4096 steps; ``other``: the look-back tiles and one-column tiles
where ``../half_runs/half_runs.patch`` ran 1.04-1.06x faster, the own tile only; ``probe`` (after the
rule): lambda and discounted returns around 24576 x 1024, the one held-out cell the rule slowed,
the rule's tile against the tile before it and 64 x 32 on four warps; ``column``: every kernel's bf16
look-back tiles of 8-64 environments and 65536 steps and more (one or a few columns of tiles), its
own tile with and without four environments per thread.

  PYTHONPATH=. python docs/bench/four_envs/tiles.py PLAN warm I K     # compile share I of K
  PYTHONPATH=. python docs/bench/four_envs/tiles.py PLAN time OUT.json
"""
import sys
from dataclasses import replace

sys.path.append("docs/bench/run_successor")
sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import sweep as run_successor_sweep  # noqa: E402

ENVS4 = "+envs4"
TILES = ["64x32w2+3stages", "64x32w4+3stages", "64x64w4+3stages", "32x32w2+3stages"]
WALK_CELLS = [(N, T) for N in (8192, 16384, 32768) for T in (1024, 2048, 4096) if N * T <= 2**26] + [(12288, 2048)]
OTHER_CELLS = [("linear_scan", 2048, 2048), ("linear_scan", 512, 8192), ("linear_scan", 1024, 4096),
               ("vtrace", 16, 65536), ("discounted_returns", 16, 65536), ("linear_scan", 16, 65536),
               ("linear_scan", 16, 262144)]


def own_in_fours(est: str, N: int, T: int) -> str:
    """The kernels' own bf16 tile four environments per thread (whether or not the rule gives it so)."""
    return B.config_label(replace(B.default_config(est, N, T, "tn", B.DTYPES["bf16"]), env_runs_of_four=True))


def cell_labels(est: str, N: int, T: int, tiles: list) -> list:
    return list(dict.fromkeys(["default", own_in_fours(est, N, T)] + [tile + "+latest+runs" + ENVS4 for tile in tiles]))


COLUMN_CELLS = [(N, T) for N in (8, 12, 16, 64) for T in (65536, 262144)] + [(16, 1048576)]
PROBE_CELLS = [(24576, 1024), (28672, 1024), (24576, 1300), (20480, 1024), (24576, 768)]
PROBE_TILES = ["64x64w4+3stages+latest+runs", "64x32w4+3stages+latest+runs" + ENVS4]
PLANS = {"walks": [(est, N, T, "bf16", label) for est in ("vtrace", "lambda_returns", "discounted_returns")
                   for N, T in WALK_CELLS for label in cell_labels(est, N, T, TILES)],
         "other": [(est, N, T, "bf16", label) for est, N, T in OTHER_CELLS for label in cell_labels(est, N, T, [])],
         "column": [(est, N, T, "bf16", label) for est in B.SPECS for N, T in COLUMN_CELLS
                    for label in cell_labels(est, N, T, [])],
         "probe": [(est, N, T, "bf16", label) for est in ("lambda_returns", "discounted_returns")
                   for N, T in PROBE_CELLS for label in ["default"] + PROBE_TILES]}

if __name__ == "__main__":
    if sys.argv[2] == "warm":
        run_successor_sweep.warm(PLANS[sys.argv[1]], int(sys.argv[3]), int(sys.argv[4]))
    else:
        run_successor_sweep.time_all(PLANS[sys.argv[1]], sys.argv[3])
