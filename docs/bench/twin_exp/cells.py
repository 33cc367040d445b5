"""V-trace and Retrace on short ``[T, N]`` cells, whose whole sequences their explicit-layout (Gluon)
twins hold, the kernels' own block shape: whichever ``kernels`` package is first on the path, so that
the twins with ``tl.exp`` and with ``_scan.fast_exp`` compare process against process
(``../explicit_layout/heldout.py``'s measurement: float64 reference first, then device time per call
replayed from a CUDA graph, each call reading its own input set, two rounds).

  PYTHONPATH=<kernels version>:. python docs/bench/twin_exp/cells.py twins TAG OUT.json [warm SHARD SHARDS]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

CELLS = [(128, 4096, "f32"), (128, 2048, "f32"), (64, 4096, "f32"), (100, 2400, "f32"), (200, 3000, "f32"),
         (250, 1500, "f32"), (48, 6000, "f32"), (20, 1500, "f32"), (180, 1200, "f32"), (128, 4096, "bf16"),
         (200, 1600, "bf16")]
H.PLANS["twins"] = [(est, *cell) for est in ("vtrace", "retrace") for cell in CELLS]

if __name__ == "__main__":
    H.cli(sys.argv[1:])
