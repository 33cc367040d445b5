"""scripts/bench_trainer.py (its code: rltrain.bench.trainer_*): the figures it derives from a run's metrics, and
its --quick mode end to end."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from conftest import load_script
from rltrain.bench import trainer_cases as cases
from rltrain.bench import trainer_runs as runs
from rltrain.bench import trainer_tables as tables
from rltrain.bench import update_microbench as update
from rltrain.machine import git_commit

ROOT = Path(__file__).resolve().parents[1]
script = load_script("bench_trainer")  # its command line


def test_summarize_leaves_out_the_warmup():
    case = cases.Case("ppo", "CartPole-v1", num_envs=4, num_steps=10, warmup=2, timed=3)
    rows = []
    for i in range(1, 6):  # 40 steps per iteration; the first two are warm-up (slow)
        wall = 5.0 if i <= 2 else 0.5
        rows.append({"global_step": 40 * i, "time": 100.0 + (10.0 if i <= 2 else 10.0 + 0.6 * (i - 2)),
                     "perf/iteration_s": wall, "perf/rollout_s": wall * 0.8, "perf/rollout/env_s": wall * 0.5,
                     "perf/update_s": wall * 0.2, "charts/avg_episodic_return": float(i)})
    out = runs.summarize(case, rows)
    assert out["iterations"] == 3 and out["steps"] == 120
    assert out["sps"] == pytest.approx(120 / 1.8)  # wall clock from the last warm-up record
    assert out["iteration_ms"] == pytest.approx(500.0)
    assert out["phases_ms"] == pytest.approx({"rollout": 400.0, "rollout/env": 250.0, "update": 100.0})
    assert out["rollout_sps"] == pytest.approx(120 / 1.2) and out["final_avg_return"] == 5.0
    impala = cases.Case("impala", "CartPole-v1", num_envs=4, num_steps=10, warmup=1, timed=1)
    rows = [{"global_step": 20 * i, "time": 2.0 * i, "perf/iteration_s": 1.0, "perf/learner_queue_wait_s": 0.25,
             "charts/actor_SPS": 100.0, "policy_lag/mean": 2.0} for i in range(1, 5)]
    out = runs.summarize(impala, rows)  # 2 updates after the warm-up, 4 s of wall clock, 0.5 s waiting
    assert out["iterations"] == 2 and out["learner_wait"] == pytest.approx(0.125) and out["actor_sps"] == 100.0
    assert "error" in runs.summarize(case, rows[:1])


@pytest.mark.slow
def test_quick_mode_end_to_end(tmp_path, capsys):
    """Raw EnvPool, a 'before' checkout (this one) and the after trainers, tiny, on the CPU."""
    out = tmp_path / "throughput.json"
    result = script.main(["--quick", "--cases", "ppo-cartpole,impala-cartpole", "--before-root", str(ROOT),
                     "--out", str(out)])
    assert json.loads(out.read_text())["cases"].keys() == result["cases"].keys() == {"ppo-cartpole", "impala-cartpole"}
    meta = result["meta"]
    assert meta["cpu_cores"] >= 1 and meta["torch"] and meta["envpool"] and runs.BEFORE_ROOT in meta["command"]
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
    assert result["cases"]["impala-cartpole"]["runs"]["after"]["flags"] == list(cases.IMPALA_QUICK)
    printed = capsys.readouterr().out
    assert "raw EnvPool" in printed and printed.rstrip().splitlines()[-1].startswith("(rollout:")
    for key in ("device_name", "driver", "cuda", "torch", "triton", "date"):  # what docs/results files name
        assert key in meta, key
    text = script.main(["--markdown", str(out)])["markdown"]
    ppo = result["cases"]["ppo-cartpole"]["runs"]
    assert f"| | after | {ppo['after']['sps']:,.0f} | {100 * ppo['after']['vs_raw']:.0f}% |" in text
    assert text.count("| run | steps / iteration |") == 2  # a phase table per case, a row per run
    header = next(line for line in text.splitlines() if line.startswith("| run | steps / iteration | **rollout** |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    row = next(line for line in text.splitlines() if line.startswith(f"| after | {ppo['after']['batch_steps']:,} |"))
    cells = dict(zip(columns, (c.strip() for c in row.strip("|").split("|"))))
    assert cells["rollout/env"] == f"{ppo['after']['phases_ms']['rollout/env']:.1f}"
    assert cells["**iteration**"] == f"{ppo['after']['iteration_ms']:.1f}"


@pytest.mark.slow
def test_variants_wait_for_the_essential_runs_and_the_budget(tmp_path, monkeypatch):
    """Variants run after every case's before/after, and none starts past --time-budget."""
    tiny = cases.Case("ppo", "CartPole-v1", num_envs=4, num_steps=8, warmup=1, timed=1, raw_steps=20, raw_warmup=2,
                  variants=(("after, 1 env group", ("--env-groups", "1")),))
    monkeypatch.setitem(cases.CASES, "tiny", tiny)
    result = script.main(["--cases", "tiny", "--time-budget", "0", "--out", str(tmp_path / "t.json")])
    runs = result["cases"]["tiny"]["runs"]
    assert list(runs) == ["after", "after, 1 env group"] and runs["after"]["sps"] > 0
    assert runs["after, 1 env group"]["error"] == "skipped: past the 0.0 s budget"


def test_the_command_is_recorded_as_given_without_the_before_root_path():
    """A relative --out is what a user types again; --before-root's path exists on the measuring machine only."""
    argv = ["--cases", "ppo-cartpole", "--before-root", "/tmp/before", "--out", "docs/results/t.json"]
    assert runs.machine(argv, "/tmp/before")["command"] == (
        "python scripts/bench_trainer.py --cases ppo-cartpole --before-root <checkout of before_commit> "
        "--out docs/results/t.json")
    assert runs.machine(["--before-root=/tmp/before"], "/tmp/before")["command"].endswith(
        " --before-root=<checkout of before_commit>")
    assert runs.machine(["--out", "docs/results/t.json"], None)["command"] == \
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
    assert git_commit(tmp_path) == head
    assert git_commit(tmp_path / "copy") is None


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
    assert git_commit(tmp_path) == head
    (tmp_path / "a.py").write_text("x = 2\n")
    assert git_commit(tmp_path) == head + "+dirty"


def test_torchrun_ratio_pairs_the_runs_taken_in_turn():
    under = [{"sps": 95.0, "turn": 1, "torchrun_ranks": 1}, {"sps": 120.0, "turn": 2, "torchrun_ranks": 1}]
    entries = {"after": {"turns": [{"sps": 100.0, "turn": 1}, {"sps": 120.0, "turn": 2}]},
            "after, torchrun 1 rank(s)": {"torchrun_ranks": 1, "turns": under},
            "after, --compile": {"turns": [{"sps": 500.0, "turn": 1}, {"sps": 500.0, "turn": 2}]}}  # not plain
    out = runs.torchrun_vs_plain(entries)
    assert out["torchrun_vs_plain"]["1"] == pytest.approx(215 / 220)
    assert out["torchrun_vs_plain_pairs"]["1"] == pytest.approx([0.95, 1.0])
    single = {"after": {"sps": 100.0}, "after, torchrun 1 rank(s)": {"sps": 90.0, "torchrun_ranks": 1}}  # one turn
    assert runs.torchrun_vs_plain(single) == {"torchrun_vs_plain": {"1": 0.9}, "torchrun_vs_plain_pairs": {"1": [0.9]}}
    assert runs.torchrun_vs_plain({"after": {"sps": 1.0}}) == {}


# ---------------------------------------------------------------------------- turns (trainer runs mocked)
TINY = cases.Case("ppo", "CartPole-v1", num_envs=4, num_steps=8, warmup=1, timed=1, after_flags=("--after",),
              variants=(("after, a", ("--a",)), ("after, b", ("--b",))))


class FakeRuns:
    """Stands in for raw EnvPool and the trainer subprocesses: records each call in order, answers with the
    next of the figures given per kind of run (``raw``, or a run's flags joined), and moves a fake clock."""

    def __init__(self, monkeypatch, figures=None, seconds_per_run=0.0):
        self.calls, self.now, self.seconds = [], 0.0, seconds_per_run
        self.figures = {k: list(v) for k, v in (figures or {}).items()}
        monkeypatch.setattr(runs, "raw_envpool", self.raw)
        monkeypatch.setattr(runs, "run_trainer", self.run)
        monkeypatch.setattr(runs, "time", type("Clock", (), {"perf_counter": staticmethod(lambda: self.now)}))

    def next(self, kind, default):
        left = self.figures.get(kind)
        return left.pop(0) if left else default

    def raw(self, case, threads):
        self.calls.append("raw")
        return {"sps": self.next("raw", 1000.0), "num_threads": 2, "steps": 4000, "tried": {"2": 1000.0}}

    def run(self, root, case, extra, runs_dir, timeout, nproc=0):
        kind = " ".join(extra) + (f" torchrun {nproc}" if nproc else "")
        self.calls.append(kind)
        self.now += self.seconds
        sps = self.next(kind, 500.0)
        return {"flags": list(extra), "process_s": 1.0, "iterations": 1, "steps": 32, "sps": sps,
                "iteration_ms": self.next(kind + " ms", 10.0), "batch_steps": 32,
                "phases_ms": {"rollout": self.next(kind + " rollout", 6.0), "update": 4.0},
                "final_avg_return": None, "rollout_sps": 2 * sps}


def test_turns_run_round_robin_with_raw_envpool_first(tmp_path, monkeypatch):
    """Turn by turn: raw EnvPool, before, after, each variant -- the same order in every turn."""
    monkeypatch.setitem(cases.CASES, "tiny", TINY)
    fake = FakeRuns(monkeypatch)
    result = script.main(["--cases", "tiny", "--turns", "3", "--before-root", str(ROOT), "--out", str(tmp_path / "t.json")])
    assert fake.calls == ["raw", "", "--after", "--a", "--b"] * 3  # "": before, whose flags the case does not add
    case = result["cases"]["tiny"]
    assert list(case["runs"]) == ["before", "after", "after, a", "after, b"] and case["num_turns"] == 3
    for entry in case["runs"].values():
        assert [run["turn"] for run in entry["turns"]] == [1, 2, 3]
    assert [raw["turn"] for raw in case["raw"]["turns"]] == [1, 2, 3]
    assert json.loads((tmp_path / "t.json").read_text())["cases"] == result["cases"]


def test_torchrun_runs_take_turns_with_the_plain_run(tmp_path, monkeypatch):
    """ppo-cartpole-torchrun1 is three turns of (plain after, after under torchrun) unless --turns says otherwise."""
    fake = FakeRuns(monkeypatch, {"": [100.0, 120.0, 110.0], " torchrun 1": [95.0, 120.0, 99.0]})
    torchrun1 = cases.CASES["ppo-cartpole-torchrun1"]
    monkeypatch.setitem(cases.CASES, "tiny-torchrun", dataclasses.replace(torchrun1, after_flags=()))
    case = script.main(["--cases", "tiny-torchrun", "--out", str(tmp_path / "t.json")])["cases"]["tiny-torchrun"]
    assert fake.calls == ["raw", "", " torchrun 1"] * 3
    assert case["torchrun_vs_plain"]["1"] == pytest.approx((95 + 120 + 99) / (100 + 120 + 110))
    assert case["torchrun_vs_plain_pairs"]["1"] == pytest.approx([0.95, 1.0, 0.9])
    assert case["runs"]["after, torchrun 1 rank(s)"]["sps_median"] == 99.0


def test_each_label_gets_the_median_and_range_over_its_turns(tmp_path, monkeypatch):
    """Each turn's run against that turn's raw EnvPool; per label the median, min and max over the turns."""
    monkeypatch.setitem(cases.CASES, "tiny", TINY)
    FakeRuns(monkeypatch, {"raw": [100.0, 200.0, 100.0], "--after": [90.0, 150.0, 95.0],
                           "--after ms": [10.0, 30.0, 20.0], "--after rollout": [5.0, 9.0, 7.0]})
    argv = ["--cases", "tiny", "--turns", "3", "--no-variants", "--out", str(tmp_path / "t.json")]
    case = script.main(argv)["cases"]["tiny"]
    after = case["runs"]["after"]
    assert [run["vs_raw"] for run in after["turns"]] == pytest.approx([0.9, 0.75, 0.95])
    assert (after["vs_raw_median"], after["vs_raw_min"], after["vs_raw_max"]) == pytest.approx((0.9, 0.75, 0.95))
    assert (after["sps_median"], after["sps_min"], after["sps_max"]) == (95.0, 90.0, 150.0)
    assert (after["rollout_vs_raw_median"], after["rollout_vs_raw_min"]) == pytest.approx((1.8, 1.5))
    assert after["phases_ms"] == {"rollout": 7.0, "update": 4.0} and after["iteration_ms"] == 20.0
    assert (case["raw"]["sps_median"], case["raw"]["sps_min"], case["raw"]["sps_max"]) == (100.0, 100.0, 200.0)


def test_a_multi_turn_result_renders_one_row_per_label_with_its_range(tmp_path, monkeypatch, capsys):
    from rltrain.bench import tables as results_tables
    monkeypatch.setitem(cases.CASES, "tiny", TINY)
    FakeRuns(monkeypatch, {"raw": [1000.0, 2000.0, 1000.0], "--after": [900.0, 1500.0, 950.0],
                           "--after rollout": [5.0, 9.0, 7.0], "--a": [880.0, 930.0, 1861.0]})
    out = tmp_path / "t.json"
    script.main(["--cases", "tiny", "--turns", "3", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "75.0-95.0%" in printed and "1,000-2,000 steps/s" in printed  # the console table's ranges
    text = script.main(["--markdown", str(out)])["markdown"]
    lines = text.splitlines()
    title = "PPO CartPole-v1 4 x 8; median (range) of 3 turns"
    assert f"| {title} | raw EnvPool | 1,000 (1,000-2,000) | 100% | | |" in lines
    assert "| | after | 950 (900-1,500) | 90.0% (75.0-95.0) | 180.0% (150.0-190.0) |  |" in lines
    assert "| | after, a | 930 (880-1,861) | 88.0% (46.5-186.1) | 176.0% (93.0-372.2) |  |" in lines
    assert sum(line.startswith("| | after") for line in lines) == 3  # one row per label, not per turn
    assert "**tiny** (ms / iteration, median of 3 turns)" in lines
    assert "| after | 32 | 7.0 | 4.0 | 10.0 |" in lines  # the phases' medians
    readme = results_tables.render(["trainer", str(out), "--cells", "readme"])
    assert "| | after | 950 (900-1,500) | 90.0% (75.0-95.0) |" in readme and "after, a" not in readme


def test_one_turn_keeps_the_single_run_layout(tmp_path, monkeypatch):
    """--turns 1 (the default): a label's entry is its run, raw EnvPool's figure the case's raw, no turn keys."""
    monkeypatch.setitem(cases.CASES, "tiny", TINY)
    fake = FakeRuns(monkeypatch)
    default = script.main(["--cases", "tiny", "--out", str(tmp_path / "a.json")])["cases"]
    assert fake.calls == ["raw", "--after", "--a", "--b"]
    one = script.main(["--cases", "tiny", "--turns", "1", "--out", str(tmp_path / "b.json")])["cases"]
    assert one == default and list(one["tiny"]) == ["trainer", "env_id", "num_envs", "num_steps", "raw", "runs"]
    assert one["tiny"]["raw"] == fake.raw(None, 0)
    after = fake.run(ROOT, TINY, ("--after",), None, 0)
    assert one["tiny"]["runs"]["after"] == {**after, "vs_raw": 0.5, "rollout_vs_raw": 1.0}
    assert list(one["tiny"]["runs"]["after"])[-2:] == ["vs_raw", "rollout_vs_raw"]


def test_later_turns_and_variants_wait_for_the_budget(tmp_path, monkeypatch):
    """Turn 1's after always runs; past --time-budget nothing else starts, each skipped turn saying so."""
    monkeypatch.setitem(cases.CASES, "tiny", TINY)
    fake = FakeRuns(monkeypatch, seconds_per_run=1.0)
    out = tmp_path / "t.json"
    case = script.main(["--cases", "tiny", "--turns", "2", "--time-budget", "0", "--out", str(out)])["cases"]["tiny"]
    assert fake.calls == ["raw", "--after"]
    after, a = case["runs"]["after"], case["runs"]["after, a"]
    assert [run.get("error") for run in after["turns"]] == [None, "skipped: past the 0.0 s budget"]
    assert after["sps_median"] == 500.0 and len(case["raw"]["turns"]) == 1
    assert a["error"] == "skipped: past the 0.0 s budget"
    text = script.main(["--markdown", str(out)])["markdown"]
    assert "| | after (1 of 2 turns) | 500 (500-500) |" in text and "after, a" not in text


def test_the_default_budget_is_400_s_a_turn(tmp_path, monkeypatch):
    monkeypatch.setitem(cases.CASES, "tiny", dataclasses.replace(TINY, variants=TINY.variants[:1]))
    fake = FakeRuns(monkeypatch, seconds_per_run=300.0)  # 2 turns: 800 s; the 4th run would start at 900 s
    case = script.main(["--cases", "tiny", "--turns", "2", "--out", str(tmp_path / "t.json")])["cases"]["tiny"]
    assert fake.calls == ["raw", "--after", "--a", "raw", "--after"]
    assert case["runs"]["after, a"]["turns"][1]["error"] == "skipped: past the 800.0 s budget"


def test_turns_must_be_positive(tmp_path):
    with pytest.raises(SystemExit, match="--turns must be at least 1"):
        script.main(["--cases", "ppo-cartpole", "--turns", "0", "--out", str(tmp_path / "t.json")])


def test_the_committed_torchrun_result_renders_a_row_per_run():
    """Results written before turns were one entry per label (``after (2)``) render as they did."""
    results = json.loads((ROOT / "docs" / "results" / "torchrun_overhead.json").read_text())
    text = tables.markdown(results)
    runs = results["cases"]["ppo-cartpole-torchrun1"]["runs"]
    for label, run in runs.items():
        assert f"| | {label} | {run['sps']:,.0f} | {100 * run['vs_raw']:.0f}% |" in text
    pairs = ", ".join(f"{r:.3f}" for r in results["cases"]["ppo-cartpole-torchrun1"]["torchrun_vs_plain_pairs"]["1"])
    assert f"(each turn: {pairs})" in tables.table(results)


def test_the_update_microbench_times_the_ppo_trainers_loss_with_the_presets_coefficients(monkeypatch):
    ppo = load_script("ppo")  # the trainer program the microbenchmark loads (rltrain.trainer_process)
    presets, real = [], ppo.minibatch_loss
    monkeypatch.setattr(ppo, "minibatch_loss", lambda args, *a: (presets.append(args), real(args, *a))[1])
    monkeypatch.setattr(update, "UPDATE_VARIANTS", (("eager", update.UpdateVariant(deterministic=False)),
                                               ("graph", update.UpdateVariant(graphed=True))))
    out = update.update_microbench((4, 84, 84), 6, minibatch=4, minibatches=2, epochs=1, repeats=1, warmup=0)
    assert out["eager"]["update_ms"] > 0 and out["eager"]["steps"] == 2
    assert "CUDA" in out["graph"]["error"]  # recorded, not raised: the other variants still run
    preset = ppo.cli(["--config", str(ROOT / "configs" / "atari.yaml")])
    assert len(presets) == 2 and all(a == preset for a in presets)


# ---------------------------------------------------------------------------- ppo-atari-overlap
def test_an_overlapped_run_counts_the_collector_threads_rollouts():
    """--overlap-rollout: the rollout's steps/s are those of the collector thread (perf/overlapped/rollout_s),
    over the iterations that collected one beside their update (the last starts none); the main thread's
    rollout phases (the wait for it) are not the rollout's time."""
    case = cases.Case("ppo", "Pong-v5", num_envs=4, num_steps=10, warmup=1, timed=3)
    rows = [{"global_step": 40 * i, "time": float(i), "perf/iteration_s": 1.0, "perf/rollout_s": 0.1,
             "perf/rollout/wait_s": 0.1, "perf/update_s": 0.9} for i in range(1, 5)]
    for row in rows[:-1]:
        row.update({"perf/overlapped/rollout_s": 0.8, "perf/overlapped/rollout/env_s": 0.8})
    out = runs.summarize(case, rows)
    assert out["sps"] == pytest.approx(120 / 3.0)
    assert out["rollout_sps"] == pytest.approx(2 * 40 / 1.6)  # iterations 2 and 3 collected one, 0.8 s each
    assert out["phases_ms"]["overlapped/rollout/env"] == pytest.approx(800 * 2 / 3)
    phases = sorted(out["phases_ms"], key=tables.phase_order)
    assert phases == ["rollout", "rollout/wait", "update", "overlapped/rollout", "overlapped/rollout/env"]
    assert [tables.is_group(p) for p in phases] == [True, False, True, True, False]


def test_the_overlap_case_takes_turns_with_the_synchronous_preset(tmp_path, monkeypatch):
    """Each turn: raw EnvPool, the preset as it is, the preset with --overlap-rollout; three turns by default."""
    fake = FakeRuns(monkeypatch)
    result = script.main(["--cases", "ppo-atari-overlap", "--out", str(tmp_path / "t.json")])
    case = result["cases"]["ppo-atari-overlap"]
    assert fake.calls == ["raw", "", "--overlap-rollout"] * 3
    assert list(case["runs"]) == ["after", "after, --overlap-rollout"] and case["num_turns"] == 3
    overlap = cases.CASES["ppo-atari-overlap"]
    assert overlap.flags == ("--config", "configs/atari.yaml") and (overlap.num_envs, overlap.num_steps) == (1024, 32)
    assert overlap.warmup >= 3  # the synchronous first two iterations of an overlapped run are left out
    assert cases.quick_case(overlap).variants == overlap.variants  # the --quick version runs the overlap too


@pytest.mark.slow
def test_quick_overlap_case_end_to_end(tmp_path):
    """The tiny Pong-v5 version on the CPU (a minute and more): both trainer runs read back, the overlapped one's
    collector-thread phases in its phase row after the main thread's."""
    out = tmp_path / "overlap.json"
    result = script.main(["--quick", "--cases", "ppo-atari-overlap", "--turns", "1", "--out", str(out)])
    entries = result["cases"]["ppo-atari-overlap"]["runs"]
    assert set(entries) == {"after", "after, --overlap-rollout"}
    for label, run in entries.items():
        assert "error" not in run, (label, run.get("error"))
        assert run["sps"] > 0 and run["rollout_sps"] > 0
    assert "overlapped/rollout/env" in entries["after, --overlap-rollout"]["phases_ms"]
    assert "overlapped/rollout" not in entries["after"]["phases_ms"]
    header = next(line for line in script.main(["--markdown", str(out)])["markdown"].splitlines()
                  if line.startswith("| run | steps / iteration |"))
    assert header.index("**update**") < header.index("**overlapped/rollout**") < header.index("**iteration**")
