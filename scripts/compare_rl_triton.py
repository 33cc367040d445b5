"""The fused kernels against the public rl-triton library (0.1.3), in the same process on the same
inputs and the same clock. GPU only: rl-triton takes CUDA tensors. It is not a dependency: put its
``src/`` first on ``PYTHONPATH``; its code is not in this repository.

    PYTHONPATH=<rl-triton>/src:. python scripts/compare_rl_triton.py docs/results/kernels_vs_rl_triton.json
    python scripts/results_tables.py rl-triton docs/results/kernels_vs_rl_triton.json   # its table

Its API differs from ours, so each adapter converts our inputs once, outside the timed call, to the
arguments its ``compute_*`` functions document: the timed call is what its user pays given data
already in its format. The conversion keeps every input's meaning:

* flags as float32. A step flagged both terminated and truncated, which our inputs allow and
  rl-triton documents as invalid, keeps only the termination in every cell: that changes none of our
  outputs (a termination drops the bootstrap and cuts the trace either way).
* with truncations, ``bootstrap_values`` ``[N, T]``: the value after each truncated step (ours:
  ``V_{t+1}``, or ``next_values[t]`` for discounted returns), zero at the other steps, and in the last
  column the value after the window: 0 if the last step terminated, its continuation if it was
  truncated, else our bootstrap value. Its GAE and V-trace read that column as the last step's next
  value only (their scan carry beyond the window is 0, as ours); its discounted returns read it as the
  return beyond the window too, which a truncated or terminated last step cuts. Without truncations
  its GAE and V-trace take ``last_value`` and its discounted returns the same last column.
* V-trace: the target policy's log-probabilities are our log-ratios, the behaviour's are 0; it has no
  ``lambda`` (ours 1) and clips its policy-gradient advantages at ``rho_bar`` (ours ``pg_rho_bar``).
* eligibility traces and episodic sums: the flags unshifted; both libraries reset after a flagged
  step (``done_{t-1}``), and both sums get ``boundary="ends_at"``.
* the discount and trace parameters, given to both explicitly (``PARAMS``).

Each output is checked against the float64 reference before timing (``rltrain.bench.cells.checked_times``),
with the random nonzero bootstrap values, so both compute the same numbers. Each estimator runs with
truncations (rl-triton's ``bootstrap_values`` path) and without (its ``last_value`` / no-``truncateds``
path).

Per cell and implementation: ``do_bench`` (L2 flushed, median), ``event`` (rl-triton's own method:
CUDA events around one synchronized call, median of 100 after 20 warm-up calls: host launch
included), ``host`` (back-to-back calls, wall time per call), ``graph`` (device only: 20 calls
replayed from a CUDA graph). GAE is timed twice: as called by default (advantages and returns stored,
the advantages compared: ``ours``) and with ``returns=False`` (the outputs rl-triton writes:
``ours_no_returns``). Inputs are ``[N, T]`` (rl-triton's layout), float32. The output file is ``{meta,
rows}``: ``meta`` as ``bench_kernels.py`` writes it (device, driver, versions, date) plus rl-triton's
version, the kernels' commit, ``PARAMS`` and a note of these conventions. The adapters and the run:
``rltrain/bench/rl_triton.py``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout too

from rltrain.bench.rl_triton import compare  # noqa: E402


def main(argv=None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        raise SystemExit("usage: compare_rl_triton.py RESULTS.json")
    return compare(argv[0])


if __name__ == "__main__":
    main()
