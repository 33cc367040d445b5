"""Learning test: the default `python scripts/ppo.py` solves CartPole-v1.

Runs the trainer in a subprocess with TRITON_INTERPRET removed (the
interpreter is only for the short runs in tests/test_ppo.py) and
``--ca-backend triton``, i.e. the fused API's PyTorch path on CPU.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_default_run_solves_cartpole(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    t0 = time.time()
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "ppo.py"), "--runs-dir", str(tmp_path),
                        "--ca-backend", "triton", "--no-progress"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    wall = time.time() - t0
    assert r.returncode == 0, r.stderr[-3000:]
    (run_dir,) = tmp_path.glob("CartPole-v1__ppo__1__*")
    rows = [json.loads(line) for line in open(run_dir / "metrics.jsonl")]
    avg = [row.get("charts/avg_episodic_return", 0.0) for row in rows]
    solved = [row["global_step"] for row, a in zip(rows, avg) if a >= 475]
    print(f"CartPole: solved at step {solved[0] if solved else None}, final avg {avg[-1]:.1f}, "
          f"{rows[-1]['global_step']} steps, wall {wall:.0f}s")
    assert solved, f"never reached an average return of 475 (best {max(avg):.1f})"
    assert avg[-1] >= 475
    assert wall < 300
