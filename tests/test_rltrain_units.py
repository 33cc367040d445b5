"""Unit tests of rltrain/: timers, Amdahl, checkpoints, config, seeding, rollout storage."""

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import torch

from rltrain.checkpoint import load_checkpoint, save_checkpoint
from conftest import load_script
from rltrain.config import ConfigError, load_yaml_preset, parse_args
from rltrain.rollout import RolloutBuffer, minibatch_indices
from rltrain.seeding import get_rng_state, seed_everything, set_rng_state
from rltrain.timers import PhaseTable, PhaseTimer, amdahl_speedup, group_totals


def test_amdahl():
    assert amdahl_speedup(0.0, 10) == pytest.approx(1.0)
    assert amdahl_speedup(1.0, 10) == pytest.approx(10.0)
    assert amdahl_speedup(0.5, 2) == pytest.approx(1 / (0.5 + 0.25))
    with pytest.raises(ValueError):
        amdahl_speedup(0.5, 0)


def test_phase_timer_sums_to_wall_cpu(clock):
    timer = PhaseTimer("cpu")
    t0 = clock()
    for _ in range(5):
        with timer.phase("rollout/env"):
            clock.advance(0.01)
        with timer.phase("ca"):
            clock.advance(0.002)
        with timer.phase("update/forward"):
            clock.advance(0.005)
    secs = timer.read()
    wall = clock() - t0
    assert secs == pytest.approx({"rollout/env": 0.05, "ca": 0.01, "update/forward": 0.025})
    assert sum(secs.values()) == pytest.approx(wall)
    assert timer.read() == {}  # read resets
    g = group_totals(secs)
    assert g["rollout"] == secs["rollout/env"] and g["update"] == secs["update/forward"]
    table = PhaseTable(warmup=0)
    table.add(secs, wall)
    text = table.format()
    assert "rollout/env" in text and "timed total" in text


def test_phase_table_leaves_out_warmup():
    table = PhaseTable(warmup=1)
    table.add({"ca": 5.0}, 5.0)  # first iteration: compilation
    table.add({"ca": 0.001, "update/forward": 0.009}, 0.01)
    assert table.iterations == 1 and table.totals["ca"] == pytest.approx(0.001)
    assert "after 1 warm-up" in table.format()


def test_checkpoint_atomic(tmp_path):
    path = tmp_path / "ck" / "latest.pt"
    save_checkpoint({"a": torch.arange(3), "step": 1}, path)
    save_checkpoint({"a": torch.arange(4), "step": 2}, path)
    assert load_checkpoint(path)["step"] == 2
    assert [p.name for p in path.parent.iterdir()] == ["latest.pt"]  # no temp files left

    class Boom:
        def __reduce__(self):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        save_checkpoint({"x": Boom()}, path)  # a failed write keeps the old file
    assert load_checkpoint(path)["step"] == 2
    assert [p.name for p in path.parent.iterdir()] == ["latest.pt"]
    with pytest.raises(ConfigError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "missing.pt")


@dataclass
class _Args:
    learning_rate: float = 1e-3
    num_envs: int = 4
    config: str = ""


def test_config_precedence(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("learning-rate: 0.5\nnum_envs: 16\n")
    a = parse_args(_Args, ["--config", str(cfg)])
    assert (a.learning_rate, a.num_envs, a.config) == (0.5, 16, str(cfg))
    a = parse_args(_Args, ["--config", str(cfg), "--num-envs", "3"])
    assert (a.learning_rate, a.num_envs) == (0.5, 3)


def test_config_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("learning_rate: [0.1\n")
    with pytest.raises(ConfigError, match="does not parse"):
        parse_args(_Args, ["--config", str(bad)])
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("learning_rat: 0.1\n")
    with pytest.raises(ConfigError, match="unknown field 'learning_rat'.*learning_rate"):
        parse_args(_Args, ["--config", str(unknown)])
    with pytest.raises(ConfigError, match="not found"):
        parse_args(_Args, ["--config", str(tmp_path / "nope.yaml")])


def test_seeding_roundtrip():
    seed_everything(3)
    state = get_rng_state()
    a = (torch.rand(3), np.random.rand(3))
    set_rng_state(state)
    b = (torch.rand(3), np.random.rand(3))
    assert torch.equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_seeding_chooses_deterministic_or_fast_numerics():
    """--torch-deterministic: deterministic cuDNN, full-fp32 matrix products; off: timed cuDNN, TF32."""
    saved = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
             torch.backends.cuda.matmul.allow_tf32)
    try:
        seed_everything(0, deterministic=False)
        assert not torch.backends.cudnn.deterministic and torch.backends.cudnn.benchmark
        assert torch.backends.cuda.matmul.allow_tf32
        seed_everything(0, deterministic=True)
        assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
        assert not torch.backends.cuda.matmul.allow_tf32
    finally:
        (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
         torch.backends.cuda.matmul.allow_tf32) = saved


def test_rollout_buffer_and_minibatches():
    buf = RolloutBuffer.allocate(5, 3, (4,), torch.float32, (), torch.long, torch.device("cpu"))
    assert buf.obs.shape == (5, 3, 4) and buf.valid.dtype == torch.bool and buf.valid.all()
    flat = buf.flat(advantages=torch.zeros(5, 3))
    assert flat["obs"].shape == (15, 4) and flat["advantages"].shape == (15,)
    idx = minibatch_indices(15, 5, torch.device("cpu"))
    assert idx.shape == (3, 5) and sorted(idx.flatten().tolist()) == list(range(15))
    with pytest.raises(ValueError):
        minibatch_indices(15, 4, torch.device("cpu"))


@pytest.mark.parametrize("script, preset", [("ppo", "classic_control.yaml"), ("impala", "impala_classic_control.yaml")])
def test_classic_control_preset_is_the_defaults(script, preset):
    """The classic-control presets say they hold their script's defaults; they must not drift from them."""
    args_cls = load_script(script).Args
    values = load_yaml_preset(Path(__file__).resolve().parents[1] / "configs" / preset, args_cls)
    defaults = dataclasses.asdict(args_cls())
    assert values and {k: defaults[k] for k in values} == values


def test_trainer_state_roundtrip_and_resume_defaults(tmp_path):
    """A checkpoint restores model, optimizer, scheduler, RNG and extras; its saved args become the
    defaults of the next parse, flags still win; the learning rate of the flags replaces the saved one."""
    from envs import RunningMeanStd
    from rltrain.trainer import TrainerState, parse_trainer_args

    @dataclass
    class Args:
        TRAINER: ClassVar[str] = "ppo"
        learning_rate: float = 0.1
        num_envs: int = 4
        env_id: str = "CartPole-v1"
        resume: str = ""
        config: str = ""

    def build(lr):
        model = torch.nn.Linear(3, 2)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: 1.0 - it / 10)
        return model, opt, sched, RunningMeanStd((3,))

    model, opt, sched, rms = build(0.1)
    model(torch.randn(5, 3)).sum().backward()
    opt.step()
    sched.step()
    rms.update(torch.randn(7, 3))
    seed_everything(5)
    path = tmp_path / "latest.pt"
    TrainerState(Args(num_envs=8), model, opt, sched, rms=rms, unused=None).save(
        path, iteration=3, global_step=96, recent_returns=[1.0, 2.0], run_dir=tmp_path, wall_s=12.5)
    expected_draw = torch.rand(2)

    args = parse_trainer_args(Args, ["--resume", str(path), "--learning-rate", "0.5"])
    assert (args.num_envs, args.learning_rate) == (8, 0.5)  # saved args are defaults, flags win
    model2, opt2, sched2, rms2 = build(args.learning_rate)
    ckpt = load_checkpoint(path)
    assert ckpt["unused"] is None and ckpt["iteration"] == 3 and ckpt["recent_returns"] == [1.0, 2.0]
    assert ckpt["wall_s"] == 12.5
    TrainerState(args, model2, opt2, sched2, rms=rms2, unused=None).restore(ckpt)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), model2.state_dict().values()))
    assert torch.equal(rms2.mean, rms.mean) and torch.equal(rms2.count, rms.count)
    assert sched2.last_epoch == 1 and sched2.base_lrs == [0.5]
    assert torch.equal(torch.rand(2), expected_draw)  # RNG restored
    with pytest.raises(ConfigError, match="checkpoint not found"):
        parse_trainer_args(Args, ["--resume", str(tmp_path / "missing.pt")])


@pytest.mark.parametrize("saved_channels_last", [False, True])
def test_restore_lays_adam_moments_out_like_the_parameters(tmp_path, saved_channels_last, device, fp32_cuda):
    """A checkpoint of one memory layout resumed by a model of the other: the moments take the
    parameters' strides, so fused Adam (a flat walk over weight, gradient and moments) takes the step
    the saved model would have taken."""
    from types import SimpleNamespace

    from agents import make_agent
    from rltrain.trainer import TrainerState

    def build(channels_last):
        torch.manual_seed(0)
        agent = make_agent("nature_cnn", (4, 36, 36), True, 3)
        agent.torso.channels_last = channels_last
        agent = agent.to(device)
        opt = torch.optim.Adam(agent.parameters(), lr=1e-3, eps=1e-5, fused=True)
        return agent, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda it: 1.0)

    gen = torch.Generator().manual_seed(1)
    frames = torch.randint(0, 256, (16, 4, 36, 36), dtype=torch.uint8, generator=gen).to(device)
    actions = torch.randint(0, 3, (16,), generator=gen).to(device)

    def step(agent, opt):
        opt.zero_grad()
        _, logp, ent, value = agent.get_action_and_value(frames, actions)
        (logp.sum() + ent.sum() + value.square().sum()).backward()
        opt.step()

    saved, opt, sched = build(saved_channels_last)
    for _ in range(2):
        step(saved, opt)
    save_checkpoint({"model": saved.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                     "rng": get_rng_state()}, tmp_path / "latest.pt")
    ckpt = load_checkpoint(tmp_path / "latest.pt")
    resumed, opt2, sched2 = build(not saved_channels_last)
    TrainerState(SimpleNamespace(learning_rate=1e-3), resumed, opt2, sched2).restore(ckpt)
    for p in resumed.parameters():
        assert all(v.stride() == p.stride() for v in opt2.state[p].values() if v.shape == p.shape)
    step(saved, opt)
    step(resumed, opt2)
    for p, q in zip(saved.parameters(), resumed.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("error, code", [("config", 2), ("nonfinite", 3), ("other", 4)])
def test_run_main_exit_codes(capsys, error, code):
    from rltrain.config import DistributedArgs
    from rltrain.losses import NonFiniteLossError
    from rltrain.trainer import run_main

    class OtherError(RuntimeError):
        pass

    errors = {"config": ConfigError("bad --num-envs"), "nonfinite": NonFiniteLossError("nan at iteration 3"),
              "other": OtherError("actor 0 failed")}
    contexts = []

    def main(args, ctx):
        contexts.append(ctx)
        raise errors[error]

    @dataclass
    class Args(DistributedArgs):
        cuda: bool = False

    with pytest.raises(SystemExit) as exit_info:
        run_main(main, Args, {OtherError: 4})
    assert exit_info.value.code == code
    assert capsys.readouterr().err == f"error: {errors[error]}\n"
    assert not contexts[0].is_distributed  # a plain run: no process group
