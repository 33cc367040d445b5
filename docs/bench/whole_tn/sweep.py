"""Long ``[T, N]`` sequences held whole (fourteenth session): float32 sequences of 512-8192 steps
from 512 to 16384 environments, where the kernels walk time (from 8192 environments) or chain
look-back tiles (below) and reach 24-77% of the copy. Here one program holds a whole sequence of
4, 8 or 16 environments on 4, 8 or 16 warps (4 to 32 steps per thread and input), in thread runs
(``+runs``) and, 8 wide, in Triton's layout; from 1024 steps also look-back tiles of 256-1024 steps
(a chain of at most 32 tiles); and ``default``. Each label is checked against the float64
reference first; device time per call of calls replayed from a CUDA graph, each call reading its
own input set (they cycle through four times the L2), two rounds interleaved (from the repository
root):

  PYTHONPATH=. python docs/bench/whole_tn/sweep.py PLAN OUT.json [warm ESTIMATOR]

PLAN ``whole``: the above. PLAN ``mid``: from 512 to 2048 environments and 512 to 8192 steps (where
``whole`` found longer tiles faster), look-back tiles of 128-256 steps 16 and 32 environments
wide, in thread runs and in Triton's layout, whole sequences of 512 and 1024 steps 8 and 16 wide,
and ``default``.

``warm`` only compiles (one estimator per process, to compile in parallel) and times nothing. The
fraction of a device-to-device copy measured in the same process is printed with each time."""
import itertools
import json
import sys
import time

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402

CELLS = [(512, 8192), (1024, 8192), (512, 16384), (2048, 2048), (8192, 512), (1024, 4096), (4096, 4096), (2048, 4096),
         (4096, 1024), (512, 4096), (1024, 2048), (2048, 1024), (4096, 512), (512, 2048), (1024, 1024), (2048, 512)]
MID_CELLS = [(T, N) for N in (512, 1024, 2048) for T in (512, 1024, 2048, 4096, 8192)]
LOOKBACK_TILES = ((256, 16, 4), (512, 8, 8), (512, 16, 8), (1024, 8, 8))


def whole_shapes(est: str, T: int) -> dict:
    """Labels of the block shapes tried for ``est`` at ``T`` steps (``default`` added by the caller)."""
    latest = "+latest" if kernels._launch.kernel_traits(est)["latest_first"] else ""
    labels = [f"{T}x{bn}w{warps}{latest}+runs" for bn in (4, 8, 16) for warps in (4, 8, 16)
              if 4 <= T * bn // (32 * warps) <= 32]
    triton_width = next((bn for bn in (8, 4) if T * bn // (32 * 16) <= 32), None)
    if triton_width:
        labels.append(f"{T}x{triton_width}w{min(16, max(4, T * triton_width // 1024))}{latest}")
    if T >= 1024:
        labels += [f"{bt}x{bn}w{warps}+lookback{latest}+runs" for bt, bn, warps in LOOKBACK_TILES if bt < T]
    return {label: B.parse_config_label(label) for label in labels}


def mid_shapes(est: str, T: int) -> dict:
    """PLAN ``mid``'s labels for ``est`` at ``T`` steps."""
    latest = "+latest" if kernels._launch.kernel_traits(est)["latest_first"] else ""
    labels = [f"{bt}x{bn}w{warps}+lookback{latest}{runs}" for bt, bn, warps in ((128, 16, 2), (128, 16, 4),
              (256, 16, 4), (128, 32, 4), (256, 32, 8)) for runs in ("+runs", "") if bt < T]
    labels += [f"{T}x{bn}w{warps}{latest}+runs" for bn, warps in ((8, 4), (8, 8), (16, 8), (8, 16), (16, 16))
               if T <= 1024 and 4 <= T * bn // (32 * warps) <= 32]
    return {label: B.parse_config_label(label) for label in labels}


def dram_cell(est: str, T: int, N: int, configs: dict, warm: bool, copy_gbs: float, labels: dict,
              dtype_name: str = "f32") -> dict:
    """One ``[T, N]`` cell of ``dtype_name`` inputs (float32 by default): ``configs`` maps a label to
    a block shape (``None``: the kernels' choice), each checked against the reference, then timed
    from a CUDA graph whose calls cycle through input sets filling four times the L2 (at most 200),
    two rounds (``warm``: one call each, untimed). The row is printed (time and fraction of the
    copy) unless ``warm``."""
    nbytes = B.cell_bytes(est, N, T, B.DTYPES[dtype_name])
    n_sets = 1 if warm else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
    times = B.block_shape_graph_times(est, configs, N, T, "tn", dtype_name, n_sets, warm)
    row = dict(estimator=est, N=N, T=T, dtype=dtype_name, sets=n_sets, bytes=nbytes, copy_gbs=copy_gbs,
               labels=labels, times=times)
    if not warm:
        def show(x):
            return f"{x:.1f}({nbytes / x / 1e3 / copy_gbs:.0%})" if isinstance(x, float) else str(x)[:40]
        print(f"{est} {T}x{N} {dtype_name} sets={n_sets} " + "  ".join(
            f"{k}[{labels[k]}]=" + "/".join(show(x) for x in v) for k, v in times.items()), flush=True)
    return row


def main(plan: str, out: str, warm: bool, only: str = None) -> None:
    copy_gbs = 0.0 if warm else B.copy_bandwidth("cuda", 2**30, 25, 200)
    rows = []
    start = time.time()
    for (T, N), est in itertools.product(CELLS if plan == "whole" else MID_CELLS, B.SPECS):
        if only and est != only:
            continue
        default = B.default_config(est, N, T, "tn", B.DTYPES["f32"])
        shapes = (whole_shapes if plan == "whole" else mid_shapes)(est, T)
        configs = {"default": None, **{k: c for k, c in shapes.items() if c != default}}
        labels = {k: B.config_label(c or default) for k, c in configs.items()}
        rows.append(dram_cell(est, T, N, configs, warm, copy_gbs, labels))
        if not warm:
            json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:4] == ["warm"], sys.argv[4] if sys.argv[3:4] == ["warm"] else None)
