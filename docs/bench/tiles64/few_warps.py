"""Few environments with long ``[N, T]`` rows (thirteenth session): one program per environment
holding the whole row on 8, 16 and 32 warps (rl-triton's design: 16 warps at 2048-4096 steps),
against the kernels' choice, float32, on the same inputs, checked against the float64 reference
first, device time of 20 calls replayed from a CUDA graph (one input set, as
``../quarters/few.log``), two rounds interleaved (from the repository root):

  PYTHONPATH=. python docs/bench/tiles64/few_warps.py PLAN OUT.json [warm]

PLAN ``first``: GAE and V-trace at 128 x 4096, 128 x 2048 and 256 x 4096, 8-32 warps, and two
2048-step chunks on 16 warps. PLAN ``all``: every estimator at 128, 256 and 511 x 4096 and 200 x
3000, 8 and 16 warps. PLAN ``dram``: GAE on those cells with 8 and 16 warps, each captured call
reading its own input set (they cycle through four times the L2), as ``../short_tn/dram.py``;
PLAN ``dram_all``: the same for the other estimators."""
import json
import sys

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from kernels import LaunchConfig  # noqa: E402

PLAN, OUT = sys.argv[1:3]
WARM = sys.argv[3:] == ["warm"]
LONG_ROWS = ((128, 4096), (256, 4096), (511, 4096), (200, 3000))
FIRST = [(est, N, T) for est in ("gae", "vtrace") for N, T in ((128, 4096), (128, 2048), (256, 4096))]
ALL = [(est, N, T) for est in B.SPECS for N, T in LONG_ROWS]
DRAM = [(est, N, T) for est in B.SPECS if (est == "gae") == (PLAN == "dram") for N, T in LONG_ROWS]


def input_sets(est: str, N: int, T: int) -> int:
    """Input sets filling four times the L2 (at most 200) for the DRAM plans, one otherwise."""
    if PLAN in ("first", "all") or WARM:
        return 1
    return B.input_set_count(B.cell_bytes(est, N, T, B.DTYPES["f32"]), "cuda", l2_fills=4, most=200)


rows = []
for est, N, T in {"first": FIRST, "all": ALL}.get(PLAN, DRAM):
    block_t = kernels._triton.triton.next_power_of_2(T)
    warps = (8, 16, 32) if PLAN == "first" else (8, 16)
    shapes = {"default": None, **{f"{block_t}x1 {w}w": LaunchConfig(block_t, 1, w) for w in warps}}
    if PLAN == "first" and T == 4096:
        shapes["2048x1 16w s2"] = LaunchConfig(2048, 1, 16, num_stages=2)
    n_sets = input_sets(est, N, T)
    times = B.block_shape_graph_times(est, shapes, N, T, "nt", "f32", n_sets, WARM)
    rows.append(dict(estimator=est, N=N, T=T, sets=n_sets, times=times))
    if not WARM:
        print(f"{est} {N}x{T} " + (f"sets={n_sets} " if n_sets > 1 else "") + "  ".join(
            f"{k}=" + "/".join(f"{x:.2f}" if isinstance(x, float) else str(x)[:60] for x in v)
            for k, v in times.items()), flush=True)
json.dump(rows, open(OUT, "w"), indent=1)
