"""The look-back window of a single column of environments (``_launch.ONE_COLUMN_LOOKBACK_WINDOW``:
how many predecessor tiles a look-back tile at most 16 environments wide polls and composes per step
of its walk where its tiles are the only column), the kernels' own block shapes on ``[T, N]`` cells of
1-16 environments: ``../explicit_layout/heldout.py``'s measurement (device time per call from a CUDA
graph, inputs rotated through four times the L2, each cell checked against the float64 reference
first), with whatever ``kernels`` is first on PYTHONPATH, one process per version and window.
PLAN ``select``: every kernel on six float32 cells (16 x 2^20, 2^18, 2^16 and 2^14 steps, one
environment x 2^20, four x 2^18) and three bf16 kernels at 16 x 2^20: the window is chosen here.
PLAN ``heldout``: every kernel on seven float32 cells outside it and two bf16 ones, and four controls
of several columns, which the window leaves alone. PLAN ``below16``: every kernel on ten float32 and
three bf16 cells of 1-13 environments outside ``sweep.py``'s, and two controls of 16 and 40.

  PYTHONPATH=<kernels' checkout>:. python docs/bench/one_column/cells.py [WINDOW] PLAN TAG OUT.json [warm SHARD SHARDS]

WINDOW (optional: the kernels' own where left out) is set on ``_launch`` before any kernel compiles.
"""
import os
import sys

if sys.argv[1].isdigit():
    from kernels import _launch

    _launch.ONE_COLUMN_LOOKBACK_WINDOW = int(sys.argv.pop(1))
sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

H.PLANS.update({
    "select": [(est, T, N, "f32") for est in H.B.SPECS
               for T, N in ((1048576, 16), (262144, 16), (65536, 16), (16384, 16), (1048576, 1), (262144, 4))]
    + [(est, 1048576, 16, "bf16") for est in ("gae", "lambda_returns", "linear_scan")],
    "heldout": [(est, T, N, "f32") for est in H.B.SPECS
                for T, N in ((500000, 16), (100000, 16), (30000, 16), (4096, 16), (1048576, 8), (300000, 1),
                             (70000, 12))]
    + [(est, T, N, "bf16") for est in ("vtrace", "retrace", "discounted_returns", "episodic_prefix_sum")
       for T, N in ((300000, 16), (1048576, 1))]
    + [("gae", 50000, 40, "f32"), ("retrace", 7000, 100, "f32"), ("lambda_returns", 65536, 64, "f32"),
       ("linear_scan", 8192, 512, "f32")],
    "below16": [(est, T, N, dtype) for est in H.B.SPECS for T, N, dtype in (
        (400000, 1, "f32"), (150000, 2, "f32"), (600000, 4, "f32"), (50000, 5, "f32"), (300000, 7, "f32"),
        (90000, 9, "f32"), (40000, 11, "f32"), (250000, 13, "f32"), (120000, 12, "f32"), (65536, 8, "f32"),
        (500000, 2, "bf16"), (100000, 12, "bf16"), (300000, 6, "bf16"))]
    + [("gae", 100000, 16, "f32"), ("lambda_returns", 50000, 40, "f32")],
})

if __name__ == "__main__":
    H.cli(sys.argv[1:])
