"""Explicit-layout walks (``LaunchConfig.explicit_walk``, thirty-fifth session): GAE's Gluon walk twin,
warps side by side along environments so that a chunk's scan stays in its warp, against the kernels'
own block shape, each checked against the float64 reference first, then device time from a CUDA
graph, two rounds, one process (``../run_successor/sweep.py``'s ``warm`` and ``time_all``). Cells N x T.
PLAN ``sweep``: bf16 and float32 cells of the walks and of the look-back tiles below them, the own
tile against every walk tile of 8-32 lanes along time, one and two stages.

  PYTHONPATH=. python docs/bench/gluon_walks/walks.py PLAN warm I K     # compile share I of K
  PYTHONPATH=. python docs/bench/gluon_walks/walks.py PLAN time OUT.json
"""
import sys

sys.path.append("docs/bench/run_successor")
sys.path.append("scripts")
import sweep as run_successor_sweep  # noqa: E402

# block_t x block_n on warps; lanes along time = 32 * (16 / itemsize) * warps / block_n
BF16_TILES = ["128x32w4", "64x32w4", "256x32w4", "64x64w4", "128x64w4", "64x32w2", "128x16w2", "64x16w2",
              "128x8w1", "32x128w4"]
F32_TILES = ["128x16w4", "64x16w4", "64x32w4", "128x32w4", "128x8w2", "64x16w2", "128x4w1"]
BF16_CELLS = [(8192, 4096), (16384, 2048), (32768, 1024), (8192, 1024), (4096, 4096), (12288, 2048)]
F32_CELLS = [(8192, 4096), (16384, 2048), (4096, 4096), (2048, 8192)]


def labels(tiles: list) -> list:
    return ["default"] + [f"{tile}{stages}+xwalk" for tile in tiles for stages in ("", "+2stages")]


PLANS = {"sweep": [("gae", N, T, "bf16", label) for N, T in BF16_CELLS for label in labels(BF16_TILES)]
         + [("gae", N, T, "f32", label) for N, T in F32_CELLS for label in labels(F32_TILES)]}


if __name__ == "__main__":
    if sys.argv[2] == "warm":
        run_successor_sweep.warm(PLANS[sys.argv[1]], int(sys.argv[3]), int(sys.argv[4]))
    else:
        run_successor_sweep.time_all(PLANS[sys.argv[1]], sys.argv[3])
