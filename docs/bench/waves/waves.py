"""Walks whose programs fill their waves badly (thirty-fifth session): from 8192 environments the
`[T, N]` walks take 64-environment tiles, one or two programs per multiprocessor of the H200, so
10240 and 12288 environments (160 and 192 programs on 132 multiprocessors) leave part of a wave idle
or unbalanced, where 32-environment tiles (320, 384 programs) fill more of theirs. The kernels' own
tile against 32- and 64-wide tiles, each checked against the float64 reference first, then device
time from a CUDA graph, two rounds, one process (``../run_successor/sweep.py``'s ``warm`` and
``time_all``). Cells N x T. PLAN ``sweep``: 10240, 12288 and 20480 environments; ``beyond``
(thirty-sixth session): 16384 to 32768 environments, float32 GAE, lambda and discounted returns,
``linear_scan`` and the light kernels, bf16 GAE and Retrace.

  PYTHONPATH=. python docs/bench/waves/waves.py PLAN warm I K     # compile share I of K
  PYTHONPATH=. python docs/bench/waves/waves.py PLAN time OUT.json
"""
import sys

sys.path.append("docs/bench/run_successor")
sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import sweep as run_successor_sweep  # noqa: E402

TILES = ["64x32w2+3stages", "64x32w4+3stages", "32x32w2+3stages", "32x64w4+4stages", "64x64w4+3stages"]
CELLS = [(10240, 2048), (12288, 2048), (20480, 2048)]


def labels(est: str, N: int, T: int, dtype_name: str) -> list:
    order = "+latest" if B.default_config(est, N, T, "tn", B.DTYPES[dtype_name]).latest_first else ""
    return list(dict.fromkeys(["default"] + [tile + order + "+runs" for tile in TILES]))


SWEPT = [(est, d) for est in ("gae", "retrace", "lambda_returns", "discounted_returns") for d in ("f32", "bf16")] + [
    ("linear_scan", "f32"), ("eligibility_traces", "f32")]
BEYOND_CELLS = [(16384, 2048), (18432, 2048), (24576, 1024), (32768, 1024)]
BEYOND = [(est, d) for est in ("gae", "lambda_returns", "discounted_returns", "linear_scan", "eligibility_traces",
                               "episodic_prefix_sum") for d in ("f32",)] + [("gae", "bf16"), ("retrace", "bf16")]
PLANS = {"sweep": [(est, N, T, d, label) for est, d in SWEPT for N, T in CELLS for label in labels(est, N, T, d)],
         "beyond": [(est, N, T, d, label) for est, d in BEYOND for N, T in BEYOND_CELLS
                    for label in labels(est, N, T, d)]}


if __name__ == "__main__":
    if sys.argv[2] == "warm":
        run_successor_sweep.warm(PLANS[sys.argv[1]], int(sys.argv[3]), int(sys.argv[4]))
    else:
        run_successor_sweep.time_all(PLANS[sys.argv[1]], sys.argv[3])
