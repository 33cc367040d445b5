"""End-to-end tests of scripts/ppo.py (CPU): smoke runs, timers, seeding,
checkpoint/resume, bad input.  The long CartPole learning test is in
tests/test_ppo_learning.py."""

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import load_script, needs_mujoco
from rltrain.config import ConfigError
from rltrain.trainer import run_main

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "ppo.py"
TINY = ["--num-envs", "2", "--num-steps", "8", "--num-minibatches", "2", "--update-epochs", "1",
        "--no-progress"]


ppo = load_script("ppo")


def run_inproc(tmp_path, *flags):
    args = ppo.cli(["--runs-dir", str(tmp_path / "runs"), *flags])
    return ppo.main(args)


def run_cli(tmp_path, *flags, env=None, timeout=300):
    env = dict(os.environ if env is None else env)
    return subprocess.run([sys.executable, str(SCRIPT), "--runs-dir", str(tmp_path / "runs"), *flags],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def metrics(run_dir):
    return [json.loads(line) for line in open(Path(run_dir) / "metrics.jsonl")]


# ------------------------------------------------------------------ smoke runs
def test_smoke_atari(tmp_path):
    out = run_inproc(tmp_path, "--env-id", "Breakout-v5", *TINY, "--total-timesteps", "32",
                     "--ca-backend", "triton")
    rows = metrics(out["run_dir"])
    assert out["global_step"] == 32 and len(rows) == 2
    assert {"losses/value_loss", "perf/ca_s", "perf/rollout/env_s", "perf/ca_backend_index",
            "perf/ca_share_update", "perf/ca_share_iteration", "charts/SPS"} <= set(rows[-1])
    assert list((Path(out["run_dir"])).glob("events.out.tfevents.*"))  # TensorBoard


@needs_mujoco
def test_smoke_mujoco_gaussian_normalized(tmp_path):
    out = run_inproc(tmp_path, "--config", str(ROOT / "configs" / "mujoco.yaml"), "--env-id", "Hopper-v4",
                     *TINY, "--total-timesteps", "32", "--ca-backend", "triton", "--save-model")
    assert out["global_step"] == 32
    ck = torch.load(Path(out["run_dir"]) / "checkpoints" / "final.pt", weights_only=False)
    assert ck["obs_norm"] is not None and ck["rew_norm"] is not None and ck["args"]["norm_obs"]


def test_short_run_triton_interpreter(tmp_path):
    """The fused kernel's Triton code under the interpreter (CI sets TRITON_INTERPRET=1)."""
    env = dict(os.environ, TRITON_INTERPRET="1")
    r = run_cli(tmp_path, "--ca-backend", "triton", "--num-envs", "4", "--num-steps", "32",
                "--total-timesteps", "256", "--no-progress", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "GAE backend triton |" in r.stdout + r.stderr  # the kernels ran, interpreted


def test_timers_sum_to_iteration_time(tmp_path):
    """The phases cover the iteration: their sum is within 5% of its wall time in the median
    iteration (one iteration of these tiny ones can lose more than that to the OS under load, outside
    any phase), and never exceeds it; the sub-phases sum to the phases exactly."""
    out = run_inproc(tmp_path, "--num-envs", "4", "--num-steps", "64", "--total-timesteps", "2048",
                     "--ca-backend", "triton", "--no-progress")
    rows = metrics(out["run_dir"])
    covered = []
    for row in rows:
        phases = row["perf/rollout_s"] + row["perf/ca_s"] + row["perf/update_s"]
        covered.append(phases / row["perf/iteration_s"])
        assert phases <= row["perf/iteration_s"] * 1.01  # CUDA events: microsecond resolution
        subs = row["perf/ca_s"] + sum(v for k, v in row.items() if k.startswith("perf/") and k.count("/") == 2)
        assert subs == pytest.approx(phases, rel=1e-6)
    assert len(rows) == 8 and statistics.median(covered) == pytest.approx(1.0, rel=0.05)


def test_same_seed_same_result(tmp_path):
    flags = ["--num-envs", "4", "--num-steps", "32", "--total-timesteps", "256", "--ca-backend", "triton",
             "--save-model", "--no-progress"]
    a = run_inproc(tmp_path / "a", *flags)
    b = run_inproc(tmp_path / "b", *flags)
    ma = torch.load(Path(a["run_dir"]) / "checkpoints" / "final.pt", weights_only=False)["model"]
    mb = torch.load(Path(b["run_dir"]) / "checkpoints" / "final.pt", weights_only=False)["model"]
    assert all(torch.equal(ma[k], mb[k]) for k in ma)
    la = [r["losses/loss"] for r in metrics(a["run_dir"])]
    assert la == [r["losses/loss"] for r in metrics(b["run_dir"])]


def test_env_groups_short_run(tmp_path):
    """Two env groups stepped in turn (the CUDA default) on the CPU: the run completes, the rollout
    phases cover the iteration."""
    out = run_inproc(tmp_path, "--env-groups", "2", "--num-envs", "4", "--num-steps", "16",
                     "--total-timesteps", "192", "--ca-backend", "triton", "--no-progress")
    rows = metrics(out["run_dir"])
    assert out["global_step"] == 192 and len(rows) == 3
    for row in rows:
        phases = row["perf/rollout_s"] + row["perf/ca_s"] + row["perf/update_s"]
        assert phases <= row["perf/iteration_s"] * 1.01
        assert {"perf/rollout/env_s", "perf/rollout/inference_s", "perf/rollout/h2d_s", "perf/rollout/d2h_s"} <= set(row)


def test_compile_gives_the_eager_losses(tmp_path):
    """--compile (torch.compile of the minibatch loss, backward through it) trains like the eager loss."""
    flags = ["--num-envs", "4", "--num-steps", "16", "--total-timesteps", "128", "--update-epochs", "2",
             "--ca-backend", "triton", "--save-model", "--no-progress"]
    eager = run_inproc(tmp_path / "eager", *flags)
    compiled = run_inproc(tmp_path / "compiled", *flags, "--compile")
    for a, b in zip(metrics(eager["run_dir"]), metrics(compiled["run_dir"])):
        for k in ("losses/loss", "losses/value_loss", "losses/approx_kl"):
            assert b[k] == pytest.approx(a[k], rel=1e-4, abs=1e-7), k
    ma = torch.load(Path(eager["run_dir"]) / "checkpoints" / "final.pt", weights_only=False)["model"]
    mb = torch.load(Path(compiled["run_dir"]) / "checkpoints" / "final.pt", weights_only=False)["model"]
    assert all(torch.allclose(ma[k], mb[k], rtol=1e-4, atol=1e-6) for k in ma)


@pytest.mark.slow
def test_track_wandb_offline(tmp_path):
    env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true")
    r = run_cli(tmp_path, "--track", *TINY, "--total-timesteps", "32", "--ca-backend", "triton", env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert list((tmp_path / "runs").glob("*/wandb/offline-run-*"))


# ------------------------------------------------------------------ checkpoint / resume
@pytest.mark.slow
def test_resume_after_kill(tmp_path):
    flags = ["--num-envs", "4", "--num-steps", "128", "--total-timesteps", str(4 * 128 * 12),
             "--checkpoint-every", "2", "--ca-backend", "triton", "--no-progress"]
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--runs-dir", str(tmp_path / "runs"), *flags],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    ckpts = []
    while time.time() < deadline and not ckpts and proc.poll() is None:
        ckpts = list((tmp_path / "runs").glob("*/checkpoints/latest.pt"))
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert ckpts, "no checkpoint was written before the run ended"
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    ck = torch.load(ckpts[0], weights_only=False)
    done_it = ck["iteration"]
    assert done_it < 12 and ck["global_step"] == done_it * 512
    r = run_cli(tmp_path, "--resume", str(ckpts[0]), env=dict(os.environ, TRITON_INTERPRET="0"))
    assert r.returncode == 0, r.stderr[-3000:]
    rows = metrics(ckpts[0].parents[1])
    its = [row["charts/iteration"] for row in rows]
    assert its[-1] == 12 and rows[-1]["global_step"] == 12 * 512
    assert sorted(set(its)) == list(range(1, 13))  # no iteration lost after the checkpoint
    assert torch.load(ckpts[0], weights_only=False)["iteration"] == 12


def test_ctrl_c_finishes_the_iteration_keeps_a_checkpoint_and_resumes(tmp_path):
    """The first Ctrl-C stops the run after its iteration with a checkpoint of that iteration (exit 0), also
    without --checkpoint-every, and says where it is; --resume goes on from its global step without losing
    an iteration."""
    flags = ["--num-envs", "4", "--num-steps", "32", "--total-timesteps", str(4 * 32 * 400),
             "--ca-backend", "loop", "--no-progress"]
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--runs-dir", str(tmp_path / "runs"), *flags],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    rows = []
    while time.time() < deadline and len(rows) < 2 and proc.poll() is None:
        logs = list((tmp_path / "runs").glob("*/metrics.jsonl"))
        rows = logs[0].read_text().splitlines() if logs else []
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out[-3000:]
    (ckpt,) = (tmp_path / "runs").glob("*/checkpoints/latest.pt")
    saved = torch.load(ckpt, weights_only=False)
    stopped = saved["iteration"]
    assert 2 <= stopped < 400 and f"interrupted at iteration {stopped}; continue with --resume {ckpt}\n" in out
    logged = metrics(ckpt.parents[1])
    assert [row["charts/iteration"] for row in logged] == list(range(1, stopped + 1))  # finished, logged, kept
    assert saved["global_step"] == logged[-1]["global_step"] == stopped * 4 * 32
    r = run_cli(tmp_path, "--resume", str(ckpt), "--total-timesteps", str(4 * 32 * (stopped + 2)))
    assert r.returncode == 0, r.stderr[-3000:]
    resumed = metrics(ckpt.parents[1])[stopped:]  # the resumed segment's rows go on from the saved step
    assert [(row["charts/iteration"], row["global_step"]) for row in resumed] == [
        (stopped + 1, saved["global_step"] + 4 * 32), (stopped + 2, saved["global_step"] + 2 * 4 * 32)]


def test_default_step_budget_fits_any_number_of_envs():
    """Without --total-timesteps: 300,000 steps, or 40 rollouts where one rollout is large (the README's
    `--num-envs 4096` runs 40 iterations instead of stopping at a batch larger than the budget)."""
    assert ppo.cli(["--num-envs", "8"]).with_step_budget().total_timesteps == 300_000
    assert ppo.cli(["--num-envs", "4096"]).with_step_budget().total_timesteps == 40 * 128 * 4096
    assert ppo.cli(["--num-envs", "4096", "--total-timesteps", "600000"]).with_step_budget().total_timesteps == 600_000


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("flags,message", [
    (["--env-id", "Breakout-v4x"], "unknown env id 'Breakout-v4x'.*Did you mean"),
    (["--num-envs", "0"], "--num-envs must be an integer >= 1, got 0"),
    (["--num-envs", "3", "--num-steps", "5", "--num-minibatches", "4"], "does not divide the batch"),
    (["--num-envs", "4", "--env-groups", "3"], "--env-groups 3 must divide --num-envs 4"),
])
def test_bad_input_inproc(tmp_path, flags, message):
    with pytest.raises(ConfigError, match=message):
        run_inproc(tmp_path, *flags)


def test_bad_input_cli_exit_code(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("num_envs: [4\n")
    r = run_cli(tmp_path, "--config", str(bad))
    assert r.returncode == 2 and "does not parse" in r.stderr
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("num_env: 4\n")
    with pytest.raises(ConfigError, match="unknown field 'num_env'.*num_envs"):
        ppo.cli(["--config", str(unknown)])
    r = run_cli(tmp_path, "--env-id", "Pong-v6")
    assert r.returncode == 2 and "Pong-v5" in r.stderr


@pytest.mark.parametrize("flags,message", [
    (["--agent", "nature_cnn"], "--agent nature_cnn needs image observations [C, H, W]; CartPole-v1's have shape (4,): "
                                "use --agent mlp (or auto)"),
    (["--runs-dir", "{tmp}/a_file/runs"], "--runs-dir {tmp}/a_file/runs: cannot create the run folder "
                                          "{tmp}/a_file/runs/CartPole-v1__ppo__1__"),
    (["--runs-dir", "/proc/nope"],
     "--runs-dir /proc/nope: cannot create the run folder /proc/nope/CartPole-v1__ppo__1__"),
    (["--exp-name", "a/b"], "--exp-name must be a name of letters, digits, '.', '_', '+', '=', '-' starting with a "
                            "letter or digit (no '/'), got 'a/b'"),
    (["--config", "{tmp}/empty.yaml"], "config file {tmp}/empty.yaml sets no field (it is empty or holds only "
                                       "comments); write field: value lines, or leave --config out"),
])
def test_bad_input_is_exit_2_with_one_line_and_no_run_folder(tmp_path, capsys, flags, message):
    """What the script's ``__main__`` runs: ``error: <message>`` on stderr, exit status 2, no traceback, and
    no run folder in --runs-dir."""
    if "/proc/nope" in flags and not Path("/proc/self").is_dir():
        pytest.skip("no /proc here")
    (tmp_path / "a_file").write_text("a file, not a folder\n")
    (tmp_path / "empty.yaml").write_text("# nothing set\n")
    flags = [f.format(tmp=tmp_path) for f in flags]
    runs = ["--runs-dir", str(tmp_path / "runs")] if "--runs-dir" not in flags else []
    with pytest.raises(SystemExit) as e:
        run_main(ppo.main, lambda: ppo.cli([*runs, *TINY, "--total-timesteps", "32", *flags]))
    assert e.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: " + message.format(tmp=tmp_path)), line
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
def test_nan_loss_stops_and_keeps_checkpoint(tmp_path):
    first = run_inproc(tmp_path, "--num-envs", "4", "--num-steps", "32", "--total-timesteps", "256",
                       "--checkpoint-every", "1", "--ca-backend", "triton", "--no-progress")
    latest = Path(first["run_dir"]) / "checkpoints" / "latest.pt"
    r = run_cli(tmp_path, "--resume", str(latest), "--total-timesteps", "512", "--learning-rate", "1e30")
    assert r.returncode == 3, r.stderr[-3000:]
    last_logged = metrics(first["run_dir"])[-1]["charts/iteration"]
    assert last_logged >= 2 and "non-finite loss" in r.stderr
    assert f"at iteration {last_logged + 1} " in r.stderr  # names the iteration that failed
    kept = torch.load(latest, weights_only=False)  # the last good checkpoint is kept, loadable
    assert kept["iteration"] == last_logged
    assert all(torch.isfinite(v).all() for v in kept["model"].values())


def test_graph_update_takes_the_same_steps_as_the_eager_update(tmp_path):
    """``--graph-update`` (replayed from a CUDA graph on CUDA, eager on the gathered rows elsewhere):
    the same losses, learning-rate schedule and parameters as without it, through a resume -- also
    one that records a run whose checkpoint an eager segment wrote."""
    def run(first, resumed, name):
        flags = ["--runs-dir", str(tmp_path / name), "--num-envs", "4", "--num-steps", "16", "--no-progress",
                 "--seed", "3", "--num-minibatches", "2", "--update-epochs", "2", "--torch-deterministic",
                 "--checkpoint-every", "2", "--save-model"]
        out = ppo.main(ppo.cli([*flags, *first, "--total-timesteps", str(4 * 16 * 2)]))
        latest = Path(out["run_dir"]) / "checkpoints" / "latest.pt"
        ppo.main(ppo.cli(["--resume", str(latest), "--total-timesteps", str(4 * 16 * 4), "--no-progress", *resumed]))
        rows = [json.loads(line) for line in open(Path(out["run_dir"]) / "metrics.jsonl")]
        final = torch.load(Path(out["run_dir"]) / "checkpoints" / "final.pt", weights_only=False)
        return rows, final["model"]

    eager_rows, eager_model = run([], ["--no-graph-update"], "eager")
    for first, resumed in ((["--graph-update"], []), ([], ["--graph-update"])):
        rows, model = run(first, resumed, "graph" + str(len(first)))
        assert len(rows) == len(eager_rows) == 4
        for key in ("losses/loss", "losses/approx_kl", "charts/learning_rate"):
            assert [r[key] for r in rows] == pytest.approx([r[key] for r in eager_rows], rel=1e-4, abs=1e-6), key
        assert rows[-1]["charts/learning_rate"] < rows[0]["charts/learning_rate"]  # annealed
        for name, value in eager_model.items():
            torch.testing.assert_close(model[name], value, rtol=1e-4, atol=1e-5)
