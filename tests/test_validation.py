"""Flag validation (rltrain/validation.py) and the minibatch split (rltrain/minibatches.py), through
both trainers: every rule's message names the flag as typed, bad values never reach torch."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rltrain.config import ConfigError  # noqa: E402
from rltrain.minibatches import LearnerBatch, resolve_minibatches  # noqa: E402
from rltrain.validation import FIELD_RULES, validate  # noqa: E402

ppo, impala, evaluate_script = load_script("ppo"), load_script("impala"), load_script("evaluate")
TRAINERS = {"ppo": ppo, "impala": impala}

# field -> (a value that breaks its rule, what the message must say)
EXP_NAME = ("--exp-name must be a name of letters, digits, '.', '_', '+', '=', '-' starting with a letter or digit "
            "(no '/')")
BAD = {
    "exp_name": ("a/b", f"{EXP_NAME}, got 'a/b'"),
    "seed": (-1, "--seed must be an integer in [0, 1073741824], got -1"),
    "checkpoint_every": (-1, "--checkpoint-every must be an integer >= 0, got -1"),
    "eval_every": (-2, "--eval-every must be an integer >= 0, got -2"),
    "eval_episodes": (0, "--eval-episodes must be an integer >= 1, got 0"),
    "num_envs": (0, "--num-envs must be an integer >= 1, got 0"),
    "num_threads": (-1, "--num-threads must be an integer >= 0, got -1"),
    "torch_threads": (-4, "--torch-threads must be an integer >= 0, got -4"),
    "total_timesteps": (-1, "--total-timesteps must be an integer >= 0, got -1"),
    "num_steps": (0, "--num-steps must be an integer >= 1, got 0"),
    "num_minibatches": (-1, "--num-minibatches must be an integer >= 0, got -1"),
    "minibatch_size": (-64, "--minibatch-size must be an integer >= 0, got -64"),
    "update_epochs": (0, "--update-epochs must be an integer >= 1, got 0"),
    "learning_rate": (-1.0, "--learning-rate must be > 0, got -1.0"),
    "gamma": (1.5, "--gamma must be in [0, 1], got 1.5"),
    "ent_coef": (-0.01, "--ent-coef must be >= 0, got -0.01"),
    "vf_coef": (-0.5, "--vf-coef must be >= 0, got -0.5"),
    "max_grad_norm": (0.0, "--max-grad-norm must be > 0, got 0.0"),
    "ca_shadow_every": (-1, "--ca-shadow-every must be an integer >= 0, got -1"),
    "hidden_sizes": ((64, 0), "--hidden-sizes must be one or more integers >= 1, got (64, 0)"),
    "gae_lambda": (1.01, "--gae-lambda must be in [0, 1], got 1.01"),
    "clip_coef": (-0.2, "--clip-coef must be > 0, got -0.2"),
    "target_kl": (0.0, "--target-kl must be > 0 (or unset), got 0.0"),
    "kl_adaptive_lr": (-0.01, "--kl-adaptive-lr must be > 0 (or unset), got -0.01"),
    "num_actors": (0, "--num-actors must be an integer >= 1, got 0"),
    "env_groups": (-1, "--env-groups must be an integer >= 0, got -1"),
    "learner_batch_envs": (-1, "--learner-batch-envs must be an integer >= 0, got -1"),
    "env_batch_size": (-1, "--env-batch-size must be an integer >= 0, got -1"),
    "queue_size": (0, "--queue-size must be an integer >= 1, got 0"),
    "param_refresh_every": (0, "--param-refresh-every must be an integer >= 1, got 0"),
    "vtrace_lambda": (-0.1, "--vtrace-lambda must be in [0, 1], got -0.1"),
    "rho_bar": (0.0, "--rho-bar must be > 0, got 0.0"),
    "c_bar": (-1.0, "--c-bar must be > 0, got -1.0"),
    "pg_rho_bar": (0.0, "--pg-rho-bar must be > 0, got 0.0"),
    "stop_at_return": (math.inf, "--stop-at-return must be a finite number (or unset), got inf"),
    "actor_timeout_s": (0.0, "--actor-timeout-s must be > 0, got 0.0"),
    "episodes": (0, "--episodes must be an integer >= 1, got 0"),
    "fps": (0, "--fps must be an integer >= 1, got 0"),
    "dist_timeout_s": (0.0, "--dist-timeout-s must be > 0, got 0.0"),
}
CASES = [(name, field) for name, script in {**TRAINERS, "evaluate": evaluate_script}.items()
         for field in (f.name for f in dataclasses.fields(script.Args)) if field in FIELD_RULES]


def _numeric(tp) -> bool:
    args = typing.get_args(tp)
    return tp in (int, float) or (type(None) in args and any(a in (int, float) for a in args))


@pytest.mark.parametrize("script", ["ppo", "impala", "evaluate"])
def test_every_numeric_flag_has_a_rule(script):
    mod = {**TRAINERS, "evaluate": evaluate_script}[script]
    hints = typing.get_type_hints(mod.Args)
    numeric = {f.name for f in dataclasses.fields(mod.Args) if _numeric(hints[f.name])}
    assert numeric and numeric <= set(FIELD_RULES), sorted(numeric - set(FIELD_RULES))


def test_every_rule_is_exercised_here():
    assert set(FIELD_RULES) == set(BAD)


def test_no_rule_outlives_its_flag():
    flags = {f.name for mod in (*TRAINERS.values(), evaluate_script) for f in dataclasses.fields(mod.Args)}
    assert set(FIELD_RULES) <= flags, sorted(set(FIELD_RULES) - flags)


@pytest.mark.parametrize("script,field", CASES)
def test_rule_message_names_the_flag(script, field, tmp_path):
    mod = {**TRAINERS, "evaluate": evaluate_script}[script]
    value, message = BAD[field]
    args = mod.Args(checkpoint="final.pt") if mod is evaluate_script else mod.Args()
    args = dataclasses.replace(args, **{field: value})
    with pytest.raises(ConfigError) as e:
        validate(args)
    assert str(e.value) == message


@pytest.mark.parametrize("script", ["ppo", "impala"])
@pytest.mark.parametrize("flag,value,message", [
    ("--learning-rate", "-1", "--learning-rate must be > 0, got -1.0"),
    ("--gamma", "1.5", "--gamma must be in [0, 1], got 1.5"),
    ("--max-grad-norm", "0", "--max-grad-norm must be > 0, got 0.0"),
    ("--learning-rate", "nan", "--learning-rate must be > 0, got nan"),
])
def test_trainer_main_rejects_before_building_anything(script, flag, value, message, tmp_path):
    mod = TRAINERS[script]
    with pytest.raises(ConfigError, match="^" + message.replace("[", r"\[").replace("]", r"\]") + "$"):
        mod.main(mod.cli(["--runs-dir", str(tmp_path / "runs"), flag, value]))
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", ["a/b", "../runs", "..", ".hidden", "", "two words", "a\\b"])
def test_an_exp_name_that_is_not_one_folder_name_is_refused(name):
    with pytest.raises(ConfigError) as e:
        validate(ppo.cli(["--exp-name", name]))
    assert str(e.value) == f"{EXP_NAME}, got {name!r}"


def test_exp_names_in_use_are_accepted():
    for name in ("ppo", "preset-eager", "trial0", "impala-preset", "lr_3e-4", "v1.2+fix", "seed=3"):
        validate(ppo.cli(["--exp-name", name]))


def test_preset_of_the_wrong_type_is_named(tmp_path):
    preset = tmp_path / "p.yaml"
    preset.write_text("total_timesteps: 1e7\n")  # YAML reads 1e7 as a string
    with pytest.raises(ConfigError, match=r"^--total-timesteps must be an integer >= 0, got '1e7'$"):
        validate(ppo.cli(["--config", str(preset)]))


@pytest.mark.parametrize("script,flags", [("ppo", ["--clip-coef", "-0.2"]), ("impala", ["--gamma", "1.5"])])
def test_cli_exits_2_with_the_message(script, flags, tmp_path):
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{script}.py"), "--runs-dir", str(tmp_path),
                        *flags], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])))
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1] == "error: " + BAD[flags[0][2:].replace("-", "_")][1]


# ----------------------------------------------------------------------------- relations
GRAPH_OR_COMPILE = ("--graph-update and --compile each cut the update's launches: choose one (a preset's graph_update: "
                    "true is turned off by --no-graph-update)")


@pytest.mark.parametrize("script,flags,message", [
    ("impala", ["--num-envs", "16", "--num-actors", "3"], "--num-envs 16 must be a multiple of --num-actors 3"),
    ("impala", ["--num-envs", "8", "--num-actors", "2", "--env-batch-size", "5"],
     "--env-batch-size must be in [0, num_envs / num_actors = 4], got 5"),
    ("ppo", ["--num-envs", "4", "--num-steps", "8", "--total-timesteps", "31"],
     "--total-timesteps 31 is smaller than one batch (8 steps x 4 envs = 32)"),
    ("impala", ["--num-envs", "8", "--num-actors", "2", "--num-steps", "4", "--total-timesteps", "15"],
     "--total-timesteps 15 is smaller than one batch (4 steps x 4 envs = 16)"),
    ("ppo", ["--num-envs", "3", "--num-steps", "5", "--num-minibatches", "4"],
     "--num-minibatches 4 does not divide the batch of 15 steps (num_envs * num_steps)"),
    ("impala", ["--num-envs", "6", "--num-minibatches", "4"],
     "--num-minibatches 4 does not divide the batch of 6 env columns (learner_batch_envs, or num_envs / num_actors)"),
    ("impala", ["--num-envs", "8", "--learner-batch-envs", "4", "--num-minibatches", "3"],
     "--num-minibatches 3 does not divide the batch of 4 env columns (learner_batch_envs, or num_envs / num_actors)"),
    ("impala", ["--num-envs", "8", "--num-actors", "2", "--learner-batch-envs", "5"],
     "--learner-batch-envs must be in [0, num_envs / num_actors = 4] (0: 4), got 5"),
    ("impala", ["--num-envs", "16", "--learner-batch-envs", "5"],  # 16 = 5 + 5 + 5 + 1: batches across rounds
     "--learner-batch-envs 5 must divide an actor's envs (num_envs / num_actors = 16), so that every round of them "
     "makes whole learner batches"),
    ("ppo", ["--agent", "nature_cnn"],
     "--agent nature_cnn needs image observations [C, H, W]; CartPole-v1's have shape (4,): use --agent mlp (or auto)"),
    ("impala", ["--env-id", "Acrobot-v1", "--agent", "impala_resnet"],
     "--agent impala_resnet needs image observations [C, H, W]; Acrobot-v1's have shape (6,): use --agent mlp "
     "(or auto)"),
    ("ppo", ["--minibatch-size", "7", "--num-minibatches", "4"],  # 7 does not divide 1024 either: the pair is named
     "--num-minibatches 4 and --minibatch-size 7 disagree: 4 minibatches of 7 steps are 28 steps, a batch is 1024 "
     "(128 steps x 8 envs); give one of them and set the other to 0"),
    ("ppo", ["--num-envs", "6", "--env-groups", "4"], "--env-groups 4 must divide --num-envs 6"),
    ("ppo", ["--graph-update", "--compile"], GRAPH_OR_COMPILE),
    ("ppo", ["--kl-adaptive-lr", "0.01"], "--kl-adaptive-lr sets the learning rate from the policy's KL during "
     "the update and --anneal-lr would overwrite it every iteration: give --no-anneal-lr with it"),
    ("ppo", ["--kl-adaptive-every", "epoch"], "--kl-adaptive-every epoch sets when --kl-adaptive-lr adapts the rate; "
     "without --kl-adaptive-lr nothing adapts it (give a target KL)"),
    ("ppo", ["--config", str(ROOT / "configs" / "atari.yaml"), "--compile"], GRAPH_OR_COMPILE),  # the preset's graphs
])
def test_relations(script, flags, message):
    with pytest.raises(ConfigError) as e:
        validate(TRAINERS[script].cli(flags))
    assert str(e.value) == message


# ----------------------------------------------------------------------------- --minibatch-size
@pytest.mark.parametrize("n,size,expected", [
    (4, 0, (4, 256)), (0, 256, (4, 256)), (4, 256, (4, 256)), (0, 1024, (1, 1024)), (1024, 0, (1024, 1)),
])
def test_minibatch_size_and_count_derive_each_other(n, size, expected):
    assert resolve_minibatches(LearnerBatch(rows=128, columns=8), n, size) == expected


@pytest.mark.parametrize("n,size,message", [
    (4, 128, "--num-minibatches 4 and --minibatch-size 128 disagree: 4 minibatches of 128 steps are 512 steps, a "
             "batch is 1024 (128 steps x 8 envs); give one of them and set the other to 0"),
    (0, 0, "--num-minibatches and --minibatch-size are both 0; give one of them"),
    (0, 100, "--minibatch-size 100 does not divide the batch of 1024 steps (128 steps x 8 envs)"),
    (3, 0, "--num-minibatches 3 does not divide the batch of 1024 steps (num_envs * num_steps)"),
])
def test_minibatch_flags_that_disagree(n, size, message):
    with pytest.raises(ConfigError) as e:
        resolve_minibatches(LearnerBatch(rows=128, columns=8), n, size)
    assert str(e.value) == message


def test_impala_minibatches_are_whole_env_columns():
    batch = LearnerBatch(rows=16, columns=8, whole_columns=True)
    assert resolve_minibatches(batch, 0, 32) == (4, 32)  # 2 columns of 16 steps each
    assert resolve_minibatches(batch, 2, 0) == (2, 64)
    with pytest.raises(ConfigError, match="multiple of --num-steps 16"):
        resolve_minibatches(batch, 0, 8)
    with pytest.raises(ConfigError, match="does not divide the batch of 8 env columns"):
        resolve_minibatches(batch, 3, 0)


def test_minibatch_size_reaches_the_ppo_update(tmp_path):
    """--minibatch-size alone sets the split: 64 steps a minibatch, 2 minibatches x 1 epoch per iteration."""
    out = ppo.main(ppo.cli(["--runs-dir", str(tmp_path), "--num-envs", "4", "--num-steps", "32",
                            "--num-minibatches", "0", "--minibatch-size", "64", "--update-epochs", "1",
                            "--total-timesteps", "128", "--no-progress", "--save-model"]))
    import torch
    ck = torch.load(Path(out["run_dir"]) / "checkpoints" / "final.pt", weights_only=False)
    assert ck["optimizer"]["state"][0]["step"].item() == 2  # Adam steps: one per minibatch


def test_the_atari_preset_compiles_its_update_once_its_graphs_are_turned_off():
    args = TRAINERS["ppo"].cli(["--config", str(ROOT / "configs" / "atari.yaml"), "--compile", "--no-graph-update"])
    validate(args)
    assert args.compile and not args.graph_update
