"""The trainers' credit-assignment flags, end to end on the CPU: backends taking turns by iteration,
the equivalence check, the shadow's metrics, --advantage-recompute and --synthetic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import load_script
from rltrain.config import ConfigError
from rltrain.credit import EQUIVALENCE_TOL, CreditMismatchError

ppo = load_script("ppo")
impala = load_script("impala")
PPO_TINY = ["--num-envs", "4", "--num-steps", "16", "--num-minibatches", "2", "--update-epochs", "2", "--no-progress"]
IMPALA_TINY = ["--num-envs", "4", "--num-steps", "8", "--num-minibatches", "2", "--update-epochs", "2",
               "--no-progress"]


def run(trainer, tmp_path, *flags, iterations=4):
    tiny = PPO_TINY if trainer is ppo else IMPALA_TINY
    batch = int(tiny[1]) * int(tiny[3])
    out = trainer.main(trainer.cli(["--runs-dir", str(tmp_path / "runs"), *tiny,
                                    "--total-timesteps", str(iterations * batch), *flags]))
    return [json.loads(line) for line in open(Path(out["run_dir"]) / "metrics.jsonl")]


def losses(rows):
    return [r[k] for r in rows for k in ("losses/policy_loss", "losses/value_loss", "losses/approx_kl")]


def test_backends_take_turns_by_iteration(tmp_path, capsys):
    rows = run(ppo, tmp_path, "--ca-backend", "loop,triton,captured", iterations=6)
    assert [r["perf/ca_backend_index"] for r in rows] == [0, 1, 2, 0, 1, 2]
    assert {"check/ca_rel_err_loop", "check/ca_rel_err_triton", "check/ca_rel_err_captured"} <= set(rows[0])
    assert all(rows[0][f"check/ca_rel_err_{n}"] < EQUIVALENCE_TOL for n in ("loop", "triton", "captured"))
    out = capsys.readouterr().out
    assert "GAE backend loop, triton, captured" in out and "(taking turns by iteration)" in out
    for label in ("loop", "triton", "captured"):  # a phase table per backend
        assert f"phase table (1 iterations, GAE backend {label}" in out


def test_equivalence_check_stops_a_wrong_backend(tmp_path, monkeypatch):
    from kernels.baselines import loop

    good = loop.vtrace
    monkeypatch.setattr(loop, "vtrace", lambda *a, **k: tuple(1.01 * x for x in good(*a, **k)))
    with pytest.raises(CreditMismatchError, match="vtrace of loop"):
        run(impala, tmp_path, "--synthetic", "--ca-backend", "triton,loop")


def test_bad_backend_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="--ca-backend: unknown backend 'trition'.*triton"):
        run(ppo, tmp_path, "--ca-backend", "loop,trition")


@pytest.mark.parametrize("trainer", [ppo, impala], ids=["ppo", "impala"])
def test_shadow_metrics_are_logged_and_consistent(tmp_path, trainer):
    rows = run(trainer, tmp_path, "--synthetic", "--ca-backend", "triton", "--ca-shadow-every", "2")
    ca_key = "perf/ca_s" if trainer is ppo else "perf/learner/ca_s"
    for i, r in enumerate(rows, start=1):
        assert ("perf/ca_kernel_speedup" in r) == (i % 2 == 0)
        if i % 2:
            continue
        k, s = r["perf/ca_kernel_speedup"], r["perf/ca_share"]
        assert k == pytest.approx(r["perf/ca_shadow_s"] / r[ca_key])
        t_iter = r["perf/iteration_s"] - r["perf/ca_shadow_wall_s"]
        assert s == pytest.approx(r["perf/ca_shadow_s"] / (t_iter - r[ca_key] + r["perf/ca_shadow_s"]))
        assert r["perf/amdahl_predicted_speedup"] == pytest.approx(1 / ((1 - s) + s / k))
        assert r["perf/ca_shadow_rel_err"] < EQUIVALENCE_TOL


@pytest.mark.parametrize("trainer", [ppo, impala], ids=["ppo", "impala"])
def test_advantage_recompute_modes(tmp_path, trainer):
    """With a learning rate of 1e-30 (Adam's steps are ~lr, far below a float32 parameter's rounding) the
    critic never changes, so recomputing gives the targets of
    ``once`` (up to rounding); with learning, epoch and minibatch recompute change the update.
    IMPALA learns from a synthetic batch here: its actor threads make real runs differ run to run."""
    data = ["--synthetic"] if trainer is impala else []
    frozen = {m: run(trainer, tmp_path / f"{m}0", *data, "--advantage-recompute", m, "--learning-rate", "1e-30")
              for m in ("once", "epoch", "minibatch")}
    for m in ("epoch", "minibatch"):
        assert losses(frozen[m]) == pytest.approx(losses(frozen["once"]), rel=1e-4, abs=1e-6)
    learning = {m: run(trainer, tmp_path / m, *data, "--advantage-recompute", m) for m in ("once", "epoch", "minibatch")}
    for m in ("epoch", "minibatch"):
        assert losses(learning[m])[3:] != pytest.approx(losses(learning["once"])[3:], rel=1e-3)
    recompute_phase = "perf/update/value_recompute_s" if trainer is ppo else "perf/learner/value_recompute_s"
    assert recompute_phase in learning["epoch"][-1]
    if trainer is ppo:  # PPO's once is the rollout's values: no forward pass again
        assert recompute_phase not in learning["once"][-1]


def test_ppo_once_is_the_default_and_minibatch_is_impalas():
    assert ppo.Args().advantage_recompute == "once" and impala.Args().advantage_recompute == "minibatch"


@pytest.mark.parametrize("trainer", [ppo, impala], ids=["ppo", "impala"])
def test_synthetic_runs_without_environments(tmp_path, trainer, monkeypatch):
    def no_envs(*args, **kwargs):
        raise AssertionError("--synthetic created environments")
    monkeypatch.setattr(trainer, "EnvGroups" if trainer is ppo else "make_envs", no_envs)
    rows = run(trainer, tmp_path, "--synthetic", "--env-id", "Breakout-v5", "--hidden-sizes", "8",
               "--ca-backend", "loop", iterations=2)
    assert len(rows) == 2 and all(r["losses/loss"] == r["losses/loss"] for r in rows)  # finite, not NaN
    assert not any(k.startswith(("perf/rollout/", "perf/actor/")) for k in rows[-1])


def test_hidden_sizes_shape_the_mlp(tmp_path):
    out = ppo.main(ppo.cli(["--runs-dir", str(tmp_path), *PPO_TINY, "--total-timesteps", "64", "--synthetic",
                            "--hidden-sizes", "32", "16", "8", "--save-model"]))
    import torch

    model = torch.load(Path(out["run_dir"]) / "checkpoints" / "final.pt", weights_only=False)["model"]
    widths = [v.shape[0] for k, v in model.items() if k.startswith("torso.net") and k.endswith("weight")]
    assert widths == [32, 16, 8]


def test_impala_actor_keeps_acting_while_the_learner_captures(tmp_path):
    """The captured backend records its CUDA graph with the actor thread running (eager on the CPU)."""
    rows = run(impala, tmp_path, "--ca-backend", "captured,triton", iterations=4)
    assert [r["perf/ca_backend_index"] for r in rows] == [0, 1, 0, 1]
    assert rows[0]["check/ca_rel_err_captured"] < EQUIVALENCE_TOL
