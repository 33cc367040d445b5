"""Held-out cells for the twenty-second session's changes, the kernels' own block shape (whichever
``kernels`` package is first on the path; ``../explicit_layout/heldout.py``'s measurement: checked
against the float64 reference, then device time per call replayed from a CUDA graph, each call
reading its own input set, two rounds). PLAN ``waves``: V-trace's walks from 8192 environments
(``_launch.fills_waves``: float32 64 x 64 on eight warps; bf16 64 x 32 on four at 8192-8448),
with controls the rule leaves alone; ``instructions``: GAE, V-trace and Retrace on walks, look-back
tiles and short tiles, float32 and bf16 (pairs without mask selects, ``_scan.fast_exp``,
V-trace's ``y_{t+1}`` from thread runs); ``attribution``: 14 of those cells, for the kernels with
one of the three changes at a time.

  PYTHONPATH=<kernels version>:. python docs/bench/bf16_walks/cells.py PLAN TAG OUT.json [warm SHARD SHARDS]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

WAVE_CELLS = [(3000, 8256, "f32"), (700, 8320, "f32"), (2000, 16640, "f32"), (1000, 24576, "f32"),
              (600, 32704, "f32"), (1500, 16000, "f32"), (1000, 31744, "f32"), (1500, 10000, "f32"),
              (3000, 8256, "bf16"), (1500, 8400, "bf16"), (5000, 8192, "bf16"), (2000, 8464, "bf16"),
              (1500, 16000, "bf16")]
INSTRUCTION_CELLS = [(4096, 8192, "f32"), (2048, 16384, "f32"), (3000, 8256, "f32"), (2048, 2048, "f32"),
                     (8192, 512, "f32"), (3000, 3000, "f32"), (3000, 4096, "f32"), (2000, 7200, "f32"),
                     (1000, 6000, "f32"), (128, 4096, "f32"), (40, 5000, "f32"), (4096, 8192, "bf16"),
                     (2048, 16384, "bf16"), (2048, 2048, "bf16"), (1000, 6000, "bf16"), (128, 4096, "bf16")]
ATTRIBUTION_CELLS = [("gae", 4096, 8192, "f32"), ("gae", 4096, 8192, "bf16"), ("gae", 3000, 8256, "f32"),
                     ("vtrace", 4096, 8192, "f32"), ("vtrace", 4096, 8192, "bf16"), ("vtrace", 2048, 16384, "bf16"),
                     ("vtrace", 8192, 512, "f32"), ("vtrace", 2048, 2048, "f32"), ("vtrace", 2000, 7200, "f32"),
                     ("retrace", 4096, 8192, "f32"), ("retrace", 2048, 16384, "f32"), ("retrace", 4096, 8192, "bf16"),
                     ("retrace", 2048, 2048, "f32"), ("retrace", 3000, 4096, "f32")]
H.PLANS["attribution"] = ATTRIBUTION_CELLS
H.PLANS["waves"] = [("vtrace", *cell) for cell in WAVE_CELLS]
H.PLANS["instructions"] = [(est, *cell) for est in ("gae", "vtrace", "retrace") for cell in INSTRUCTION_CELLS]

if __name__ == "__main__":
    H.cli(sys.argv[1:])
