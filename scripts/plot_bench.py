"""Plots of a benchmark run: speedup of the fused kernels over each baseline vs T, one line per N.

``scripts/bench_kernels.py`` writes them at the end of a run (what they show: ``rltrain/bench/plots.py``);
by hand::

    python scripts/plot_bench.py docs/results/kernels_quick_grid.json --estimators gae,vtrace,retrace
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout too

from rltrain.bench.plots import plot_all  # noqa: E402


def main(argv=None) -> list[Path]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path, help="a results file of scripts/bench_kernels.py (.json)")
    p.add_argument("--estimators", default=None, help="comma-separated (default: every estimator in the file)")
    opts = p.parse_args(argv)
    if not opts.results.is_file():
        p.error(f"results: no such file: {opts.results}")
    estimators = opts.estimators.split(",") if opts.estimators else None
    written = plot_all(json.loads(opts.results.read_text())["rows"], opts.results.parent, opts.results.stem, estimators)
    for path in written:
        print(path)
    return written


if __name__ == "__main__":
    main()
