"""V-trace's ``[T, N]`` look-back tiles of more than 256 steps: the block shape the rule gave before the
twenty-sixth session (``before``) against look-back tiles in thread runs (``+runs``, the tile's
successor values from the runs), one process. Each cell checked against the float64 reference first;
device time per call of calls replayed from a CUDA graph, each call reading its own input set (they cycle
through four times the L2), two rounds (``../explicit_layout/sweep.py``'s ``time_cell``).
PLAN ``rule``: float32 in 16-aligned rows from 512 to 2047 environments (300-12000 steps), float32 below
512 environments from 65536 steps, bf16 below 2048 environments.

  python docs/bench/vtrace_runs/sweep.py PLAN OUT.json [warm SHARD SHARDS]
"""
import os
import sys

sys.path.append("scripts")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))  # before this folder
import bench_kernels as B  # noqa: E402
import sweep as S  # noqa: E402 - explicit_layout/sweep.py: its cell's measurement

RUNS_TILES = ("256x16w4", "256x32w8", "128x32w4", "512x16w8", "128x16w4")
PLANS = {
    "rule": [(T, N, "f32") for T, N in ((300, 1024), (600, 1536), (1000, 1024), (1500, 768), (2000, 640),
                                        (3000, 1040), (5000, 768), (8000, 1536), (12000, 528), (2500, 1984),
                                        (4000, 512), (70000, 40), (200000, 24), (131072, 100), (65536, 64),
                                        (80000, 16), (2000, 400), (10000, 250), (1000, 480))]
    + [(T, N, "bf16") for T, N in ((3000, 100), (20000, 64), (12000, 200), (300, 300), (262144, 16), (6000, 480),
                                   (5000, 768), (8000, 1536), (3000, 1040), (1000, 1024), (300, 1024))],
}


def before(T: int, N: int, dtype_name: str) -> str:
    """The label of V-trace's tile before the change (``_launch._block_shape`` then): below 512
    environments 16 wide, 256 steps on eight warps from 65536 steps, else 128 on two; from 512 two-warp
    16 x 32 tiles, bf16 in 16-aligned rows 64 x 16 on two in thread runs."""
    if N < 512:
        return f"{256 if T >= 65536 else 128}x16w{8 if T >= 65536 else 2}+lookback+latest"
    return "64x16w2+lookback+latest+runs" if dtype_name == "bf16" and N % 16 == 0 else "16x32w2+lookback+latest"


def main(plan: str, out: str, warm: bool, shard: int = 0, shards: int = 1) -> None:
    def cell_row(cell: tuple, copy_gbs: float) -> dict:
        T, N, dtype_name = cell
        labels = {"before": before(T, N, dtype_name), **{t: f"{t}+lookback+latest+runs" for t in RUNS_TILES}}
        configs = {name: B.parse_config_label(label) for name, label in labels.items()}
        return S.time_cell("vtrace", T, N, dtype_name, configs, warm, copy_gbs, labels=labels)

    S.run_plan(PLANS[plan], cell_row, out, warm, shard, shards)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:4] == ["warm"], *(int(a) for a in sys.argv[4:6]))
