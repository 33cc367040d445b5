"""Short ``[T, N]`` sequences: the kernels' own block shape against whole-sequence tiles in an
explicit layout (``LaunchConfig.explicit_layout``, 4 warps along time, two widths), one process.
Each cell checked against the float64 reference first; device time per call of calls replayed from a
CUDA graph, each call reading its own input set (they cycle through four times the L2), two rounds.
PLAN ``gae``: GAE on 120 cells; ``others``: the other estimators on 44; ``unaligned``: every estimator on
rows not 16 elements apart (N % 16 != 0) of 80-256 steps, 32 cells each; ``light_small``: eligibility
traces and episodic sums on six such cells of 65-128 steps (both eighteenth session); ``warps``
(nineteenth session): every estimator's 16-aligned sequences of 16-256 steps, the kernels' own block
shape (``default``) against explicit tiles of 2 and 4 environments per thread on 4, 8 and 16 warps;
``partial``: the kernels without eight-warp tiles on 129-256 steps (T a multiple of 16 or not), the
same tiles on 4 and 8 warps; ``partial_short``: the same on 33-127 steps; ``partial_unaligned``: the
light kernels' rows not 16 elements apart, 129-256 steps (the last nine cells held out);
``eight_envs`` (twenty-fourth session): GAE, V-trace, Retrace, lambda and discounted returns on 16-aligned
sequences of 64-256 steps, the kernels' own block shape against tiles of 4 and 8 environments per thread
on 4 and 8 warps; ``walk_edge``: every estimator's float32 sequences of 100-256 steps from 4096 to 32768
environments (where the walks start), the kernels' own block shape against tiles of 2 and 4 environments
per thread on 4 and 8 warps; ``walk_edge_bf16``: bf16 sequences of 64-256 steps from 2048 to 32768
environments, tiles of 4 and 8 per thread; ``unaligned_heavy``: GAE, V-trace, Retrace, lambda and
discounted returns and ``linear_scan`` on rows not 16 elements apart, 136-256 steps, 1000-12008
environments, tiles of 2 and 4 per thread on 4 and 8 warps; ``unaligned_short`` (twenty-fifth session): the same
kernels' rows not 16 elements apart of 72-128 steps, 1000-30002 environments, the same tiles.

  python docs/bench/explicit_layout/sweep.py PLAN OUT.json [warm SHARD SHARDS]

"triton" is the block shape the Triton kernels' rule gives (``choose_config`` without explicit
layouts: the kernels' own before them).
"""
import dataclasses
import itertools
import json
import sys
import time

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
from kernels import _launch  # noqa: E402

F32_TS = (8, 16, 24, 32, 50, 64, 100, 128, 200, 256)
F32_NS = (16, 128, 512, 1000, 2048, 3000, 4096, 8192, 16384, 32768)
BF16_TS, BF16_NS = (16, 64, 128, 256), (512, 2048, 4096, 8192, 16384)
PLANS = {
    "gae": [("gae", T, N, "f32") for T, N in itertools.product(F32_TS, F32_NS) if T * N <= 2**23]
    + [("gae", T, N, "bf16") for T, N in itertools.product(BF16_TS, BF16_NS)],
    "others": [(est, T, N, dtype) for est in B.SPECS if est != "gae"
               for T, N, dtype in [(T, N, "f32") for T, N in itertools.product((8, 16, 32, 64, 128, 256),
                                                                                (128, 1000, 2048, 4096, 8192, 32768))
                                   if T * N <= 2**23] + [(16, 4096, "bf16"), (128, 4096, "bf16")]],
    "unaligned": [(est, T, N, dtype) for est in B.SPECS
                  for T, N, dtype in [(T, N, "f32") for T, N in itertools.product((80, 128, 200, 256),
                                                                                 (1000, 1001, 2500, 3000, 6004, 12008, 30002))]
                  + [(T, N, "bf16") for T, N in itertools.product((128, 256), (3000, 12008))]],
    "light_small": [(est, T, N, dtype) for est in ("eligibility_traces", "episodic_prefix_sum")
                    for T, N, dtype in [(100, 1500, "f32"), (90, 777, "f32"), (70, 14006, "f32"), (80, 1000, "f32"),
                                        (128, 1000, "f32"), (100, 6002, "bf16")]],
    "warps": [(est, T, N, dtype) for est in B.SPECS
              for T, N, dtype in [(T, N, "f32") for T, N in itertools.product((16, 32, 64, 128, 200, 256),
                                                                               (1024, 2048, 4096, 8192, 16384))
                                  if max(T, 128) * N <= 2**21] + [(T, 4096, "bf16") for T in (64, 128, 256)]],
    "partial": [(est, T, N, "f32") for est in ("gae", "lambda_returns", "eligibility_traces", "episodic_prefix_sum",
                                               "linear_scan")
                for T, N in itertools.product((136, 150, 180, 200, 224, 240, 250, 256), (1024, 2048, 4096, 6144))],
    "partial_short": [(est, T, N, "f32") for est in ("gae", "lambda_returns", "eligibility_traces", "episodic_prefix_sum",
                                                     "linear_scan")
                      for T, N in itertools.product((40, 48, 72, 100, 112, 128), (1024, 2048, 4096))],
    "partial_unaligned": [(est, T, N, "f32") for est in ("eligibility_traces", "episodic_prefix_sum")
                          for T, N in list(itertools.product((136, 150, 200, 224, 250, 256), (1000, 2500, 6004)))
                          + list(itertools.product((140, 175, 230), (1500, 3000, 9000)))],
    "eight_envs": [(est, T, N, dtype) for est in ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns")
                   for T, N, dtype in [(T, N, "f32") for T, N in itertools.product((64, 128, 256),
                                                                                    (2048, 4096, 8192, 16384))
                                       if T * N <= 2**21] + [(128, 4096, "bf16"), (128, 8192, "bf16")]],
    "walk_edge": [(est, T, N, "f32") for est in B.SPECS
                  for T, N in itertools.product((100, 128, 200, 256), (4096, 6144, 8192, 12288, 16384, 24576, 32768))],
    "walk_edge_bf16": [(est, T, N, "bf16") for est in B.SPECS
                       for T, N in itertools.product((64, 128, 256), (2048, 4096, 8192, 16384, 32768))],
    "unaligned_heavy": [(est, T, N, "f32") for est in ("gae", "vtrace", "retrace", "lambda_returns",
                                                       "discounted_returns", "linear_scan")
                        for T, N in itertools.product((136, 180, 200, 256), (1000, 2500, 5000, 6004, 12008))],
    "unaligned_short": [(est, T, N, "f32") for est in ("gae", "vtrace", "retrace", "lambda_returns",
                                                       "discounted_returns", "linear_scan")
                        for T, N in itertools.product((72, 100, 128), (1000, 2500, 6004, 12008, 30002))],
}
# Plans timed against the kernels' own block shape (not the Triton rule's), and the explicit tiles
# they try: (environments per thread, warps).
FOUR_AND_EIGHT_WARPS = ((2, 4), (4, 4), (2, 8), (4, 8))
AGAINST_DEFAULT = {"warps": FOUR_AND_EIGHT_WARPS + ((4, 16),), "partial": FOUR_AND_EIGHT_WARPS,
                   "partial_short": FOUR_AND_EIGHT_WARPS, "partial_unaligned": FOUR_AND_EIGHT_WARPS,
                   "eight_envs": ((4, 4), (8, 4), (4, 8), (8, 8)), "walk_edge": FOUR_AND_EIGHT_WARPS,
                   "walk_edge_bf16": ((4, 4), (8, 4), (4, 8), (8, 8)), "unaligned_heavy": FOUR_AND_EIGHT_WARPS,
                   "unaligned_short": FOUR_AND_EIGHT_WARPS}


def explicit_configs(T: int, tiles=((2, 4), (4, 4))) -> dict:
    """Whole-sequence tiles of ``(environments per thread, warps)`` (4 warps: no suffix)."""
    out = {}
    for envs_per_thread, warps in tiles:
        try:
            tile = _launch.explicit_tile(T, envs_per_thread, warps)
        except ValueError:  # too few steps for that many warps
            continue
        out[f"explicit{tile.block_t}x{tile.block_n}" + (f"w{warps}" if warps != 4 else "")] = tile
    return out


def main(plan: str, out: str, warm: bool, shard: int = 0, shards: int = 1) -> None:
    def cell_row(cell: tuple, copy_gbs: float) -> dict:
        est, T, N, dtype_name = cell
        if plan in AGAINST_DEFAULT:
            shown = B.default_config(est, N, T, "tn", B.DTYPES[dtype_name])
            configs = {"default": None, **explicit_configs(T, AGAINST_DEFAULT[plan])}
        else:
            traits = dict(_launch.kernel_traits(est), explicit_short_tiles=False)
            shown = _launch.choose_config(T, N, False, itemsize=B.DTYPES[dtype_name].itemsize,
                                          aligned_rows=_launch.rows_are_aligned(N), **traits)
            configs = {"triton": shown, **explicit_configs(T)}
        default = B.config_label(shown)
        return time_cell(est, T, N, dtype_name, configs, warm, copy_gbs, f"[{default}] ", triton=default)

    run_plan(PLANS[plan], cell_row, out, warm, shard, shards)


def run_plan(cells: list, cell_row, out: str, warm: bool, shard: int = 0, shards: int = 1) -> None:
    """A sweep's loop: this shard's ``cells`` (every ``shards``-th from ``shard``), each made a row by
    ``cell_row(cell, copy_gbs)`` after the copy bandwidth is measured, the rows written to ``out`` as
    they come; ``warm``: no copy, nothing written (the rows only fill the compile cache)."""
    copy_gbs = 0.0 if warm else B.copy_bandwidth("cuda", 2**30, 25, 200)
    rows, start = [], time.time()
    for i, cell in enumerate(cells):
        if i % shards != shard:
            continue
        rows.append(cell_row(cell, copy_gbs))
        if not warm:
            json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


def run_against_before(cells: list, candidates, out: str, warm: bool, shard: int = 0, shards: int = 1) -> None:
    """``run_plan`` over ``cells`` whose block shapes are ``candidates(*cell)`` (label -> block shape,
    the kernels' own labelled ``before``), each row shown and tagged with the ``before`` shape."""
    def cell_row(cell: tuple, copy_gbs: float) -> dict:
        configs = candidates(*cell)
        before = B.config_label(configs["before"])
        return time_cell(*cell, configs, warm, copy_gbs, f"[{before}] ", before=before)

    run_plan(cells, cell_row, out, warm, shard, shards)


def against_before_cli(plans: dict, candidates, argv: list) -> None:
    """``run_against_before`` from the command line ``PLAN OUT.json [warm SHARD SHARDS]``."""
    run_against_before(plans[argv[0]], candidates, argv[1], argv[2:3] == ["warm"], *(int(a) for a in argv[3:5]))


def as_run_tile(own, block_t: int, block_n: int, warps: int):
    """``own`` (a ``LaunchConfig``) made a ``block_t x block_n`` look-back tile in thread runs on
    ``warps`` warps; its step order kept."""
    return dataclasses.replace(own, block_t=block_t, block_n=block_n, num_warps=warps, lookback=True,
                               num_stages=1, thread_runs=True, explicit_layout=False)


def time_cell(est: str, T: int, N: int, dtype_name: str, configs: dict, warm: bool, copy_gbs: float,
              shown: str = "", **fields) -> dict:
    """One sweep cell's row: ``configs`` (label -> block shape, ``None`` for the kernels' own) checked
    and timed by ``bench_kernels.block_shape_graph_times`` over input sets filling four times the L2
    (one when ``warm``, untimed), with ``fields``; printed after ``shown`` unless ``warm``."""
    nbytes = B.cell_bytes(est, N, T, B.DTYPES[dtype_name])
    n_sets = 1 if warm else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
    times = B.block_shape_graph_times(est, configs, N, T, "tn", dtype_name, n_sets, warm)
    if not warm:
        print(f"{est} {T}x{N} {dtype_name} {shown}" + "  ".join(
            f"{k}=" + "/".join(f"{x:.2f}" if isinstance(x, float) else str(x)[:60] for x in v)
            for k, v in times.items()), flush=True)
    return dict(estimator=est, T=T, N=N, dtype=dtype_name, sets=n_sets, bytes=nbytes, copy_gbs=copy_gbs, **fields,
                times=times)


if __name__ == "__main__":
    warm = sys.argv[3:4] == ["warm"]
    main(sys.argv[1], sys.argv[2], warm, *(int(a) for a in sys.argv[4:6]))
