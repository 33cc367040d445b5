"""The short ``[T, N]`` rule against the first session's table with inputs from DRAM (twelfth
session): ``sweep.py`` and ``verify.py`` replay one input set, which the L2 keeps between replays
for cells under ~50 MB; here each captured call reads its own input set, cycling through enough
sets to be four times the L2 (at least 20 calls per graph, at most 200 sets). Every label is
checked against the float64 reference on the first set first; device time per call from the CUDA
graph, two rounds interleaved (from the repository root):

  PYTHONPATH=. python docs/bench/short_tn/dram.py PLAN OUT.json [warm ESTIMATOR]

PLAN ``rule``: 15 cells, float32 and bf16, labels as in ``verify.py``: ``default`` (the kernels' choice), ``old``
(the first session's table), ``tile`` (the rule's single tile where it walks). PLAN ``tiles``:
float32 sequences of 64-256 steps from 1024 to 8192 environments in single tiles of 4-16
environments on two or four warps, in thread runs, with ``default`` and ``old``; and bf16 tiles of
32-128 steps at 4096 and 8192 environments: ``f32rule`` (the float32 rule's shape) and that shape
twice as wide. PLAN ``layouts`` (thirteenth session): sequences of 33-256 steps around the
rule's thresholds (float32 64, 100, 128 and 256 steps; bf16 48 and 64 steps; 1024 to 8192
environments, 6000: rows not 16-aligned) in four-warp tiles 4, 8 and 16 environments wide (bf16
also 32), each in thread runs and in Triton's layout, with ``default``."""
import itertools
import json
import sys
import time
from dataclasses import replace

sys.path.append("scripts")
sys.path.append("docs/bench/short_tn")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from verify import shapes  # noqa: E402

PLAN, OUT = sys.argv[1:3]
WARM = sys.argv[3:4] == ["warm"]
ONLY = sys.argv[4] if WARM else None
CELLS = [(4096, 128), (1024, 128), (2048, 128), (8192, 128), (16384, 128), (4096, 256), (8192, 256), (4096, 64),
         (16384, 64), (4096, 32), (4096, 16), (1024, 16), (32768, 16), (4096, 8), (32768, 8)]
TILES = [("f32", T, N) for T in (64, 128, 256) for N in (1024, 2048, 4096, 8192)]
TILES += [("bf16", T, N) for T in (32, 64, 128) for N in (4096, 8192)]
LAYOUTS = [("f32", 64, N) for N in (2048, 4096, 6000, 8192)]
LAYOUTS += [("f32", T, N) for T in (100, 128, 256) for N in (4096, 6000)]
LAYOUTS += [("bf16", T, N) for T in (48, 64) for N in (1024, 2048, 4096, 6000, 8192)]


def tile_shapes(est: str, N: int, T: int, dtype_name: str) -> dict:
    latest = kernels._launch.kernel_traits(est)["latest_first"]
    shapes_ = shapes(est, N, T, B.DTYPES[dtype_name])
    out = {k: c for k, c in shapes_.items() if k in ("default", "old", "f32rule")}
    if dtype_name == "f32":
        for bn, warps in ((4, 2), (8, 2), (4, 4), (8, 4), (16, 4)):
            t_pow2 = kernels._triton.triton.next_power_of_2(T)
            label = f"{t_pow2}x{bn}w{warps}"
            out[label] = B.parse_config_label(f"{label}{'+latest' if latest else ''}+runs")
    else:
        f32rule = B.default_config(est, N, T, "tn", B.DTYPES["f32"])
        out["f32rule"], out["double"] = f32rule, replace(f32rule, block_n=2 * f32rule.block_n)
    default = B.default_config(est, N, T, "tn", B.DTYPES[dtype_name])
    return {k: c for k, c in out.items() if k == "default" or c != default}


def layout_shapes(est: str, N: int, T: int, dtype_name: str) -> dict:
    latest = "+latest" if kernels._launch.kernel_traits(est)["latest_first"] else ""
    t_pow2 = kernels._triton.triton.next_power_of_2(T)
    widths = (4, 8, 16, 32) if dtype_name == "bf16" else (4, 8, 16)
    labels = [f"{t_pow2}x{bn}w4{latest}{runs}" for bn in widths for runs in ("+runs", "")]
    default = B.default_config(est, N, T, "tn", B.DTYPES[dtype_name])
    out = {label: B.parse_config_label(label) for label in labels}
    return {"default": None, **{k: c for k, c in out.items() if c != default}}


rows = []
start = time.time()
cells = ([(d, T, N) for d in ("f32", "bf16") for N, T in CELLS] if PLAN == "rule"
         else TILES if PLAN == "tiles" else LAYOUTS)
for est, (dtype_name, T, N) in itertools.product(B.SPECS, cells):
    if ONLY and est != ONLY:
        continue
    dtype = B.DTYPES[dtype_name]
    if PLAN == "rule":
        configs = {k: c for k, c in shapes(est, N, T, dtype).items() if k in ("default", "old", "tile")}
    elif PLAN == "tiles":
        configs = tile_shapes(est, N, T, dtype_name)
    else:
        configs = layout_shapes(est, N, T, dtype_name)
    nbytes = B.cell_bytes(est, N, T, dtype)
    n_sets = 1 if WARM else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
    times = B.block_shape_graph_times(est, configs, N, T, "tn", dtype_name, n_sets, WARM)
    labels = {k: B.config_label(c) if c is not None else B.config_label(B.default_config(est, N, T, "tn", dtype))
              for k, c in configs.items()}
    rows.append(dict(estimator=est, dtype=dtype_name, N=N, T=T, sets=n_sets, bytes=nbytes, labels=labels, times=times))
    if not WARM:
        print(f"{est} {dtype_name} {T}x{N} sets={n_sets} " + "  ".join(
            f"{k}[{labels[k]}]=" + "/".join(f"{x:.2f}" if isinstance(x, float) else str(x) for x in v)
            for k, v in times.items()), flush=True)
        json.dump(rows, open(OUT, "w"), indent=1)
print(f"done in {time.time() - start:.0f} s", flush=True)
