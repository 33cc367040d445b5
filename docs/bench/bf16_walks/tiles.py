"""Block shapes of the bf16 `[T, N]` walks (twenty-second session): V-trace's (1.00x float32 at
8192 x 4096 in the twenty-first session), GAE's and Retrace's, each candidate against the kernels'
own choice (``default``), checked against the float64 reference first, then device time from a CUDA
graph, two rounds, one process (``../run_successor/sweep.py``'s ``warm`` and ``time_all``). Cells
N x T. PLAN ``first``: the walks from 8192 environments, tiles with more warps per multiprocessor
than the kernels' own (the twenty-first session's sweeps show V-trace's bf16 64 x 32 walks taking
~179 us for 2^25 elements whether 256 or 512 programs: a per-chunk latency, not bytes).

  PYTHONPATH=. python docs/bench/bf16_walks/tiles.py PLAN warm I K     # compile share I of K
  PYTHONPATH=. python docs/bench/bf16_walks/tiles.py PLAN time OUT.json
"""
import sys

sys.path.append("docs/bench/run_successor")
import sweep as run_successor_sweep  # noqa: E402

VTRACE = ["32x32w4+3stages", "32x32w4+4stages", "64x32w4+3stages", "64x32w4+4stages", "64x32w8+3stages",
          "128x32w8+3stages", "32x16w1+3stages", "32x16w2+3stages", "64x16w4+3stages", "16x32w1+3stages",
          "16x32w2+3stages", "32x64w8+3stages", "64x64w8+3stages", "16x16w1+3stages", "32x32w2+2stages",
          "64x32w4+2stages"]
WIDE = ["64x64w8+3stages", "64x64w8+4stages", "32x32w4+3stages", "64x32w4+3stages", "32x64w8+3stages",
        "64x64w8+2stages", "128x64w8+3stages"]
HEAVY = ["64x64w8+3stages", "128x64w8+3stages", "64x32w4+3stages", "32x32w4+3stages", "64x16w4+3stages",
         "128x32w8+3stages", "32x64w8+3stages", "64x64w4+2stages", "128x64w8+2stages"]

PLANS = {
    "first": [("vtrace", N, T, "bf16", label) for N, T in ((8192, 4096), (16384, 2048), (12288, 2048))
              for label in run_successor_sweep.labels(VTRACE)]
    + [("vtrace", 8192, 4096, "f32", label) for label in run_successor_sweep.labels(VTRACE)]
    + [(est, N, T, "bf16", label) for est in ("gae", "retrace") for N, T in ((8192, 4096), (16384, 2048))
       for label in run_successor_sweep.labels(HEAVY)],
    "wide": [(est, N, T, "f32", label) for est in ("vtrace", "retrace")
             for N, T in ((8192, 1024), (8192, 2048), (8192, 8192), (8448, 2048), (10240, 2048), (12288, 2048),
                          (16384, 1024), (16384, 2048), (32768, 1024), (8192, 4096))
             for label in run_successor_sweep.labels(WIDE)]
    + [("vtrace", N, T, "bf16", label) for N, T in ((8192, 1024), (8192, 2048), (8192, 8192), (8448, 2048),
                                                     (8320, 3000), (8704, 2048))
       for label in run_successor_sweep.labels(["64x32w4+3stages"])],
}

if __name__ == "__main__":
    if sys.argv[2] == "warm":
        run_successor_sweep.warm(PLANS[sys.argv[1]], int(sys.argv[3]), int(sys.argv[4]))
    else:
        run_successor_sweep.time_all(PLANS[sys.argv[1]], sys.argv[3])
