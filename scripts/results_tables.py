"""Markdown tables of the results files under ``docs/results/`` (the tables in README.md and docs/perf.md).

    python scripts/results_tables.py kernels docs/results/kernels_quick_grid.json           # every cell
    python scripts/results_tables.py kernels docs/results/kernels_quick_grid.json --cells readme
    python scripts/results_tables.py kernels docs/results/kernels_vs_before.json --cells before
    python scripts/results_tables.py rl-triton docs/results/kernels_vs_rl_triton.json
    python scripts/results_tables.py trainer docs/results/trainer_throughput.json
    python scripts/results_tables.py scaling docs/results/multi_gpu_scaling.json
    python scripts/results_tables.py time-to-score docs/results/time_to_score.json
    python scripts/results_tables.py atari-suite docs/results/atari_suite.json
    python scripts/results_tables.py update README.md docs/perf.md   # rewrite their tables from the files
    python scripts/results_tables.py check README.md docs/perf.md    # exit 1 where a table is out of date

The tables, and the markers that make a table in a Markdown file a generated one: ``rltrain/bench/tables.py``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout too

from rltrain.bench.tables import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
