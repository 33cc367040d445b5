"""The kernels' own block shapes (``config=None``) on ``[T, N]`` cells below 512 environments where the
look-back tiles of the kernels other than V-trace changed (``_launch._few_env_run_tile``), with whatever
``kernels`` is first on PYTHONPATH (the kernels before the change, or after it), one process per version:
``../explicit_layout/heldout.py``'s measurement (device time per call from a CUDA graph, inputs rotated
through four times the L2, each cell checked against the float64 reference first, two rounds), with this
plan added to its own.
PLAN ``heldout``: the rule (drawn from ``sweep_few.log``) on 16 cells outside the sweep for each of the
seven kernels, float32 and bf16: one column of 16 environments from 65536 steps (Retrace's float32 is a
control: unchanged), 16 environments below 65536 steps, 40-496 environments in rows 16 elements apart and
not; and five controls the rule leaves alone (512 environments, 8 environments, V-trace, the walks).

  PYTHONPATH=<kernels' checkout>:. python docs/bench/lookback_runs/cells.py PLAN TAG OUT.json [warm SHARD SHARDS]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

ESTIMATORS = tuple(est for est in H.B.SPECS if est != "vtrace")
H.PLANS.update({
    "heldout": [(est, T, N, dtype) for est in ESTIMATORS for T, N, dtype in (
        (500000, 16, "f32"), (100000, 16, "f32"), (30000, 16, "f32"), (4096, 16, "f32"), (50000, 40, "f32"),
        (7000, 100, "f32"), (1500, 250, "f32"), (700, 304, "f32"), (3000, 496, "f32"), (9000, 64, "f32"),
        (40000, 208, "f32"), (257, 400, "f32"),
        (300000, 16, "bf16"), (6000, 208, "bf16"), (2000, 72, "bf16"), (20000, 96, "bf16"))]
    + [("gae", 8192, 512, "f32"), ("gae", 1000, 8, "f32"), ("vtrace", 5000, 150, "f32"),
       ("lambda_returns", 4096, 4096, "f32"), ("linear_scan", 4096, 512, "bf16")],
})

if __name__ == "__main__":
    H.cli(sys.argv[1:])
