"""GAE on short ``[T, N]`` cells outside the sweep's grid (N and T not powers of two), the kernels'
own block shape: whichever ``kernels`` package is first on the path, so that two versions compare
process against process. Checked against the float64 reference first; device time per call of calls
replayed from a CUDA graph, each call reading its own input set (four times the L2), two rounds.

  PYTHONPATH=<kernels version>:. python docs/bench/explicit_layout/heldout.py TAG OUT.json [warm]
"""
import json
import sys
import time

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402

CELLS = [(10, 300, "f32"), (12, 50000, "f32"), (20, 1500, "f32"), (24, 20000, "f32"), (40, 2500, "f32"),
         (48, 1000, "f32"), (60, 12000, "f32"), (70, 6000, "f32"), (90, 5000, "f32"), (128, 1024, "f32"),
         (128, 4096, "f32"), (128, 8000, "f32"), (150, 1200, "f32"), (180, 4800, "f32"), (230, 2400, "f32"),
         (20, 10000, "bf16"), (100, 3200, "bf16"), (128, 4096, "bf16"), (200, 1600, "bf16")]


def main(tag: str, out: str, warm: bool) -> None:
    copy_gbs = 0.0 if warm else B.copy_bandwidth("cuda", 2**30, 25, 200)
    rows, start = [], time.time()
    for T, N, dtype_name in CELLS:
        nbytes = B.cell_bytes("gae", N, T, B.DTYPES[dtype_name])
        n_sets = 1 if warm else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        times = B.block_shape_graph_times("gae", {"default": None}, N, T, "tn", dtype_name, n_sets, warm)
        default = B.config_label(B.default_config("gae", N, T, "tn", B.DTYPES[dtype_name]))
        rows.append(dict(tag=tag, T=T, N=N, dtype=dtype_name, sets=n_sets, bytes=nbytes, copy_gbs=copy_gbs,
                         default=default, times=times))
        if not warm:
            print(f"{tag} {T}x{N} {dtype_name} [{default}] " + "/".join(
                f"{x:.2f}" if isinstance(x, float) else str(x)[:60] for x in times["default"]), flush=True)
            json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:4] == ["warm"])
