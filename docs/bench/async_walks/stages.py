"""How deep the async walk's ring should be (thirty-seventh session): GAE's twin through
``kernels.gae`` with each given block shape (``LaunchConfig.async_walk``, 64 x 64 on four warps, two
to six stages) against the kernels' choice, each checked against the float64 reference first, then
device time from a CUDA graph, two rounds, one process (``../run_successor/sweep.py``'s ``warm`` and
``time_all``). Cells N x T. PLAN ``stages``: the first range of the first rule (8192-8448
environments), where the twin in three stages was slower held out than the prototype's, and two
cells of the second.

  PYTHONPATH=. python docs/bench/async_walks/stages.py PLAN time OUT.json
"""
import sys

sys.path.append("docs/bench/run_successor")
import sweep as run_successor_sweep  # noqa: E402

TILES = ["64x64w4+%dstages+latest+async" % s for s in (2, 3, 4, 5, 6)]
CELLS = [(8192, 3000), (8192, 4096), (8448, 1500), (12800, 2048), (16384, 2048)]
PLANS = {"stages": [("gae", N, T, "bf16", label) for N, T in CELLS for label in ["default"] + TILES]}

if __name__ == "__main__":
    if sys.argv[2] == "warm":
        run_successor_sweep.warm(PLANS[sys.argv[1]], int(sys.argv[3]), int(sys.argv[4]))
    else:
        run_successor_sweep.time_all(PLANS[sys.argv[1]], sys.argv[3])
