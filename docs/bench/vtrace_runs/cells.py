"""The kernels' own block shapes (``config=None``) on ``[T, N]`` cells where V-trace's float32 look-back
tiles changed (``_launch._wide_scan_run_tile``), with whatever ``kernels`` is first on PYTHONPATH
(the kernels before the change, or after it), one process per version: ``../explicit_layout/heldout.py``'s
measurement (device time per call from a CUDA graph, inputs rotated through four times the L2, each cell
checked against the float64 reference first, two rounds), with these plans added to its own.
PLAN ``first_form``: the change's first form (256 x 16 tiles on four warps wherever V-trace took
look-back tiles) on 21 float32 cells outside the first sweep (``sweep_tune.log``): few environments with
long sequences, 257-1000 steps below 2048 environments, rows not 16 elements apart from 2048
environments; and four controls (V-trace's walks and bf16 tiles, GAE, 8 environments).
PLAN ``heldout``: the rule kept (``_launch._wide_scan_run_tile``, drawn from ``sweep_rule.log``) on 22 cells
outside both sweeps, float32 and bf16, and six controls it leaves alone (rows not 16 elements apart from
512 environments, V-trace's walks, bf16 at 300 steps from 512 environments, fewer than 16 environments,
GAE).

  PYTHONPATH=<kernels' checkout>:. python docs/bench/vtrace_runs/cells.py PLAN TAG OUT.json [warm SHARD SHARDS]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

H.PLANS.update({
    "first_form": [("vtrace", T, N, "f32") for T, N in (
        (3000, 100), (5000, 700), (20000, 64), (100000, 40), (6000, 300), (8000, 1000), (12000, 200),
        (40000, 48), (262144, 16), (300, 1000), (400, 1500), (600, 700), (1000, 1800), (300, 300),
        (257, 2000), (500, 100), (3000, 3000), (2500, 5000), (2048, 8200), (500, 6004), (700, 33))]
    + [("vtrace", 4096, 2048, "f32"), ("vtrace", 4096, 512, "bf16"), ("gae", 8192, 512, "f32"),
       ("vtrace", 1000, 8, "f32")],
    "heldout": [("vtrace", T, N, "f32") for T, N in (
        (5000, 150), (30000, 32), (90000, 20), (400000, 16), (1500, 350), (257, 480), (70000, 200), (8000, 17),
        (700, 1024), (1200, 1280), (6000, 896), (20000, 512), (400, 2032), (3500, 1600))]
    + [("vtrace", T, N, "bf16") for T, N in ((5000, 150), (100000, 40), (1024, 256), (400000, 16), (600, 1024),
                                              (800, 768), (2000, 1536), (10000, 512))]
    + [("vtrace", 3000, 3000, "f32"), ("vtrace", 5000, 700, "f32"), ("vtrace", 4096, 2048, "f32"),
       ("vtrace", 300, 1024, "bf16"), ("vtrace", 1000, 8, "f32"), ("gae", 8192, 512, "f32")],
})

if __name__ == "__main__":
    H.cli(sys.argv[1:])
