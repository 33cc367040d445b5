"""Two versions' ``versions.py`` runs side by side: per cell and estimator the kernels' own block
shape, the median of each version's device times over its rounds, and the ratio (``A / B``: above 1
when B is faster); then the geometric mean, and the same over the cells where ``--only`` holds.

  python docs/bench/run_edges/compare.py DIR A B [--only short-unpipelined]

``DIR`` holds ``A_1.json``, ``A_2.json``, ``B_1.json``, ``B_2.json``. ``short-unpipelined``: the
cells where the sixteenth session's rule skips the last chunk's carry-out (``skips_last_carry``).
Run from the repository root."""
import json
import math
import statistics
import sys
from pathlib import Path

import torch

sys.path.append("scripts")
import bench_kernels as B  # noqa: E402
from kernels import _launch  # noqa: E402


def medians(directory: Path, tag: str) -> dict:
    times = {}
    for path in sorted(directory.glob(f"{tag}_*.json")):
        for row in json.load(open(path)):
            key = (row["estimator"], row["T"], row["N"], row["dtype"], row["layout"], row["default"])
            times.setdefault(key, []).extend(x for x in row["times"]["default"] if isinstance(x, float))
    return {key: statistics.median(v) for key, v in times.items() if v}


def skips_last_carry(key) -> bool:
    """``_scan.scan_chunk``'s rule for the cell's block shape: no look-back, unpipelined, at most 256
    steps, no warp shuffles (``_launch.shuffles_time``); V-trace's ``scan_chunk_with_next`` never."""
    est, T, N, dtype, layout, label = key
    config = B.parse_config_label(label)
    shuffles = _launch.shuffles_time(config, layout != "tn", torch.float32, B.DTYPES[dtype].itemsize)
    return (est != "vtrace" and not config.lookback and config.num_stages == 1 and config.block_t <= 256
            and not shuffles)


def geomean(xs) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs))


if __name__ == "__main__":
    directory, a, b = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    only = sys.argv[5] if sys.argv[4:5] == ["--only"] else None
    before, after = medians(directory, a), medians(directory, b)
    ratios, chosen = [], []
    for key in before.keys() & after.keys():
        ratio = before[key] / after[key]
        ratios.append(ratio)
        if only == "short-unpipelined" and skips_last_carry(key):
            chosen.append(ratio)
        est, T, N, dtype, layout, label = key
        print(f"{est:20s} N={N:<6d} T={T:<5d} {dtype} {layout} [{label}] {before[key]:8.2f} -> {after[key]:8.2f} us "
              f"({ratio:.3f}x)")
    print(f"all: {geomean(ratios):.3f}x over {len(ratios)} cells ({min(ratios):.3f}-{max(ratios):.3f})")
    if chosen:
        print(f"{only}: {geomean(chosen):.3f}x over {len(chosen)} cells ({min(chosen):.3f}-{max(chosen):.3f})")
