"""The ``[T, N]`` look-back tiles of every kernel below 16 environments: the kernels' own block shape
(``before``: 256 or 512 steps of ``next_power_of_2(N)`` environments on four warps in Triton's layout;
V-trace 128 or 256 steps on two or eight) against look-back tiles in thread runs as wide as the
environments' next power of two and 16 wide, 256-8192 steps (the kernels' own tile with its shape,
warps and ``thread_runs`` replaced), one process. Each cell checked against the float64 reference
first; device time per call of calls replayed from a CUDA graph, each call reading its own input set
(they cycle through four times the L2), two rounds (``../explicit_layout/sweep.py``'s ``time_cell``).
PLAN ``below16``: 1-15 environments, 20000-1048576 steps, float32 and bf16.

  python docs/bench/one_column/sweep.py PLAN OUT.json [warm SHARD SHARDS]
"""
import os
import sys

sys.path.append("scripts")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import bench_kernels as B  # noqa: E402
import sweep as S  # noqa: E402 - explicit_layout/sweep.py: its cell's measurement
from kernels._triton import triton  # noqa: E402

# (block_t, warps) of the thread-run tiles tried, at most 64 elements per thread.
RUNS_TILES = ((256, 4), (512, 4), (1024, 4), (1024, 8), (2048, 8), (4096, 4), (4096, 8), (8192, 8))
F32_CELLS = ((1048576, 1), (262144, 1), (1048576, 2), (262144, 4), (1048576, 8), (131072, 8), (70000, 12),
             (200000, 10), (30000, 6), (100000, 15), (20000, 14), (500000, 3))
BF16_CELLS = ((1048576, 1), (262144, 4), (70000, 12), (1048576, 8))
PLANS = {"below16": [(est, T, N, "f32") for est in B.SPECS for T, N in F32_CELLS]
         + [(est, T, N, "bf16") for est in B.SPECS for T, N in BF16_CELLS]}


def candidates(est: str, T: int, N: int, dtype_name: str) -> dict:
    """Label -> block shape: the kernels' own (``before``) and the thread-run look-back tiles."""
    own = B.default_config(est, N, T, "tn", B.DTYPES[dtype_name])
    tiles = {"before": own}
    for block_n in sorted({triton.next_power_of_2(N), 16}):
        for block_t, warps in RUNS_TILES:
            if block_t * block_n <= 64 * 32 * warps:
                tiles[f"{block_t}x{block_n}w{warps}"] = S.as_run_tile(own, block_t, block_n, warps)
    return tiles


if __name__ == "__main__":
    S.against_before_cli(PLANS, candidates, sys.argv[1:])
