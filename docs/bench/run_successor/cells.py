"""Successor values from thread runs (twenty-first session): GAE and V-trace on ``[T, N]`` cells whose
Triton tiles hold their rows in thread runs (walks and look-back tiles, float32 and bf16; a few in
Triton's own layout as controls), Retrace and lambda returns (code unchanged) as controls. The
measurement is ``../explicit_layout/heldout.py``'s: whichever ``kernels`` package is first on the
path, checked against the float64 reference, then device time per call replayed from a CUDA graph.
PLAN ``run_successor``: those cells; ``wide_walks``: V-trace's float32 walks from 6000 to 8191
environments, where ``_launch.WIDE_WALKS_FROM`` changed their tiles (controls below it).

  PYTHONPATH=<kernels version>:. python docs/bench/run_successor/cells.py PLAN TAG OUT.json [warm SHARD SHARDS]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

CELLS = [(4096, 8192, "f32"), (2048, 16384, "f32"), (500, 12000, "f32"), (8192, 512, "f32"), (2048, 2048, "f32"),
         (1000, 5000, "f32"), (8192, 2048, "f32"), (512, 2048, "f32"), (6000, 700, "f32"), (3000, 3000, "f32"),
         (128, 32768, "f32"), (200, 20000, "f32"), (4096, 8192, "bf16"), (8192, 512, "bf16"), (4096, 1024, "bf16"),
         (256, 16384, "bf16"), (2048, 16384, "bf16"), (1024, 8192, "bf16")]
CONTROL_CELLS = [(4096, 8192, "f32"), (2048, 2048, "f32"), (128, 32768, "f32")]
H.PLANS["run_successor"] = ([(est, *cell) for est in ("gae", "vtrace") for cell in CELLS]
                            + [(est, *cell) for est in ("retrace", "lambda_returns") for cell in CONTROL_CELLS])
H.PLANS["wide_walks"] = [("vtrace", T, N, "f32") for T, N in
                         ((1500, 6400), (3000, 6496), (700, 7008), (5000, 7200), (2000, 7504), (1200, 8000),
                          (4000, 8176), (2000, 6000), (3000, 6384), (1500, 4096))]

if __name__ == "__main__":
    H.cli(sys.argv[1:])
