"""The Atari suite (scripts/atari_suite.py) on the CPU: the human-normalised arithmetic and the Atari-5
estimate on known inputs, the time budget of rltrain.trainer_process on a stand-in trainer, a suite
that goes on game by game across invocations (a finished game skipped, an interrupted one resumed from
its checkpoint), its results and table from synthetic curves, and bad input."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import load_script
from rltrain import atari_scores
from rltrain.atari_scores import ATARI5, atari5_median, cleanrl_ppo_10m, human_normalized
from rltrain.atari_suite import SuiteState
from rltrain.bench import tables as results_tables
from rltrain.config import ConfigError, exit_on_config_error
from rltrain.trainer_process import TimedRun, train_for

ROOT = Path(__file__).resolve().parents[1]
suite = load_script("atari_suite")

# the five coefficients of the Atari-5 regression, as the data file gives them
COEFFICIENTS = {"BattleZone": 0.3819751237831753, "DoubleDunk": 0.0679099488887574,
                "NameThisGame": 0.310804148620847, "Phoenix": 0.12412619402774641, "Qbert": 0.08048518286466755}


def test_the_reference_table_covers_the_57_games_as_envpool_names_them():
    import envpool

    ids = set(envpool.list_all_envs())
    assert len(atari_scores.GAMES) == 57 and all(f"{g}-v5" in ids for g in atari_scores.GAMES)
    assert atari_scores.ATARI5 == ("BattleZone", "DoubleDunk", "NameThisGame", "Phoenix", "Qbert")
    assert atari_scores.reference()["atari5"]["coefficients"] == COEFFICIENTS
    assert all(cleanrl_ppo_10m(g)["source"].startswith("https://docs.cleanrl.dev/") for g in atari_scores.GAMES)


def test_human_normalised_scores():
    # random 0, human 1 (Pong: random -20.7, human 14.6); halfway (Qbert: 163.9 and 13455.0)
    assert human_normalized("Pong", -20.7) == 0.0 and human_normalized("Pong", 14.6) == pytest.approx(1.0)
    assert human_normalized("Qbert", 163.9 + 0.5 * (13455.0 - 163.9)) == pytest.approx(0.5)
    # CleanRL's published human-normalised scores of its returns (ppo_atari_envpool_xla_jax, atari_hns.md)
    assert human_normalized("BattleZone", 24937.9) == pytest.approx(0.648278, abs=1e-6)
    assert human_normalized("DoubleDunk", -8.56781) == pytest.approx(4.56009, abs=1e-5)  # 10.03219 / 2.2
    assert human_normalized("DoubleDunk", -19.7) == pytest.approx(-0.5)  # below random: negative
    with pytest.raises(KeyError, match="Qbertt"):
        human_normalized("Qbertt", 1.0)


def test_atari5_estimate_on_known_inputs():
    """log10(1 + M) = sum c_g log10(1 + max(100 h_g, 0)), M in percent."""
    # every game at 0.99: each log10(1 + 99) = 2, so M = 10 ** (2 * 0.9653005981851935) - 1 = 84.2317...%
    assert sum(COEFFICIENTS.values()) == pytest.approx(0.9653005981851935, abs=1e-15)
    assert atari5_median(dict.fromkeys(ATARI5, 0.99)) == pytest.approx(0.842317089421, rel=1e-9)
    # BattleZone alone (a score below random counts as random): 10 ** (2 * 0.38197512378) - 1 = 4.80698%
    only = {"BattleZone": 0.99, "DoubleDunk": 0.0, "NameThisGame": -0.5, "Phoenix": 0.0, "Qbert": 0.0}
    assert atari5_median(only) == pytest.approx(0.0480697889418, rel=1e-9)
    assert atari5_median(dict.fromkeys(ATARI5, 0.0)) == 0.0  # no intercept: random play estimates 0
    # Rainbow's scores on the five (its paper's no-op table, the Atari-5 repository's RAINBOW (fixed).csv):
    # within the model's 10.4% of Rainbow's published 57-game median, 223%
    rainbow = {"BattleZone": 62010, "DoubleDunk": -0.3, "NameThisGame": 13136, "Phoenix": 108528.6, "Qbert": 33817.5}
    estimate = atari5_median({g: human_normalized(g, s) for g, s in rainbow.items()})
    assert abs(estimate / 2.23 - 1) < 0.104
    with pytest.raises(ValueError, match="missing: Qbert"):
        atari5_median({g: 1.0 for g in ATARI5 if g != "Qbert"})


# ----------------------------------------------------------------------------- the time budget

FAKE_TRAINER = textwrap.dedent('''
    """Stands in for a trainer: one metrics row per 0.05 s, one training second each; on SIGINT it
    writes its checkpoint and exits 0, as the trainers do."""
    import json, os, pathlib, signal, sys, time
    run = pathlib.Path(sys.argv[1]); rows = int(sys.argv[2]); run.mkdir(parents=True, exist_ok=True)
    (run / "pid").write_text(str(os.getpid()))
    stop = []
    signal.signal(signal.SIGINT, lambda *a: stop.append(1))
    with open(run / "metrics.jsonl", "a") as f:
        for i in range(1, rows + 1):
            f.write(json.dumps({"charts/iteration": i, "charts/wall_s": float(i)}) + "\\n"); f.flush()
            if stop:
                (run / "latest.pt").write_text(str(i)); sys.exit(0)
            time.sleep(0.05)
''')


def test_train_for_stops_the_trainer_at_its_budget_with_a_checkpoint(tmp_path):
    script = tmp_path / "trainer.py"
    script.write_text(FAKE_TRAINER)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text('{"charts/wall_s": 99.0}\n')  # an earlier segment's row
    seen = []
    metrics = run_dir / "metrics.jsonl"
    done = train_for([sys.executable, str(script), str(run_dir), "1000"], 5.0, lambda: metrics, tmp_path / "log.txt",
                     on_row=seen.append, offset=metrics.stat().st_size, stop_signal=signal.SIGINT, poll_s=0.05)
    # rows within the budget went to on_row; the first past it (6 s) stopped the trainer, which
    # checkpointed at the iteration it was in and exited 0
    assert [r["charts/wall_s"] for r in seen] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert done.past_budget and done.returncode == 0 and done.last_wall_s == 6.0 and done.metrics == metrics
    assert int((run_dir / "latest.pt").read_text()) >= 6


def test_train_for_lets_a_trainer_that_ends_first_end(tmp_path):
    script = tmp_path / "trainer.py"
    script.write_text(FAKE_TRAINER)
    metrics = tmp_path / "run" / "metrics.jsonl"
    done = train_for([sys.executable, str(script), str(metrics.parent), "3"], 60.0, lambda: metrics,
                     tmp_path / "log.txt", poll_s=0.05)
    assert not done.past_budget and done.returncode == 0 and done.last_wall_s == 3.0
    assert not (metrics.parent / "latest.pt").exists()


def test_a_trainer_whose_suite_is_killed_stops_with_a_checkpoint(tmp_path):
    """The process running train_for dies by SIGKILL (a device's time limit): its trainer gets the parent
    death signal (SIGINT), writes its checkpoint and ends, rather than training on unwatched."""
    script = tmp_path / "trainer.py"
    script.write_text(FAKE_TRAINER)
    run_dir = tmp_path / "run"
    parent = textwrap.dedent(f'''
        import os, signal, sys
        from pathlib import Path
        from rltrain.trainer_process import train_for
        metrics = Path({str(run_dir)!r}) / "metrics.jsonl"
        def on_row(row):
            if row["charts/wall_s"] >= 3:
                os.kill(os.getpid(), signal.SIGKILL)
        train_for([sys.executable, {str(script)!r}, {str(run_dir)!r}, "100000"], 1e9, lambda: metrics,
                  Path({str(tmp_path / "log.txt")!r}), on_row=on_row, poll_s=0.05, stop_signal=signal.SIGINT,
                  parent_death_signal=signal.SIGINT)
    ''')
    done = subprocess.run([sys.executable, "-c", parent], cwd=ROOT, timeout=60)
    try:
        assert done.returncode == -signal.SIGKILL
        deadline = time.monotonic() + 20
        while not (run_dir / "latest.pt").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        rows = (run_dir / "metrics.jsonl").read_text().count("\n")
        time.sleep(0.3)
        assert (run_dir / "latest.pt").exists() and (run_dir / "metrics.jsonl").read_text().count("\n") == rows
    finally:
        try:  # a trainer left running fails the test above; it does not outlive it
            os.kill(int((run_dir / "pid").read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass


# ----------------------------------------------------------------------------- a suite across invocations

ROW_S, STEPS_PER_S = 16.0, 20_000  # a row every 16 training seconds, 20k env steps a second
# each game's average return against training seconds w
CURVES = {"BattleZone-v5": lambda w: 50.0 * w, "DoubleDunk-v5": lambda w: -18.6 + 0.02 * w,
          "NameThisGame-v5": lambda w: 5.0 * w, "Phoenix-v5": lambda w: 20.0 * w, "Qbert-v5": lambda w: 30.0 * w}


class FakeTrainings:
    """Stands in for ``train_for``: writes the run folder a trainer writes (args.json, a metrics row every
    16 training seconds, checkpoints/latest.pt) per ``plans[env_id]``: ``budget`` (rows to the first one
    past the budget), ``interrupt`` (rows to 40% of the budget, a checkpoint 4 rows before the last,
    then Ctrl-C), ``fail`` (exit 3)."""

    def __init__(self, plans, seed_gain=0.0):
        self.plans, self.calls, self.seed_gain = plans, [], seed_gain  # seed s: the curve x (1 + gain (s - 1))

    def __call__(self, cmd, budget_s, find_metrics, log_path, **kwargs):
        flags = list(cmd[2:])
        self.calls.append(flags)

        def value(flag):
            return flags[flags.index(flag) + 1]
        if "--resume" in flags:
            ckpt = Path(value("--resume"))
            saved = json.loads(ckpt.read_text())
            run_dir, env_id, start, seed = ckpt.parent.parent, saved["env_id"], saved["iteration"] + 1, saved["seed"]
        else:
            env_id, start, seed = value("--env-id"), 1, int(value("--seed"))
            run_dir = Path(value("--runs-dir")) / f"{env_id}__{value('--exp-name')}__{value('--seed')}__1000"
            run_dir.mkdir(parents=True)
            (run_dir / "args.json").write_text(json.dumps({"env_id": env_id, "exp_name": value("--exp-name"),
                                                           "seed": int(value("--seed"))}))
        metrics = find_metrics()  # the suite records the run folder
        assert metrics == run_dir / "metrics.jsonl"
        plan = self.plans[env_id]
        gain = 1.0 + self.seed_gain * (seed - 1)
        i = start
        with open(metrics, "a") as f:
            while True:
                wall = ROW_S * i
                f.write(json.dumps({"charts/iteration": i, "global_step": int(STEPS_PER_S * wall),
                                    "charts/wall_s": wall,
                                    "charts/avg_episodic_return": CURVES[env_id](wall) * gain}) + "\n")
                if wall > (budget_s if plan == "budget" else 0.4 * budget_s):
                    break
                i += 1
        (run_dir / "checkpoints").mkdir(exist_ok=True)
        kept = i - 4 if plan == "interrupt" else i
        saved = {"env_id": env_id, "iteration": kept, "seed": seed}
        (run_dir / "checkpoints" / "latest.pt").write_text(json.dumps(saved))
        if plan == "interrupt":
            raise KeyboardInterrupt
        return TimedRun(3 if plan == "fail" else 0, metrics, plan == "budget", ROW_S * i)


def _args(tmp_path, **kw):
    return suite.Args(**{"suite_dir": str(tmp_path / "suites"), "name": "s", "plots": False, **kw})


def test_a_suite_skips_finished_games_and_resumes_an_interrupted_one(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # the preset's path is relative to the folder the suite runs in
    first = FakeTrainings({"BattleZone-v5": "budget", "DoubleDunk-v5": "interrupt"})
    monkeypatch.setattr(suite, "train_for", first)
    with pytest.raises(KeyboardInterrupt):
        suite.main(_args(tmp_path, games=["BattleZone", "DoubleDunk-v5", "Qbert"]))
    state = SuiteState.load(tmp_path / "suites" / "s")
    entries = {e["env_id"]: e for e in state.entries()}
    assert entries["BattleZone-v5"]["status"] == "done" and entries["BattleZone-v5"]["ended"] == "budget"
    assert entries["DoubleDunk-v5"]["status"] == "interrupted" and "Qbert-v5" not in entries
    interrupted_ckpt = Path(entries["DoubleDunk-v5"]["run_dir"]) / "checkpoints" / "latest.pt"
    assert interrupted_ckpt.is_file()
    assert state.data["config"] == "configs/atari.yaml" and state.data["checkpoint_every"] == 20

    second = FakeTrainings({"DoubleDunk-v5": "budget", "Qbert-v5": "budget"})
    monkeypatch.setattr(suite, "train_for", second)
    doc = suite.main(_args(tmp_path, games=["BattleZone", "DoubleDunk", "Qbert"]))
    out = capsys.readouterr().out
    # BattleZone is not trained again; DoubleDunk goes on from its checkpoint; Qbert starts
    assert [c[:2] for c in second.calls] == [["--resume", str(interrupted_ckpt)], ["--config", "configs/atari.yaml"]]
    assert "[1/3] BattleZone-v5 seed 1: done (" in out and "skipped" in out
    assert "[2/3] DoubleDunk-v5 seed 1: continuing from" in out
    entries = {e["env_id"]: e for e in SuiteState.load(tmp_path / "suites" / "s").entries()}
    assert all(e["status"] == "done" for e in entries.values())
    outcomes = [s["outcome"] for s in entries["DoubleDunk-v5"]["segments"]]
    assert outcomes == ["interrupted", "budget"]
    # the resumed curve: one row per iteration (the 4 rows after the checkpoint logged again), 16 s apart
    (double,) = [r for r in doc["runs"] if r["env_id"] == "DoubleDunk-v5"]
    assert double["curve"]["wall_s"] == [ROW_S * i for i in range(1, 39)]
    assert double["return_at_min"]["10"] == pytest.approx(-18.6 + 0.02 * 592)  # the last row by 600 s: 592 s
    assert (tmp_path / "suites" / "s" / "atari_suite.json").is_file()
    # a third call trains nothing
    third = FakeTrainings({})
    monkeypatch.setattr(suite, "train_for", third)
    suite.main(_args(tmp_path, games=["BattleZone", "DoubleDunk", "Qbert"]))
    assert third.calls == []


def test_a_failed_game_is_reported_and_the_next_game_still_trains(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    fake = FakeTrainings({"Phoenix-v5": "fail", "Qbert-v5": "budget"})
    monkeypatch.setattr(suite, "train_for", fake)
    doc = suite.main(_args(tmp_path, games=["Phoenix", "Qbert"]))
    assert [r["status"] for r in doc["runs"]] == ["failed", "done"]
    assert "Phoenix-v5 seed 1: failed (exit 3" in capsys.readouterr().err


def test_the_results_and_table_of_a_synthetic_suite(tmp_path, monkeypatch):
    """The Atari-5 for 10 minutes, curves of known slope: the returns at 2, 5 and 10 minutes are the rows
    at 112, 288 and 592 s (the last at or before each), the run stopped at its first row past 600 s (608 s)."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(suite, "train_for", FakeTrainings(dict.fromkeys(CURVES, "budget")))
    suite.main(_args(tmp_path, out=str(tmp_path / "results" / "atari_suite.json")))
    path = tmp_path / "results" / "atari_suite.json"
    doc = json.loads(path.read_text())
    (battle,) = [r for r in doc["runs"] if r["game"] == "BattleZone"]
    assert battle["return_at_min"] == {"2": 5600.0, "5": 14400.0, "10": 29600.0}  # 50 x 112, 288, 592
    assert battle["human_normalized"] == pytest.approx((29600 - 2360) / (37187.5 - 2360))
    assert battle["env_steps"] == 20_000 * 608 and battle["steps_per_s"] == pytest.approx(20_000)
    assert battle["minutes"] == pytest.approx(608 / 60)
    # CleanRL's 24283.75: 50 w >= 24283.75 from w = 485.7 s, the row at 496 s
    assert battle["cleanrl_ppo_10m"] == 24283.75 and battle["minutes_to_cleanrl"] == pytest.approx(496 / 60)
    (name,) = [r for r in doc["runs"] if r["game"] == "NameThisGame"]
    assert name["minutes_to_cleanrl"] is None  # 5 x 592 = 2960 < 5750
    # Atari-5 from the five normalised scores at 592 s: BattleZone 0.78214, DoubleDunk 11.84 / 2.2 = 5.38182,
    # NameThisGame 667.7 / 5756.7 = 0.11599, Phoenix 11078.6 / 6481.2 = 1.70934, Qbert 17596.1 / 13291.1 = 1.32390
    assert doc["atari5"]["estimate"] == pytest.approx(0.492690432, rel=1e-8) and doc["atari5"]["missing"] == []
    assert {"device_name", "cpu_cores", "torch", "envpool", "date"} <= set(doc["meta"])
    assert doc["suite"]["commands"][0].startswith("python scripts/atari_suite.py --name s --suite-dir ")
    assert battle["commands"][0].startswith("python scripts/ppo.py --config configs/atari.yaml --env-id BattleZone-v5")
    table = results_tables.main(["atari-suite", str(path)]) == 0
    text = results_tables.atari_suite_table(path)
    assert table and text.splitlines()[0].startswith(doc["meta"]["device_name"])
    rows = {line.split(" | ")[0][2:]: line for line in text.splitlines() if line.startswith("| ") and "---" not in line}
    assert rows["BattleZone"] == ("| BattleZone | 1/1 | 10.1 | 12.2M | 20.0k | 5600 | 14400 | 29600 | 78% | 24284 "
                                  "| 8.3 (1/1) |")
    assert rows["DoubleDunk"] == ("| DoubleDunk | 1/1 | 10.1 | 12.2M | 20.0k | -16.4 | -12.8 | -6.8 | 538% | -6.8 "
                                  "| 9.9 (1/1) |")
    assert rows["NameThisGame"].endswith("| 2960 | 12% | 5750 | never (0/1) |")
    assert "Atari-5 estimate of the 57-game median human-normalised score: **49%**." in text


def test_several_seeds_are_summarised_by_their_median(tmp_path, monkeypatch):
    """BattleZone, seed 1 at 50 w and seed 2 at 55 w: 29600 and 32560 at 592 s, median 31080 (human-normalised
    0.78214 and 0.86713, median 0.82464); CleanRL's 24283.75 reached at 496 s and 448 s (55 w >= 24283.75
    from w = 441.5 s), median 7.87 minutes."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(suite, "train_for", FakeTrainings({"BattleZone-v5": "budget"}, seed_gain=0.1))
    doc = suite.main(_args(tmp_path, games=["BattleZone"], seeds=[1, 2]))
    (game,) = doc["games"]
    assert game["return_at_min"]["10"] == pytest.approx(31080)
    assert game["return_at_budget_range"] == pytest.approx([29600, 32560])
    assert game["minutes_to_cleanrl"] == {"reached": "2/2", "median": pytest.approx((496 + 448) / 120)}
    assert "| 5880 | 15120 | 31080 (29600 to 32560) | 82% | 24284 | 7.9 (2/2) |" in suite.markdown(doc)
    assert doc["atari5"]["estimate"] is None and doc["atari5"]["missing"] == ["DoubleDunk", "NameThisGame",
                                                                                "Phoenix", "Qbert"]


def test_the_learning_curves_are_drawn(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(suite, "train_for", FakeTrainings({"Pong-v5": "budget"}))
    CURVES["Pong-v5"] = lambda w: -21.0 + 0.05 * w
    try:
        doc = suite.main(suite.Args(suite_dir=str(tmp_path), name="p", games=["Pong"], budget_min=2.0))
    finally:
        del CURVES["Pong-v5"]
    png = Path(doc["plot"])
    assert png == tmp_path / "p" / "atari_suite.png" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ----------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("kw, message", [
    (dict(games=["Qbertt"]), "error: --games: unknown game 'Qbertt' (neither one of the 57 Atari games nor an "
                             "EnvPool task). Did you mean: Qbert"),
    (dict(budget_min=0.0), "error: --budget-min must be a number of minutes > 0, got 0.0"),
    (dict(budget_min=math.nan), "error: --budget-min must be a number of minutes > 0, got nan"),
    (dict(seeds=[1, 1]), "error: --seeds: give each seed once, got [1, 1]"),
    (dict(extra=["--env-id", "Pong-v5"]), "error: --extra: --env-id is set by the suite"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, monkeypatch, capsys, kw, message):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(suite, "train_for", FakeTrainings({}))
    with pytest.raises(SystemExit) as e:
        exit_on_config_error(lambda: suite.main(_args(tmp_path, **kw)))
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(message) and err.count("\n") == 1


def test_extra_trainer_flags_add_up():
    import tyro

    args = tyro.cli(suite.Args, args=["--extra=--num-envs", "--extra=2048", "--games", "Pong", "Qbert"])
    assert args.extra == ["--num-envs", "2048"] and args.games == ["Pong", "Qbert"]
    assert suite.fresh_flags(args, "Pong-v5", 1, Path("r"))[-2:] == ["--num-envs", "2048"]


def test_a_suite_keeps_its_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(suite, "train_for", FakeTrainings({"Pong-v5": "budget"}))
    CURVES["Pong-v5"] = lambda w: 0.0
    try:
        suite.main(_args(tmp_path, games=["Pong"], budget_min=1.0))
    finally:
        del CURVES["Pong-v5"]
    with pytest.raises(ConfigError, match="suite 's' was started with --budget-min 1.0, not 2.0"):
        suite.main(_args(tmp_path, games=["Pong"], budget_min=2.0))
    with pytest.raises(ConfigError, match="no suite in"):
        suite.main(_args(tmp_path, name="other", summarize_only=True))


def test_the_command_line_rejects_a_bad_budget_in_one_line():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "atari_suite.py"), "--budget-min", "-5"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and done.stderr == "error: --budget-min must be a number of minutes > 0, got -5.0\n"


@pytest.mark.slow
def test_a_real_suite_stopped_and_resumed_trains_to_its_budget(tmp_path):
    """PPO on CartPole-v1 for 12 training seconds: Ctrl-C mid-run keeps a checkpoint; the same command
    goes on from it to the budget."""
    cmd = [sys.executable, str(ROOT / "scripts" / "atari_suite.py"), "--games", "CartPole-v1", "--config",
           "configs/classic_control.yaml", "--budget-min", "0.2", "--suite-dir", str(tmp_path), "--name", "cp",
           "--checkpoint-every", "2", "--extra=--total-timesteps", "--extra=10000000", "--no-plots"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        found = list(tmp_path.glob("cp/runs/*/checkpoints/latest.pt"))
        if found:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "suite stopped" in err
    (entry,) = SuiteState.load(tmp_path / "cp").entries()
    assert entry["status"] == "interrupted"
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (run,) = json.loads((tmp_path / "cp" / "atari_suite.json").read_text())["runs"]
    assert run["status"] == "done" and run["ended"] == "budget" and run["commands"][1].startswith(
        "python scripts/ppo.py --resume ")
    walls = run["curve"]["wall_s"]
    assert walls == sorted(walls) and walls[-1] > 12.0 and run["return_at_min"]["0.2"] is not None
