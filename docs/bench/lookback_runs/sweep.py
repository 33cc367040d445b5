"""The ``[T, N]`` look-back tiles of more than 256 steps below 1024 environments of every kernel but
V-trace (GAE, Retrace, lambda and discounted returns, eligibility traces, episodic sums, ``linear_scan``):
the kernels' own block shape (``before``) against four-warp and eight-warp look-back tiles in thread runs
(the kernels' own tile with its block shape, warps and ``thread_runs`` replaced), one process. Each cell
checked against the float64 reference first; device time per call of calls replayed from a CUDA graph, each
call reading its own input set (they cycle through four times the L2), two rounds
(``../explicit_layout/sweep.py``'s ``time_cell``).
PLAN ``few``: 16-511 environments, where the kernels took 256 x 16 (512 x 16 from 65536 steps) four-warp
tiles in Triton's layout, and 512-1023 environments, where they take thread-run tiles already; float32 and
bf16.

  python docs/bench/lookback_runs/sweep.py PLAN OUT.json [warm SHARD SHARDS]
"""
import os
import sys

sys.path.append("scripts")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))  # before this folder
import bench_kernels as B  # noqa: E402
import sweep as S  # noqa: E402 - explicit_layout/sweep.py: its cell's measurement

ESTIMATORS = tuple(est for est in B.SPECS if est != "vtrace")
# (block_t, block_n, warps) of the look-back tiles in thread runs tried; 32-wide ones from 32 environments.
RUNS_TILES = ((128, 16, 4), (256, 16, 4), (512, 16, 4), (512, 16, 8), (1024, 16, 8), (256, 16, 2),
              (128, 32, 4), (256, 32, 8))
F32_CELLS = ((1048576, 16), (262144, 16), (100000, 24), (131072, 32), (65536, 64), (20000, 48), (32768, 128),
             (16384, 256), (8192, 256), (4096, 128), (2048, 64), (3000, 100), (1000, 300), (500, 200), (300, 400),
             (5000, 480), (12000, 200), (2048, 496), (8192, 512), (4096, 768), (2000, 1000), (10000, 512),
             (600, 640))
BF16_CELLS = ((1048576, 16), (16384, 256), (4096, 128), (3000, 100), (65536, 64), (8192, 512))
PLANS = {"few": [(est, T, N, "f32") for est in ESTIMATORS for T, N in F32_CELLS]
         + [(est, T, N, "bf16") for est in ESTIMATORS for T, N in BF16_CELLS]}


def candidates(est: str, T: int, N: int, dtype_name: str) -> dict:
    """Label -> block shape: the kernels' own (``before``) and the thread-run look-back tiles, each the
    kernels' own with its shape replaced (so a tile keeps its kernel's step order)."""
    own = B.default_config(est, N, T, "tn", B.DTYPES[dtype_name])
    tiles = {"before": own}
    for block_t, block_n, warps in RUNS_TILES:
        if block_n <= max(16, N):
            tiles[f"{block_t}x{block_n}w{warps}"] = S.as_run_tile(own, block_t, block_n, warps)
    return tiles


if __name__ == "__main__":
    S.against_before_cli(PLANS, candidates, sys.argv[1:])
