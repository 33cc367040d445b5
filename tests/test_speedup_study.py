"""scripts/speedup_study.py and its arithmetic (rltrain/study.py): the --quick study end to end on the
CPU, rounds and ratios on made-up iterations, one process per backend, wandb offline, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import load_script
from rltrain.config import ConfigError
from rltrain.credit import EQUIVALENCE_TOL
from rltrain.study import quartiles, rotation_rounds, separate_rounds, summarize
from rltrain.timers import amdahl_speedup

study = load_script("speedup_study")
ONE_POINT = ["--estimators", "gae", "--num-envs", "4", "--num-steps", "16", "--schedules", "1x2", "--rounds", "2"]


def run_study(tmp_path, *flags):
    return study.main(study.cli(["--out-dir", str(tmp_path / "study"), *flags]))


def check_record(r, backends):
    """What every result line must satisfy: the prediction's arithmetic, the median inside its IQR,
    the equivalence check's error, the warm-up reported."""
    assert r["backend"] in backends and r["baseline"] == backends[0]
    assert r["predicted_speedup"] == pytest.approx(amdahl_speedup(r["share"], r["kernel_speedup"]))
    assert r["measured_q25"] <= r["measured_speedup"] <= r["measured_q75"]
    assert 0 <= r["share"] <= 1 and r["iteration_s"] > r["ca_s"] > 0
    assert 0 <= r["rel_err"] < EQUIVALENCE_TOL
    assert len(r["warmup_iteration_s"]) == 1 and r["rounds"] >= 1
    if r["backend"] == r["baseline"]:
        assert r["kernel_speedup"] == r["measured_speedup"] == r["predicted_speedup"] == r["other_ratio"] == 1.0


def test_quick_study_end_to_end(tmp_path):
    result = run_study(tmp_path, "--quick")
    out = Path(result["out_dir"])
    assert result["failed"] == 0
    for name in ("results.jsonl", "results.csv", "results.md", "meta.json", "phases.png",
                 "measured_vs_predicted.png", "speedup_vs_share.png"):
        assert (out / name).stat().st_size > 0, name
    records = [json.loads(line) for line in open(out / "results.jsonl")]
    preset = study.PRESETS["quick"]
    assert len(records) == len(preset.points) * len(preset.backends)
    assert {r["point"] for r in records} == {p.name for p in preset.points}
    for r in records:
        check_record(r, preset.backends)
        assert r["rounds"] == preset.rounds and r["mode"] == "interleaved"
        assert list(Path(out / "logs" / r["point"] / r["backend"]).glob("events.out.tfevents.*"))  # TensorBoard
    meta = json.loads((out / "meta.json").read_text())
    assert {"device_name", "driver", "cuda", "torch", "triton", "date"} <= set(meta) and meta["rounds"] == preset.rounds
    table = (out / "results.md").read_text()
    assert all(p.name in table for p in preset.points) and meta["device_name"] in table
    assert len((out / "results.csv").read_text().splitlines()) == len(records) + 1
    combined = json.loads((out / "results.json").read_text())  # what results_tables.py study reads
    assert combined["meta"] == meta and combined["records"] == records


def make_rows(times, num_backends, warmup_rounds=1, ca_key="perf/ca_s"):
    """Rotation rows from ``times[b] = [(ca_s, iteration_s), ...]`` per round, after warm-up rounds."""
    rows = [{"perf/ca_backend_index": b, ca_key: 9.0, "perf/iteration_s": 99.0}
            for _ in range(warmup_rounds) for b in range(num_backends)]
    for r in range(len(times[0])):
        for b in range(num_backends):
            ca, it = times[b][r]
            rows.append({"perf/ca_backend_index": b, ca_key: ca, "perf/iteration_s": it,
                         "perf/ca_share_update": ca / (ca + 1.0)})
    return rows


def test_rounds_ratios_and_prediction():
    # the baseline spends 2 s of a 10 s iteration in credit assignment; the kernel 0.1 s, everything
    # else unchanged (8 s): the measured speedup is the prediction. "slow" makes the rest 10% slower.
    base = [(2.0, 10.0)] * 3
    kernel = [(0.1, 8.1)] * 3
    slow = [(0.1, 8.9), (0.1, 8.9), (0.1, 8.9)]
    rows = make_rows([base, kernel, slow], 3)
    steady, warm = rotation_rounds(rows, 3, 1)
    assert len(warm) == 3 and all(len(s) == 3 for s in steady)
    base_r, kernel_r, slow_r = summarize(steady, ["loop", "triton", "other"], "perf/ca_s")
    assert base_r["share"] == pytest.approx(0.2) and base_r["kernel_speedup"] == 1.0
    assert kernel_r["kernel_speedup"] == pytest.approx(20.0)
    assert kernel_r["predicted_speedup"] == pytest.approx(1 / (0.8 + 0.2 / 20))
    assert kernel_r["measured_speedup"] == pytest.approx(10 / 8.1) == pytest.approx(kernel_r["predicted_speedup"])
    assert kernel_r["other_ratio"] == pytest.approx(1.0)
    assert slow_r["measured_speedup"] == pytest.approx(10 / 8.9)
    assert slow_r["other_ratio"] == pytest.approx(8.0 / 8.8)  # the measured effect behind measured < predicted
    assert slow_r["measured_speedup"] == pytest.approx(slow_r["predicted_speedup"] * 8.1 / 8.9)


def test_per_round_ratios_give_median_and_iqr():
    base = [(1.0, 10.0), (1.0, 12.0), (1.0, 10.0), (1.0, 11.0)]
    kern = [(0.5, 9.5), (0.5, 10.0), (0.5, 8.0), (0.5, 10.0)]  # ratios 10/9.5, 1.2, 1.25, 1.1
    steady, _ = rotation_rounds(make_rows([base, kern], 2), 2, 1)
    r = summarize(steady, ["loop", "triton"], "perf/ca_s")[1]
    assert (r["measured_q25"], r["measured_speedup"], r["measured_q75"]) == pytest.approx(
        quartiles([10 / 9.5, 1.2, 1.25, 1.1]))
    assert r["measured_speedup"] == pytest.approx((1.1 + 1.2) / 2)


def test_rotation_rounds_checks_the_order_and_drops_incomplete_rounds():
    rows = make_rows([[(1.0, 2.0)] * 2, [(1.0, 2.0)] * 2], 2)
    steady, _ = rotation_rounds(rows + rows[-2:-1], 2, 1)  # a last round cut short: backend 0 only
    assert [len(s) for s in steady] == [2, 2]
    swapped = rows[:2] + [rows[3], rows[2]] + rows[4:]
    with pytest.raises(ValueError, match="iteration 3 ran backend 1"):
        rotation_rounds(swapped, 2, 1)


def test_separate_rounds_pair_by_position():
    runs = [[{"i": i, "b": b} for i in range(n)] for b, n in ((0, 5), (1, 4))]
    steady, warm = separate_rounds(runs, 1)
    assert [[r["i"] for r in s] for s in steady] == [[1, 2, 3], [1, 2, 3]] and len(warm) == 2


@pytest.mark.slow
def test_separate_processes(tmp_path):
    result = run_study(tmp_path, *ONE_POINT, "--backends", "loop", "triton", "--separate-processes")
    assert result["failed"] == 0
    records = result["records"]
    assert [r["backend"] for r in records] == ["loop", "triton"]
    for r in records:
        check_record(r, ("loop", "triton"))
        assert r["mode"] == "separate processes" and "--ca-backend " + r["backend"] in r["command"]


@pytest.mark.slow
def test_wandb_offline_group_and_tags(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    result = run_study(tmp_path, *ONE_POINT, "--rounds", "1", "--backends", "loop", "captured", "--wandb")
    logs = Path(result["out_dir"]) / "logs"
    runs = sorted(logs.glob("*/*/wandb/offline-run-*"))
    assert [p.parents[1].name for p in runs] == ["captured", "loop"]


def test_time_limit_skips_points_and_still_writes_outputs(tmp_path):
    result = run_study(tmp_path, *ONE_POINT, "--time-limit-s", "1e-9")
    assert result["failed"] == 0 and all(r["error"].startswith("skipped") for r in result["records"])
    assert (Path(result["out_dir"]) / "phases.png").is_file()


@pytest.mark.parametrize("flags,message", [
    (["--estimators", "ppo"], "--estimators: unknown 'ppo'"),
    (["--schedules", "4-4"], "--schedules: '4-4' is not EPOCHSxMINIBATCHES"),
    (["--recompute", "always"], "--recompute: unknown 'always'"),
    (["--num-steps", "100", "--batch-budget", "1024"], "--batch-budget 1024 is not a multiple"),
    (["--backends", "loop", "fused"], "--ca-backend: unknown backend 'fused'"),
])
def test_bad_input(tmp_path, flags, message):
    with pytest.raises(ConfigError, match=message):
        run_study(tmp_path, *flags)


def test_gpu_preset_lists_its_points(capsys):
    study.main(study.cli(["--preset", "gpu", "--list"]))
    out = capsys.readouterr().out
    preset = study.PRESETS["gpu"]
    assert all(p.name in out for p in preset.points)
    assert sum(p.est_s for p in preset.points) <= preset.time_limit_s < 480  # the estimates fit 8 minutes
    assert "--ca-backend loop,compile,triton,captured" in out
