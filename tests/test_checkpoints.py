"""Checkpoints that belong to their run (rltrain/checkpoint.py, the trainers' --resume, scripts/evaluate.py):
each records the trainer, environment and network that wrote it; --resume refuses another trainer's,
environment's or network's checkpoint before a file is touched; a file that is not a whole checkpoint
is exit 2 naming it, in all three scripts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents import make_agent  # noqa: E402
from rltrain.checkpoint import (FORMAT_VERSION, CheckpointError, Origin, load_checkpoint, network_of,  # noqa: E402
                                origin_of, save_checkpoint)
from rltrain.config import ConfigError, exit_on_config_error  # noqa: E402
from rltrain.trainer import run_main  # noqa: E402

ppo, impala, evaluate_script = load_script("ppo"), load_script("impala"), load_script("evaluate")
TRAINERS = {"ppo": ppo, "impala": impala}
TINY = {"ppo": ["--num-envs", "2", "--num-steps", "8", "--num-minibatches", "2", "--update-epochs", "1",
                "--total-timesteps", "32", "--no-progress"],  # 2 iterations
        "impala": ["--num-envs", "4", "--num-steps", "8", "--total-timesteps", "64", "--no-progress"]}  # 2 updates


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A finished PPO run and a finished IMPALA run on CartPole-v1, each with its ``final.pt``, in one runs folder."""
    root = tmp_path_factory.mktemp("runs")
    folders = {name: Path(mod.main(mod.cli(["--runs-dir", str(root), *TINY[name], "--save-model"]))["run_dir"])
               for name, mod in TRAINERS.items()}
    return root, folders


def files(root: Path) -> dict:
    """Every file under ``root`` and its bytes."""
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def exit_status(script: str, argv: list, capsys) -> tuple:
    """``(exit status, stderr)`` of the script's entry point (what its ``__main__`` runs) on ``argv``."""
    with pytest.raises(SystemExit) as e:
        if script == "evaluate":
            exit_on_config_error(lambda: evaluate_script.main(evaluate_script.Args(checkpoint=argv[1])))
        else:
            run_main(TRAINERS[script].main, lambda: TRAINERS[script].cli(argv))
    return e.value.code, capsys.readouterr().err


# ----------------------------------------------------------------------------- the record
def test_a_checkpoint_records_its_trainer_environment_network_and_format(runs):
    _, folders = runs
    for trainer, folder in folders.items():
        ckpt = load_checkpoint(folder / "checkpoints" / "final.pt")
        assert {k: ckpt[k] for k in ("format", "trainer", "env_id", "network")} == {
            "format": FORMAT_VERSION, "trainer": trainer, "env_id": "CartPole-v1", "network": "mlp 64x64"}


@pytest.mark.parametrize("arch,obs_shape,kwargs,expected", [
    ("mlp", (4,), {}, "mlp 64x64"),
    ("auto", (4,), {"hidden": (32, 16, 8)}, "mlp 32x16x8"),
    ("mlp", (4,), {"q_head": True}, "mlp 64x64, Q critic"),
    ("auto", (4, 36, 36), {}, "nature_cnn"),
    ("impala_resnet", (4, 36, 36), {"q_head": True}, "impala_resnet, Q critic"),
])
def test_the_network_is_named_from_its_weights(arch, obs_shape, kwargs, expected):
    assert network_of(make_agent(arch, obs_shape, True, 3, **kwargs).state_dict()) == expected


def test_a_checkpoint_without_the_record_is_known_by_its_args_and_weights():
    """Checkpoints written before the record: IMPALA's args have ``correction``, PPO's do not."""
    model = make_agent("mlp", (4,), True, 2, q_head=True).state_dict()
    assert origin_of({"args": {"env_id": "Acrobot-v1", "correction": "retrace"}, "model": model}) == Origin(
        "impala", "Acrobot-v1", "mlp 64x64, Q critic")
    assert origin_of({"args": {"env_id": "CartPole-v1", "gae_lambda": 0.95}, "model": model}).trainer == "ppo"


def test_a_checkpoint_of_a_newer_format_is_named(tmp_path):
    save_checkpoint({"format": FORMAT_VERSION + 1, "args": {}, "model": {}}, tmp_path / "new.pt")
    with pytest.raises(CheckpointError, match=f"has format {FORMAT_VERSION + 1}; this rltrain reads formats up to "
                                              f"{FORMAT_VERSION}"):
        load_checkpoint(tmp_path / "new.pt")


# ----------------------------------------------------------------------------- --resume refused
def test_ppo_refuses_impalas_checkpoint_with_exit_2_and_leaves_every_file_as_it_was(runs):
    """The reported loss: PPO resumed from an IMPALA run appended its rows there and replaced its final.pt."""
    root, folders = runs
    ckpt = folders["impala"] / "checkpoints" / "final.pt"
    before = files(root)
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "ppo.py"), "--resume", str(ckpt),
                        "--total-timesteps", "20000"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 2, r.stderr[-3000:]
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"error: --resume {ckpt}: written by impala on CartPole-v1 with network mlp 64x64; "
                           f"this is ppo on CartPole-v1 (another trainer)"), line
    assert files(root) == before  # no row appended, no checkpoint replaced, no folder made


@pytest.mark.parametrize("script,written,flags,this,why", [
    ("impala", "ppo", [], "impala on CartPole-v1", "another trainer"),
    ("ppo", "ppo", ["--env-id", "Acrobot-v1"], "ppo on Acrobot-v1", "another environment"),
    ("ppo", "ppo", ["--hidden-sizes", "32", "32"], "ppo on CartPole-v1 with network mlp 32x32", "another network"),
    ("impala", "impala", ["--correction", "retrace"], "impala on CartPole-v1 with network mlp 64x64, Q critic",
     "another network"),
])
def test_resume_refuses_another_trainer_environment_or_network(runs, capsys, script, written, flags, this, why):
    root, folders = runs
    ckpt = folders[written] / "checkpoints" / "final.pt"
    before = files(root)
    code, err = exit_status(script, ["--resume", str(ckpt), "--total-timesteps", "256", *flags], capsys)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: --resume {ckpt}: written by {written} on CartPole-v1 with network mlp 64x64; "
                           f"this is {this} ({why})"), line
    assert files(root) == before


def test_a_checkpoint_without_the_record_resumes_its_own_run(tmp_path):
    """A checkpoint written before the record (no ``format``) continues with the trainer its args name."""
    first = ppo.main(ppo.cli(["--runs-dir", str(tmp_path), *TINY["ppo"], "--checkpoint-every", "1"]))
    latest = Path(first["run_dir"]) / "checkpoints" / "latest.pt"
    ckpt = torch.load(latest, weights_only=False)
    for key in ("format", "trainer", "env_id", "network"):
        del ckpt[key]
    torch.save(ckpt, latest)
    with pytest.raises(ConfigError, match=r"written by ppo on CartPole-v1 with network mlp 64x64; this is impala "):
        impala.cli(["--resume", str(latest)])
    out = ppo.main(ppo.cli(["--resume", str(latest), "--total-timesteps", "48", "--no-progress"]))
    assert out["run_dir"] == first["run_dir"] and out["global_step"] == 48  # iteration 3 of 16 steps
    assert load_checkpoint(latest)["trainer"] == "ppo"  # written again, with the record


# ----------------------------------------------------------------------------- files that are not checkpoints
def bad_checkpoint(kind: str, good: Path, folder: Path) -> Path:
    path = folder / f"{kind}.pt"
    if kind == "truncated":
        path.write_bytes(good.read_bytes()[:100])  # head -c 100
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("model: not a checkpoint\n")
    else:
        torch.save([1, 2, 3], path)  # a pickle, but not a dict
    return path


@pytest.mark.parametrize("kind,what", [
    ("truncated", "truncated or not a checkpoint (PytorchStreamReader failed reading zip archive"),
    ("empty", "truncated or not a checkpoint (the file is empty)"),
    ("text", "truncated or not a checkpoint ("),
    ("list", "not a checkpoint (it holds a list, not a dict of state)"),
])
@pytest.mark.parametrize("script", ["ppo", "impala", "evaluate"])
def test_a_file_that_is_not_a_checkpoint_is_exit_2_naming_it(runs, tmp_path, capsys, script, kind, what):
    _, folders = runs
    path = bad_checkpoint(kind, folders["ppo"] / "checkpoints" / "final.pt", tmp_path)
    flag = "--checkpoint" if script == "evaluate" else "--resume"
    code, err = exit_status(script, [flag, str(path)], capsys)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: checkpoint {path}: {what}"), line


def test_evaluate_still_reads_both_trainers_checkpoints(runs):
    _, folders = runs
    for trainer, folder in folders.items():
        report = evaluate_script.main(evaluate_script.Args(checkpoint=str(folder / "checkpoints" / "final.pt"),
                                                           episodes=2, num_envs=2))
        assert report["trainer"] == trainer and report["episodes"] == 2
