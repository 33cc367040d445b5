"""Look-back tiles for short ``[T, N]`` sequences, and bf16 ``[T, N]`` block shapes (fifteenth
session). The kernels hold a ``[T, N]`` sequence of up to 256 steps whole in one tile per program
(8-16 environments wide on four warps from 33 steps): 4096 x 128, the PPO trainer's rollout, ran
at 7.1 us on the device, against 3.3 us for the same bytes stored ``[N, T]``. Here such sequences
are also split over time into look-back tiles of 16-64 steps and 16-64 environments (more
programs, each loading whole 64-256-byte row segments), in thread runs (``+runs``) and in Triton's
layout. Each label is checked against the float64 reference first; device time per call of calls
replayed from a CUDA graph, each call reading its own input set (they cycle through four times the
L2), two rounds interleaved (from the repository root):

  PYTHONPATH=. python docs/bench/tn_lookback/tiles.py PLAN OUT.json [warm ESTIMATOR]

PLAN ``short``: float32, 64-256 steps, 1024-8192 environments. PLAN ``bf16_short``: the same tiles
in bf16 at 128 steps. PLAN ``bf16_long``: bf16 sequences of 2048-4096 steps from 2048 to 16384
environments (where bf16 ran 0.98-1.63x float32's time): walks and look-back tiles twice as many
steps or environments as float32's, with float32's ``default`` in the same run. PLAN ``bf16_mid``:
bf16 sequences of 1024-8192 steps from 512 to 1536 environments, two- and four-warp look-back tiles
in thread runs. PLAN ``odd_short``: PLAN ``short``'s tiles for float32 sequences of 20-200 steps
that are not powers of two (the whole-sequence tiles hold T rounded up to one, up to half of it
padding), 4096 and 8192 environments. PLAN ``ppo``: float32 128-step sequences from 2048 to 8192
environments held whole on 2-16 warps (the sweeps of the twelfth session went to four). PLAN
``bf16_walks``: GAE's, V-trace's and Retrace's bf16 walks from 8192 environments in tiles of about
float32's bytes per thread (32 x 64 on two warps and the like), float32's ``default`` in the same
run. PLAN ``narrow_walks``: float32 sequences of 2048-8192 steps from 512 to 4096 environments
walked without look-back in tiles 8-32 environments wide, three to six chunks deep (256-1024
programs), against the look-back tiles taken there.

``warm`` only compiles (one estimator per process, to compile in parallel) and times nothing."""
import itertools
import json
import sys
import time

sys.path.append("scripts")
sys.path.append("docs/bench/whole_tn")
import bench_kernels as B  # noqa: E402
import kernels  # noqa: E402
from sweep import dram_cell  # noqa: E402  (docs/bench/whole_tn/sweep.py)

SHORT_CELLS = [(T, N) for T in (128, 64, 256) for N in (4096, 2048, 8192, 1024)]
BF16_SHORT_CELLS = [(128, N) for N in (4096, 2048, 8192)]
BF16_LONG_CELLS = [(4096, 8192), (2048, 16384), (4096, 4096), (2048, 2048)]
SHORT_TILES = ("16x32w1+lookback{}+runs", "32x32w1+lookback{}+runs", "32x32w2+lookback{}+runs",
               "32x16w1+lookback{}+runs", "64x32w2+lookback{}+runs", "64x16w2+lookback{}+runs",
               "64x32w4+lookback{}+runs", "32x64w2+lookback{}+runs", "16x64w1+lookback{}", "32x32w1+lookback{}")
ODD_SHORT_CELLS = [(T, N) for T in (20, 80, 100, 140, 160, 200) for N in (4096, 8192)]
PPO_CELLS = [(128, 4096), (128, 2048), (128, 8192)]
PPO_TILES = ("128x16w8{}+runs", "128x8w8{}+runs", "128x32w8{}+runs", "128x16w8{}", "128x32w16{}+runs",
             "128x64w16{}+runs", "128x8w4{}+runs", "128x16w4{}", "128x8w2{}+runs", "128x16w2{}+runs")
BF16_WALK_CELLS = [(4096, 8192), (2048, 16384), (1024, 32768), (512, 16384)]
BF16_WALK_TILES = ("32x64w2+3stages{}+runs", "32x64w2+4stages{}+runs", "32x32w1+3stages{}+runs",
                   "32x64w4+3stages{}+runs", "16x64w1+3stages{}+runs", "64x32w2+3stages{}+runs",
                   "32x128w4+3stages{}+runs", "32x64w1+3stages{}+runs", "64x64w4+3stages{}+runs")
NARROW_WALK_CELLS = [(2048, 2048), (4096, 4096), (8192, 1024), (4096, 2048), (8192, 512)]
NARROW_WALK_TILES = ("64x16w2+4stages{}+runs", "128x16w4+4stages{}+runs", "32x16w1+4stages{}+runs",
                     "64x8w2+4stages{}+runs", "128x8w4+4stages{}+runs", "64x16w2+6stages{}+runs",
                     "32x32w2+4stages{}+runs", "64x16w4+3stages{}+runs")
BF16_MID_CELLS = [(2048, 512), (8192, 512), (4096, 1024), (2048, 1024), (1024, 1536)]
BF16_MID_TILES = ("64x32w2+lookback{}+runs", "64x64w2+lookback{}+runs", "128x32w4+lookback{}+runs",
                  "32x64w2+lookback{}+runs", "128x16w4+lookback{}+runs", "64x16w2+lookback{}+runs")
BF16_LONG_TILES = ("64x64w4+3stages{}+runs", "64x64w4+4stages{}+runs", "128x64w4+4stages{}+runs",
                   "64x128w4+3stages{}+runs", "128x32w4+4stages{}+runs", "64x128w8+3stages{}+runs",
                   "32x64w1+lookback{}", "64x64w2+lookback{}+runs", "32x64w2+lookback{}+runs",
                   "128x32w4+lookback{}+runs", "64x32w2+lookback{}+runs")
PLANS = {"short": (SHORT_CELLS, SHORT_TILES, "f32"), "bf16_short": (BF16_SHORT_CELLS, SHORT_TILES, "bf16"),
         "bf16_long": (BF16_LONG_CELLS, BF16_LONG_TILES, "bf16"), "bf16_mid": (BF16_MID_CELLS, BF16_MID_TILES, "bf16"),
         "odd_short": (ODD_SHORT_CELLS, SHORT_TILES, "f32"), "ppo": (PPO_CELLS, PPO_TILES, "f32"),
         "bf16_walks": (BF16_WALK_CELLS, BF16_WALK_TILES, "bf16", ("gae", "vtrace", "retrace")),
         "narrow_walks": (NARROW_WALK_CELLS, NARROW_WALK_TILES, "f32")}


def shapes(est: str, T: int, tiles: tuple) -> dict:
    """``tiles``' labels for ``est`` (latest first where its reverse walks hold them so); look-back tiles
    only if shorter than ``T``."""
    latest = "+latest" if kernels._launch.kernel_traits(est)["latest_first"] else ""
    labels = [t.format(latest) for t in tiles]
    return {label: config for label in labels if (config := B.parse_config_label(label)).block_t < T
            or not config.lookback}


def main(plan: str, out: str, warm: bool, only: str = None) -> None:
    cells, tiles, dtype_name, *estimators = PLANS[plan]
    estimators = estimators[0] if estimators else tuple(B.SPECS)
    copy_gbs = 0.0 if warm else B.copy_bandwidth("cuda", 2**30, 25, 200)
    rows = []
    start = time.time()
    for (T, N), est in itertools.product(cells, estimators):
        if only and est != only:
            continue
        default = B.default_config(est, N, T, "tn", B.DTYPES[dtype_name])
        configs = {"default": None, **{k: c for k, c in shapes(est, T, tiles).items() if c != default}}
        labels = {k: B.config_label(c or default) for k, c in configs.items()}
        if plan in ("bf16_long", "bf16_walks"):
            f32_default = B.config_label(B.default_config(est, N, T, "tn", B.DTYPES["f32"]))
            rows.append(dram_cell(est, T, N, {"default": None}, warm, copy_gbs, {"default": f32_default}))
        rows.append(dram_cell(est, T, N, configs, warm, copy_gbs, labels, dtype_name))
        if not warm:
            json.dump(rows, open(out, "w"), indent=1)
    print(f"done in {time.time() - start:.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:4] == ["warm"], sys.argv[4] if sys.argv[3:4] == ["warm"] else None)
