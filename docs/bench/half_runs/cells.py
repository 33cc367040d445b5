"""16-bit float ``[T, N]`` tiles four environments per thread (thirty-second session): the cells,
every estimator, the kernels' own block shapes, through ``../explicit_layout/heldout.py``'s
measurement (device time per call from a CUDA graph, inputs rotated through four times the L2, each
cell checked against the float64 reference first), one process per version. PLAN ``cells``: bf16
walks (8192 x 4096, 16384 x 2048, 32768 x 1024), look-back tiles (2048 x 2048, 512 x 8192,
4096 x 4096, 2500 x 2304 in rows not 16 elements apart), a short tile (4096 x 128), one column
(16 x 65536), and float32 at 8192 x 4096 and 16384 x 2048 (for the bf16 / float32 ratio). PLAN
``light``: the light kernels' bf16 walks, the two cells of ``tiles.py``'s sweep, six held out, and
controls the rule leaves alone (1024 steps, float32, ``linear_scan``).

  PYTHONPATH=<kernels' checkout>:. python docs/bench/half_runs/cells.py PLAN TAG OUT.json [warm I K]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

ESTIMATORS = ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "eligibility_traces",
              "episodic_prefix_sum", "linear_scan")
BF16 = ((4096, 8192), (2048, 16384), (1024, 32768), (2048, 2048), (8192, 512), (4096, 4096), (2304, 2500),
        (128, 4096), (65536, 16))
F32 = ((4096, 8192), (2048, 16384))
LIGHT_SWEPT = ((4096, 8192), (2048, 16384))
LIGHT_HELD_OUT = ((8192, 8192), (2048, 12288), (3000, 8192), (2560, 10240), (6000, 9216), (2048, 32768))
H.PLANS.update({"cells": [(est, T, N, "bf16") for est in ESTIMATORS for T, N in BF16]
                + [(est, T, N, "f32") for est in ESTIMATORS for T, N in F32],
                "light": [(est, T, N, "bf16") for est in ("eligibility_traces", "episodic_prefix_sum")
                          for T, N in LIGHT_SWEPT + LIGHT_HELD_OUT + ((1024, 32768),)]
                + [(est, 4096, 8192, "f32") for est in ("eligibility_traces", "episodic_prefix_sum")]
                + [("linear_scan", 4096, 8192, "bf16")]})

if __name__ == "__main__":
    H.cli(sys.argv[1:])
