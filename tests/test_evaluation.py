"""Evaluation (rltrain/evaluation.py, scripts/evaluate.py, the trainers' --eval-every): full episodes,
scores as JSON, a video, and a clear error when a codec package is missing."""

from __future__ import annotations

import builtins
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rltrain.config import ConfigError  # noqa: E402
from rltrain.evaluation import VideoRecorder, evaluate  # noqa: E402

ppo, impala, evaluate_script = load_script("ppo"), load_script("impala"), load_script("evaluate")


class EpisodesOfKnownLength:
    """Next-step-autoreset vector env: env ``i``'s episodes last ``lengths[i]`` steps with reward 1 a
    step, so a score is the episode's length; even episodes terminate, odd ones are truncated."""

    def __init__(self, lengths):
        self.lengths = np.asarray(lengths)
        self.t = np.zeros(len(lengths), np.int64)
        self.episode = np.zeros(len(lengths), np.int64)
        self.ended = np.zeros(len(lengths), bool)

    def reset(self):
        return np.zeros((len(self.lengths), 1), np.float32), {}

    def step(self, action):
        reward = np.where(self.ended, 0.0, 1.0)
        self.episode += self.ended
        self.t = np.where(self.ended, 0, self.t + 1)
        end = self.t >= self.lengths
        term, trunc = end & (self.episode % 2 == 0), end & (self.episode % 2 == 1)
        self.ended = end
        return np.zeros((len(self.lengths), 1), np.float32), reward, term, trunc, {}

    def render(self, env_ids):
        return np.full((len(env_ids), 6, 5, 3), self.t[env_ids[0]] % 255, np.uint8)


def test_each_env_plays_its_quota_so_short_episodes_are_not_favoured():
    envs = EpisodesOfKnownLength([2, 10, 3])
    result = evaluate(lambda obs: np.zeros(len(obs)), envs, num_envs=3, episodes=7)
    assert sorted(result.scores) == [2, 2, 2, 3, 3, 10, 10]  # quotas 3, 2, 2 (env order), lengths as scores
    assert result.lengths == [int(s) for s in result.scores]
    assert result.mean == pytest.approx(32 / 7) and result.std == pytest.approx(np.std(result.scores))


def test_recorder_takes_env_0s_first_episode(tmp_path):
    pytest.importorskip("imageio")
    envs = EpisodesOfKnownLength([4, 9])
    recorder = VideoRecorder(tmp_path / "ep.gif", fps=10)
    evaluate(lambda obs: np.zeros(len(obs)), envs, num_envs=2, episodes=4, recorder=recorder)
    assert recorder.frames == 1 + 4  # the first observation, then one frame per step of the episode
    assert (tmp_path / "ep.gif").stat().st_size > 0


def test_missing_codec_package_is_named(tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_ffmpeg(name, *args, **kwargs):
        if name == "imageio_ffmpeg":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ffmpeg)
    with pytest.raises(ConfigError, match=r"needs the package imageio-ffmpeg \(pip install imageio-ffmpeg\)"):
        VideoRecorder(tmp_path / "ep.mp4")
    with pytest.raises(ConfigError, match="must end in .mp4 or .gif"):
        VideoRecorder(tmp_path / "ep.avi")


@pytest.fixture(scope="module")
def cartpole_checkpoint(tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    out = ppo.main(ppo.cli(["--runs-dir", str(runs), "--num-envs", "4", "--num-steps", "32",
                            "--total-timesteps", "512", "--no-progress", "--save-model"]))
    return Path(out["run_dir"]) / "checkpoints" / "final.pt"


def test_evaluate_script_writes_json_and_video(cartpole_checkpoint, tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "evaluate.py"), "--checkpoint", str(cartpole_checkpoint),
                        "--episodes", "5", "--num-envs", "2", "--video", str(tmp_path / "cartpole.mp4"),
                        "--json", str(tmp_path / "scores.json")], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    report = json.loads((tmp_path / "scores.json").read_text())
    assert report["episodes"] == len(report["scores"]) == 5 and report["env_id"] == "CartPole-v1"
    assert report["mean"] == pytest.approx(np.mean(report["scores"])) and report["policy"] == "sampled"
    assert report["trainer"] == "ppo" and report["command"].startswith("python scripts/evaluate.py --checkpoint ")
    assert {"device_name", "torch", "date"} <= set(report["meta"])
    assert all(1 <= s <= 500 for s in report["scores"])
    assert f"score {report['mean']:.2f} +- {report['std']:.2f} over 5 episodes" in r.stdout
    import imageio.v2 as imageio
    reader = imageio.get_reader(tmp_path / "cartpole.mp4")
    first, frames = reader.get_data(0), reader.count_frames()
    reader.close()
    assert first.shape == (400, 600, 3) and frames >= 2  # gymnasium's CartPole picture, one frame a step
    assert f"({frames} frames)" in r.stdout


def test_greedy_policy_is_deterministic(cartpole_checkpoint):
    a = evaluate_script.main(evaluate_script.Args(checkpoint=str(cartpole_checkpoint), episodes=3, num_envs=3,
                                                  greedy=True, seed=4))
    b = evaluate_script.main(evaluate_script.Args(checkpoint=str(cartpole_checkpoint), episodes=3, num_envs=3,
                                                  greedy=True, seed=4))
    assert a["scores"] == b["scores"] and a["policy"] == "greedy"


def test_evaluate_rejects_what_is_not_a_checkpoint(tmp_path):
    with pytest.raises(ConfigError, match="checkpoint not found"):
        evaluate_script.main(evaluate_script.Args(checkpoint=str(tmp_path / "missing.pt")))
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(ConfigError, match="is not a checkpoint of scripts/ppo.py or scripts/impala.py"):
        evaluate_script.main(evaluate_script.Args(checkpoint=str(tmp_path / "other.pt")))


@pytest.mark.parametrize("script,flags,message", [
    ("evaluate", ["--checkpoint", "missing.pt"], "error: checkpoint not found: missing.pt"),
    ("time_to_score", ["missing"], "error: no metrics.jsonl in missing"),
])
def test_tools_exit_2_naming_the_bad_input(script, flags, message, tmp_path):
    """The tools beside the trainers end bad input as the trainers do: the message, exit status 2."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{script}.py"), *flags], capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1] == message, r.stderr[-2000:]


def test_atari_evaluation_plays_whole_games_with_game_scores(tmp_path):
    """Breakout with episodic life off: one episode is a whole game (5 lives), scores unclipped."""
    out = ppo.main(ppo.cli(["--runs-dir", str(tmp_path), "--env-id", "Breakout-v5", "--num-envs", "2",
                            "--num-steps", "8", "--num-minibatches", "2", "--update-epochs", "1",
                            "--total-timesteps", "16", "--no-progress", "--save-model"]))
    report = evaluate_script.main(evaluate_script.Args(
        checkpoint=str(Path(out["run_dir"]) / "checkpoints" / "final.pt"), episodes=2, num_envs=2))
    # a game of 5 lives with a near-random policy lasts well over one life (about 30-60 agent steps)
    assert report["episodes"] == 2 and min(report["lengths"]) > 60


@pytest.mark.parametrize("script", ["ppo", "impala"])
def test_eval_every_logs_the_score(script, tmp_path):
    mod = {"ppo": ppo, "impala": impala}[script]
    out = mod.main(mod.cli(["--runs-dir", str(tmp_path), "--num-envs", "4", "--num-steps", "16",
                            "--total-timesteps", "256", "--no-progress", "--eval-every", "2", "--eval-episodes", "3"]))
    rows = [json.loads(line) for line in open(Path(out["run_dir"]) / "metrics.jsonl")]
    evaluated = [r for r in rows if "eval/score" in r]
    assert [r["charts/iteration"] for r in evaluated] == [2, 4]
    assert all(r["eval/score"] >= 1 and r["eval/score_std"] >= 0 for r in evaluated)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: the policy on the GPU, uint8 Atari frames")
def test_atari_on_cuda_eval_every_and_evaluate_with_video(tmp_path):
    pytest.importorskip("imageio_ffmpeg")
    out = ppo.main(ppo.cli(["--runs-dir", str(tmp_path), "--config", str(ROOT / "configs" / "atari.yaml"),
                            "--env-id", "Pong-v5", "--num-envs", "64", "--num-steps", "8", "--minibatch-size", "256",
                            "--total-timesteps", "1024", "--no-progress", "--save-model", "--eval-every", "2",
                            "--eval-episodes", "2"]))
    rows = [json.loads(line) for line in open(Path(out["run_dir"]) / "metrics.jsonl")]
    assert [r["eval/score"] for r in rows if "eval/score" in r] and all(-21 <= r["eval/score"] <= 21 for r in rows
                                                                        if "eval/score" in r)
    report = evaluate_script.main(evaluate_script.Args(
        checkpoint=str(Path(out["run_dir"]) / "checkpoints" / "final.pt"), episodes=2, num_envs=2,
        video=str(tmp_path / "pong.mp4")))
    assert report["device"] == "cuda" and all(-21 <= s <= 21 for s in report["scores"])
    assert (tmp_path / "pong.mp4").stat().st_size > 0
