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
