"""Async walks for the reverse kernels (thirty-eighth session): lambda and discounted returns' twins through
``kernels.<estimator>`` in 64 x 64 tiles on four warps (two to six stages), 64 x 128 (two and three)
and 32 x 64 (four and six) against the kernels' choice (the Triton walk), bf16 ``[T, N]`` with
truncations (as the benchmark calls them) from 8192 to 32768 environments; float32 at 8192 x 4096 and
16384 x 2048 for the bf16 / float32 ratio; GAE's twin in its rule's depths against its Triton walk
(its code moved into ``_async_walk``'s helpers: the same PTX, measured again). PLAN ``discounted``:
discounted returns' twin once its series were copied and held in lambda returns' order (r, V', the
flags; first in r, the flags, V'), 64 x 64 in two to four stages and 64 x 128 in two and three, against
its Triton walk and the kernels' choice (the rule). PLAN ``more``: discounted returns at 8192 x 4096
and 8448 x 2048 in tiles on two warps, 32 steps and 128; GAE's twin from 9216 to 12288 environments
(between its ranges) and at 28672 and 32768 (past them) in 64 x 64 (three and four stages) and 64 x
128 (two and three). PLAN ``long_chunks``: lambda returns and GAE at the same two cells in 128 x 64 (two
and three stages). PLAN ``heavy``: V-trace's and Retrace's twins, in the tiles their sm_90 builds hold
without spills (V-trace: 32 x 64 and 64 x 32 on four warps, 32 x 32 on two; Retrace: 64 x 64 in two
to four stages, 32 x 64, 64 x 32, 64 x 128 and 128 x 64), against the kernels' choice (their Triton
walks), over ``CELLS``. Each checked against
the float64 reference first, then device time from a CUDA graph, two rounds, one process
(``../run_successor/sweep.py``'s ``warm`` and ``time_all``). Cells N x T.

  PYTHONPATH=. python docs/bench/async_returns/stages.py PLAN warm I K     # compile share I of K
  PYTHONPATH=. python docs/bench/async_returns/stages.py PLAN time OUT.json
"""
import sys

sys.path.append("docs/bench/run_successor")
import sweep as run_successor_sweep  # noqa: E402

TILES = (["64x64w4+%dstages+latest+async" % s for s in (2, 3, 4, 5, 6)]
         + ["64x128w4+%dstages+latest+async" % s for s in (2, 3)]
         + ["32x64w4+%dstages+latest+async" % s for s in (4, 6)])
CELLS = [(8192, 4096), (8448, 2048), (10240, 2048), (12288, 2048), (14336, 2048), (16384, 2048), (20480, 1024),
         (24576, 1024), (32768, 1024)]
LIGHT = ("lambda_returns", "discounted_returns")
PLANS = {"stages": [(est, N, T, "bf16", label) for est in LIGHT for N, T in CELLS for label in ["default"] + TILES]
         + [(est, N, T, "f32", "default") for est in LIGHT for N, T in ((8192, 4096), (16384, 2048))]
         + [("gae", N, T, "bf16", label) for N, T, stages in ((8192, 4096, 4), (16384, 2048, 2))
            for label in ("default", "64x64w4+3stages+latest+runs", "64x64w4+%dstages+latest+async" % stages)],
         # discounted returns' twin with its series in lambda returns' order, against its Triton walk
         "discounted": [("discounted_returns", N, T, "bf16", label) for N, T in CELLS
                        for label in ["default", "64x32w2+3stages+latest+runs+envs4"] + TILES[:3] + TILES[5:7]],
         # discounted returns at 8192 environments in other tiles; GAE's twin between and past its ranges
         "more": [("discounted_returns", N, T, "bf16", label) for N, T in CELLS[:2]
                  for label in ["default"] + ["64x64w2+%dstages+latest+async" % s for s in (2, 3, 4)]
                  + ["64x32w2+%dstages+latest+async" % s for s in (3, 4)]
                  + ["32x64w4+%dstages+latest+async" % s for s in (2, 3)]
                  + ["128x64w4+%dstages+latest+async" % s for s in (2, 3)]]
         + [("gae", N, T, "bf16", label) for N, T in ((9216, 2048), (10240, 2048), (11264, 2048), (12288, 2048),
                                                      (28672, 1024), (32768, 1024))
            for label in ["default"] + TILES[1:3] + TILES[5:7]],
         # 128-step chunks (discounted returns' fast tile at 8192 environments) for lambda returns and GAE
         "long_chunks": [(est, N, T, "bf16", label) for est in ("lambda_returns", "gae") for N, T in CELLS[:2]
                         for label in ["default"] + ["128x64w4+%dstages+latest+async" % s for s in (2, 3)]],
         # V-trace's and Retrace's twins in the tiles their builds hold in registers (V-trace's 64 x 64 spills)
         "heavy": [("vtrace", N, T, "bf16", label) for N, T in CELLS
                   for label in ["default"] + ["32x64w4+%dstages+latest+async" % s for s in (3, 4, 6)]
                   + ["64x32w4+%dstages+latest+async" % s for s in (3, 4, 6)]
                   + ["32x32w2+%dstages+latest+async" % s for s in (4, 6)]]
         + [("retrace", N, T, "bf16", label) for N, T in CELLS
            for label in ["default"] + ["64x64w4+%dstages+latest+async" % s for s in (2, 3, 4)]
            + ["32x64w4+%dstages+latest+async" % s for s in (4, 6)]
            + ["64x32w4+4stages+latest+async", "64x128w4+2stages+latest+async", "128x64w4+2stages+latest+async"]]}

if __name__ == "__main__":
    if sys.argv[2] == "warm":
        run_successor_sweep.warm(PLANS[sys.argv[1]], int(sys.argv[3]), int(sys.argv[4]))
    else:
        run_successor_sweep.time_all(PLANS[sys.argv[1]], sys.argv[3])
