"""``--overlap-rollout`` (rltrain/overlap.py): the envs step rollout k+1 while update k runs.

* the behaviour policy of each rollout, recomputed from the parameters recorded before every update: rollout
  k+1 acted with the parameters from before update k (log-probabilities and values), not with those it is
  learned with; the first two rollouts of a run are on-policy;
* the run takes the configured iterations and env steps (no rollout beyond the last iteration), the same
  for the same seed, and its phases: the main thread's add up to the iteration, the collector thread's
  are logged apart;
* Ctrl-C with a rollout in flight keeps a checkpoint and --resume goes on; two ranks under torchrun;
* the pieces: the parameter-and-buffer snapshot, a collector thread's failure raised in the main thread,
  the phase table's overlapped block, the flag against --synthetic.

The runs are CartPole-v1 on the CPU (the collector in a thread); the same checks on a GPU (its own CUDA
stream, the policy step and the update replayed from CUDA graphs) run where one is present.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import threading
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from agents import make_agent
from conftest import load_script, torchrun
from envs import EnvGroups
from rltrain.collector import RolloutCollector
from rltrain.config import ConfigError
from rltrain.overlap import Rollouts, copy_module_state
from rltrain.timers import PhaseTable, PhaseTimer

ROOT = Path(__file__).resolve().parents[1]
ppo = load_script("ppo")

N, T, ITERATIONS = 4, 16, 6
BATCH = N * T
FLAGS = ["--num-envs", str(N), "--num-steps", str(T), "--num-minibatches", "2", "--update-epochs", "2",
         "--learning-rate", "0.01", "--no-anneal-lr", "--ca-backend", "loop", "--no-progress", "--seed", "5",
         "--overlap-rollout", "--norm-value"]  # value statistics are buffers: the snapshot must carry them


def metrics(run_dir) -> list:
    return [json.loads(line) for line in open(Path(run_dir) / "metrics.jsonl")]


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=[
    pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")])])
def recorded(request, tmp_path_factory):
    """An overlapped run of ITERATIONS iterations; per iteration, the agent's parameters when it starts (before
    its update) and the rollout it learns from; and how many rollouts the collector took."""
    device = request.param
    seen, collects = [], []
    collect, collector_collect = Rollouts.collect, RolloutCollector.collect

    def recording(self, timer, *, start_next):
        before = {k: v.detach().cpu().clone() for k, v in self.agent.state_dict().items()}
        episodes = collect(self, timer, start_next=start_next)
        rollout = {k: getattr(self.buf, k).cpu().clone() for k in ("obs", "actions", "logprobs", "values")}
        rollout["bootstrap"] = (self.bootstrap_obs.cpu().clone(), self.bootstrap_value.cpu().clone())
        seen.append((before, rollout))
        return episodes

    def counting(self, timer):
        collects.append(threading.current_thread().name)
        return collector_collect(self, timer)

    flags = [*FLAGS, "--total-timesteps", str(ITERATIONS * BATCH), "--runs-dir", str(tmp_path_factory.mktemp("run"))]
    flags += ["--graph-update"] if device == "cuda" else ["--no-cuda"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Rollouts, "collect", recording)
        mp.setattr(RolloutCollector, "collect", counting)
        out = ppo.main(ppo.cli(flags))
    return {"device": device, "out": out, "seen": seen, "collects": collects, "rows": metrics(out["run_dir"])}


def behaviour(params: dict, rollout: dict):
    """Log-probabilities of the rollout's actions and values of its states (and V(s_T)) under ``params``."""
    agent = make_agent("mlp", (4,), True, 2, norm_value=True)
    agent.load_state_dict(params)
    with torch.no_grad():
        obs, actions = rollout["obs"].flatten(0, 1), rollout["actions"].flatten(0, 1)
        _, logprob, _, value = agent.get_action_and_value(obs, actions)
        bootstrap = agent.get_value(rollout["bootstrap"][0])
    return logprob.view(T, N), value.view(T, N), bootstrap


def test_rollout_k_plus_1_acts_with_the_parameters_from_before_update_k(recorded):
    """Rollout k (k >= 3) holds the log-probabilities and values of the parameters from before update k-1 --
    the behaviour policy PPO's ratio is taken against -- and not of those from before update k, which it is
    learned with; rollouts 1 and 2 (the synchronous start) hold those of the parameters they are learned with."""
    seen = recorded["seen"]
    assert len(seen) == ITERATIONS
    tol = dict(rtol=1e-4, atol=1e-5)
    for k, (params, rollout) in enumerate(seen, start=1):
        acted = seen[k - 2][0] if k >= 3 else params
        logprob, value, bootstrap = behaviour(acted, rollout)
        torch.testing.assert_close(rollout["logprobs"], logprob, **tol, msg=f"rollout {k}")
        torch.testing.assert_close(rollout["values"], value, **tol, msg=f"rollout {k}")
        torch.testing.assert_close(rollout["bootstrap"][1], bootstrap, **tol, msg=f"rollout {k}")
        if k >= 3:  # one update stale: the parameters it is learned with give other log-probabilities
            now, _, _ = behaviour(params, rollout)
            assert (now - rollout["logprobs"]).abs().max() > 1e-3, k


def test_the_run_takes_the_configured_iterations_and_env_steps(recorded):
    """Every rollout is collected once and learned from once: ITERATIONS rollouts for ITERATIONS iterations (the
    last starts none), the first two on the main thread, the others in the collector thread."""
    rows, out = recorded["rows"], recorded["out"]
    assert [r["charts/iteration"] for r in rows] == list(range(1, ITERATIONS + 1))
    assert [r["global_step"] for r in rows] == [BATCH * i for i in range(1, ITERATIONS + 1)]
    assert out["global_step"] == ITERATIONS * BATCH
    assert recorded["collects"] == ["MainThread"] * 2 + ["rollout-collector"] * (ITERATIONS - 2)


def test_the_main_thread_phases_add_up_to_the_iteration_and_the_collector_is_logged_apart(recorded):
    """The main thread's phases -- the wait for the collector thread included -- account for the iteration but for
    its readout (losses, episode figures, logging: milliseconds); the collector thread's phases are logged apart."""
    rows = recorded["rows"]
    outside = []
    for i, row in enumerate(rows, start=1):
        main = row["perf/rollout_s"] + row["perf/ca_s"] + row["perf/update_s"]
        assert main <= row["perf/iteration_s"] * 1.01
        outside.append(row["perf/iteration_s"] - main)
        overlapped = {k for k in row if k.startswith("perf/overlapped/")}
        if 2 <= i < ITERATIONS:  # a rollout was collected beside this update
            assert {"perf/overlapped/rollout_s", "perf/overlapped/rollout/env_s",
                    "perf/overlapped/rollout/inference_s", "perf/rollout/wait_s"} <= set(row)
            subs = sum(row[k] for k in overlapped if k.count("/") == 3)
            assert subs == pytest.approx(row["perf/overlapped/rollout_s"], rel=1e-6)
        else:
            assert not overlapped
        if i >= 3:  # the collector thread stepped this iteration's envs: the main thread did not
            assert "perf/rollout/env_s" not in row and "perf/rollout/handoff_s" in row
    # a rollout/wait left out would leave the collector thread's rollout outside the phases: tens of ms or more
    assert statistics.median(outside) < 0.02


def test_the_same_seed_gives_the_same_overlapped_run(recorded, tmp_path):
    """The collector thread draws its actions from a generator of its own, the update's minibatches from the
    global one: the same seed gives the same losses whatever the threads' timing."""
    if recorded["device"] != "cpu":
        pytest.skip("bit-identical runs on the CPU")
    again = ppo.main(ppo.cli([*FLAGS, "--total-timesteps", str(ITERATIONS * BATCH), "--runs-dir", str(tmp_path),
                              "--no-cuda"]))
    keys = ("losses/loss", "losses/approx_kl", "charts/episodic_return")
    assert [[r.get(k) for k in keys] for r in metrics(again["run_dir"])] == \
        [[r.get(k) for k in keys] for r in recorded["rows"]]


def test_ctrl_c_with_a_rollout_in_flight_keeps_a_checkpoint_and_resumes(tmp_path, monkeypatch):
    """A Ctrl-C arriving while the collector thread steps the next rollout: the iteration finishes, its
    checkpoint is kept (the rollout in flight is dropped), and --resume goes on from the next iteration."""
    join, in_flight = Rollouts.join, []

    def interrupted_join(self, timer):
        in_flight.append(self.in_flight)
        if in_flight == [False, True, True]:  # iteration 3, its update done, rollout 4 in flight
            os.kill(os.getpid(), signal.SIGINT)
        return join(self, timer)

    monkeypatch.setattr(Rollouts, "join", interrupted_join)
    flags = [*FLAGS, "--no-cuda", "--runs-dir", str(tmp_path / "runs"), "--checkpoint-every", "100"]
    out = ppo.main(ppo.cli([*flags, "--total-timesteps", str(ITERATIONS * BATCH)]))
    monkeypatch.setattr(Rollouts, "join", join)
    assert out["interrupted"] and out["global_step"] == 3 * BATCH
    latest = Path(out["run_dir"]) / "checkpoints" / "latest.pt"
    assert torch.load(latest, weights_only=False)["iteration"] == 3
    resumed = ppo.main(ppo.cli(["--resume", str(latest), "--no-progress", "--total-timesteps", str(5 * BATCH)]))
    assert resumed["global_step"] == 5 * BATCH and not resumed["interrupted"]
    rows = metrics(out["run_dir"])
    assert [r["charts/iteration"] for r in rows] == [1, 2, 3, 4, 5]
    assert [r["global_step"] for r in rows] == [BATCH * i for i in range(1, 6)]


@pytest.mark.slow
def test_two_ranks_each_with_a_collector_thread(tmp_path):
    """Under torchrun (2 CPU ranks, Gloo) each rank collects in a thread of its own; the observation statistics
    are all-reduced and the checkpoints written once the rollouts are in."""
    done, _ = torchrun(str(ROOT / "scripts" / "ppo.py"), *FLAGS, "--no-cuda", "--num-threads", "1",
                       "--total-timesteps", str(4 * BATCH), "--runs-dir", str(tmp_path), "--norm-obs",
                       "--checkpoint-every", "2", "--dist-timeout-s", "60")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = metrics(run_dir)
    assert [r["global_step"] for r in rows] == [BATCH * i for i in range(1, 5)]
    assert "perf/overlapped/rollout_s" in rows[2]


# ------------------------------------------------------------------ the pieces
def test_the_snapshot_copies_parameters_and_buffers_in_place():
    class WithStats(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(3, 2)
            self.register_buffer("mean", torch.zeros(3))

    src, dst = WithStats(), WithStats()
    with torch.no_grad():
        src.mean.fill_(4.0)
    addresses = [t.data_ptr() for t in (*dst.parameters(), *dst.buffers())]
    copy_module_state(dst, src)
    assert torch.equal(dst.mean, src.mean) and torch.equal(dst.linear.weight, src.linear.weight)
    assert [t.data_ptr() for t in (*dst.parameters(), *dst.buffers())] == addresses  # a graph's addresses hold
    with pytest.raises(ValueError, match="mean"):
        copy_module_state(nn.Linear(3, 2), src)


def _rollouts(overlap_on: bool = True) -> Rollouts:
    torch.manual_seed(0)
    return Rollouts(EnvGroups("CartPole-v1", 2, 1, seed=1, num_threads=1), make_agent("mlp", (4,), True, 2), 8,
                    "cpu", overlap=overlap_on)


def test_a_failure_in_the_collector_thread_is_raised_in_the_main_thread(monkeypatch):
    rollouts, timer = _rollouts(), PhaseTimer("cpu")
    calls = []

    def collect(timer):
        calls.append(threading.current_thread().name)
        if len(calls) == 3:
            raise RuntimeError("EnvPool went away")
        return [], []

    monkeypatch.setattr(rollouts.collector, "collect", collect)
    rollouts.collect(timer, start_next=True)  # the first: synchronous, nothing started
    assert rollouts.join(timer) == {}
    rollouts.collect(timer, start_next=True)  # synchronous, then rollout 3 in the background
    with pytest.raises(RuntimeError, match="EnvPool went away") as failure:
        rollouts.join(timer)
    assert calls == ["MainThread", "MainThread", "rollout-collector"]
    assert any(entry.name == "collect" for entry in failure.traceback)  # the collector thread's frames
    assert not rollouts.in_flight


def test_close_joins_the_collection_in_flight():
    rollouts, timer = _rollouts(), PhaseTimer("cpu")
    rollouts.collect(timer, start_next=True)
    rollouts.collect(timer, start_next=True)
    assert rollouts.in_flight
    rollouts.close()
    assert not rollouts.in_flight and "rollout-collector" not in {t.name for t in threading.enumerate()}


def test_without_the_flag_the_collector_acts_with_the_agent_into_the_learners_storage():
    """Synchronous: no copy of the agent, no second storage, no thread."""
    rollouts = _rollouts(overlap_on=False)
    assert rollouts.acting is rollouts.agent and rollouts.buf is rollouts.collector.buf
    rollouts.collect(PhaseTimer("cpu"), start_next=True)
    rollouts.collect(PhaseTimer("cpu"), start_next=True)
    assert not rollouts.in_flight


def test_the_phase_table_shows_the_overlapped_phases_apart_from_the_total():
    table = PhaseTable(warmup=0)
    for _ in range(2):
        table.add({"rollout/wait": 0.6, "update/graph_step": 0.4}, 1.0,
                  overlapped={"rollout/env": 0.9, "rollout/inference": 0.05})
    lines = table.format().splitlines()
    total = next(i for i, line in enumerate(lines) if line.startswith("timed total"))
    assert lines[total].split()[2:4] == ["2.000", "1000.00"]  # the main thread's phases alone
    block = lines[total + 2:]
    assert block[0].startswith("overlapped")
    assert block[1].split() == ["rollout", "1.900", "950.00", "95.00%"]  # the share of the timed total
    assert block[2].split() == ["rollout/env", "1.800", "900.00", "90.00%"]
    assert not any(line.strip().startswith("rollout/env") for line in lines[:total])


def test_overlap_needs_environments(tmp_path):
    with pytest.raises(ConfigError, match="--overlap-rollout.*--synthetic"):
        ppo.main(ppo.cli(["--synthetic", "--overlap-rollout", "--runs-dir", str(tmp_path)]))
