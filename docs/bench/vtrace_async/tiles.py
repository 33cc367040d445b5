"""V-trace's async-walk twin (thirty-ninth session): the tiles its sm_90 builds hold without spills
against the kernel's own choice (its Triton walk), bf16 ``[T, N]``, each checked against the float64
reference first, then device time from a CUDA graph, two rounds, one process
(``../run_successor/sweep.py``'s ``warm`` and ``time_all``); float32 at the ratio's two cells. Cells
N x T. PLAN ``tiles``: 64 x 64 in two to four stages, 64 x 128 and 128 x 64 in two, 32 x 64 in four,
over the nine cells of ``../async_returns/stages.py``; ``warps``: tiles of eight warps (64 x 64 in two to
four stages, 32 x 64 in four and six, 128 x 64 and 64 x 128 in two), 64 x 32 on four in three and four,
and 32 x 64 on four in four, over eight of those cells; ``fours``: walks of four environments per thread
(8-byte vectors, ``+envs4``) on eight warps (64 x 64 in two to four stages, 128 x 64 and 64 x 128 in two,
32 x 64 in four) and on four (64 x 32 in three and four), over the same cells; ``deep``: from 8192 to 9216
environments, deeper rings and 16-warp programs of four environments per thread; ``ranges``: the
three tiles that won (128 x 64 and 64 x 128 on eight warps, 128 x 32 on four, two stages, four
environments per thread) between and beyond those cells, to set the rule's ranges.

  PYTHONPATH=. python docs/bench/vtrace_async/tiles.py PLAN warm I K     # compile share I of K
  PYTHONPATH=. python docs/bench/vtrace_async/tiles.py PLAN time OUT.json
"""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(__file__), "..", "run_successor"))
import sweep as run_successor_sweep  # noqa: E402

CELLS = [(8192, 4096), (8448, 2048), (10240, 2048), (12288, 2048), (14336, 2048), (16384, 2048), (20480, 1024),
         (24576, 1024), (32768, 1024)]  # ../async_returns/stages.py's
TILES = (["64x64w4+%dstages+latest+async" % s for s in (2, 3, 4)]
         + ["64x128w4+2stages+latest+async", "128x64w4+2stages+latest+async", "32x64w4+4stages+latest+async"])
WARPS = (["64x64w8+%dstages+latest+async" % s for s in (2, 3, 4)]
         + ["32x64w8+%dstages+latest+async" % s for s in (4, 6)]
         + ["64x32w4+%dstages+latest+async" % s for s in (3, 4)]
         + ["128x64w8+2stages+latest+async", "64x128w8+2stages+latest+async", "32x64w4+4stages+latest+async"])
FOURS = (["64x64w8+%dstages+latest+envs4+async" % s for s in (2, 3, 4)]
         + ["128x64w8+2stages+latest+envs4+async", "32x64w8+4stages+latest+envs4+async", "64x128w8+2stages+latest+envs4+async"]
         + ["64x32w4+%dstages+latest+envs4+async" % s for s in (3, 4)])
DEEP = (["128x64w8+3stages+latest+envs4+async", "128x64w16+2stages+latest+envs4+async",
         "128x64w16+3stages+latest+envs4+async", "64x64w16+3stages+latest+envs4+async",
         "64x64w16+4stages+latest+envs4+async", "64x64w8+5stages+latest+envs4+async",
         "64x64w8+6stages+latest+envs4+async", "128x32w4+2stages+latest+envs4+async",
         "128x32w4+3stages+latest+envs4+async", "128x64w8+3stages+latest+async", "128x64w8+2stages+latest+envs4+async"])
RANGE_TILES = ("128x64w8+2stages+latest+envs4+async", "64x128w8+2stages+latest+envs4+async",
               "128x32w4+2stages+latest+envs4+async")
RANGE_CELLS = ((8704, 2048), (9216, 2048), (9728, 2048), (14336, 2048), (16896, 1500), (17408, 2048), (18432, 2048),
               (22528, 1024), (25344, 1024), (26624, 1024), (28672, 1024), (30720, 1024), (33792, 1024))
PLANS = {"tiles": [("vtrace", N, T, "bf16", label) for N, T in CELLS for label in ["default"] + TILES]
         + [("vtrace", N, T, "f32", "default") for N, T in ((8192, 4096), (16384, 2048))],
         "warps": [("vtrace", N, T, "bf16", label) for N, T in CELLS if N != 14336 for label in ["default"] + WARPS],
         "deep": [("vtrace", N, T, "bf16", label) for N, T in ((8192, 4096), (8448, 2048), (8192, 1024), (9216, 2048))
                  for label in ["default"] + list(DEEP)],
         "ranges": [("vtrace", N, T, "bf16", label) for N, T in RANGE_CELLS for label in ("default",) + RANGE_TILES],
         "fours": [("vtrace", N, T, "bf16", label) for N, T in CELLS if N != 14336 for label in ["default"] + FOURS]}

if __name__ == "__main__":
    if sys.argv[2] == "warm":
        run_successor_sweep.warm(PLANS[sys.argv[1]], int(sys.argv[3]), int(sys.argv[4]))
    else:
        run_successor_sweep.time_all(PLANS[sys.argv[1]], sys.argv[3])
