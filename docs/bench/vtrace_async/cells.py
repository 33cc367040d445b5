"""V-trace's async walks (thirty-ninth session): bf16 cells outside the sweeps (``tiles.py``), the
kernels' own block shapes, through ``../explicit_layout/heldout.py``'s measurement (device time per call
from a CUDA graph, inputs rotated through four times the L2, each cell checked against the float64
reference first), one process per version. Cells are ``(estimator, T, N, dtype)``, N x T not swept, in
each of the rule's four ranges (128 x 64 to 8448 environments, 64 x 128 to 16896, 128 x 64 to 25344,
64 x 128 to 33792, four environments per thread on eight warps), and controls the rule leaves alone
(past the ranges, rows not 16 elements apart, float32, GAE).

PLAN ``heldout``.

  PYTHONPATH=<kernels' checkout>:. python docs/bench/vtrace_async/cells.py PLAN TAG OUT.json [warm I K]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

RANGES = ((3000, 8192), (1500, 8320), (700, 8448), (5000, 8192),
          (2500, 9472), (900, 10752), (3000, 11264), (1000, 13312), (2500, 15360),
          (1800, 19456), (800, 21504), (1200, 23552),
          (700, 27648), (1500, 29696), (600, 31744))
CONTROLS = (("vtrace", 1024, 34816, "bf16"), ("vtrace", 2048, 12300, "bf16"), ("vtrace", 4096, 8192, "f32"),
            ("gae", 3000, 8192, "bf16"))
H.PLANS["heldout"] = [("vtrace", T, N, "bf16") for T, N in RANGES] + list(CONTROLS)

if __name__ == "__main__":
    H.cli(sys.argv[1:])
