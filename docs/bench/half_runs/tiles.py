"""Block shapes of the bf16 ``[T, N]`` walks with 16-bit tiles four environments per thread
(thirty-second session): every estimator at 8192 x 4096 and 16384 x 2048, the kernels' own choice
(``default``) against candidate tiles, each checked against the float64 reference first, then device
time from a CUDA graph, two rounds, one process (``../run_successor/sweep.py``'s ``warm`` and
``time_all``). Cells N x T. PLAN ``eight``: the kernels' own layout (eight environments per thread);
``four``: with ``half_runs.patch`` applied and ``HALF_RUNS=1`` (four per thread); ``light_1024``: the
light kernels at 1024 steps, their tiles against 128 x 32 on two warps and 128 x 64 on four;
``light_short``: the same at 300-1500 steps against 128 x 32 on two warps.

  [HALF_RUNS=1] PYTHONPATH=. python docs/bench/half_runs/tiles.py PLAN warm I K     # compile share I of K
  [HALF_RUNS=1] PYTHONPATH=. python docs/bench/half_runs/tiles.py PLAN time OUT.json
"""
import sys

sys.path.append("docs/bench/run_successor")
import sweep as run_successor_sweep  # noqa: E402

from cells import ESTIMATORS  # noqa: E402

# with the tiles eight environments per thread (16-byte vectors, the kernels' own) and four (HALF_RUNS=1)
EIGHT = ["128x32w2+3stages", "128x32w4+3stages", "128x64w4+3stages", "128x64w4+4stages", "64x64w4+4stages",
         "64x32w2+3stages"]
FOUR = ["64x64w4+3stages", "64x64w4+4stages", "128x32w4+3stages", "64x32w2+3stages", "128x32w2+3stages",
        "128x64w4+3stages", "64x32w4+3stages"]
PLANS = {name: [(est, N, T, "bf16", label) for est in ESTIMATORS for N, T in ((8192, 4096), (16384, 2048))
                for label in run_successor_sweep.labels(tiles)] for name, tiles in (("eight", EIGHT), ("four", FOUR))}
# the light kernels' bf16 walks of 1024 steps, where their 64 x 32 two-warp tiles stay
PLANS["light_1024"] = [(est, N, 1024, "bf16", label) for est in ("eligibility_traces", "episodic_prefix_sum")
                       for N in (8192, 16384, 32768)
                       for label in run_successor_sweep.labels(["128x32w2+3stages", "128x64w4+4stages"])]
# and of 300-1500 steps, their 64 x 32 two-warp tiles against 128 x 32 on two warps
PLANS["light_short"] = [(est, N, T, "bf16", label) for est in ("eligibility_traces", "episodic_prefix_sum")
                        for N, T in ((8192, 512), (16384, 512), (32768, 512), (8192, 300), (12288, 700),
                                     (16384, 1500), (20000, 1024))
                        for label in run_successor_sweep.labels(["128x32w2+3stages"])]

if __name__ == "__main__":
    if sys.argv[2] == "warm":
        run_successor_sweep.warm(PLANS[sys.argv[1]], int(sys.argv[3]), int(sys.argv[4]))
    else:
        run_successor_sweep.time_all(PLANS[sys.argv[1]], sys.argv[3])
