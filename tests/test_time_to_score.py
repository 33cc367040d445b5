"""Time-to-score arithmetic on synthetic logs (rltrain/time_to_score.py, scripts/time_to_score.py) and
the training clock behind charts/wall_s, continued across --resume."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rltrain import wallclock  # noqa: E402
from rltrain.config import ConfigError  # noqa: E402
from rltrain.time_to_score import (band, first_crossing, load_run, markdown, parse_thresholds,  # noqa: E402
                                   runs_from_document, step_curve, summarize)

ppo = load_script("ppo")
tts_script = load_script("time_to_score")


def write_run(root: Path, env_id: str, exp: str, seed: int, rows) -> Path:
    """A run folder whose metrics.jsonl has ``(iteration, global_step, wall_s, avg_return)`` rows."""
    run = root / f"{env_id}__{exp}__{seed}__1700000000"
    run.mkdir(parents=True)
    with open(run / "metrics.jsonl", "w") as f:
        for it, step, wall, ret in rows:
            row = {"global_step": step, "charts/iteration": it, "charts/wall_s": wall}
            if ret is not None:
                row["charts/avg_episodic_return"] = ret
            f.write(json.dumps(row) + "\n")
    return run


def test_first_crossing_in_steps_and_minutes(tmp_path):
    run = load_run(write_run(tmp_path, "Pong-v5", "ppo", 1, [
        (1, 1000, 30.0, None), (2, 2000, 60.0, -21.0), (3, 3000, 90.0, 5.0), (4, 4000, 120.0, 20.0),
        (5, 5000, 150.0, 19.0), (6, 6000, 180.0, 20.5)]))
    c = first_crossing(run, 20.0)
    assert (c.global_step, c.wall_s, c.minutes) == (4000, 120.0, 2.0)
    assert first_crossing(run, 21.0) is None
    assert first_crossing(run, -21.0).global_step == 2000  # rows without a return yet are skipped


def test_a_resumed_segment_replaces_the_iterations_it_logs_again(tmp_path):
    """Killed after iteration 3 (checkpoint at 2, 100 s): the resumed segment logs 3 and 4 again from
    100 s on; the curve follows the resumed rows, whose time was counted."""
    run = load_run(write_run(tmp_path, "Pong-v5", "ppo", 1, [
        (1, 100, 50.0, 1.0), (2, 200, 100.0, 2.0), (3, 300, 150.0, 20.0),  # lost: after the checkpoint
        (3, 300, 160.0, 3.0), (4, 400, 210.0, 20.0)]))
    assert run.steps.tolist() == [100, 200, 300, 400] and run.wall_s.tolist() == [50.0, 100.0, 160.0, 210.0]
    assert first_crossing(run, 20.0).wall_s == 210.0


def test_seeds_median_and_range(tmp_path):
    runs = [load_run(write_run(tmp_path, "Pong-v5", "ppo", s, [
        (1, 1000, 60.0 * s, 0.0), (2, 2000, 120.0 * s, 20.0 + s)])) for s in (1, 2, 3)]
    runs.append(load_run(write_run(tmp_path, "Pong-v5", "ppo", 4, [(1, 1000, 60.0, 0.0), (2, 2000, 999.0, 10.0)])))
    doc = summarize(runs, parse_thresholds(["Pong-v5=20", "21"]))
    (group,) = doc["groups"]
    assert group["seeds"] == [1, 2, 3, 4]
    at20 = group["thresholds"]["20"]  # seeds 1-3 at 2, 4, 6 minutes; seed 4 never: median of 2, 4, 6, inf
    assert at20["reached"] == "3/4" and at20["median_minutes"] == pytest.approx(5.0)
    assert (at20["min_minutes"], at20["max_minutes"]) == (2.0, 6.0) and at20["median_steps"] == 2000
    at21 = group["thresholds"]["21"]  # seeds 1-3 only reach 21, 22, 23 -- 3 of 4 again
    assert at21["reached"] == "3/4"
    assert doc["runs"][0]["crossings"]["20"] == {"global_step": 2000, "wall_s": 120.0, "minutes": 2.0}
    assert doc["runs"][3]["crossings"]["20"] is None


def test_curves_are_steps_not_interpolations():
    x, y = np.array([10.0, 20.0]), np.array([1.0, 5.0])
    assert np.isnan(step_curve(x, y, np.array([5.0]))).all()
    assert step_curve(x, y, np.array([10.0, 15.0, 20.0, 25.0])).tolist() == [1.0, 1.0, 5.0, 5.0]
    b = band([(x, y), (np.array([10.0, 30.0]), np.array([3.0, 7.0]))], points=3)  # grid 0, 10, 20
    assert b["x"].tolist() == [0.0, 10.0, 20.0]
    assert b["median"][1:].tolist() == [2.0, 4.0] and b["min"][1:].tolist() == [1.0, 3.0]
    assert b["max"][1:].tolist() == [3.0, 5.0]


def test_script_writes_json_and_pngs(tmp_path):
    runs = [write_run(tmp_path / "runs", "Breakout-v5", "ppo", s, [
        (1, 1000, 60.0, 10.0), (2, 2000, 120.0, 350.0 + s), (3, 3000, 180.0, 420.0)]) for s in (1, 2)]
    out = tmp_path / "results" / "time_to_score.json"
    doc = tts_script.main(tts_script.Args(runs=[str(r) for r in runs], thresholds=["Breakout-v5=300,400"],
                                          out=str(out)))
    written = json.loads(out.read_text())
    assert written["groups"] == json.loads(json.dumps(doc["groups"]))
    assert written["groups"][0]["thresholds"]["400"]["median_minutes"] == 3.0
    assert {"device_name", "driver", "cuda", "cpu_cores", "date"} <= set(written["meta"]) and written["meta"]["torch"]
    assert (tmp_path / "results" / "learning_curves_Breakout-v5.png").stat().st_size > 0


def test_the_json_goes_beside_the_runs_unless_out_names_a_file(tmp_path, monkeypatch):
    """Without --out a call never writes over the recorded docs/results/time_to_score.json (nor any file
    outside the runs folder); --merge of that document keeps working with --out."""
    monkeypatch.chdir(tmp_path)  # a checkout's layout: docs/results/ beside runs/
    recorded = tmp_path / "docs" / "results" / "time_to_score.json"
    recorded.parent.mkdir(parents=True)
    run = write_run(tmp_path / "runs", "Pong-v5", "ppo", 1, [(1, 100, 60.0, -21.0), (2, 200, 120.0, 20.0)])
    tts_script.main(tts_script.Args(runs=[str(run)], thresholds=["Pong-v5=20"], out=str(recorded), plots=False))
    kept = recorded.read_bytes()
    again = write_run(tmp_path / "runs", "Pong-v5", "ppo", 2, [(1, 100, 60.0, -21.0), (2, 200, 180.0, 20.0)])
    doc = tts_script.main(tts_script.Args(runs=["runs/" + again.name], merge=[str(recorded)],
                                          thresholds=["Pong-v5=20"], plots=False))
    assert recorded.read_bytes() == kept
    assert json.loads((tmp_path / "runs" / "time_to_score.json").read_text())["groups"] == doc["groups"]
    assert doc["groups"][0]["seeds"] == [1, 2]  # the merged run and the new one
    with pytest.raises(ConfigError, match="--out is needed when no run folder is given"):
        tts_script.main(tts_script.Args(runs=[], merge=[str(recorded)], plots=False))


def test_training_clock_leaves_pauses_out(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(wallclock.time, "perf_counter", lambda: now[0])
    clock = wallclock.TrainingClock(previous_s=40.0)
    assert clock.seconds() == 40.0  # not started: the earlier segments only
    clock.start()
    now[0] = 110.0
    with clock.paused():
        now[0] = 125.0
    now[0] = 130.0
    assert clock.seconds() == 40.0 + 30.0 - 15.0


def test_wall_s_continues_across_resume(tmp_path, capsys):
    """charts/wall_s goes on from the checkpoint's seconds; the console's last line gives both clocks: the
    segment's wall time and the run's training seconds in all (the checkpoint's plus this segment's)."""
    flags = ["--runs-dir", str(tmp_path), "--num-envs", "4", "--num-steps", "32", "--no-progress",
             "--checkpoint-every", "2"]
    first = ppo.main(ppo.cli([*flags, "--total-timesteps", str(4 * 32 * 4)]))
    latest = Path(first["run_dir"]) / "checkpoints" / "latest.pt"
    saved_s = torch.load(latest, weights_only=False)["wall_s"]
    capsys.readouterr()
    ppo.main(ppo.cli(["--resume", str(latest), "--total-timesteps", str(4 * 32 * 8), "--no-progress"]))
    last = capsys.readouterr().out.strip().splitlines()[-1]
    segment, in_all = re.search(r"wall ([0-9.]+)s this segment, ([0-9.]+)s of training in all \(charts/wall_s\)$",
                                last).groups()
    assert float(in_all) == pytest.approx(saved_s + float(segment), abs=0.15)  # both printed to 0.1 s
    rows = [json.loads(line) for line in open(Path(first["run_dir"]) / "metrics.jsonl")]
    walls = [r["charts/wall_s"] for r in rows]
    assert [r["charts/iteration"] for r in rows] == list(range(1, 9))
    assert saved_s == pytest.approx(walls[3], abs=0.5)  # the checkpoint of iteration 4 holds its seconds
    assert all(b > a for a, b in zip(walls, walls[1:]))  # the resumed segment starts where the first ended
    assert walls[4] - saved_s < 5.0 and load_run(first["run_dir"]).wall_s[-1] == walls[-1]
    segments = json.loads((Path(first["run_dir"]) / "machine.json").read_text())  # one entry per segment
    assert len(segments) == 2 and all(m["device_name"] and m["cpu_cores"] >= 1 and m["ranks"] == 1 for m in segments)


def test_a_run_folder_names_its_arguments_without_a_checkpoint(tmp_path):
    """A run without checkpoints still says how it was run: ``args.json`` beside ``metrics.jsonl``."""
    out = ppo.main(ppo.cli(["--runs-dir", str(tmp_path), "--num-envs", "4", "--num-steps", "16", "--no-progress",
                            "--seed", "7", "--exp-name", "short", "--learning-rate", "0.001",
                            "--total-timesteps", str(4 * 16 * 2)]))
    run_dir = Path(out["run_dir"])
    assert not (run_dir / "checkpoints").exists()
    saved = json.loads((run_dir / "args.json").read_text())
    assert (saved["seed"], saved["exp_name"], saved["learning_rate"]) == (7, "short", 0.001)
    run = load_run(run_dir)
    assert (run.trainer, run.seed, run.exp_name, run.args["num_envs"]) == ("ppo", 7, "short", 4)
    command = tts_script.command_line(run, tts_script._defaults(run))
    assert command.split() == ["python", "scripts/ppo.py", "--exp-name", "short", "--seed", "7", "--num-envs", "4",
                               "--total-timesteps", "128", "--learning-rate", "0.001", "--num-steps", "16"], command



def test_merged_documents_keep_their_runs_and_a_run_folder_given_again_replaces_its_own(tmp_path):
    """A document stores each run's machine and whole curve: merged into a later call, its runs count
    as they did (crossings, groups, plots); ``--alias`` counts a search trial's run as a seed of the preset."""
    def machine(run_dir, name, cpu="EPYC 9454"):
        env_id, exp, seed, _ = run_dir.name.split("__")
        (run_dir / "args.json").write_text(json.dumps({"env_id": env_id, "exp_name": exp, "seed": int(seed),
                                                       "num_envs": 4}))
        (run_dir / "machine.json").write_text(json.dumps([{"device_name": name, "driver": "1", "cuda": "13.0",
                                                            "torch": "2", "triton": "3", "date": "2026-01-01",
                                                            "cpu_cores": 16, "cpu_model": cpu, "ranks": 1}]))
        return run_dir

    first = machine(write_run(tmp_path / "a", "Pong-v5", "trial0", 1, [(1, 100, 60.0, -21.0), (2, 200, 240.0, 20.5)]),
                    "H100")
    old = tmp_path / "old.json"
    tts_script.main(tts_script.Args(runs=[str(first)], thresholds=["Pong-v5=20"], out=str(old), plots=False))
    assert json.loads(old.read_text())["meta"]["device_name"] == "H100"  # where the runs trained, not this host

    second = machine(write_run(tmp_path / "b", "Pong-v5", "preset", 2, [(1, 100, 60.0, -20.0), (2, 200, 360.0, 20.0)]),
                     "H100", cpu="Xeon 8480")
    out = tmp_path / "new.json"
    doc = tts_script.main(tts_script.Args(runs=[str(second)], merge=[str(old)], alias=["trial0=preset"],
                                          thresholds=["Pong-v5=20"], out=str(out)))
    (group,) = doc["groups"]
    assert doc["meta"]["cpu_models"] == ["EPYC 9454", "Xeon 8480"] and "devices" not in doc["meta"]
    assert group["group"] == "Pong-v5 preset" and group["seeds"] == [1, 2]
    assert group["thresholds"]["20"]["median_minutes"] == pytest.approx(5.0)  # 4 and 6 minutes
    merged = {r["seed"]: r for r in json.loads(out.read_text())["runs"]}
    assert merged[1]["crossings"]["20"] == {"global_step": 200, "wall_s": 240.0, "minutes": 4.0}
    assert merged[1]["final"]["steps_per_s"] == pytest.approx(200 / 240.0, abs=0.05)  # 200 steps by 240 s
    assert merged[1]["machine"]["device_name"] == "H100" and "--exp-name trial0" in merged[1]["command"]
    assert (tmp_path / "learning_curves_Pong-v5.png").stat().st_size > 0
    table = markdown(doc).splitlines()  # the generated table of docs/training.md
    assert table[0] == "**Pong-v5**" and "| PPO `preset` | 4 | 2 | 6.0 | 20.2 (20.0 to 20.5) | 5.0 (2/2) |" in table

    again = tts_script.main(tts_script.Args(runs=[str(second), str(first)], merge=[str(out)],
                                            thresholds=["Pong-v5=20"], out=str(out), plots=False))
    assert sorted(r["seed"] for r in again["runs"]) == [1, 2]  # the folders replace the stored copies

    with pytest.raises(ConfigError, match="--merge .*no stored curve"):
        old.write_text(json.dumps({"runs": [{"run_dir": "x", "env_id": "Pong-v5"}]}))
        tts_script.main(tts_script.Args(runs=[], merge=[str(old)], out=str(out)))


def test_a_stored_command_is_the_one_that_ran_and_labels_and_reproduce_commands_survive_a_merge(tmp_path):
    """``--alias`` labels a run (its exp name stays), ``--reproduce CONFIG=FLAGS`` stores the command
    today's trainer needs beside the one that ran, and a later ``--merge`` keeps command, label and
    reproduce command as stored."""
    trial = write_run(tmp_path / "r", "Pong-v5", "trial0", 1, [(1, 100, 60.0, -21.0), (2, 200, 240.0, 20.5)])
    seed2 = write_run(tmp_path / "r", "Pong-v5", "preset", 2, [(1, 100, 60.0, -20.0), (2, 200, 360.0, 20.0)])
    first = tmp_path / "first.json"
    doc = tts_script.main(tts_script.Args(runs=[str(trial), str(seed2)], alias=["preset=preset-eager",
                                                                                 "trial0=preset-eager"],
                                          reproduce=["preset-eager=--no-graph-update"], thresholds=["Pong-v5=20"],
                                          out=str(first), plots=False))
    runs = {r["seed"]: r for r in doc["runs"]}
    assert (runs[1]["exp_name"], runs[1]["label"], runs[2]["exp_name"], runs[2]["label"]) == \
        ("trial0", "preset-eager", "preset", "preset-eager")
    for r in runs.values():
        assert "--no-graph-update" not in r["command"] and r["reproduce"] == r["command"] + " --no-graph-update"
    assert [(g["group"], g["configuration"], g["seeds"]) for g in doc["groups"]] == \
        [("Pong-v5 preset-eager", "preset-eager", [1, 2])]
    assert "`preset-eager` | - | 2 | 6.0 |" in markdown(doc)

    new = write_run(tmp_path / "s", "Pong-v5", "preset", 3, [(1, 100, 60.0, -20.0), (2, 200, 300.0, 20.0)])
    again = tts_script.main(tts_script.Args(runs=[str(new)], merge=[str(first)], thresholds=["Pong-v5=20"],
                                            out=str(tmp_path / "again.json"), plots=False))
    stored = {r["seed"]: r for r in again["runs"]}
    for seed in (1, 2):
        assert {k: stored[seed][k] for k in ("exp_name", "label", "command", "reproduce")} == \
            {k: runs[seed][k] for k in ("exp_name", "label", "command", "reproduce")}
    assert (stored[3]["label"], stored[3]["reproduce"]) == (None, None)  # a new run: its own configuration
    assert [g["group"] for g in again["groups"]] == ["Pong-v5 preset-eager", "Pong-v5 preset"]  # folder order
    with pytest.raises(ConfigError, match="--reproduce"):
        tts_script.main(tts_script.Args(runs=[str(new)], reproduce=["preset"], out=str(tmp_path / "x.json")))


def test_a_document_written_before_labels_keeps_each_runs_folder_name_as_its_exp_name(tmp_path):
    """Such a document stored a run's configuration (after ``--alias``) as its ``exp_name``; read back,
    the run folder's name is the exp name again and the stored one its label."""
    trial = write_run(tmp_path / "r", "Pong-v5", "trial0", 1, [(1, 100, 60.0, -21.0), (2, 200, 240.0, 20.5)])
    doc = tts_script.main(tts_script.Args(runs=[str(trial)], alias=["trial0=preset"], thresholds=["Pong-v5=20"],
                                          out=str(tmp_path / "new.json"), plots=False))
    (run,) = doc["runs"]
    old = {**run, "exp_name": "preset"}
    del old["label"], old["reproduce"]
    (stored,) = runs_from_document({"runs": [old]})
    assert (stored.exp_name, stored.label, stored.group) == ("trial0", "preset", "Pong-v5 preset")
    (plain,) = runs_from_document({"runs": [{**old, "exp_name": "trial0"}]})
    assert (plain.exp_name, plain.label) == ("trial0", None)


def test_the_document_is_the_same_whichever_runs_were_merged(tmp_path):
    """Runs and groups in run-folder order: a run added by --merge later lands where a full call puts it."""
    folders = [write_run(tmp_path / "r", "Pong-v5", exp, seed, [(1, 100, 60.0, -21.0), (2, 200, 120.0, 20.0)])
               for exp, seed in (("before", 1), ("preset", 1), ("preset", 2))]
    whole = tts_script.main(tts_script.Args(runs=[str(f) for f in reversed(folders)], thresholds=["Pong-v5=20"],
                                            out=str(tmp_path / "whole.json"), plots=False))
    old = tmp_path / "old.json"
    tts_script.main(tts_script.Args(runs=[str(folders[0]), str(folders[2])], thresholds=["Pong-v5=20"],
                                    out=str(old), plots=False))
    merged = tts_script.main(tts_script.Args(runs=[str(folders[1])], merge=[str(old)], thresholds=["Pong-v5=20"],
                                             out=str(tmp_path / "merged.json"), plots=False))
    assert [g["group"] for g in merged["groups"]] == ["Pong-v5 before", "Pong-v5 preset"]
    assert [r["run_dir"] for r in merged["runs"]] == [r["run_dir"] for r in whole["runs"]] == sorted(map(str, folders))


def test_runs_on_two_kinds_of_card_get_a_card_column_and_a_header_naming_both(tmp_path):
    """A document whose runs trained on an H100 and an H200 says which card each configuration used;
    a run recorded before ``cpu_model`` existed adds no processor to the list."""
    from rltrain.bench.formats import machine

    def on(run_dir, card, cpu=None):
        env_id, exp, seed, _ = run_dir.name.split("__")
        (run_dir / "args.json").write_text(json.dumps({"env_id": env_id, "exp_name": exp, "seed": int(seed),
                                                       "num_envs": 8}))
        machine = {"device_name": card, "driver": "1", "cuda": "13.0", "torch": "2", "triton": "3",
                   "date": f"2026-01-0{seed}", "cpu_cores": 16, **({"cpu_model": cpu} if cpu else {})}
        (run_dir / "machine.json").write_text(json.dumps([machine]))
        return run_dir

    ppo_run = on(write_run(tmp_path, "Breakout-v5", "preset", 1, [(1, 100, 60.0, 5.0), (2, 200, 300.0, 310.0)]),
                 "NVIDIA H100 80GB HBM3")
    impala_run = on(write_run(tmp_path, "Breakout-v5", "impala", 2, [(1, 100, 60.0, 9.0), (2, 200, 240.0, 320.0)]),
                    "NVIDIA H200", cpu="Xeon")
    doc = summarize([load_run(ppo_run), load_run(impala_run)], {"Breakout-v5": [300.0]})
    assert doc["meta"]["devices"] == ["NVIDIA H100 80GB HBM3", "NVIDIA H200"] and "cpu_models" not in doc["meta"]
    table = markdown(doc).splitlines()
    assert table[2].startswith("| configuration | card | envs |") and table[3].startswith("|---|---|---:|")
    assert "| PPO `preset` | H100 | 8 | 1 | 5.0 | 310.0 | 5.0 (1/1) |" in table
    assert "| PPO `impala` | H200 | 8 | 1 | 4.0 | 320.0 | 4.0 (1/1) |" in table
    assert machine(doc["meta"]).startswith("NVIDIA H100 80GB HBM3 / NVIDIA H200, driver 1,")
    assert "(Xeon)" in machine(doc["meta"])

    single = summarize([load_run(ppo_run)], {"Breakout-v5": [300.0]})
    assert "devices" not in single["meta"] and "| card |" not in markdown(single)
