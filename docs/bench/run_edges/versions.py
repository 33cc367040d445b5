"""One version of the kernels on a fixed set of cells (the kernels' own block shapes, and for the
short ``[T, N]`` cells a few others), so two versions can be compared process against process:
each cell checked against the float64 reference first, then device time per call of calls
replayed from a CUDA graph, each call reading its own input set (they cycle through four times the
L2), two rounds. The version is whichever ``kernels`` package is first on the path (from the
repository root):

  PYTHONPATH=<kernels version>:. python docs/bench/run_edges/versions.py PLAN TAG OUT.json [warm ESTIMATOR]
"""
import itertools
import json
import sys
import time

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
from kernels import LaunchConfig, _launch  # noqa: E402

SHORT_SHAPES = {  # extra block shapes for the short [T, N] cells: (block_t, block_n, warps), thread runs
    "128x8w4": (128, 8, 4), "128x16w8": (128, 16, 8), "128x32w8": (128, 32, 8), "128x4w1": (128, 4, 1),
    "128x8w2": (128, 8, 2), "128x32w16": (128, 32, 16),
}
PLANS = {  # PLAN: cells (T, N, dtype, layout, extra shapes)
    "main": [(128, 4096, "f32", "tn", True), (128, 2048, "f32", "tn", True), (128, 8192, "f32", "tn", True),
             (256, 4096, "f32", "tn", False), (64, 4096, "f32", "tn", False), (32, 8192, "f32", "tn", False),
             (16, 32768, "f32", "tn", False), (128, 32768, "f32", "tn", False), (200, 3000, "f32", "tn", False),
             (4096, 8192, "f32", "tn", False), (2048, 16384, "f32", "tn", False), (2048, 2048, "f32", "tn", False),
             (4096, 4096, "f32", "tn", False), (8192, 512, "f32", "tn", False), (1000, 1000, "f32", "tn", False),
             (128, 4096, "bf16", "tn", False), (4096, 8192, "bf16", "tn", False), (2048, 2048, "bf16", "tn", False),
             (128, 4096, "f32", "nt", False), (4096, 8192, "f32", "nt", False), (4096, 128, "f32", "nt", False)],
}


def main(plan: str, tag: str, out: str, warm: bool, only: str = None) -> None:
    copy_gbs = 0.0 if warm else B.copy_bandwidth("cuda", 2**30, 25, 200)
    rows = []
    start = time.time()
    for (T, N, dtype_name, layout, extra), est in itertools.product(PLANS[plan], B.SPECS):
        if only and est != only:
            continue
        configs = {"default": None}
        if extra and layout == "tn":
            latest_first = _launch.kernel_traits(est)["latest_first"]
            configs.update({k: _launch.in_step_order(LaunchConfig(bt, bn, w, thread_runs=True), False, latest_first)
                            for k, (bt, bn, w) in SHORT_SHAPES.items()})
        nbytes = B.cell_bytes(est, N, T, B.DTYPES[dtype_name])
        n_sets = 1 if warm else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        times = B.block_shape_graph_times(est, configs, N, T, layout, dtype_name, n_sets, warm)
        default = B.config_label(B.default_config(est, N, T, layout, B.DTYPES[dtype_name]))
        rows.append(dict(tag=tag, estimator=est, N=N, T=T, dtype=dtype_name, layout=layout, sets=n_sets,
                         bytes=nbytes, copy_gbs=copy_gbs, default=default, times=times))
        if not warm:
            def show(x):
                return f"{x:.2f}({nbytes / x / 1e3 / copy_gbs:.0%})" if isinstance(x, float) else str(x)[:40]
            print(f"{tag} {est} {T}x{N} {dtype_name} {layout} [{default}] " + "  ".join(
                f"{k}=" + "/".join(show(x) for x in v) for k, v in times.items()), flush=True)
            json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    warm = sys.argv[4:5] == ["warm"]
    main(sys.argv[1], sys.argv[2], sys.argv[3], warm, sys.argv[5] if warm else None)
