"""The short ``[T, N]`` rule (twelfth session) against the first session's table on a wider grid
than its sweep (``sweep.py``): every estimator, float32 and bf16, T from 8 to 256 (100: not a
power of two), 1024 to 32768 environments (4000: rows not 16-aligned), and around each threshold
of the rule the shapes on its other side. Same inputs, checked against the float64 reference
first, device time of 20 calls replayed from a CUDA graph, two rounds interleaved (from the
repository root):

  PYTHONPATH=. python docs/bench/short_tn/verify.py OUT.json [warm ESTIMATOR DTYPE]

Labels: ``default`` the block shape the kernels choose; ``old`` the first session's table (whole
sequence per program: 32 environments on one warp to T = 32, tiles of ~1024 elements on four warps
to T = 256; latest first for reverse kernels); ``f32rule`` the float32 rule's shape (for bf16
cells); ``walk`` 16-step chunks of 32 environments, one warp, three stages; ``tile`` the rule's
single tile where it walks (its shape for rows that are not 16-aligned); ``wide`` / ``narrow`` that
tile with twice / half the environments; all in thread runs. The first run (``verify_first.*``)
checked the first form of the rule (float32 only, walks from 2^21 elements of T rounded up to a
power of two) with the same labels."""
import itertools
import json
import sys
import time
from dataclasses import replace

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from kernels import LaunchConfig  # noqa: E402
from kernels._launch import kernel_traits  # noqa: E402
from kernels._triton import triton  # noqa: E402

TS = (8, 16, 32, 64, 100, 128, 256)
NS = (1024, 2048, 4096, 8192, 16384, 32768, 4000)


def old_shape(T: int) -> LaunchConfig:
    t_pow2 = triton.next_power_of_2(T)
    return LaunchConfig(t_pow2, 32, 1) if T <= 32 else LaunchConfig(t_pow2, max(8, 1024 // t_pow2), 4)


def shapes(est: str, N: int, T: int, dtype) -> dict:
    latest = kernel_traits(est)["latest_first"]
    default = B.default_config(est, N, T, "tn", dtype)
    tile = kernels._launch.estimator_config(est, T, N, False, dtype.itemsize, aligned_rows=False)  # never a walk
    out = {"default": None, "old": old_shape(T),
           "f32rule": B.default_config(est, N, T, "tn", B.DTYPES["f32"]),
           "walk": LaunchConfig(16, 32, 1, num_stages=3, thread_runs=True) if T > 16 else None,
           "tile": tile if tile.thread_runs else None,
           "wide": replace(tile, block_n=2 * tile.block_n) if tile.thread_runs else None,
           "narrow": replace(tile, block_n=tile.block_n // 2) if tile.thread_runs and tile.block_n >= 8 else None}
    chosen, seen = {}, {default}
    for label, config in out.items():
        config = config if config is None else replace(config, latest_first=latest)
        if label == "default" or (config is not None and config not in seen):
            chosen[label] = config
            seen.add(config)
    return chosen


def main(out: str, warm: bool, only) -> None:
    rows = []
    start = time.time()
    for est, dtype_name, T, N in itertools.product(B.SPECS, ("f32", "bf16"), TS, NS):
        if only and (est, dtype_name) != only:
            continue
        fn = getattr(kernels, est)
        configs = shapes(est, N, T, B.DTYPES[dtype_name])
        calls = {label: (lambda a, k, c=c: fn(*a, **k, config=c)) for label, c in configs.items()}
        timer = (lambda f: 0.0) if warm else (lambda f: B.graph_us(f, "cuda", 0.0))
        times = B.checked_times(calls, est, N, T, "tn", dtype_name, 1 if warm else 2, 10, 50, timer=timer)
        labels = {k: "default" if c is None else B.config_label(c) for k, c in configs.items()}
        labels["default"] = B.config_label(B.default_config(est, N, T, "tn", B.DTYPES[dtype_name]))
        rows.append(dict(estimator=est, dtype=dtype_name, N=N, T=T, labels=labels, times=times))
        if not warm:
            print(f"{est} {dtype_name} {T}x{N} " + "  ".join(
                f"{k}[{labels[k]}]=" + "/".join(f"{x:.2f}" if isinstance(x, float) else str(x)[:50] for x in v)
                for k, v in times.items()), flush=True)
            json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:3] == ["warm"], tuple(sys.argv[3:5]) if sys.argv[2:3] == ["warm"] else None)
