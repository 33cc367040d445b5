"""Learning tests: `python scripts/impala.py` solves CartPole-v1 with V-trace; Retrace clearly improves.

The trainer runs in a subprocess with TRITON_INTERPRET removed (the interpreter is
only for the short runs of tests/test_impala_units.py) and ``--ca-backend triton``,
i.e. the fused API's PyTorch path on CPU.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(tmp_path, *flags, timeout=400):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    t0 = time.time()
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "impala.py"), "--runs-dir", str(tmp_path),
                        "--ca-backend", "triton", "--no-progress", *flags],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)
    wall = time.time() - t0
    assert r.returncode == 0, r.stderr[-3000:]
    (run_dir,) = tmp_path.glob("CartPole-v1__impala__*")
    rows = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    return rows, wall


@pytest.mark.slow
def test_default_vtrace_run_solves_cartpole(tmp_path):
    """The default run reaches an average return of 475 within its budget.

    Actors and learner run concurrently, so a run is not reproducible step for step even with a
    fixed seed, and a run can stall under the bar now and then (docs/training.md). The test calls
    the defaults broken only when three independent runs all miss it.
    """
    attempts = []
    for seed in (1, 2, 3):
        rows, wall = _run(tmp_path / f"seed{seed}", "--seed", str(seed), "--stop-at-return", "475")
        avg = [row.get("charts/avg_episodic_return", 0.0) for row in rows]
        solved = [row["global_step"] for row, a in zip(rows, avg) if a >= 475]
        lag = max(row.get("policy_lag/max", 0) for row in rows)
        print(f"V-trace CartPole seed {seed}: solved at step {solved[0] if solved else None}, best avg "
              f"{max(avg):.1f}, {rows[-1]['global_step']} steps, wall {wall:.0f}s, max lag {lag}")
        assert lag <= 2 + 1 + 1  # queue_size + num_actors + param_refresh_every
        assert wall < 240
        attempts.append(max(avg))
        if solved:
            return
    pytest.fail(f"never reached an average return of 475 (best per seed: {attempts})")


@pytest.mark.slow
def test_retrace_run_improves(tmp_path):
    rows, wall = _run(tmp_path, "--correction", "retrace", "--total-timesteps", "150000", "--learning-rate", "1e-3")
    avg = [row.get("charts/avg_episodic_return", 0.0) for row in rows]
    first = next(a for a in avg if a > 0)
    print(f"Retrace CartPole: first avg {first:.1f}, best {max(avg):.1f}, final {avg[-1]:.1f}, wall {wall:.0f}s")
    assert max(avg) >= 150 and max(avg) >= 4 * first
    assert wall < 150
