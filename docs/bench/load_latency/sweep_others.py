"""Sweep the persistent look-back tiles (``LaunchConfig.persistent``) of V-trace, lambda returns and
discounted returns (thirty-first session) against each kernel's block shape without them, on five
float32 ``[T, N]`` cells of GAE's sweep. Each variant is checked against the float64 reference first
(a wrong one reads ``WRONG``, one that cannot launch ``FAIL``), then timed as device time per call
from a CUDA graph whose calls take input sets rotated through four times the L2, two rounds
(``bench_kernels.block_shape_graph_times``). ``without`` is the block shape ``choose_config`` gives
with no ``PERSISTENT_LOOK_BACK_TILE``. Percentages in the log are of a 2 GiB device-to-device copy
timed at the start. Lambda returns' persistent twin won on no cell and was removed after the run:
its variants need the kernels of commit 6c21b06 first on PYTHONPATH; Retrace's (``retrace``) won on none either,
those of commit bf4c45e.

  PYTHONPATH=. python docs/bench/load_latency/sweep_others.py OUT.json [ESTIMATOR,... [more] | boundary | retrace]
"""
import json
import os
import sys
import time

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
from kernels import _launch  # noqa: E402

CELLS = ((8192, 512), (4096, 1024), (2048, 2048), (2048, 3072), (8192, 2048))  # (T, N)
TILES = ((128, 32, 4, 2), (64, 32, 4, 2), (64, 32, 4, 3), (128, 16, 4, 2), (128, 16, 4, 3), (64, 32, 2, 3),
         (128, 32, 8, 1), (128, 32, 8, 2), (256, 32, 8, 1), (32, 32, 2, 4))  # (block_t, block_n, warps, per SM)
# Lambda returns gained from none of TILES: more, with programs per SM up to what fits.
MORE_TILES = ((128, 32, 4, 3), (128, 32, 4, 4), (128, 32, 4, 1), (256, 16, 4, 2), (256, 16, 4, 3), (128, 64, 8, 1),
              (256, 16, 8, 1), (64, 64, 4, 2))
ESTIMATORS = ("vtrace", "lambda_returns", "discounted_returns")
# V-trace's held-out cells lost at 1100 x 3824 (0.89x) and from 16384 x 512 (0.96-0.97x): its tile against its
# tiles without it between 3072 and 3824 environments and at 512-1024 environments over long sequences.
BOUNDARY_CELLS = ((2048, 3328), (1500, 3584), (3000, 3456), (1100, 3200), (1100, 3072), (1600, 3824), (4096, 3712),
                  (16384, 1024), (16384, 768), (8192, 1024), (32768, 1024), (3000, 1040))


def without_persistent(est: str, T: int, N: int):
    traits = dict(_launch.kernel_traits(est), persistent_look_back_tile=None, explicit_short_tiles=False)
    return _launch.choose_config(T, N, False, itemsize=4, aligned_rows=N % 16 == 0, **traits)


def main(out: str, estimators: tuple, tiles: tuple = TILES, cells: tuple = CELLS) -> None:
    copy_gbs = B.copy_bandwidth("cuda", 2**31, 25, 200)
    print(f"copy {copy_gbs:.0f} GB/s", flush=True)
    rows, start = [], time.time()
    for est in estimators:
        for T, N in cells:
            configs = {"without": without_persistent(est, T, N)}
            configs.update({f"p{bt}x{bn}w{w}k{k}": _launch.LaunchConfig(bt, bn, w, lookback=True, latest_first=True,
                                                                        thread_runs=True, persistent=k)
                            for bt, bn, w, k in tiles})
            nbytes = B.cell_bytes(est, N, T, B.DTYPES["f32"])
            sets = B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
            times = B.block_shape_graph_times(est, configs, N, T, "tn", "f32", sets)
            rows.append(dict(estimator=est, T=T, N=N, sets=sets, bytes=nbytes, copy_gbs=copy_gbs,
                             without=B.config_label(configs["without"]), times=times))
            json.dump(rows, open(out, "w"), indent=1)
            best = {k: min(v) for k, v in times.items() if all(isinstance(x, float) for x in v)}
            for label in configs:
                us = best.get(label)
                share = f"{nbytes / (us * 1e-6) / 1e9 / copy_gbs:4.0%}" if us else ""
                print(f"{est} {T}x{N} {label:14s} " + "/".join(
                    f"{x:.2f}" if isinstance(x, float) else str(x)[:70] for x in times[label]) + f" {share}",
                      flush=True)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    if sys.argv[2:3] == ["boundary"]:
        main(sys.argv[1], ("vtrace",), ((64, 32, 4, 2),), BOUNDARY_CELLS)
    elif sys.argv[2:3] == ["retrace"]:  # the tile chosen on cells.SWEPT, then read off the others
        sys.path.append(os.path.dirname(__file__))
        import cells
        main(sys.argv[1], ("retrace",), TILES, cells.SWEPT + cells.HELD_OUT + cells.CONTROLS)
    else:
        main(sys.argv[1], tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else ESTIMATORS,
             MORE_TILES if sys.argv[3:4] == ["more"] else TILES)
