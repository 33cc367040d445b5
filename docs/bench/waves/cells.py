"""Walks that fill their waves (thirty-fifth session): cells outside ``waves.py``'s sweep, the kernels'
own block shapes, through ``../explicit_layout/heldout.py``'s measurement (device time per call from a
CUDA graph, inputs rotated through four times the L2, each cell checked against the float64 reference
first), one process per version. Cells are ``(estimator, T, N, dtype)``; the 64-environment programs
of the walks fill 0.50-0.79 of their waves (one per multiprocessor) on the held-out cells (the first rule
took those below 0.8; the final one, `_launch.half_empty_second_wave`, 8449-12672 environments), 0.82-0.97 on
the controls. PLAN ``heldout``; ``light`` (thirty-sixth session): eligibility traces and episodic sums
from 12288 to 100000 environments, the first form of `_launch.LIGHT_TWO_WARP_WALKS` (32 x 32 on two
warps above 16384 environments, 64 x 32 from 32768).

  PYTHONPATH=<kernels' checkout>:. python docs/bench/waves/cells.py PLAN TAG OUT.json [warm I K]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

CELLS = ((4096, 9216), (1024, 11264), (3000, 10000), (1500, 13312), (2048, 8704), (768, 26000))
FLOAT32 = ("gae", "lambda_returns", "discounted_returns", "eligibility_traces", "episodic_prefix_sum")
BF16 = ("gae", "retrace")
CONTROLS = (("gae", 1500, 13824, "f32"), ("retrace", 1500, 13824, "bf16"), ("lambda_returns", 1024, 24576, "f32"),
            ("linear_scan", 2048, 12288, "f32"), ("retrace", 2048, 12288, "f32"))
H.PLANS.update({"heldout": [(est, T, N, "f32") for est in FLOAT32 for T, N in CELLS]
                + [(est, T, N, "bf16") for est in BF16 for T, N in CELLS] + list(CONTROLS)})
# The light kernels' float32 walks above 16384 environments (`_launch.LIGHT_TWO_WARP_WALKS`; its first form),
# held out from ``waves.py``'s ``beyond`` sweep; the last two cells of each kernel are controls.
LIGHT_CELLS = ((2048, 17408), (2048, 20000), (1536, 22528), (1024, 28672), (1000, 30720), (2048, 32768),
               (1024, 40960), (512, 49152), (512, 65536), (300, 100000), (4096, 16384), (2048, 12288))
H.PLANS["light"] = [(est, T, N, "f32") for est in ("eligibility_traces", "episodic_prefix_sum") for T, N in LIGHT_CELLS]

if __name__ == "__main__":
    H.cli(sys.argv[1:])
