"""GAE's float32 ``[T, N]`` cells around the persistent look-back tiles (``LaunchConfig.persistent``),
the kernels' own block shapes: ``../explicit_layout/heldout.py``'s measurement (device time per call
from a CUDA graph, inputs rotated through four times the L2, each cell checked against the float64
reference first), with whatever ``kernels`` is first on PYTHONPATH, one process per version. PLAN
``persistent``: five cells of the prototype's sweep, eight held out (N and T not powers of two,
2^23 elements, 20000 steps, 3824 environments), three controls the rule leaves alone (2^20 elements,
rows not 16 elements apart, 2^21 elements); ``persistent_others``: the same cells for V-trace,
discounted returns and GAE (thirty-first session: their twins, and GAE's twin on the shared
``_scan.persistent_tile``).

  PYTHONPATH=<kernels' checkout>:. python docs/bench/load_latency/cells.py PLAN TAG OUT.json
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "explicit_layout"))
import heldout as H  # noqa: E402

SWEPT = ((8192, 512), (4096, 1024), (2048, 2048), (2048, 3072), (8192, 2048))
HELD_OUT = ((7000, 640), (4000, 1280), (2560, 2560), (5000, 896), (16384, 512), (2304, 1792), (1100, 3824),
            (20000, 608))
CONTROLS = ((2048, 512), (4096, 1000), (1024, 2048))
H.PLANS.update({"persistent": [("gae", T, N, "f32") for T, N in SWEPT + HELD_OUT + CONTROLS],
                "persistent_others": [(est, T, N, "f32") for est in ("vtrace", "discounted_returns", "gae")
                                      for T, N in SWEPT + HELD_OUT + CONTROLS]})

if __name__ == "__main__":
    H.cli(sys.argv[1:])
