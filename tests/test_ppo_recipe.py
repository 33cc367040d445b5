"""The recipe ingredients of scripts/ppo.py against numbers worked from their math (CPU): the KL-adaptive
learning rate (rltrain/adaptive_lr.py), value normalisation (agents/value_norm.py), the IMPALA ResNet
encoder, and every preset in configs/."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn as nn

from conftest import DEVICE, load_script
from agents import ValueNormalizer, make_agent
from rltrain.adaptive_lr import adapt_learning_rate, kl_adapted_lr, tensor_learning_rate
from rltrain.config import ConfigError, load_yaml_preset
from rltrain.cuda_graph import GraphedStep, capturable_adam
from rltrain.validation import validate

ROOT = Path(__file__).resolve().parents[1]
ppo = load_script("ppo")


def metrics(run_dir):
    return [json.loads(line) for line in open(Path(run_dir) / "metrics.jsonl")]


def rule(lr: float, kl: float, target: float) -> float:
    """rl_games' adaptive schedule, written out: /1.5 above 2 x target, x1.5 below target / 2, in [1e-6, 1e-2]."""
    if kl > 2 * target:
        return max(lr / 1.5, 1e-6)
    if kl < target / 2:
        return min(lr * 1.5, 1e-2)
    return lr


# ------------------------------------------------------------------ KL-adaptive learning rate
# target 0.01: above 0.02 the rate falls by 1.5, below 0.005 it rises by 1.5, between it stays
KLS = [0.03, 0.03, 0.001, 0.01, 0.019, 0.0049, 0.021]
LRS = [1e-3 / 1.5, 1e-3 / 1.5 ** 2, 1e-3 / 1.5, 1e-3 / 1.5, 1e-3 / 1.5, 1e-3, 1e-3 / 1.5]


def test_kl_adapted_lr_follows_the_rule_and_its_bounds():
    lr = torch.tensor(1e-3)
    got = []
    for kl in KLS:
        lr = kl_adapted_lr(lr, torch.tensor(kl), 0.01)
        got.append(lr.item())
    assert got == pytest.approx(LRS, rel=1e-6)
    assert kl_adapted_lr(torch.tensor(8e-3), torch.tensor(0.0), 0.01).item() == pytest.approx(1e-2)  # not 1.2e-2
    assert kl_adapted_lr(torch.tensor(1.2e-6), torch.tensor(1.0), 0.01).item() == pytest.approx(1e-6)  # not 8e-7


def test_adapt_learning_rate_updates_the_optimizer_rate_in_place():
    model = nn.Linear(2, 1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    with pytest.raises(TypeError, match="tensor learning rate"):
        adapt_learning_rate(optimizer, torch.tensor(0.03), 0.01)
    tensor_learning_rate(optimizer, "cpu")
    lr = optimizer.param_groups[0]["lr"]
    for kl, expected in zip(KLS, LRS):
        adapt_learning_rate(optimizer, torch.tensor(kl), 0.01)
        assert optimizer.param_groups[0]["lr"] is lr and lr.item() == pytest.approx(expected, rel=1e-6)


def test_the_recorded_minibatch_step_adapts_the_rate_from_each_minibatch_kl():
    """``ppo.minibatch_step`` through :class:`GraphedStep` (--graph-update): replayed from a CUDA graph on
    CUDA, eager on the CPU; each step's KL (here read from the minibatch's rows) sets the next rate, and
    recording's warm-up steps leave the rate as it was."""
    device = torch.device(DEVICE)
    learner = nn.Linear(1, 1, bias=False).to(device)
    optimizer = (capturable_adam(learner.parameters(), 1e-3, 1e-5, device) if device.type == "cuda"
                 else torch.optim.Adam(learner.parameters(), lr=torch.tensor(1e-3)))

    def loss_fn(rows):
        loss = learner(rows["x"].unsqueeze(1)).sum()
        return loss, loss.detach().reshape(1), rows["kl"][0]

    args = SimpleNamespace(kl_adaptive_lr=0.01, kl_adaptive_every="minibatch", max_grad_norm=1.0)
    step = GraphedStep(partial(ppo.minibatch_step, args, learner, optimizer, loss_fn=loss_fn), learner.parameters(),
                       optimizer, device)
    source = {"kl": torch.tensor(KLS, device=device), "x": torch.ones(len(KLS), device=device)}
    got = []
    for i in range(len(KLS)):
        step(source, torch.tensor([i], device=device))
        got.append(float(optimizer.param_groups[0]["lr"]))
    assert got == pytest.approx(LRS, rel=1e-6)


def _recipe_run(tmp_path, name, *flags):
    common = ["--runs-dir", str(tmp_path / name), "--num-envs", "4", "--num-steps", "16", "--no-progress",
              "--seed", "5", "--num-minibatches", "1", "--update-epochs", "2", "--kl-adaptive-lr", "0.001", "--no-anneal-lr",
              "--learning-rate", "0.002", "--checkpoint-every", "2", "--ca-backend", "loop"]
    out = ppo.main(ppo.cli([*common, *flags, "--total-timesteps", str(4 * 16 * 2)]))
    latest = Path(out["run_dir"]) / "checkpoints" / "latest.pt"
    saved_lr = float(torch.load(latest, weights_only=False)["optimizer"]["param_groups"][0]["lr"])
    ppo.main(ppo.cli(["--resume", str(latest), "--total-timesteps", str(4 * 16 * 5), "--no-progress"]))
    return metrics(out["run_dir"]), saved_lr


@pytest.mark.parametrize("path", [["--no-graph-update"], ["--graph-update"]])
def test_the_trainer_adapts_the_rate_after_every_minibatch_and_resumes_it(tmp_path, path):
    """One minibatch, two epochs: the first epoch's forward is the rollout's policy (KL 0: the rate rises
    by 1.5), the second's KL is twice the logged mean.  The logged rate follows the rule from the
    logged KLs, through a resume that continues from the checkpoint's rate (iteration 2's, not
    --learning-rate); on the eager update and on --graph-update's step (eager on the CPU)."""
    rows, saved_lr = _recipe_run(tmp_path, path[0], *path)
    assert [r["charts/iteration"] for r in rows] == [1, 2, 3, 4, 5]
    lr, expected = 0.002, []
    for row in rows:
        lr = rule(rule(lr, 0.0, 0.001), 2 * row["losses/approx_kl"], 0.001)
        expected.append(lr)
    assert [r["charts/learning_rate"] for r in rows] == pytest.approx(expected, rel=1e-5)
    assert saved_lr == pytest.approx(rows[1]["charts/learning_rate"], rel=1e-6)
    assert len({round(r["charts/learning_rate"], 12) for r in rows}) > 1


@pytest.mark.parametrize("path", [["--no-graph-update"], ["--graph-update"]])
def test_per_epoch_adaptation_takes_the_epochs_mean_kl(tmp_path, path):
    """--kl-adaptive-every epoch, two minibatches, one epoch: one adaptation per iteration, from the
    mean KL of the epoch's two minibatches (the logged approximate KL), where the per-minibatch rule
    adapts twice (its first minibatch acts with the rollout's policy, KL 0: a rise by 1.5)."""
    flags = ["--runs-dir", str(tmp_path), "--num-envs", "4", "--num-steps", "16", "--no-progress", "--seed", "5",
             "--num-minibatches", "2", "--update-epochs", "1", "--kl-adaptive-lr", "0.001", "--no-anneal-lr",
             "--learning-rate", "0.002", "--ca-backend", "loop", "--total-timesteps", str(4 * 16 * 4), *path]
    rows = metrics(ppo.main(ppo.cli([*flags, "--kl-adaptive-every", "epoch"]))["run_dir"])
    lr, expected = 0.002, []
    for row in rows:
        lr = rule(lr, row["losses/approx_kl"], 0.001)
        expected.append(lr)
    assert [r["charts/learning_rate"] for r in rows] == pytest.approx(expected, rel=1e-5)
    assert len({round(r["charts/learning_rate"], 12) for r in rows}) > 1
    per_minibatch = metrics(ppo.main(ppo.cli(flags))["run_dir"])
    assert per_minibatch[0]["charts/learning_rate"] != pytest.approx(rows[0]["charts/learning_rate"], rel=1e-3)


def test_kl_adaptive_lr_and_annealing_are_exclusive():
    with pytest.raises(ConfigError, match="--kl-adaptive-lr .* give --no-anneal-lr with it"):
        validate(ppo.cli(["--kl-adaptive-lr", "0.01"]))
    validate(ppo.cli(["--kl-adaptive-lr", "0.01", "--no-anneal-lr"]))


# ------------------------------------------------------------------ value normalisation
def test_value_statistics_follow_chans_rule():
    """Starting at mean 0, variance 1, count 1e-4: a batch [1, 2, 3] (a fourth row masked out) of mean
    2, population variance 2/3, count 3 merges as n = 3.0001, mean = 2 * 3 / n,
    var = (1 * 1e-4 + 2/3 * 3 + 2^2 * 1e-4 * 3 / n) / n."""
    norm = ValueNormalizer()
    norm.update(torch.tensor([1.0, 2.0, 3.0, 100.0]), torch.tensor([True, True, True, False]))
    n = 3.0001
    assert norm.count.item() == pytest.approx(n, rel=1e-12)
    assert norm.mean.item() == pytest.approx(2 * 3 / n, rel=1e-12)
    assert norm.var.item() == pytest.approx((1e-4 + 2.0 + 4 * 1e-4 * 3 / n) / n, rel=1e-12)
    norm.update(torch.tensor([4.0, 6.0]))  # all five values: mean 3.2, variance 14.8 / 5 = 2.96
    assert norm.mean.item() == pytest.approx(3.2, rel=1e-4) and norm.var.item() == pytest.approx(2.96, rel=1e-4)
    assert norm.std().item() == pytest.approx((norm.var.item() + 1e-8) ** 0.5, rel=1e-12)


def _normalizer(mean: float, var: float) -> ValueNormalizer:
    norm = ValueNormalizer()
    norm.mean.fill_(mean)
    norm.var.fill_(var - norm.eps)  # sigma = sqrt(var - eps + eps)
    return norm


def test_the_agent_reads_de_normalised_values_and_trains_its_head_in_normalised_units():
    torch.manual_seed(0)
    agent = make_agent("mlp", (4,), True, 2, norm_value=True)
    agent.value_norm.load_state_dict(_normalizer(3.0, 4.0).state_dict())
    x = torch.randn(5, 4)
    action, _, _, head = agent.get_action_and_value(x, normalized_value=True)
    assert torch.allclose(agent.get_value(x), 2 * head + 3, atol=1e-6)
    assert torch.allclose(agent.get_action_and_value(x, action)[3], 2 * head + 3, atol=1e-6)
    assert torch.allclose(agent.act(x)[2], 2 * head + 3, atol=1e-6)
    copy = make_agent("mlp", (4,), True, 2, norm_value=True)
    copy.load_state_dict(agent.state_dict())  # the statistics travel with the parameters
    assert copy.value_norm.mean.item() == 3.0 and torch.allclose(copy.get_value(x), agent.get_value(x))
    plain = make_agent("mlp", (4,), True, 2)
    assert not any("value_norm" in k for k in plain.state_dict())  # an agent without it is unchanged


class _FixedLearner(nn.Module):
    """``learner("get_action_and_value", obs, actions, normalized_value=True)`` with fixed outputs."""

    def __init__(self, logprob, entropy, head):
        super().__init__()
        self.out = (logprob, entropy, head)

    def forward(self, method, obs, actions, normalized_value=False):
        assert method == "get_action_and_value" and normalized_value
        return (actions, *self.out)


def test_the_value_loss_compares_the_head_with_normalised_targets():
    """Statistics mean 2, std 2; rows: returns 6, 0, old values 4, 2, head outputs 0.5, -0.5 (and a
    dummy row with a huge error, masked out).  Normalised returns 2, -1, old values 1, 0; clip 0.2:
    row 0 max((0.5-2)^2, (0.8-2)^2) = 2.25, row 1 max((-0.5+1)^2, (-0.2+1)^2) = 0.64; value loss
    0.5 * (2.25 + 0.64) / 2 = 0.7225.  Ratios 1, advantages normalised: policy loss 0; entropy 1:
    loss = -0.01 * 1 + 1.0 * 0.7225."""
    norm = _normalizer(2.0, 4.0)
    b = {"obs": torch.zeros(3, 4), "actions": torch.zeros(3, dtype=torch.long), "logprobs": torch.zeros(3),
         "advantages": torch.tensor([1.0, -1.0, 0.0]), "returns": torch.tensor([6.0, 0.0, 50.0]),
         "values": torch.tensor([4.0, 2.0, 0.0])}
    valid = torch.tensor([1.0, 1.0, 0.0])
    rows = ppo.loss_source(b, valid, norm)
    learner = _FixedLearner(torch.zeros(3), torch.ones(3), torch.tensor([0.5, -0.5, 80.0]))
    args = ppo.Args(clip_coef=0.2, clip_vloss=True, vf_coef=1.0, ent_coef=0.01)
    loss, stats, _ = ppo.minibatch_loss(args, learner, rows)
    assert stats[2].item() == pytest.approx(0.7225, rel=1e-6)
    assert stats[1].item() == pytest.approx(0.0, abs=1e-7)
    assert loss.item() == pytest.approx(-0.01 + 0.7225, rel=1e-6)
    assert torch.equal(ppo.loss_source(b, valid)["returns"], b["returns"])  # without --norm-value: as they are


def test_norm_value_statistics_are_saved_and_resumed(tmp_path):
    """The returns' statistics are in the checkpoint's model; a resumed run folds its next iteration
    (at most 4 x 16 valid rows) into the saved statistics, not into fresh ones."""
    flags = ["--runs-dir", str(tmp_path), "--num-envs", "4", "--num-steps", "16", "--no-progress", "--norm-value",
             "--checkpoint-every", "2", "--ca-backend", "loop"]
    out = ppo.main(ppo.cli([*flags, "--total-timesteps", str(4 * 16 * 2)]))
    latest = Path(out["run_dir"]) / "checkpoints" / "latest.pt"
    saved = torch.load(latest, weights_only=False)["model"]
    assert 64 < saved["value_norm.count"].item() <= 2 * 64 + 1e-4 and saved["value_norm.mean"].item() > 1.0
    ppo.main(ppo.cli(["--resume", str(latest), "--total-timesteps", str(4 * 16 * 3), "--no-progress", "--save-model"]))
    final = torch.load(Path(out["run_dir"]) / "checkpoints" / "final.pt", weights_only=False)["model"]
    assert 0 < final["value_norm.count"].item() - saved["value_norm.count"].item() <= 64


@pytest.mark.slow  # two torchrun ranks: about 30 s on a 2-core CPU
def test_two_ranks_adapt_one_rate_and_keep_one_set_of_statistics(tmp_path):
    """Under torchrun (2 CPU ranks, 2 envs each): the rate follows every rank's KL and the value
    statistics take every rank's returns, so parameters and buffers stay identical on both ranks (the
    trainer checks them at every checkpoint and at the end) and the statistics count the rows of both
    ranks: more than one rank's 3 x 32 steps."""
    from conftest import torchrun

    done, _ = torchrun(str(ROOT / "scripts" / "ppo.py"), "--no-cuda", "--num-envs", "4", "--num-steps", "16",
                       "--num-minibatches", "2", "--update-epochs", "2", "--num-threads", "1", "--no-progress",
                       "--kl-adaptive-lr", "0.002", "--no-anneal-lr", "--norm-value", "--checkpoint-every", "1",
                       "--save-model", "--dist-timeout-s", "60", "--runs-dir", str(tmp_path), "--total-timesteps",
                       str(3 * 64), "--ca-backend", "loop")
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "parameters identical on all 2 ranks" in done.stdout
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    final = torch.load(run / "checkpoints" / "final.pt", weights_only=False)
    assert 3 * 32 < final["model"]["value_norm.count"].item() <= 3 * 64 + 1e-4
    assert len({r["charts/learning_rate"] for r in metrics(run)}) > 1


# ------------------------------------------------------------------ IMPALA ResNet encoder
def test_ppo_trains_the_impala_resnet_with_the_recipe_and_resumes(tmp_path):
    """--agent impala_resnet on Atari frames, with ELU, --norm-value, the KL-adaptive rate and
    --graph-update's step (eager on the CPU): it trains (the encoder's weights move, the losses are
    finite) and a resume continues from the checkpoint."""
    flags = ["--runs-dir", str(tmp_path), "--env-id", "Breakout-v5", "--agent", "impala_resnet", "--cnn-activation",
             "elu", "--num-envs", "2", "--num-steps", "8", "--num-minibatches", "2", "--update-epochs", "2",
             "--norm-value", "--kl-adaptive-lr", "0.01", "--no-anneal-lr", "--graph-update", "--checkpoint-every", "1",
             "--no-progress", "--ca-backend", "loop", "--save-model"]
    torch.manual_seed(1)
    out = ppo.main(ppo.cli([*flags, "--total-timesteps", "32"]))
    run = Path(out["run_dir"])
    first = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    assert first["args"]["agent"] == "impala_resnet" and first["iteration"] == 2
    assert "torso.stages.0.res0.conv0.weight" in first["model"] and "value_norm.mean" in first["model"]
    ppo.main(ppo.cli(["--resume", str(run / "checkpoints" / "latest.pt"), "--total-timesteps", "48", "--no-progress"]))
    rows = metrics(run)
    assert [r["charts/iteration"] for r in rows] == [1, 2, 3]
    assert all(torch.isfinite(torch.tensor(r["losses/loss"])) for r in rows)
    final = torch.load(run / "checkpoints" / "final.pt", weights_only=False)["model"]
    moved = final["torso.stages.0.conv.weight"] - first["model"]["torso.stages.0.conv.weight"]
    assert moved.abs().max() > 0
    agent = make_agent("impala_resnet", (4, 84, 84), True, 4, norm_value=True, cnn_activation="elu")
    agent.load_state_dict(final)  # the evaluation script's rebuild reads these flags back
    assert isinstance(agent.torso.fc[1], nn.ELU)


# ------------------------------------------------------------------ presets
@pytest.mark.parametrize("preset", sorted(p.name for p in (ROOT / "configs").glob("*.yaml")))
def test_every_preset_parses_and_validates(preset):
    """Each preset in configs/ names only fields of its trainer (impala_*: scripts/impala.py, the others
    scripts/ppo.py), and its values pass the trainer's validation."""
    trainer = load_script("impala" if preset.startswith("impala") else "ppo")
    path = ROOT / "configs" / preset
    values = load_yaml_preset(path, trainer.Args)
    args = trainer.cli(["--config", str(path)])
    validate(args)
    assert values and all(getattr(args, k) == v for k, v in values.items())
