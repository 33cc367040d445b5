"""Which change slowed GAE's Triton tiles on rows not 16 elements apart (200 x 6004 float32: 17.9 us in
the eighteenth session's sweep, 36.0 in the twenty-fourth's, same block shape)? Times fixed block shapes
(the Triton rule's, without explicit layouts, as labels) with whatever ``kernels`` is first on
PYTHONPATH (a checkout of an earlier commit's kernels), one process per version: device time per call
from a CUDA graph, inputs rotated through four times the L2, each cell checked against the float64
reference first, two rounds.

  PYTHONPATH=old/<commit>:. python docs/bench/unaligned_regression/bisect_cells.py OUT.json [warm]
"""
import json
import sys
import time

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402

# (estimator, T, N, dtype, block shape label of the Triton rule)
CELLS = [
    ("gae", 200, 6004, "f32", "256x16w4+latest+runs"),
    ("gae", 200, 6000, "f32", "256x16w4+latest+runs"),
    ("gae", 128, 6004, "f32", "128x16w4+latest+runs"),
    ("gae", 100, 3000, "f32", "128x8w4+latest"),
    ("gae", 200, 5000, "bf16", "256x16w4+latest+runs"),
    ("vtrace", 200, 6004, "f32", "256x16w4+latest+runs"),
    ("retrace", 200, 6004, "f32", "64x32w4+lookback+latest+runs"),
    ("lambda_returns", 200, 6004, "f32", "256x16w4+latest+runs"),
    ("discounted_returns", 200, 6004, "f32", "256x8w4+latest+runs"),
]


def main(out: str, warm: bool) -> None:
    rows, start = [], time.time()
    for est, T, N, dtype, label in CELLS:
        nbytes = B.cell_bytes(est, N, T, B.DTYPES[dtype])
        sets = 1 if warm else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        times = B.block_shape_graph_times(est, {label: B.parse_config_label(label)}, N, T, "tn", dtype, sets, warm)
        rows.append(dict(estimator=est, T=T, N=N, dtype=dtype, sets=sets, label=label, times=times[label]))
        if not warm:
            print(f"{est} {T}x{N} {dtype} [{label}] {times[label]}", flush=True)
            json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:3] == ["warm"])
