"""scripts/impala.py --compile on the CPU: the compiled minibatch forward pass and loss train like the eager
ones (V-trace and Retrace, targets per minibatch and per epoch, and under torchrun with DDP), and the masked
explained variance they log.

IMPALA's actor threads make two real runs differ, so the trainer runs learn from ``--synthetic`` batches
(one random trajectory batch, the same for the same seed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import load_script, torchrun
from rltrain.losses import explained_variance

ROOT = Path(__file__).resolve().parents[1]
impala = load_script("impala")
# 3 updates of 2 epochs x 2 minibatches of 2 env columns: both loss graphs (with and without diagnostics)
TINY = ["--synthetic", "--num-steps", "8", "--num-minibatches", "2", "--update-epochs", "2", "--ca-backend", "triton",
        "--save-model", "--no-progress"]
LOSSES = ("losses/loss", "losses/policy_loss", "losses/value_loss", "losses/approx_kl", "losses/explained_variance")


def rows(run_dir) -> list:
    return [json.loads(line) for line in open(Path(run_dir) / "metrics.jsonl")]


def final_model(run_dir) -> dict:
    return torch.load(Path(run_dir) / "checkpoints" / "final.pt", weights_only=False)["model"]


def assert_same_training(eager_dir, compiled_dir) -> None:
    eager, compiled = rows(eager_dir), rows(compiled_dir)
    assert len(eager) == len(compiled) == 3
    for a, b in zip(eager, compiled):
        for k in LOSSES:
            assert b[k] == pytest.approx(a[k], rel=1e-4, abs=1e-6), k
    ma, mb = final_model(eager_dir), final_model(compiled_dir)
    assert ma.keys() == mb.keys()
    for k in ma:
        assert torch.allclose(ma[k], mb[k], rtol=1e-4, atol=1e-6), k


def test_explained_variance_is_that_of_the_valid_rows():
    g = torch.Generator().manual_seed(0)
    y, pred = torch.randn(16, 5, generator=g), torch.randn(16, 5, generator=g)
    mask = torch.rand(16, 5, generator=g) > 0.3
    expected = 1 - (y[mask] - pred[mask]).var() / y[mask].var()
    assert explained_variance(y, pred, mask.float()) == pytest.approx(expected.item(), rel=1e-5)
    one = torch.zeros(16, 5)
    one[3, 2] = 1
    assert explained_variance(y, pred, one).isnan() and explained_variance(y, pred, torch.zeros(16, 5)).isnan()


@pytest.mark.parametrize("correction, recompute", [("vtrace", "minibatch"), ("retrace", "epoch")])
def test_compile_trains_like_eager(tmp_path, correction, recompute):
    """The same seed and batch: the same losses every update and the same parameters at the end; the
    learner's phases are still timed apart (the credit assignment between the compiled pieces)."""
    flags = [*TINY, "--num-envs", "4", "--total-timesteps", "96", "--correction", correction,
             "--advantage-recompute", recompute]
    eager = impala.main(impala.cli(["--runs-dir", str(tmp_path / "eager"), *flags]))
    torch._dynamo.reset()  # compile from scratch, whatever ran in this process before
    compiled = impala.main(impala.cli(["--runs-dir", str(tmp_path / "compiled"), *flags, "--compile"]))
    assert_same_training(eager["run_dir"], compiled["run_dir"])
    last = rows(compiled["run_dir"])[-1]
    for phase in ("forward", "ca", "backward", "optim"):
        assert last[f"perf/learner/{phase}_s"] > 0, phase


@pytest.mark.slow
def test_compile_under_torchrun_trains_like_eager(tmp_path):
    """2 CPU ranks (Gloo, DDP): the compiled forward pass calls the DDP wrapper, whose own forward Dynamo
    leaves uncompiled while it compiles the agent under it; the gradients are still averaged over the ranks
    (about a minute: each rank compiles)."""
    flags = [*TINY, "--num-envs", "8", "--total-timesteps", "192", "--no-cuda", "--num-threads", "1",
             "--dist-timeout-s", "300"]  # 4 envs a rank
    for name, extra in (("eager", ()), ("compiled", ("--compile",))):
        done, _ = torchrun(str(ROOT / "scripts" / "impala.py"), *flags, *extra, "--runs-dir", str(tmp_path / name),
                           timeout=600)
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        assert "parameters identical on all 2 ranks" in done.stdout
    (eager_dir,), (compiled_dir,) = (list((tmp_path / name).iterdir()) for name in ("eager", "compiled"))
    assert_same_training(eager_dir, compiled_dir)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: actors replaying CUDA graphs")
def test_compile_with_actor_threads_on_cuda(tmp_path):
    """Two actors replay their CUDA-graph policy steps while the learner compiles and runs its compiled
    pieces (Triton kernels of Inductor's and the fused V-trace kernel on one device): the run finishes with
    finite losses and every learner phase timed."""
    updates, batch = 40, 16 * 16
    out = impala.main(impala.cli(["--runs-dir", str(tmp_path), "--no-progress", "--num-envs", "64", "--num-actors", "2",
                                  "--learner-batch-envs", "16", "--num-steps", "16",
                                  "--total-timesteps", str(updates * batch), "--compile", "--actor-timeout-s", "120"]))
    logged = rows(out["run_dir"])
    assert len(logged) == updates and out["global_step"] == updates * batch
    assert all(torch.isfinite(torch.tensor([r[k] for k in LOSSES[:4]])).all() for r in logged)
    for phase in ("forward", "ca", "backward", "optim"):
        assert logged[-1][f"perf/learner/{phase}_s"] > 0, phase
