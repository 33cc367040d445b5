"""Resume carries the whole state: a run restored from its checkpoint holds what the run held when it wrote
it -- the optimizer's per-parameter state, the scheduler, the normalisers, the RNG states, the episode
window -- and its next iteration gives the parameters the uninterrupted run has after it (CPU,
deterministic).

Each trainer runs twice in the test's process: once uninterrupted, with a checkpoint written at iteration
k, and once resumed from that checkpoint.  What the first run held at the checkpoint and what the second
holds right after restoring it are recorded (``TrainerState.save`` / ``restore`` and ``start_run``
wrapped); the final parameters are read from the runs' ``final.pt``.

For both runs to see the same data after iteration k:

* PPO steps scripted envs whose transitions repeat every rollout and never end an episode on a
  rollout's last step, so a resumed run, which starts its episodes afresh, collects the same rollout
  as the uninterrupted one (reward normalisation on: its running return is part of the state; not
  observation normalisation, whose statistics take in the fresh start's first observations once more);
* IMPALA learns with ``--synthetic`` from one fixed trajectory batch, as a learner does from its actors.
"""

import copy
from pathlib import Path

import numpy as np
import torch

from agents import make_agent
from conftest import load_script
from envs.synthetic import random_trajectory
from rltrain.checkpoint import load_checkpoint
from rltrain.seeding import get_rng_state
from rltrain.trainer import TrainerState, start_run
from scripted_envs import OBS_DIM, NUM_ACTIONS, ScriptedGroups

ppo = load_script("ppo")
impala = load_script("impala")

T = 8
PERIODIC_SCRIPTS = [  # each cycle (episodes and their dummy steps) divides T; the cycle's last step is a dummy
    [(3, "terminated"), (3, "truncated")],
    [(7, "truncated")],
    [(3, "truncated")],
    [],
]


def assert_same(a, b, where: str = "") -> None:
    """``a`` and ``b`` equal all the way down (tensors and arrays: same dtype and values)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), (where, sorted(a), sorted(b))
        for k in a:
            assert_same(a[k], b[k], f"{where}/{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif torch.is_tensor(a):
        assert torch.is_tensor(b) and a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b), where
    else:
        assert a == b, (where, a, b)


class Recorder:
    """Wraps a trainer module's ``TrainerState`` and ``start_run``: what a run held when it wrote each
    checkpoint (``saved``, by iteration) and right after restoring one (``restored``)."""

    def __init__(self, module, monkeypatch):
        self.saved, self.restored = {}, []
        recorder = self

        class RecordingState(TrainerState):
            def save(self, path, **kwargs):
                window = kwargs["recent_returns"]
                recorder.saved[kwargs["iteration"]] = {**recorder.snapshot(self),
                                                       "window": (list(window), window.maxlen)}
                super().save(path, **kwargs)

            def restore(self, ckpt, rank_state=None):
                super().restore(ckpt, rank_state)
                recorder.restored.append(recorder.snapshot(self))

        def recording_start_run(*args, **kwargs):
            run = start_run(*args, **kwargs)
            if run.resumed:
                recorder.restored[-1]["window"] = (list(run.recent_returns), run.recent_returns.maxlen)
            return run

        monkeypatch.setattr(module, "TrainerState", RecordingState)
        monkeypatch.setattr(module, "start_run", recording_start_run)

    @staticmethod
    def snapshot(state: TrainerState) -> dict:
        return copy.deepcopy({
            "model": state.model.state_dict(), "optimizer": state.optimizer.state_dict(),
            "scheduler": state.scheduler.state_dict(), "rng": get_rng_state(),
            "extras": {k: v.state_dict() if v is not None else None for k, v in state.extras.items()}})


def final_model(run_dir) -> dict:
    return load_checkpoint(Path(run_dir) / "checkpoints" / "final.pt")["model"]


def check_resumed_state(recorder: Recorder, at: int, steps: int) -> None:
    """The restored run holds what the first run held at its checkpoint of iteration ``at``, after
    ``steps`` optimizer steps (so that there is a per-parameter state to lose)."""
    saved, (restored,) = recorder.saved[at], recorder.restored
    optimizer_state = saved["optimizer"]["state"]
    assert optimizer_state and all(int(s["step"]) == steps for s in optimizer_state.values())
    assert saved["scheduler"]["last_epoch"] == at
    for key in ("optimizer", "scheduler", "extras", "rng", "window"):
        assert_same(restored[key], saved[key], key)


def test_ppo_resumes_with_its_whole_state_and_continues_as_the_uninterrupted_run(tmp_path, monkeypatch):
    iterations, at, minibatches = 4, 3, 2
    monkeypatch.setattr(ppo, "EnvGroups", lambda env_id, num_envs, num_groups, seed, num_threads:
                        ScriptedGroups(PERIODIC_SCRIPTS, num_groups, period=T))
    recorder = Recorder(ppo, monkeypatch)
    flags = ["--num-envs", str(len(PERIODIC_SCRIPTS)), "--num-steps", str(T), "--num-minibatches", str(minibatches),
             "--update-epochs", "2", "--total-timesteps", str(iterations * T * len(PERIODIC_SCRIPTS)),
             "--norm-reward", "--checkpoint-every", str(at), "--save-model", "--ca-shadow-every", "0",
             "--no-progress"]
    first = ppo.main(ppo.cli(["--runs-dir", str(tmp_path), *flags]))
    uninterrupted = final_model(first["run_dir"])
    resumed = ppo.main(ppo.cli(["--resume", str(Path(first["run_dir"]) / "checkpoints" / "latest.pt")]))

    assert resumed["run_dir"] == first["run_dir"] and resumed["global_step"] == first["global_step"]
    check_resumed_state(recorder, at, steps=at * 2 * minibatches)
    assert recorder.saved[at]["extras"]["rew_norm"] is not None
    assert recorder.saved[at]["window"][0]  # episodes ended before the checkpoint
    assert_same(final_model(resumed["run_dir"]), uninterrupted, "model")


def test_impala_resumes_with_its_whole_state_and_continues_as_the_uninterrupted_run(tmp_path, monkeypatch):
    updates, at, minibatches, width = 3, 2, 2, 4
    torch.manual_seed(5)  # one fixed batch: what the actors would hand either run
    behaviour = make_agent("auto", (OBS_DIM,), True, NUM_ACTIONS)
    batch = random_trajectory(behaviour, num_steps=T, num_envs=width, obs_shape=(OBS_DIM,), obs_dtype=torch.float32,
                              action_shape=(), action_dtype=torch.long, device=torch.device("cpu"), seed=3)
    monkeypatch.setattr(impala, "random_trajectory", lambda agent, **kwargs: batch)
    recorder = Recorder(impala, monkeypatch)
    flags = ["--synthetic", "--num-envs", str(width), "--num-steps", str(T), "--num-minibatches", str(minibatches),
             "--update-epochs", "2", "--total-timesteps", str(updates * T * width), "--checkpoint-every", str(at),
             "--save-model", "--ca-shadow-every", "0", "--no-progress"]
    first = impala.main(impala.cli(["--runs-dir", str(tmp_path), *flags]))
    uninterrupted = final_model(first["run_dir"])
    resumed = impala.main(impala.cli(["--resume", str(Path(first["run_dir"]) / "checkpoints" / "latest.pt")]))

    assert resumed["global_step"] == first["global_step"]
    check_resumed_state(recorder, at, steps=at * 2 * minibatches)
    assert_same(final_model(resumed["run_dir"]), uninterrupted, "model")

