"""GAE's short ``[T, N]`` sequences: the kernels' own block shape against whole-sequence tiles in an
explicit layout (``LaunchConfig.explicit_layout``, 4 warps along time, two widths), one process.
Each cell checked against the float64 reference first; device time per call of calls replayed from a
CUDA graph, each call reading its own input set (they cycle through four times the L2), two rounds.

  python docs/bench/explicit_layout/sweep.py OUT.json [warm SHARD SHARDS]
"""
import itertools
import json
import sys
import time

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
from kernels import LaunchConfig, _explicit_layout  # noqa: E402

F32_TS = (8, 16, 24, 32, 50, 64, 100, 128, 200, 256)
F32_NS = (16, 128, 512, 1000, 2048, 3000, 4096, 8192, 16384, 32768)
BF16_TS, BF16_NS = (16, 64, 128, 256), (512, 2048, 4096, 8192, 16384)
CELLS = [(T, N, "f32") for T, N in itertools.product(F32_TS, F32_NS) if T * N <= 2**23] + \
        [(T, N, "bf16") for T, N in itertools.product(BF16_TS, BF16_NS)]


def explicit_configs(T: int) -> dict:
    """Whole-sequence tiles on 4 warps, 2 and 4 environments per thread."""
    block_t = max(8, 1 << (T - 1).bit_length())
    env_threads = 32 // _explicit_layout.time_threads(block_t, 4)
    return {f"explicit{block_t}x{k * env_threads}": LaunchConfig(block_t, k * env_threads, 4, explicit_layout=True)
            for k in (2, 4)}


def main(out: str, warm: bool, shard: int = 0, shards: int = 1) -> None:
    copy_gbs = 0.0 if warm else B.copy_bandwidth("cuda", 2**30, 25, 200)
    rows, start = [], time.time()
    for i, (T, N, dtype_name) in enumerate(CELLS):
        if i % shards != shard:
            continue
        configs = {"default": None, **explicit_configs(T)}
        nbytes = B.cell_bytes("gae", N, T, B.DTYPES[dtype_name])
        n_sets = 1 if warm else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        times = B.block_shape_graph_times("gae", configs, N, T, "tn", dtype_name, n_sets, warm)
        default = B.config_label(B.default_config("gae", N, T, "tn", B.DTYPES[dtype_name]))
        rows.append(dict(T=T, N=N, dtype=dtype_name, sets=n_sets, bytes=nbytes, copy_gbs=copy_gbs, default=default,
                         times=times))
        if not warm:
            print(f"{T}x{N} {dtype_name} [{default}] " + "  ".join(
                f"{k}=" + "/".join(f"{x:.2f}" if isinstance(x, float) else str(x)[:60] for x in v)
                for k, v in times.items()), flush=True)
            json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    warm = sys.argv[2:3] == ["warm"]
    main(sys.argv[1], warm, *(int(a) for a in sys.argv[3:5]))
