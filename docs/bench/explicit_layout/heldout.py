"""Short ``[T, N]`` cells outside the sweeps' grids (N and T not powers of two), the kernels' own
block shape: whichever ``kernels`` package is first on the path, so that two versions compare
process against process. Checked against the float64 reference first; device time per call of calls
replayed from a CUDA graph, each call reading its own input set (four times the L2), two rounds.
PLAN ``gae``: GAE on 19 cells; ``others``: the other estimators on 7 each; ``light_unaligned``:
eligibility traces and episodic sums on 10 cells of 65-256 steps in rows not 16 elements apart
(eighteenth session); ``eight_warps``: V-trace, Retrace and discounted returns on 16 cells of 65-256
steps in 16-aligned rows (nineteenth session; discounted returns' 65-128-step cells are controls:
the rule did not change them); ``eight_warps_more``: GAE, lambda returns, eligibility traces and
episodic sums on 10 cells of 129-256 steps in 16-aligned rows (the light kernels' steps a multiple of
16 in two: controls); ``successor``: GAE and V-trace on 10 cells of 40-250 steps, the PPO rollout's
4096 x 128 among them (twentieth session: each thread's successor values from its own registers).

  PYTHONPATH=<kernels version>:. python docs/bench/explicit_layout/heldout.py PLAN TAG OUT.json [warm SHARD SHARDS]
"""
import json
import sys
import time

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402

GAE_CELLS = [(10, 300, "f32"), (12, 50000, "f32"), (20, 1500, "f32"), (24, 20000, "f32"), (40, 2500, "f32"),
         (48, 1000, "f32"), (60, 12000, "f32"), (70, 6000, "f32"), (90, 5000, "f32"), (128, 1024, "f32"),
         (128, 4096, "f32"), (128, 8000, "f32"), (150, 1200, "f32"), (180, 4800, "f32"), (230, 2400, "f32"),
         (20, 10000, "bf16"), (100, 3200, "bf16"), (128, 4096, "bf16"), (200, 1600, "bf16")]
OTHER_CELLS = [(20, 1500, "f32"), (24, 20000, "f32"), (48, 6000, "f32"), (100, 2400, "f32"), (128, 4096, "f32"),
               (180, 1200, "f32"), (128, 4096, "bf16")]
LIGHT_UNALIGNED_CELLS = [(100, 1500, "f32"), (150, 5000, "f32"), (240, 20004, "f32"), (90, 777, "f32"),
                         (180, 9000, "f32"), (129, 2001, "f32"), (70, 14006, "f32"), (250, 4100, "f32"),
                         (100, 6002, "bf16"), (200, 1500, "bf16")]
EIGHT_WARP_CELLS = [(72, 3072, "f32"), (100, 1536, "f32"), (96, 6144, "f32"), (120, 2560, "f32"), (150, 1024, "f32"),
                    (180, 3072, "f32"), (230, 4800, "f32"), (250, 1536, "f32"), (129, 7680, "f32"),
                    (80, 12288, "f32"), (110, 800, "f32"), (128, 4096, "f32"), (100, 4096, "bf16"),
                    (200, 2048, "bf16"), (128, 8192, "bf16"), (160, 6144, "bf16")]
MORE_EIGHT_WARP_CELLS = [(130, 1536, "f32"), (140, 3072, "f32"), (175, 1024, "f32"), (210, 2048, "f32"),
                         (245, 1024, "f32"), (160, 5120, "f32"), (230, 6000, "f32"), (199, 4096, "f32"),
                         (144, 2048, "f32"), (256, 1536, "f32")]
SUCCESSOR_CELLS = [(128, 4096, "f32"), (128, 2048, "f32"), (128, 8192, "f32"), (64, 4096, "f32"), (200, 3000, "f32"),
                   (100, 6000, "f32"), (40, 5000, "f32"), (250, 1500, "f32"), (128, 4096, "bf16"), (180, 2500, "bf16")]
PLANS = {"gae": [("gae", *cell) for cell in GAE_CELLS],
         "others": [(est, *cell) for est in B.SPECS if est != "gae" for cell in OTHER_CELLS],
         "light_unaligned": [(est, *cell) for est in ("eligibility_traces", "episodic_prefix_sum")
                             for cell in LIGHT_UNALIGNED_CELLS],
         "eight_warps": [(est, *cell) for est in ("vtrace", "retrace", "discounted_returns") for cell in EIGHT_WARP_CELLS],
         "eight_warps_more": [(est, *cell) for est in ("gae", "lambda_returns", "eligibility_traces", "episodic_prefix_sum")
                              for cell in MORE_EIGHT_WARP_CELLS],
         "successor": [(est, *cell) for est in ("gae", "vtrace") for cell in SUCCESSOR_CELLS]}


def main(plan: str, tag: str, out: str, warm: bool, shard: int = 0, shards: int = 1) -> None:
    copy_gbs = 0.0 if warm else B.copy_bandwidth("cuda", 2**30, 25, 200)
    rows, start = [], time.time()
    for i, (est, T, N, dtype_name) in enumerate(PLANS[plan]):
        if i % shards != shard:
            continue
        nbytes = B.cell_bytes(est, N, T, B.DTYPES[dtype_name])
        n_sets = 1 if warm else B.input_set_count(nbytes, "cuda", l2_fills=4, most=200)
        times = B.block_shape_graph_times(est, {"default": None}, N, T, "tn", dtype_name, n_sets, warm)
        default = B.config_label(B.default_config(est, N, T, "tn", B.DTYPES[dtype_name]))
        rows.append(dict(tag=tag, estimator=est, T=T, N=N, dtype=dtype_name, sets=n_sets, bytes=nbytes,
                         copy_gbs=copy_gbs, default=default, times=times))
        if not warm:
            print(f"{tag} {est} {T}x{N} {dtype_name} [{default}] " + "/".join(
                f"{x:.2f}" if isinstance(x, float) else str(x)[:60] for x in times["default"]), flush=True)
            json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


def cli(argv: list) -> None:
    """``main`` from the command line ``PLAN TAG OUT.json [warm SHARD SHARDS]`` (also the scripts
    that add plans of their own to ``PLANS``)."""
    main(argv[0], argv[1], argv[2], argv[3:4] == ["warm"], *(int(a) for a in argv[4:6]))


if __name__ == "__main__":
    cli(sys.argv[1:])
