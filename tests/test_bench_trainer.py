"""scripts/bench_trainer.py: the figures it derives from a run's metrics, and its --quick mode end to end."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import bench_trainer as B  # noqa: E402


def test_summarize_leaves_out_the_warmup():
    case = B.Case("ppo", "CartPole-v1", num_envs=4, num_steps=10, warmup=2, timed=3)
    rows = []
    for i in range(1, 6):  # 40 steps per iteration; the first two are warm-up (slow)
        wall = 5.0 if i <= 2 else 0.5
        rows.append({"global_step": 40 * i, "time": 100.0 + (10.0 if i <= 2 else 10.0 + 0.6 * (i - 2)),
                     "perf/iteration_s": wall, "perf/rollout_s": wall * 0.8, "perf/rollout/env_s": wall * 0.5,
                     "perf/update_s": wall * 0.2, "charts/avg_episodic_return": float(i)})
    out = B.summarize(case, rows)
    assert out["iterations"] == 3 and out["steps"] == 120
    assert out["sps"] == pytest.approx(120 / 1.8)  # wall clock from the last warm-up record
    assert out["iteration_ms"] == pytest.approx(500.0)
    assert out["phases_ms"] == pytest.approx({"rollout": 400.0, "rollout/env": 250.0, "update": 100.0})
    assert out["rollout_sps"] == pytest.approx(120 / 1.2) and out["final_avg_return"] == 5.0
    impala = B.Case("impala", "CartPole-v1", num_envs=4, num_steps=10, warmup=1, timed=1)
    rows = [{"global_step": 20 * i, "time": 2.0 * i, "perf/iteration_s": 1.0, "perf/learner_queue_wait_s": 0.25,
             "charts/actor_SPS": 100.0, "policy_lag/mean": 2.0} for i in range(1, 5)]
    out = B.summarize(impala, rows)  # 2 updates after the warm-up, 4 s of wall clock, 0.5 s waiting
    assert out["iterations"] == 2 and out["learner_wait"] == pytest.approx(0.125) and out["actor_sps"] == 100.0
    assert "error" in B.summarize(case, rows[:1])


def test_quick_mode_end_to_end(tmp_path, capsys):
    """Raw EnvPool, a 'before' checkout (this one) and the after trainers, tiny, on the CPU."""
    out = tmp_path / "throughput.json"
    result = B.main(["--quick", "--cases", "ppo-cartpole,impala-cartpole", "--before-root", str(ROOT),
                     "--out", str(out)])
    assert json.loads(out.read_text())["cases"].keys() == result["cases"].keys() == {"ppo-cartpole", "impala-cartpole"}
    meta = result["meta"]
    assert meta["cpu_cores"] >= 1 and meta["torch"] and meta["envpool"] and B.BEFORE_ROOT in meta["command"]
    for name, case in result["cases"].items():
        assert case["raw"]["sps"] > 0
        assert set(case["runs"]) == {"before", "after"}
        for label, run in case["runs"].items():
            assert "error" not in run, (name, label, run.get("error"))
            assert run["iterations"] >= 2 and run["sps"] > 0 and math.isfinite(run["vs_raw"])
            if case["trainer"] == "ppo":
                assert {"rollout", "rollout/env", "update", "ca"} <= set(run["phases_ms"])
                assert 0 < run["rollout_sps"] and run["rollout_vs_raw"] == pytest.approx(run["rollout_sps"] / case["raw"]["sps"])
            else:
                assert 0 <= run["learner_wait"] <= 1 and run["actor_sps"] > 0
    assert result["cases"]["impala-cartpole"]["runs"]["after"]["flags"] == list(B.IMPALA_QUICK)
    printed = capsys.readouterr().out
    assert "raw EnvPool" in printed and printed.rstrip().splitlines()[-1].startswith("(rollout:")
    for key in ("device_name", "driver", "cuda", "torch", "triton", "date"):  # what docs/results files name
        assert key in meta, key
    text = B.main(["--markdown", str(out)])["markdown"]
    ppo = result["cases"]["ppo-cartpole"]["runs"]
    assert f"| | after | {ppo['after']['sps']:,.0f} | {100 * ppo['after']['vs_raw']:.0f}% |" in text
    assert text.count("| run | steps / iteration |") == 2  # a phase table per case, a row per run
    header = next(line for line in text.splitlines() if line.startswith("| run | steps / iteration | **rollout** |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    row = next(line for line in text.splitlines() if line.startswith(f"| after | {ppo['after']['batch_steps']:,} |"))
    cells = dict(zip(columns, (c.strip() for c in row.strip("|").split("|"))))
    assert cells["rollout/env"] == f"{ppo['after']['phases_ms']['rollout/env']:.1f}"
    assert cells["**iteration**"] == f"{ppo['after']['iteration_ms']:.1f}"


def test_variants_wait_for_the_essential_runs_and_the_budget(tmp_path, monkeypatch):
    """Variants run after every case's before/after, and none starts past --time-budget."""
    tiny = B.Case("ppo", "CartPole-v1", num_envs=4, num_steps=8, warmup=1, timed=1, raw_steps=20, raw_warmup=2,
                  variants=(("after, 1 env group", ("--env-groups", "1")),))
    monkeypatch.setitem(B.CASES, "tiny", tiny)
    result = B.main(["--cases", "tiny", "--time-budget", "0", "--out", str(tmp_path / "t.json")])
    runs = result["cases"]["tiny"]["runs"]
    assert list(runs) == ["after", "after, 1 env group"] and runs["after"]["sps"] > 0
    assert runs["after, 1 env group"]["error"] == "skipped: past the 0.0 s budget"


def test_the_command_is_recorded_as_given_without_the_before_root_path():
    """A relative --out is what a user types again; --before-root's path exists on the measuring machine only."""
    argv = ["--cases", "ppo-cartpole", "--before-root", "/tmp/before", "--out", "docs/results/t.json"]
    assert B.machine(argv, "/tmp/before")["command"] == (
        "python scripts/bench_trainer.py --cases ppo-cartpole --before-root <checkout of before_commit> "
        "--out docs/results/t.json")
    assert B.machine(["--before-root=/tmp/before"], "/tmp/before")["command"].endswith(
        " --before-root=<checkout of before_commit>")
    assert B.machine(["--out", "docs/results/t.json"], None)["command"] == \
        "python scripts/bench_trainer.py --out docs/results/t.json"


def test_git_commit_names_a_checkout_top_only(tmp_path):
    """A copy made by ``git archive`` inside another checkout (the usual --before-root) has no commit of
    its own: the enclosing checkout's must not be reported as the 'before' commit."""
    import subprocess
    git = ["git", "-C", str(tmp_path), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "copy").mkdir()
    assert B.git_commit(tmp_path) == head
    assert B.git_commit(tmp_path / "copy") is None


def test_git_commit_marks_a_tree_that_differs_from_its_commit(tmp_path):
    """Figures measured on edited files must not be credited to the commit checked out under them."""
    import subprocess
    git = ["git", "-C", str(tmp_path), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "a.py"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (tmp_path / "notes.txt").write_text("untracked files do not count\n")
    assert B.git_commit(tmp_path) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert B.git_commit(tmp_path) == head + "+dirty"


def test_torchrun_ratio_pairs_the_runs_taken_in_turn():
    runs = {"after": {"sps": 100.0, "turn": 1}, "after, torchrun 1 rank(s)": {"sps": 95.0, "turn": 1, "torchrun_ranks": 1},
            "after (2)": {"sps": 120.0, "turn": 2}, "after, torchrun 1 rank(s) (2)": {"sps": 120.0, "turn": 2,
                                                                                     "torchrun_ranks": 1},
            "after, --compile": {"sps": 500.0}}  # a variant: not in the turns
    out = B.torchrun_vs_plain(runs)
    assert out["torchrun_vs_plain"]["1"] == pytest.approx(215 / 220)
    assert out["torchrun_vs_plain_pairs"]["1"] == pytest.approx([0.95, 1.0])
    assert B.torchrun_vs_plain({"after": {"sps": 1.0}}) == {}
