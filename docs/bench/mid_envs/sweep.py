"""``[T, N]`` look-back tiles from 512 to 2048 environments, sequences of more than 256 steps: the
kernels' own block shape (``before``) against look-back tiles in thread runs 8-64 environments wide,
64-1024 steps on two, four and eight warps (the kernels' own tile with its shape, warps and
``thread_runs`` replaced: ``../explicit_layout/sweep.py``'s ``as_run_tile``), one process. Each cell
checked against the float64 reference first; device time per call of calls replayed from a CUDA
graph, each call reading its own input set (they cycle through four times the L2), two rounds
(``../explicit_layout/sweep.py``'s ``time_cell``).
PLAN ``mid``: every kernel on seven float32 cells (512 x 8192 and 16384, 600 x 8000, 1000 x 5000,
1024 x 4096, 1536 x 3000, 2048 x 2048) and two bf16 ones (512 x 8192, 2048 x 2048).

  python docs/bench/mid_envs/sweep.py PLAN OUT.json [warm SHARD SHARDS]
"""
import os
import sys

sys.path.append("scripts")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import bench_kernels as B  # noqa: E402
import sweep as S  # noqa: E402 - explicit_layout/sweep.py: its cell's measurement
from kernels._triton import triton  # noqa: E402

# (block_t, block_n, warps) of the thread-run look-back tiles tried: 16-64 elements per thread.
RUNS_TILES = ((128, 16, 4), (256, 16, 4), (512, 16, 4), (256, 16, 8), (512, 16, 8), (1024, 16, 8),
              (64, 32, 2), (128, 32, 4), (256, 32, 4), (256, 32, 8), (512, 32, 8),
              (256, 8, 4), (512, 8, 4), (1024, 8, 8), (64, 64, 4), (128, 64, 8))
F32_CELLS = ((8192, 512), (16384, 512), (8000, 600), (5000, 1000), (4096, 1024), (3000, 1536), (2048, 2048))
BF16_CELLS = ((8192, 512), (2048, 2048))
PLANS = {"mid": [(est, T, N, "f32") for est in B.SPECS for T, N in F32_CELLS]
         + [(est, T, N, "bf16") for est in B.SPECS for T, N in BF16_CELLS]}


def candidates(est: str, T: int, N: int, dtype_name: str) -> dict:
    """Label -> block shape: the kernels' own (``before``) and the thread-run look-back tiles."""
    own = B.default_config(est, N, T, "tn", B.DTYPES[dtype_name])
    tiles = {"before": own}
    for block_t, block_n, warps in RUNS_TILES:
        if block_n <= triton.next_power_of_2(N):
            tiles[f"{block_t}x{block_n}w{warps}"] = S.as_run_tile(own, block_t, block_n, warps)
    return tiles


if __name__ == "__main__":
    S.against_before_cli(PLANS, candidates, sys.argv[1:])
