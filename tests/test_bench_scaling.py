"""scripts/bench_scaling.py: its scaling arithmetic, its table, the trainers' GPU memory metric, and --quick end
to end on 2 CPU ranks (Gloo), the fault check included."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.distributed as dist

from conftest import load_script
from rltrain.bench import scaling, scaling_tables, tables
from rltrain.bench import trainer_cases as cases
from rltrain.bench import trainer_runs as runs
from rltrain.distributed import DistContext
from rltrain.trainer import GPU_MEMORY_METRIC, iteration_readout, memory_metrics

script = load_script("bench_scaling")  # its command line


def row(case, ranks, sps, iteration_ms=100.0, **phases_ms):
    return {"case": case, "ranks": ranks, "sps": sps, "iteration_ms": iteration_ms, "phases_ms": phases_ms}


def test_efficiency_and_allreduce_share_of_synthetic_rows():
    rows = scaling_tables.add_scaling([
        row("ppo", 1, 1000.0, update=40.0),
        row("ppo", 2, 1900.0, 105.0, update=45.0, **{"update/allreduce": 5.25, "rank0/update/allreduce": 4.0}),
        row("ppo", 4, 3000.0, 200.0, **{"update/allreduce": 30.0}),
        row("impala", 2, 500.0, 50.0, **{"learner/allreduce": 1.0}),  # no 1-rank row: no efficiency
        {"case": "ppo", "ranks": 8, "error": "timed out after 300 s"},
    ])
    assert rows[0]["efficiency"] == 1.0 and rows[0]["allreduce_share"] is None  # one rank: no DDP
    assert rows[1]["efficiency"] == pytest.approx(1900 / 2000)
    assert rows[1]["allreduce_share"] == pytest.approx(5.25 / 105)  # the slowest rank's, rank 0's left out
    assert rows[2]["efficiency"] == pytest.approx(0.75) and rows[2]["allreduce_share"] == pytest.approx(0.15)
    assert rows[3]["efficiency"] is None and rows[3]["allreduce_share"] == pytest.approx(0.02)
    assert "efficiency" not in rows[4]


def test_default_ranks_are_one_and_the_powers_of_two_up_to_the_gpus():
    assert scaling.default_ranks(0) == [1, 2]  # CPU ranks
    assert scaling.default_ranks(1) == [1]
    assert scaling.default_ranks(6) == [1, 2, 4]
    assert scaling.default_ranks(8) == [1, 2, 4, 8]


def test_a_rank_case_keeps_the_envs_per_rank():
    case = cases.CASES["ppo-breakout"]
    four = scaling.rank_case(case, 4)
    assert (four.num_envs, four.num_steps, four.timed) == (4 * 4096, 16, case.timed)
    assert four.round_steps == 4 * case.round_steps
    flags = runs.trainer_flags(four, ["--checkpoint-every", "1"])
    assert flags[flags.index("--num-envs") + 1] == "16384" and flags.count("--checkpoint-every") == 1
    assert runs.trainer_flags(four, [])[-2:] == ["--checkpoint-every", "0"]


def test_bad_flags_exit_naming_them():
    for argv, named in ((["--timed", "foo=2"], "--timed foo=2"), (["--timed", "ppo-cartpole=0"], "--timed"),
                        (["--ranks", "0"], "--ranks 0"), (["--cases", "ppo-pong"], "--cases")):
        with pytest.raises(SystemExit, match=named):
            script.main(argv)


def test_markdown_rows_and_fault_check():
    results = {"meta": {"device_name": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "nccl": "2.27.3",
                        "dist_backend": "nccl", "date": "2026-01-02T03:04:05+00:00"},
               "cases": {"ppo-cartpole": {"trainer": "ppo", "env_id": "CartPole-v1", "num_envs_per_rank": 4096,
                                          "num_steps": 128}},
               "rows": scaling_tables.add_scaling([row("ppo-cartpole", 1, 2.0e6, 250.0, rollout=150.0, ca=2.0, update=98.0),
                                      dict(row("ppo-cartpole", 8, 1.44e7, 280.0, rollout=152.0, update=120.0,
                                               **{"update/allreduce": 7.0}), gpu_mem_peak_gib=1.234)]),
               "fault_check": {"ranks": 8, "killed_rank": 7, "all_exited_s": 2.5, "dist_timeout_s": 60.0,
                               "exit_code": 1, "failed_rank_named": True, "checkpoint_step": 4194304,
                               "resume_continued": True}}
    text = scaling_tables.markdown(results)
    assert text.startswith("NVIDIA H100 80GB HBM3 x 8, driver ?, CUDA ?, NCCL 2.27.3,")
    assert ("| PPO CartPole-v1 4096 x 128 | 1 | 2,000,000 | 100% | 250.0 | rollout 150.0 · ca 2.0 · update 98.0 "
            "| - | - | - |") in text
    assert "|  | 8 | 14,400,000 | 90% | 280.0 | rollout 152.0 · update 120.0 | 7.0 | 2.5% | 1.23 |" in text
    assert "rank 7 killed with SIGKILL" in text and "exit code 1" in text and "names rank 7" in text
    assert "from global step 4194304: continued." in text


def test_the_gpu_memory_metric_is_the_max_over_ranks_and_absent_on_the_cpu(monkeypatch):
    kw = dict(phase_secs={}, means={}, episode_returns=[], episode_lengths=[], recent_returns=[], finite=True)
    assert GPU_MEMORY_METRIC not in iteration_readout(DistContext(), **kw)  # the CPU: no metric
    assert memory_metrics(iteration_readout(DistContext(), **kw)) == {}
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda device=None: 3 * 2**29)  # 1.5 GiB here
    ctx = DistContext(rank=0, world_size=2, backend="nccl", device=torch.device("cuda", 0))

    def all_gather_object(out, obj):  # the other rank peaked at 2.25 GiB
        out[0], out[1] = obj, {**obj, GPU_MEMORY_METRIC: 2.25}
    monkeypatch.setattr(dist, "all_gather_object", all_gather_object)
    assert memory_metrics(iteration_readout(ctx, **kw)) == {GPU_MEMORY_METRIC: 2.25}
    case = cases.Case("ppo", "CartPole-v1", num_envs=4, num_steps=10, warmup=1, timed=2)
    rows = [{"global_step": 40 * i, "time": float(i), "perf/iteration_s": 1.0, GPU_MEMORY_METRIC: 0.5 * i}
            for i in range(1, 4)]
    assert runs.summarize(case, rows)["gpu_mem_peak_gib"] == 1.5
    assert "gpu_mem_peak_gib" not in runs.summarize(case, [{k: v for k, v in r.items() if k != GPU_MEMORY_METRIC}
                                                        for r in rows])


@pytest.mark.cuda
def test_the_gpu_memory_metric_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    ctx = DistContext.single_process(cuda=True)
    block = torch.empty(2**28, dtype=torch.uint8, device=ctx.device)  # 0.25 GiB
    readout = iteration_readout(ctx, phase_secs={}, means={}, episode_returns=[], episode_lengths=[],
                                recent_returns=[], finite=True)
    assert memory_metrics(readout)[GPU_MEMORY_METRIC] >= 0.25
    del block


@pytest.mark.slow
def test_quick_mode_end_to_end(tmp_path):
    """Tiny PPO and IMPALA CartPole on 1 and 2 CPU ranks, then the fault check: JSON, PNG and table."""
    out = tmp_path / "scaling.json"
    result = script.main(["--quick", "--timed", "ppo-cartpole=3", "--out", str(out)])
    data = json.loads(out.read_text())
    assert data["rows"] == result["rows"] and (tmp_path / "scaling.png").stat().st_size > 0
    meta = data["meta"]
    assert meta["dist_backend"] == "gloo" and meta["command"].startswith("python scripts/bench_scaling.py --quick")
    for key in ("device_name", "driver", "cuda", "torch", "triton", "date", "commit", "gpu_count", "nccl", "envpool"):
        assert key in meta, key
    assert set(data["cases"]) == {"ppo-cartpole", "impala-cartpole"}
    for name in data["cases"]:
        rows = {r["ranks"]: r for r in data["rows"] if r["case"] == name}
        assert set(rows) == {1, 2}
        for k, r in rows.items():
            assert "error" not in r, (name, k, r["error"])
            assert r["sps"] > 0 and r["num_envs"] == 8 * k
            assert r["iterations"] == 3 if name == "ppo-cartpole" else r["iterations"] >= 2  # --timed ppo-cartpole=3
        assert rows[1]["efficiency"] == 1.0 and rows[1]["allreduce_share"] is None
        assert rows[2]["efficiency"] == pytest.approx(rows[2]["sps"] / (2 * rows[1]["sps"]))
        assert math.isfinite(rows[2]["efficiency"]) and 0 < rows[2]["allreduce_share"] < 1
    fault = data["fault_check"]
    assert fault["ranks"] == 2 and fault["killed_rank"] == 1 and fault["dist_timeout_s"] == 60.0
    assert fault["exit_code"] != 0 and fault["failed_rank_named"]
    assert 0 < fault["all_exited_s"] < fault["dist_timeout_s"] and fault["within_timeout"]
    assert fault["resume_exit_code"] == 0 and fault["resume_continued"]
    assert fault["resumed_steps"][0] == fault["checkpoint_step"] + 2 * 8 * 16  # one iteration of both ranks
    text = tables.render(["scaling", str(out)])
    assert text.count("| PPO CartPole-v1 8 x 16 |") == 1 and "resumed on 2 ranks" in text
