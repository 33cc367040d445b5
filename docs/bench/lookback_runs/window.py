"""How many predecessor tiles a narrow look-back tile (at most ``_launch.WINDOWED_LOOKBACK_MAX_N``
environments wide) polls and composes per step of its walk (``_launch.LOOKBACK_WINDOW`` and, since
the twenty-eighth session, ``_launch.ONE_COLUMN_LOOKBACK_WINDOW``: both set here to WINDOW, as the one
window of the twenty-seventh session's kernels), on cells whose tiles are 16 wide:
``../explicit_layout/heldout.py``'s measurement of the kernels' own block shapes (device time per
call from a CUDA graph, inputs rotated through four times the L2, each cell checked against the
float64 reference first), one process per window (each with its own TRITON_CACHE_DIR). PLAN
``window``: every kernel on six float32 cells of 16-512 environments and three bf16 ones at
16 x 2^20; ``cells.py``'s plans (``heldout``) too.

  python docs/bench/lookback_runs/window.py WINDOW PLAN TAG OUT.json [warm SHARD SHARDS]
"""
import os
import sys

WINDOW = int(sys.argv.pop(1))
sys.path.insert(0, os.getcwd())
from kernels import _launch  # noqa: E402

_launch.LOOKBACK_WINDOW = _launch.ONE_COLUMN_LOOKBACK_WINDOW = WINDOW
sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
sys.path.append(os.path.dirname(__file__))
import cells  # noqa: E402,F401 - its plans
import heldout as H  # noqa: E402

H.PLANS.update({
    "window": [(est, T, N, "f32") for est in ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns",
                                               "eligibility_traces", "episodic_prefix_sum", "linear_scan")
               for T, N in ((1048576, 16), (262144, 16), (65536, 64), (16384, 256), (8192, 512), (2048, 64))]
    + [(est, 1048576, 16, "bf16") for est in ("gae", "lambda_returns", "linear_scan")],
})

if __name__ == "__main__":
    H.cli(sys.argv[1:])
