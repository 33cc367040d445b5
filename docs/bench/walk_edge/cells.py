"""Short ``[T, N]`` cells near the walks' threshold and GAE's eight-warp bound, outside the sweeps'
grids, the kernels' own block shape: whichever ``kernels`` package is first on the path, so that the
rules before and after compare process against process (``../explicit_layout/heldout.py``'s
measurement: float64 reference first, then device time per call replayed from a CUDA graph, each
call reading its own input set, two rounds).

PLAN ``unaligned``: GAE, V-trace and Retrace (lambda returns as a control) on float32 rows not 16
elements apart, 129-256 steps (their eight-warp tiles there), and one bf16 cell. PLAN ``at_bound``:
float32 129-256 steps at 8192 environments (tiles instead of walks there, not V-trace: a control, as
are the 8208-environment cells).

  PYTHONPATH=<kernels version>:. python docs/bench/walk_edge/cells.py edge|unaligned|at_bound TAG OUT.json [warm SHARD SHARDS]
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
UNALIGNED_CELLS = [(150, 3000, "f32"), (230, 7000, "f32"), (170, 9000, "f32"), (256, 30002, "f32"), (210, 20002, "f32"),
                   (140, 1500, "f32"), (250, 4100, "f32"), (200, 3500, "f32"), (200, 5000, "bf16")]
H.PLANS["unaligned"] = [(est, *cell) for est in ("gae", "vtrace", "retrace", "lambda_returns")
                        for cell in UNALIGNED_CELLS]
H.PLANS["at_bound"] = [(est, T, N, "f32") for est in ("gae", "retrace", "lambda_returns", "discounted_returns",
                                                      "linear_scan", "vtrace")
                       for T, N in ((140, 8192), (180, 8192), (230, 8192), (256, 8192), (200, 8208))]

if __name__ == "__main__":
    H.cli(sys.argv[1:])
