"""The hyperparameter search (scripts/search_hparams.py) end to end on the CPU: --quick runs three tiny
CartPole trials of the real trainer, stores them in a journal that a second call reads back, and
writes the best trials with a scripts/ppo.py command."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
search = load_script("search_hparams")


@pytest.mark.slow
def test_quick_search_stores_trials_and_writes_the_best(tmp_path):
    pytest.importorskip("optuna")
    best = tmp_path / "best.json"
    doc = search.main(search.Args(quick=True, study_dir=str(tmp_path / "search"), write_best=True,
                                  best_out=str(best)))
    counts = doc["trials"]
    assert counts["complete"] + counts["pruned"] + counts["fail"] == 3 and counts["complete"] >= 1
    written = json.loads(best.read_text())
    top = written["best"][0]
    assert top["value"] == max(t["value"] for t in written["best"]) and top["value"] > 0
    # what the return is read against: the steps trained by then, at the host's speed
    assert 0 < top["return_at_s"] <= 4.0 and top["steps"] > 0
    assert top["steps_per_s"] == pytest.approx(top["steps"] / top["return_at_s"], rel=0.01) and top["cpu_model"]
    assert top["command"].startswith("python scripts/ppo.py --config configs/classic_control.yaml")
    assert f"--minibatch-size {top['params']['minibatch_size']}" in top["command"]
    assert set(written["space"]) == set(search.QUICK_SPACE) and written["budget_s"] == 4.0
    assert {"device_name", "driver", "cuda", "torch", "triton", "date"} <= set(written["meta"])
    # each trial trained the real trainer for the budget: its metrics stop at about 4 training seconds
    trial_runs = sorted((tmp_path / "search" / "quick").glob("trial_*/runs/*/metrics.jsonl"))
    assert len(trial_runs) == 3
    # the machine written is the one the trials trained on (their machine.json), not the reader's
    trained_on = [json.loads((m.parent / "machine.json").read_text())[-1] for m in trial_runs]
    assert written["meta"]["date"] in {m["date"] for m in trained_on}
    assert top["device_name"] == trained_on[0]["device_name"]
    # the journal is the study: read back without running a trial
    again = subprocess.run([sys.executable, str(ROOT / "scripts" / "search_hparams.py"), "--quick", "--trials", "0",
                            "--study-dir", str(tmp_path / "search")], capture_output=True, text=True,
                           timeout=300, cwd=ROOT)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"best: trial {top['number']}, return {top['value']:.2f}" in again.stdout
    # rewritten from the journal: each trial's command stays the one it ran, --reproduce adds the command
    # today's trainer needs beside it, and a later rewrite without --reproduce keeps that
    read_back = dict(quick=True, trials=0, study_dir=str(tmp_path / "search"), write_best=True, best_out=str(best))
    search.main(search.Args(**read_back, reproduce="--no-cuda-graphs"))
    search.main(search.Args(**read_back))
    for trial, before in zip(json.loads(best.read_text())["best"], written["best"]):
        assert trial["command"] == before["command"] and trial["reproduce"] == before["command"] + " --no-cuda-graphs"


def test_reproduce_commands_are_kept_for_the_same_trials_of_the_same_study():
    previous = {"study": "s", "best": [{"number": 3, "command": "python a", "reproduce": "python a --x"}]}

    def doc(study="s"):
        return {"study": study, "best": [{"number": 3, "command": "python a"}, {"number": 5, "command": "python b"}]}

    kept = search.with_reproduce(doc(), "", previous)["best"]
    assert kept == [{"number": 3, "command": "python a", "reproduce": "python a --x"}, {"number": 5, "command": "python b"}]
    assert "reproduce" not in search.with_reproduce(doc("other"), "", previous)["best"][0]
    given = search.with_reproduce(doc(), "--y", previous)["best"]
    assert [t["reproduce"] for t in given] == ["python a --y", "python b --y"]


def test_a_to_score_trial_gets_a_reproduce_command_per_game():
    """--objective to-score lists each game's command: each gets its own reproduce command, kept per game."""
    def doc():
        return {"study": "s", "best": [{"number": 2, "games": {"Pong-v5": {"command": "python p"},
                                                               "Breakout-v5": {"command": "python b"}}}]}

    games = search.with_reproduce(doc(), "--y")["best"][0]["games"]
    assert {g: e["reproduce"] for g, e in games.items()} == {"Pong-v5": "python p --y", "Breakout-v5": "python b --y"}
    previous = {"study": "s", "best": [{"number": 2, "games": {"Pong-v5": {"command": "python p",
                                                                           "reproduce": "python p --x"}}}]}
    games = search.with_reproduce(doc(), "", previous)["best"][0]["games"]
    assert games["Pong-v5"]["reproduce"] == "python p --x" and "reproduce" not in games["Breakout-v5"]
    assert "reproduce" not in search.with_reproduce(doc(), "")["best"][0]  # no command of its own


def test_extra_trainer_flags_add_up():
    """One trainer flag or value per --extra, in order (a later --extra does not replace an earlier)."""
    import tyro

    args = tyro.cli(search.Args, args=["--extra=--ca-backend", "--extra=triton"])
    assert args.extra == ["--ca-backend", "triton"] and search.trial_flags(args, {})[-2:] == ["--ca-backend", "triton"]


@pytest.mark.parametrize("trainer", ["ppo", "impala"])
def test_every_value_of_the_space_is_a_flag_of_the_trainer(trainer):
    """The lowest and the highest value of each searched flag parse and land in the trainer's Args."""
    args = search.Args(trainer=trainer, num_envs=2048)
    space = search.SPACES[trainer]
    for pick in (0, -1):
        values = {k: (v[1][pick] if v[0] == "categorical" else v[1 if pick == 0 else 2]) for k, v in space.items()}
        flags = search.trial_flags(args, values, config=str(ROOT / search.PRESETS[trainer]))
        parsed = load_script(trainer).cli(flags)
        assert parsed.num_envs == 2048 and parsed.env_id == "Pong-v5"
        assert {k: getattr(parsed, k) for k in values} == values
    assert search.trial_flags(args, values)[:2] == ["--config", search.PRESETS[trainer]]


@pytest.mark.parametrize("trainer", ["ppo", "impala"])
def test_a_new_study_starts_from_the_atari_preset(trainer):
    """The Atari presets lie in their trainer's space, so a new search's first trial is the preset."""
    args = search.Args(trainer=trainer)
    config = str(ROOT / search.PRESETS[trainer])
    start = search.preset_values(load_script(trainer), args, config, search.SPACES[trainer])
    preset = load_script(trainer).cli(["--config", config])
    assert start is not None and start == {k: getattr(preset, k) for k in search.SPACES[trainer]}
    narrow = dict(search.SPACES[trainer], learning_rate=("float", 10 * preset.learning_rate, 1.0, True))
    assert search.preset_values(load_script(trainer), args, config, narrow) is None


def _processes_naming(text: str) -> list:
    """Pids of live processes whose command line holds ``text`` (Linux /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:  # the process ended meanwhile
            pass
    return found


def test_sigterm_stops_the_trial_and_stores_it_as_failed(tmp_path):
    """`timeout` or a job scheduler ending a search mid-trial: the trainer stops with it and the journal
    records the trial as failed, not as running for ever."""
    optuna = pytest.importorskip("optuna")
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    study_dir = tmp_path / "search"
    proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "search_hparams.py"), "--quick", "--trials", "1",
                             "--study-dir", str(study_dir)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not _processes_naming(str(study_dir / "quick")) and time.monotonic() < deadline:  # the trainer started
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "search stopped" in err
    assert not _processes_naming(str(study_dir))
    storage = JournalStorage(JournalFileBackend(str(study_dir / "quick.journal")))
    (trial,) = optuna.load_study(study_name="quick", storage=storage).trials
    assert trial.state == optuna.trial.TrialState.FAIL


# ------------------------------------------------------------------ --objective to-score
from rltrain.config import ConfigError  # noqa: E402
from rltrain.score_objective import BoundReporter, GameWatch, ScoreObjective, ScoreTarget, above_median  # noqa: E402
from rltrain.validation import validate  # noqa: E402

TARGETS = ("Pong-v5:20:2e6:5e6", "Breakout-v5:300:4e6:6e6")


def test_a_game_costs_its_steps_over_its_reference_or_its_budget_times_the_penalty():
    objective = ScoreObjective(tuple(ScoreTarget.parse(s) for s in TARGETS), penalty=2.0, points=10)
    assert objective.cost(0, 1.5e6) == pytest.approx(0.75)  # 1.5M / 2M
    assert objective.cost(1, None) == pytest.approx(3.0)  # never: 6M x 2 / 4M
    assert objective.total([1.5e6, 2e6]) == pytest.approx(1.25)
    assert objective.grid(1)[:2] == [(10, 0.6e6), (11, 1.2e6)] and objective.grid(1)[-1] == (19, 6e6)
    assert ScoreTarget.parse("Pong-v5:20:6.2e6:7.75e6") == ScoreTarget("Pong-v5", 20.0, 6.2e6, 7.75e6)
    for bad in ("Pong-v5:20:6e6", "Pong-v5:x:1:2", "Pong-v5:20:0:1e6"):
        with pytest.raises(ConfigError, match="--targets"):
            ScoreTarget.parse(bad)
    with pytest.raises(ConfigError, match="--penalty must be >= 1"):
        ScoreObjective(objective.targets, penalty=0.5)


def test_a_game_watch_stops_at_the_score_or_past_the_budget():
    pong = ScoreTarget.parse(TARGETS[0])
    watch = GameWatch(pong, "steps")
    rows = [{"global_step": s, "charts/wall_s": s / 1e5, "charts/avg_episodic_return": r}
            for s, r in ((1e6, 5.0), (2e6, 19.9), (3e6, 20.0), (4e6, 21.0))]
    assert [watch.feed(r) for r in rows[:3]] == [False, False, True]
    assert watch.reached_at == 3e6 and watch.steps == 3_000_000 and watch.wall_s == 30.0
    seconds = GameWatch(ScoreTarget("Pong-v5", 20.0, 10.0, 25.0), "seconds")
    assert [seconds.feed(r) for r in rows[:2]] == [False, False] and seconds.feed(rows[2])  # 30 s > 25 s budget
    assert seconds.reached_at is None and seconds.over_budget and seconds.at == 20.0


def test_the_reported_bounds_and_the_pruning_rule():
    """Pong reached at 1.5M steps (reference 2M), then Breakout short of its score at 1.2M (reference 4M):
    grid points 0.5M, 1M report 0.25, 0.5; Pong's other points its cost 0.75; Breakout's first two
    points 0.75 + 0.6/4 and 0.75 + 1.2/4."""
    objective = ScoreObjective(tuple(ScoreTarget.parse(s) for s in TARGETS), penalty=2.0, points=10)
    reports = []
    reporter = BoundReporter(objective, lambda value, step: reports.append((step, value)))
    reporter.progress(0, 0.0, 1.25e6)
    reporter.finish(0, 0.75)
    reporter.progress(1, 0.75, 1.2e6)
    reporter.progress(1, 0.75, 1.2e6)  # each point once
    assert [s for s, _ in reports] == list(range(12))
    assert [v for _, v in reports] == pytest.approx([0.25, 0.5] + [0.75] * 8 + [0.9, 1.05])
    assert above_median(2.5, [3.5, 1.25]) and not above_median(2.375, [3.5, 1.25]) and not above_median(9.0, [])


STUB_TRAINER = '''
import json, sys, time
from pathlib import Path
argv = sys.argv[1:]
flag = lambda name: argv[argv.index(name) + 1]
runs, env, lr = Path(flag("--runs-dir")), flag("--env-id"), flag("--learning-rate")
cross = json.loads(Path(sys.argv[0]).with_name("curves.json").read_text())[env][lr]
score = {"Pong-v5": 20.0, "Breakout-v5": 300.0}[env]
(runs.parent / "argv.json").write_text(json.dumps(argv))
(runs / "run").mkdir(parents=True)
with open(runs / "run" / "metrics.jsonl", "w") as f:
    for i in range(1, 41):  # 250k steps and one training second an iteration
        ret = score + 1 if cross is not None and 250_000 * i >= cross else score - 10
        f.write(json.dumps({"charts/iteration": i, "global_step": 250_000 * i, "charts/wall_s": float(i),
                            "charts/avg_episodic_return": ret}) + "\\n")
time.sleep(120)  # a trainer keeps training until the search stops it
'''


def test_to_score_runs_both_games_with_one_trials_values_and_prunes_the_slow(tmp_path, monkeypatch):
    """A stub trainer reaches each game's score at the steps ``curves`` gives for the trial's learning rate.
    Trial 0 reaches Pong 20 at 1M steps (0.5) and never Breakout 300 (6M x 2 / 4M = 3); trial 1 at 1.5M
    and 2M (0.75 + 0.5 = 1.25): its bounds stay below trial 0's 3.5, so it completes although it is
    slower on Pong.  Trial 2 never reaches Pong: at 5M steps (report point 9) its bound 5 / 2 = 2.5 is
    above the median objective of the complete trials, (3.5 + 1.25) / 2, and it stops before Breakout."""
    optuna = pytest.importorskip("optuna")
    stub = tmp_path / "stub.py"
    stub.write_text(STUB_TRAINER)
    curves = {"Pong-v5": {"0.003": 1e6, "0.001": 1.5e6, "0.002": None},
              "Breakout-v5": {"0.003": None, "0.001": 2e6, "0.002": 1e6}}
    (tmp_path / "curves.json").write_text(json.dumps(curves))
    monkeypatch.setattr(search, "trainer_command", lambda args, flags, trial_dir, exp_name:
                        [sys.executable, str(stub), *flags, "--runs-dir", str(trial_dir / "runs")])
    args = search.Args(objective="to-score", targets=TARGETS, num_envs=1024, penalty=2.0, report_points=10, trials=3,
                       startup_trials=1, study_name="s", study_dir=str(tmp_path / "search"), write_best=True,
                       best_out=str(tmp_path / "best.json"))
    preset = search.preset_values(load_script("ppo"), args, str(ROOT / search.TO_SCORE_PRESET),
                                  search.PPO_TO_SCORE_SPACE)
    study = search.make_study(args, "s", direction="minimize")
    for lr in (0.003, 0.001, 0.002):
        study.enqueue_trial({**preset, "learning_rate": lr})
    doc = search.main(args)
    trials = optuna.load_study(study_name="s", storage=study._storage).trials
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE", "PRUNED"]
    assert trials[0].value == pytest.approx(0.5 + 3.0) and trials[1].value == pytest.approx(0.75 + 0.5)
    pong = trials[1].user_attrs["Pong-v5"]
    assert pong["reached"] and pong["cost"] == pytest.approx(0.75) and pong["steps"] == 1_500_000
    assert pong["wall_s"] == 6.0 and pong["steps_per_s"] == 250_000.0
    breakout = trials[0].user_attrs["Breakout-v5"]
    assert not breakout["reached"] and breakout["steps"] == 6_000_000  # stopped at its budget
    assert max(trials[2].intermediate_values) == 9 and trials[2].intermediate_values[9] == pytest.approx(2.5)
    assert trials[2].intermediate_values[8] == pytest.approx(2.25)  # below 2.375: it went on
    trial_dirs = sorted((tmp_path / "search" / "s").glob("trial_*"))
    assert not (trial_dirs[2] / "Breakout-v5").exists()
    # both games trained with the same flags: only the game and the run folder differ
    for trial_dir in trial_dirs[:2]:
        pong_argv, breakout_argv = (json.loads((trial_dir / game / "argv.json").read_text())
                                    for game in ("Pong-v5", "Breakout-v5"))

        def same(argv):
            return [a for i, a in enumerate(argv) if i == 0 or argv[i - 1] not in ("--env-id", "--runs-dir")]
        assert same(pong_argv) == same(breakout_argv) and "--anneal-lr" in pong_argv  # the preset's: no KL target
        assert pong_argv[pong_argv.index("--env-id") + 1] == "Pong-v5"
    assert [b["number"] for b in doc["best"]] == [1, 0] and doc["best"][0]["value"] == pytest.approx(1.25)
    written = json.loads((tmp_path / "best.json").read_text())
    assert written["best"][0]["games"]["Breakout-v5"]["command"].startswith(
        "python scripts/ppo.py --config configs/atari_fast.yaml --env-id Breakout-v5")
    assert set(written["space"]) == set(search.PPO_TO_SCORE_SPACE) and written["penalty"] == 2.0
    assert [t["env_id"] for t in written["targets"]] == ["Pong-v5", "Breakout-v5"]


def test_the_to_score_space_parses_and_validates_at_its_ends():
    """Each end of the to-score space is a valid trainer command (a KL target turns the annealing off,
    none turns it on), and the candidate preset's values lie in the space (the first trial trains them)."""
    args = search.Args(objective="to-score", num_envs=1024)
    config = str(ROOT / search.TO_SCORE_PRESET)
    space = search.PPO_TO_SCORE_SPACE
    for pick in (0, -1):
        values = {k: (v[1][pick] if v[0] == "categorical" else v[1 if pick == 0 else 2]) for k, v in space.items()}
        parsed = load_script("ppo").cli(search.trial_flags(args, values, config=config))
        validate(parsed)
        assert {k: getattr(parsed, k) for k in values} == values
        assert parsed.anneal_lr == (values["kl_adaptive_lr"] is None)
    moot = load_script("ppo").cli(search.trial_flags(args, dict(kl_adaptive_lr=None, kl_adaptive_every="epoch"),
                                                     config=config))  # no target: nothing to schedule
    validate(moot)
    assert moot.kl_adaptive_lr is None and moot.kl_adaptive_every == "minibatch"
    start = search.preset_values(load_script("ppo"), args, config, space)
    assert start is not None and start["kl_adaptive_lr"] is None and start["update_epochs"] == 8


def test_the_env_count_joins_the_to_score_space_in_training_seconds_only():
    """``--num-envs-choices`` adds ``num_envs`` to the space: a trial's commands carry its count once (the
    trainer parses it), the first trial's is ``--num-envs``; env steps alone cannot weigh the count
    (fewer envs step slower), so it needs ``--measure seconds``, and the return objective rejects it."""
    config = str(ROOT / search.TO_SCORE_PRESET)
    args = search.Args(objective="to-score", measure="seconds", num_envs=1024, num_envs_choices=(256, 512, 1024))
    space = search.to_score_space(args)
    assert space["num_envs"] == ("categorical", [256, 512, 1024])
    assert {k: v for k, v in space.items() if k != "num_envs"} == search.PPO_TO_SCORE_SPACE
    flags = search.trial_flags(args, {"num_envs": 256, "update_epochs": 4}, config=config)
    assert flags.count("--num-envs") == 1 and flags[flags.index("--num-envs") + 1] == "256"
    parsed = load_script("ppo").cli(flags)
    validate(parsed)
    assert parsed.num_envs == 256 and parsed.update_epochs == 4
    assert search.preset_values(load_script("ppo"), args, config, space)["num_envs"] == 1024
    assert search.to_score_space(search.Args(objective="to-score")) is search.PPO_TO_SCORE_SPACE
    for bad, match in ((dict(measure="steps"), "needs --measure seconds"),
                       (dict(num_envs_choices=(256, 0)), "distinct counts >= 1"),
                       (dict(num_envs_choices=(256, 256)), "distinct counts >= 1")):
        with pytest.raises(ConfigError, match=match):
            search.to_score_space(search.Args(**{**dict(objective="to-score", measure="seconds",
                                                       num_envs_choices=(256, 1024)), **bad}))
    with pytest.raises(ConfigError, match="a flag of --objective to-score"):
        search.main(search.Args(num_envs_choices=(256, 1024)))


def test_a_trial_whose_env_count_cannot_fill_its_minibatch_is_pruned_before_it_starts(tmp_path):
    """256 envs x 16 steps make a batch of 4096 steps: a minibatch of 8192 is rejected by the trainer, so
    the trial is pruned without training; 1024 envs hold it."""
    optuna = pytest.importorskip("optuna")
    config = str(ROOT / search.TO_SCORE_PRESET)
    args = search.Args(objective="to-score", measure="seconds", num_envs_choices=(256, 1024), study_dir=str(tmp_path))
    trial = optuna.create_study().ask()
    values = {"num_steps": 16, "minibatch_size": 8192}
    with pytest.raises(optuna.TrialPruned, match="rejected by the trainer"):
        search.checked_trial_dir(trial, args, "s", load_script("ppo"),
                                 [search.trial_flags(args, {**values, "num_envs": 256}, config=config)])
    assert search.checked_trial_dir(trial, args, "s", load_script("ppo"), [
        search.trial_flags(args, {**values, "num_envs": 1024}, config=config)]).name == "trial_0000"
