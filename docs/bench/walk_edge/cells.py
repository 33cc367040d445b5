"""Short ``[T, N]`` cells near the walks' threshold and GAE's eight-warp bound, outside the sweeps'
grids, the kernels' own block shape: whichever ``kernels`` package is first on the path, so that the
rules before and after compare process against process (``../explicit_layout/heldout.py``'s
measurement: float64 reference first, then device time per call replayed from a CUDA graph, each
call reading its own input set, two rounds).

  PYTHONPATH=<kernels version>:. python docs/bench/walk_edge/cells.py edge TAG OUT.json [warm SHARD SHARDS]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

import bench_kernels as B  # noqa: E402  (heldout puts scripts/ on the path)

CELLS = [(240, 4096, "f32"), (180, 5000, "f32"), (250, 7000, "f32"), (230, 10000, "f32"), (160, 12000, "f32"),
         (120, 20000, "f32"), (90, 24000, "f32"), (60, 20000, "f32"), (128, 4096, "f32"), (200, 8192, "f32"),
         (128, 10000, "bf16"), (100, 12000, "bf16"), (240, 5000, "bf16"), (200, 9000, "bf16"), (64, 20000, "bf16"),
         (128, 16384, "bf16"), (128, 6000, "bf16")]
H.PLANS["edge"] = [(est, *cell) for est in B.SPECS for cell in CELLS]

if __name__ == "__main__":
    H.cli(sys.argv[1:])
