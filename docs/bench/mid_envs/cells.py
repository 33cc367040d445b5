"""Held-out ``[T, N]`` cells for the block shapes drawn from ``sweep.py`` (from 512 to 8191
environments, more than 256 steps), the kernels' own block shapes: ``../explicit_layout/heldout.py``'s
measurement (device time per call from a CUDA graph, inputs rotated through four times the L2, each
cell checked against the float64 reference first), with whatever ``kernels`` is first on PYTHONPATH,
one process per version. PLAN ``heldout``: every kernel on float32 cells in 16-aligned rows and rows
not 16 elements apart, and on bf16 cells, none of them in the sweeps; two controls the rules leave
alone.

  PYTHONPATH=<kernels' checkout>:. python docs/bench/mid_envs/cells.py PLAN TAG OUT.json [warm SHARD SHARDS]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

F32_ALIGNED = ((6000, 768), (10000, 640), (3000, 1280), (2500, 2304), (1500, 3584))
F32_UNALIGNED = ((7000, 520), (4000, 900), (2000, 1800), (1500, 2600))
BF16_ALIGNED = ((6000, 768), (2500, 2304), (1500, 3584), (1000, 5120), (700, 7168), (400, 3072))
H.PLANS.update({
    "heldout": [(est, T, N, "f32") for est in H.B.SPECS for T, N in F32_ALIGNED + F32_UNALIGNED]
    + [(est, T, N, "bf16") for est in H.B.SPECS for T, N in BF16_ALIGNED]
    + [("gae", 8192, 8192, "f32"), ("lambda_returns", 100000, 64, "f32")],
})

if __name__ == "__main__":
    H.cli(sys.argv[1:])
