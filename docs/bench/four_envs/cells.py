"""bf16 ``[T, N]`` tiles four environments per thread (thirty-third session): cells outside
``tiles.py``'s sweep, the kernels' own block shapes, through ``../explicit_layout/heldout.py``'s
measurement (device time per call from a CUDA graph, inputs rotated through four times the L2, each
cell checked against the float64 reference first), one process per version. Cells are
``(estimator, T, N, dtype)``. PLAN ``heldout``: V-trace's one-wave bf16 walks (8192-8448
environments), lambda and discounted returns' bf16 walks up to 2^25 elements, ``linear_scan``'s bf16
look-back tiles below 4096 environments, and controls the rule leaves alone (those walks beyond 2^25
elements, GAE's bf16 walks, float32, the light kernels' bf16 look-back tiles); ``lambda_w4``: lambda
returns' cells of ``heldout`` again, once its walks took four warps instead of two; ``few_envs``: the
``LONG_RUN_TILES`` kernels' bf16 look-back tiles 16 environments wide (16-511 environments), with two
controls. PLAN ``ratio``: float32 and bf16 at 8192 x 4096 and 16384 x 2048 in one process (the bf16 /
float32 ratio), GAE and Retrace (unchanged) beside the three kernels the rule changed.

  PYTHONPATH=<kernels' checkout>:. python docs/bench/four_envs/cells.py PLAN TAG OUT.json [warm I K]
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

VTRACE = ((3000, 8192), (2000, 8448), (1500, 8320), (8192, 8192), (700, 8256))
RETURNS = ((3000, 8192), (512, 8192), (2560, 10240), (1500, 12288), (1500, 16384), (1024, 20000), (1024, 24576),
           (700, 32768))
RETURNS_CONTROLS = ((8192, 8192), (2048, 20480))
LINEAR_SCAN = ((2048, 1024), (1500, 3008), (3000, 1536), (2304, 2560), (8192, 768))
FEW_ENVS = ((131072, 16), (500000, 16), (100000, 32), (65536, 48), (32768, 128), (16384, 256), (8192, 400),
            (2048, 96), (5000, 208))
CONTROLS = (("gae", 4096, 8192, "bf16"), ("lambda_returns", 4096, 8192, "f32"),
            ("eligibility_traces", 2048, 2048, "bf16"))
H.PLANS.update({"heldout": [("vtrace", T, N, "bf16") for T, N in VTRACE]
                + [(est, T, N, "bf16") for est in ("lambda_returns", "discounted_returns")
                   for T, N in RETURNS + RETURNS_CONTROLS]
                + [("linear_scan", T, N, "bf16") for T, N in LINEAR_SCAN] + list(CONTROLS),
                "few_envs": [(est, T, N, "bf16")
                             for est in ("linear_scan", "eligibility_traces", "episodic_prefix_sum")
                             for T, N in FEW_ENVS]
                + [("gae", 131072, 16, "bf16"), ("lambda_returns", 65536, 48, "bf16")],
                "lambda_w4": [("lambda_returns", T, N, "bf16") for T, N in RETURNS + RETURNS_CONTROLS],
                "ratio": [(est, T, N, dtype)
                          for est in ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns")
                          for T, N in ((4096, 8192), (2048, 16384)) for dtype in ("f32", "bf16")]})

if __name__ == "__main__":
    H.cli(sys.argv[1:])
