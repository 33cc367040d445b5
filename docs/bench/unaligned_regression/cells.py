"""The kernels' own block shapes (``config=None``) on ``[T, N]`` cells whose thread-run tiles the rule for
successor values decides, with whatever ``kernels`` is first on PYTHONPATH (the kernels before the
change, or after it), one process per version: ``../explicit_layout/heldout.py``'s measurement (device
time per call from a CUDA graph, inputs rotated through four times the L2, each cell checked against the
float64 reference first, two rounds), with these plans added to its own.
PLAN ``unaligned``: GAE's and V-trace's rows not 16 elements apart (whole-sequence tiles of 65-256 steps,
float32 and bf16; GAE's float32 four-warp look-back tiles at 1000 environments) and four controls the
change leaves alone (aligned rows, lambda returns); ``heldout``: GAE's whole-sequence tiles in rows not 16
apart on 16 other cells, every tile shape the rule gives them (float32 128 x 16, bf16 128 x 16, 128 x 32,
256 x 8 and 256 x 16), and four controls (V-trace's such rows, lambda returns, aligned rows);
``retrace_short``: Retrace's float32 rows not 16 apart of 65-128 steps on 10 cells outside the sweep
(``explicit_layout/sweep.py`` PLAN ``unaligned_short``) and four controls; ``gae_short``: GAE's float32 such
rows of 65-100 steps from 4096 environments on 8 cells outside that sweep, and four controls (110 steps,
3000 environments, 16-aligned rows, lambda returns).

  PYTHONPATH=<kernels' checkout>:. python docs/bench/unaligned_regression/cells.py \
      PLAN TAG OUT.json [warm SHARD SHARDS]

The records here were written by this script's first form, which repeated ``heldout.main``'s loop: the
same calls, without the ``tag`` and copy bandwidth, the block shape under ``config``, the times as a list.
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

H.PLANS.update({
    "unaligned": [("gae", T, N, "f32") for T, N in ((80, 5000), (100, 6004), (128, 12008), (128, 30002))]
    + [("gae", T, N, "bf16") for T, N in ((80, 8200), (150, 5000), (200, 6004), (256, 12008), (256, 30002))]
    + [("vtrace", T, N, "f32") for T, N in ((80, 6004), (100, 12008), (128, 30002))]
    + [("vtrace", T, N, "bf16") for T, N in ((100, 5000), (200, 8200), (256, 12008))]
    + [("gae", T, N, "f32") for T, N in ((300, 1000), (1000, 1001), (4096, 1000))]
    + [("gae", 128, 16384, "f32"), ("vtrace", 200, 16384, "bf16"), ("gae", 512, 2048, "f32"),
       ("lambda_returns", 200, 6004, "f32")],
    "heldout": [("gae", T, N, "f32") for T, N in ((72, 7000), (110, 20002), (90, 65000), (128, 4100))]
    + [("gae", T, N, "bf16") for T, N in ((65, 6004), (110, 4100), (72, 9000), (100, 16390), (128, 20002),
                                          (90, 65000), (140, 777), (200, 2500), (256, 1500), (170, 9000),
                                          (230, 4100), (129, 16390))]
    + [("vtrace", 170, 9000, "bf16"), ("vtrace", 100, 7000, "f32"), ("lambda_returns", 128, 7000, "f32"),
       ("gae", 128, 16384, "f32")],
    "retrace_short": [("retrace", T, N, "f32") for T, N in ((65, 777), (80, 1500), (96, 3000), (110, 5000), (120, 9000),
                                                            (70, 20002), (90, 40000), (128, 1001), (75, 12345),
                                                            (115, 2047))]
    + [("retrace", 100, 4096, "f32"), ("retrace", 100, 9000, "bf16"), ("gae", 100, 9000, "f32"),
       ("lambda_returns", 110, 5000, "f32")],
    "gae_short": [("gae", T, N, "f32") for T, N in ((66, 4100), (80, 7000), (90, 20002), (96, 50002), (85, 9000),
                                                    (70, 12345), (100, 16390), (75, 4500))]
    + [("gae", 110, 7000, "f32"), ("gae", 80, 3000, "f32"), ("gae", 80, 7008, "f32"),
       ("lambda_returns", 80, 7000, "f32")],
})

if __name__ == "__main__":
    H.cli(sys.argv[1:])
