"""Async walks for lambda returns, discounted returns and Retrace (thirty-eighth session): bf16 cells
outside the sweeps (``stages.py``), the kernels' own block shapes, through ``../explicit_layout/heldout.py``'s
measurement (device time per call from a CUDA graph, inputs rotated through four times the L2, each
cell checked against the float64 reference first), one process per version. Cells are
``(estimator, T, N, dtype)``, N x T not swept, in each of a rule's ranges, and controls the rules
leave alone (between and past the ranges, rows not 16 elements apart, float32).

PLAN ``heldout``: lambda and discounted returns' first rule (64 x 64 in four stages to 8448
environments, 64 x 128 in three from 9216 to 16896, 64 x 64 in two to 25344, 64 x 128 in two to 33792,
alike for both); ``final``: the cells the final rules changed beyond it (discounted returns' 128 x 64 to
8448, GAE's 64 x 128 ranges); ``retrace``: Retrace's rule.

  PYTHONPATH=<kernels' checkout>:. python docs/bench/async_returns/cells.py PLAN TAG OUT.json [warm I K]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

RANGES = ((3000, 8192), (1500, 8320), (700, 8448),
          (2048, 9216), (1500, 9728), (3000, 11264), (1000, 13312), (2500, 15360), (1200, 16896),
          (1800, 18432), (800, 21504), (1000, 25344),
          (700, 26624), (900, 28672), (600, 30720), (500, 33792))
CONTROLS = ((2048, 8704, "bf16"), (1024, 34816, "bf16"), (2048, 12300, "bf16"), (4096, 8192, "f32"))
H.PLANS["heldout"] = [(est, T, N, dtype) for est in ("lambda_returns", "discounted_returns")
                      for T, N, dtype in [(T, N, "bf16") for T, N in RANGES] + list(CONTROLS)]
# The final rule's new ranges: discounted returns' 128 x 64 in three stages to 8448 environments (64 x 64
# in four, the first rule's, ran slower there: PLAN heldout), GAE's 64 x 128 in three from 9216 to 12672
# and from 25345 to 33792 environments; controls in the ranges the first rule already held.
FINAL_RANGES = {"discounted_returns": ((3000, 8192), (1500, 8320), (700, 8448), (5000, 8192)),
                "gae": ((2048, 9216), (1500, 9728), (2500, 10752), (3000, 11264), (1000, 12672),
                        (1000, 25856), (700, 26624), (900, 28672), (600, 30720), (500, 33792))}
FINAL_CONTROLS = (("gae", 3000, 8192, "bf16"), ("gae", 1800, 18432, "bf16"), ("lambda_returns", 3000, 8192, "bf16"),
                  ("lambda_returns", 1800, 18432, "bf16"))
# Retrace's rule: 64 x 64 in three stages to 8448 environments, two to 16896, three to 25344, two to 33792.
RETRACE_RANGES = ((3000, 8192), (1500, 8320), (700, 8448), (2048, 9216), (1500, 12800), (2500, 15360), (1000, 16896),
                  (1800, 18432), (800, 21504), (1000, 25344), (700, 26624), (900, 28672), (600, 30720), (500, 33792))
H.PLANS["retrace"] = ([("retrace", T, N, "bf16") for T, N in RETRACE_RANGES]
                      + [("retrace", 1024, 34816, "bf16"), ("retrace", 2048, 12300, "bf16"),
                         ("retrace", 4096, 8192, "f32"), ("gae", 3000, 8192, "bf16")])
H.PLANS["final"] = [(est, T, N, "bf16") for est, cells in FINAL_RANGES.items() for T, N in cells] + list(FINAL_CONTROLS)

if __name__ == "__main__":
    H.cli(sys.argv[1:])
