"""IMPALA unit tests (fast, CPU): per-env chains under out-of-order recv, actor errors,
policy lag bound, Q head, short trainer runs (V-trace and Retrace), resume, Ctrl-C."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents import make_agent  # noqa: E402
from conftest import load_script  # noqa: E402
from envs.async_collector import TrajectoryAssembler  # noqa: E402
from rltrain.actor_learner import Actor, ActorError, ActorPool, ParamServer  # noqa: E402
from rltrain.interrupt import GracefulInterrupt  # noqa: E402


class FakeAsyncEnv:
    """EnvPool-like async env: obs = [env_id, step_in_episode, episode, global_step_of_env];
    recv returns ``batch`` envs in a random order.  Episodes end after ``ep_len`` steps, alternating
    terminated / truncated; the step after an end is a reset (reward 0), as with next-step autoreset.
    The reward of a step encodes (env, its global step, the action taken): 1000 * env + step + action / 10."""

    def __init__(self, num_envs, batch, ep_len=5, seed=0, fail_after=None, stall_after=None):
        self.N, self.B, self.ep_len = num_envs, batch, ep_len
        self.rng = np.random.default_rng(seed)
        self.t = np.zeros(num_envs, np.int64)      # step within episode
        self.ep = np.zeros(num_envs, np.int64)
        self.g = np.zeros(num_envs, np.int64)      # global step of env (obs index in its chain)
        self.done = np.zeros(num_envs, bool)
        self.ready = []                            # (env, obs, rew, term, trunc)
        self.calls, self.fail_after = 0, fail_after
        self.stall_after, self.unstall = stall_after, threading.Event()  # recv blocks until unstall is set

    def _obs(self, i):
        return np.array([i, self.t[i], self.ep[i], self.g[i]], np.float32)

    def async_reset(self):
        self.ready = [(i, self._obs(i), 0.0, False, False) for i in range(self.N)]

    def recv(self):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise ValueError("boom from the fake env")
        if self.stall_after is not None and self.calls > self.stall_after:
            self.unstall.wait()
        while len(self.ready) < self.B:
            time.sleep(0.001)
        pick = self.rng.choice(len(self.ready), self.B, replace=False)
        items = [self.ready[k] for k in pick]
        self.ready = [r for k, r in enumerate(self.ready) if k not in set(pick.tolist())]
        ids = np.array([it[0] for it in items])
        return (np.stack([it[1] for it in items]), np.array([it[2] for it in items], np.float32),
                np.array([it[3] for it in items]), np.array([it[4] for it in items]), {"env_id": ids})

    def send(self, action, env_id):
        for a, i in zip(np.asarray(action), np.asarray(env_id)):
            rew = 1000.0 * i + self.g[i] + a / 10.0
            if self.done[i]:  # autoreset step: action ignored
                self.t[i], self.ep[i], rew, term, trunc = 0, self.ep[i] + 1, 0.0, False, False
                self.done[i] = False
            else:
                self.t[i] += 1
                end = self.t[i] >= self.ep_len
                term, trunc = end and self.ep[i] % 2 == 0, end and self.ep[i] % 2 == 1
                self.done[i] = end
            self.g[i] += 1
            self.ready.append((int(i), self._obs(i), float(rew), bool(term), bool(trunc)))


def _make_actor(env, N, T, q, stop, params=None, policy=None):
    policy = policy or make_agent("mlp", (4,), True, 3)
    params = params or ParamServer(policy)
    return Actor(0, env, policy, params, q, stop, num_envs=N, num_steps=T, obs_shape=(4,),
                 obs_dtype=torch.float32, action_shape=(), action_dtype=torch.long, device=torch.device("cpu"),
                 num_actions=3, batch_size=env.B)


@pytest.mark.parametrize("N,B,T", [(6, 2, 4), (5, 3, 7), (4, 4, 3)])
def test_out_of_order_chains_stay_intact(N, B, T):
    env = FakeAsyncEnv(N, B, ep_len=3, seed=N * B)
    q, stop = queue.Queue(maxsize=100), threading.Event()
    actor = _make_actor(env, N, T, q, stop)
    pool = ActorPool([actor], q, stop)
    pool.start()
    batches = [pool.get() for _ in range(6)]
    pool.close()
    seen = {i: [] for i in range(N)}
    for b in batches:
        assert b.obs.shape[:2] == (T + 1, N) and b.actions.shape == (T, N)
        for c in range(N):
            o = b.obs[:, c].numpy()
            env_id = int(b.env_ids[c])
            assert (o[:, 0] == env_id).all(), "a column mixes envs"
            g = o[:, 3]
            assert (np.diff(g) == 1).all(), f"chain of env {env_id} not consecutive: {g}"
            seen[env_id].append((g[0], g[-1]))
            a = b.actions[:, c].numpy()
            r = b.rewards[:, c].numpy()
            for t in range(T):
                ended_before = t > 0 and (b.terminated[t - 1, c] or b.truncated[t - 1, c])
                if r[t] != 0.0:  # a real step: reward encodes (env, step, action)
                    assert r[t] == pytest.approx(1000.0 * env_id + g[t] + a[t] / 10.0)
                    assert bool(b.valid[t, c]) or t == 0
                if t > 0:
                    assert bool(b.valid[t, c]) == (not ended_before)
                # terminated/truncated at t <=> obs t+1 is the final obs of an episode
                assert bool(b.terminated[t, c] or b.truncated[t, c]) == (o[t + 1, 1] == 3 and o[t, 1] == 2)
    for i, spans in seen.items():  # consecutive trajectories of an env share the boundary obs
        spans.sort()
        for (a0, a1), (b0, b1) in zip(spans, spans[1:]):
            assert b0 == a1


def test_valid_mask_carries_over_trajectory_boundary():
    asm = TrajectoryAssembler(1, 2, (1,), torch.float32, (), torch.long, "cpu")
    ids = np.array([0])
    f = torch.tensor([False])
    out = []
    for t in range(6):
        done = torch.tensor([t == 2])  # the step taken at obs 1 ends the episode
        out += asm.observe(ids, torch.tensor([[float(t)]]), torch.tensor([1.0]), done if t else f, f)
        asm.act(ids, torch.tensor([t]), torch.tensor([0.0]), 0)
    assert len(out) == 2
    assert out[0].terminated[:, 0].tolist() == [False, True]
    assert out[1].valid[:, 0].tolist() == [False, True]  # the autoreset dummy at the start of batch 2


def test_actor_exception_stops_the_learner_with_the_error():
    env = FakeAsyncEnv(4, 2, fail_after=5)
    q, stop = queue.Queue(maxsize=2), threading.Event()
    pool = ActorPool([_make_actor(env, 4, 8, q, stop)], q, stop)
    pool.start()
    t0 = time.time()
    with pytest.raises(ActorError, match="boom from the fake env"):
        for _ in range(100):
            pool.get()
    pool.close()
    assert time.time() - t0 < 10 and not any(a.is_alive() for a in pool.actors)


def test_a_stalled_actor_ends_the_wait_with_its_stack():
    """An actor stuck in the env's recv (the learner would wait forever) is reported within the stall
    timeout, with where it is stuck."""
    env = FakeAsyncEnv(4, 4, stall_after=3)
    q, stop = queue.Queue(maxsize=4), threading.Event()
    pool = ActorPool([_make_actor(env, 4, 8, q, stop)], q, stop, stall_timeout_s=0.5)
    pool.start()
    t0 = time.time()
    with pytest.raises(ActorError, match=r"no trajectory batch from the actors in 0.5 s[\s\S]*in recv"):
        pool.get()
    assert time.time() - t0 < 5
    env.unstall.set()
    pool.close()
    assert not pool.actors[0].is_alive()


def test_close_never_hangs_with_a_full_queue():
    env = FakeAsyncEnv(4, 4)
    q, stop = queue.Queue(maxsize=1), threading.Event()
    pool = ActorPool([_make_actor(env, 4, 2, q, stop)], q, stop)
    pool.start()
    time.sleep(0.3)  # the actor is now blocked on a full queue
    t0 = time.time()
    pool.close()
    assert time.time() - t0 < 5 and not pool.actors[0].is_alive()


def test_graceful_interrupt_defers_the_first_ctrl_c(monkeypatch):
    import rltrain.interrupt as interrupt_module
    clock = [100.0]
    monkeypatch.setattr(interrupt_module.time, "monotonic", lambda: clock[0])
    before = signal.getsignal(signal.SIGINT)
    with GracefulInterrupt() as interrupt:
        signal.raise_signal(signal.SIGINT)  # only recorded
        assert interrupt.requested
        with pytest.raises(KeyboardInterrupt):
            interrupt.check()
        clock[0] += 0.5 * interrupt_module.REPEAT_WINDOW_S
        signal.raise_signal(signal.SIGINT)  # the same request again (timeout -s INT signals child and group)
        clock[0] += interrupt_module.REPEAT_WINDOW_S
        with pytest.raises(KeyboardInterrupt):  # a second Ctrl-C is not deferred
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.slow
def test_a_burst_of_sigints_stops_the_trainer_after_the_iteration_with_its_checkpoint(tmp_path):
    """``timeout -s INT`` signals the trainer and then its process group (the trainer again); a
    terminal's Ctrl-C under torchrun arrives twice too. Two SIGINTs 0.1 s apart are one request: the
    run ends after an iteration, exit code 0, with ``latest.pt`` of that iteration."""
    import json
    import subprocess
    from rltrain.checkpoint import load_checkpoint
    cmd = [sys.executable, str(ROOT / "scripts" / "ppo.py"), "--env-id", "CartPole-v1", "--num-envs", "4",
           "--num-steps", "16", "--total-timesteps", "100000000", "--checkpoint-every", "100000", "--no-progress",
           "--no-cuda", "--runs-dir", str(tmp_path)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    try:
        deadline = time.time() + 90
        while not any(len(m.read_text().splitlines()) >= 3 for m in tmp_path.glob("*/metrics.jsonl")):
            assert proc.poll() is None and time.time() < deadline, "the trainer did not start iterating"
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, out[-3000:]
    (run,) = tmp_path.glob("CartPole-v1__*")
    last = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert load_checkpoint(run / "checkpoints" / "latest.pt")["global_step"] == last["global_step"]


def test_ctrl_c_surfaces_in_get_and_close_still_works():
    """A deferred Ctrl-C is raised by get() between polls, with the queue's locks free."""
    env = FakeAsyncEnv(4, 2)
    q, stop = queue.Queue(maxsize=1), threading.Event()
    interrupt = GracefulInterrupt()
    pool = ActorPool([_make_actor(env, 4, 2, q, stop)], q, stop, interrupt)
    pool.start()
    pool.get()
    interrupt.requested = True
    with pytest.raises(KeyboardInterrupt):
        pool.get()
    t0 = time.time()
    pool.close()
    assert time.time() - t0 < 5 and not pool.actors[0].is_alive()
    assert not q.mutex.locked()


def test_param_server_versions():
    a, b = make_agent("mlp", (4,), True, 2), make_agent("mlp", (4,), True, 2)
    ps = ParamServer(a, version=0)
    with torch.no_grad():
        next(a.parameters()).add_(1.0)
    assert ps.pull(b, -1) == 0
    ps.publish(a, 7)
    assert ps.pull(b, 0) == 7
    assert all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))


def test_q_head_agent():
    ag = make_agent("mlp", (4,), True, 3, q_head=True)
    dist, q = ag.dist_and_critic(torch.zeros(5, 4))
    assert q.shape == (5, 3) and dist.probs.shape == (5, 3)
    with pytest.raises(ValueError):
        make_agent("mlp", (4,), False, 3, q_head=True)


# ----------------------------------------------------------------------------- trainer runs

def _metrics(run_dir):
    return [json.loads(line) for line in open(Path(run_dir) / "metrics.jsonl")]


@pytest.mark.parametrize("correction", ["vtrace", "retrace"])
def test_short_run_logs_everything(tmp_path, correction):
    impala = load_script("impala")
    args = impala.cli(["--runs-dir", str(tmp_path), "--no-progress", "--total-timesteps", "4096",
                       "--num-envs", "8", "--num-steps", "16", "--correction", correction,
                       "--queue-size", "2", "--checkpoint-every", "4"])
    out = impala.main(args)
    rows = _metrics(out["run_dir"])
    assert len(rows) == 4096 // (8 * 16)
    keys = set().union(*rows)
    for k in ["charts/SPS", "charts/actor_SPS", "charts/learner_SPS", "losses/policy_loss", "losses/value_loss",
              "losses/entropy", "losses/approx_kl", "losses/explained_variance", "policy_lag/mean",
              "policy_lag/max", "perf/learner_queue_wait_s", "perf/actor_queue_wait_s", "perf/learner/ca_s",
              "perf/learner/forward_s", "perf/learner/backward_s", "perf/learner/optim_s", "perf/actor/env_s",
              "perf/actor/inference_s", "perf/ca_share_update", "perf/ca_share_iteration", "charts/learning_rate"]:
        assert k in keys, k
    # policy lag: measured, bounded by queue size + blocked actor put + the batch being built
    lag_max = max(r["policy_lag/max"] for r in rows)
    assert 0 <= lag_max <= args.queue_size + args.num_actors + args.param_refresh_every
    assert (Path(out["run_dir"]) / "checkpoints" / "latest.pt").is_file()


def test_narrow_learner_batches_from_two_actors(tmp_path):
    """Learner batches of 2 env columns from actors of 4 envs: twice the updates of full-width batches;
    policy lag grows by the same factor in updates (the same in env steps)."""
    impala = load_script("impala")
    args = impala.cli(["--runs-dir", str(tmp_path), "--no-progress", "--total-timesteps", "1024",
                       "--num-envs", "8", "--num-actors", "2", "--learner-batch-envs", "2", "--num-steps", "8",
                       "--num-minibatches", "2"])
    out = impala.main(args)
    rows = _metrics(out["run_dir"])
    assert len(rows) == 1024 // (2 * 8) and out["global_step"] == 1024
    rounds = (8 // 2) // 2  # batches in one round of an actor's envs
    lag_max = max(r["policy_lag/max"] for r in rows)
    assert 0 <= lag_max <= rounds * (args.queue_size + args.num_actors + args.param_refresh_every)


def test_async_recv_batch_and_resume(tmp_path):
    impala = load_script("impala")
    common = ["--runs-dir", str(tmp_path), "--no-progress", "--num-envs", "8", "--env-batch-size", "3",
              "--num-steps", "8", "--checkpoint-every", "2"]
    out = impala.main(impala.cli(common + ["--total-timesteps", "256"]))
    ckpt = Path(out["run_dir"]) / "checkpoints" / "latest.pt"
    out2 = impala.main(impala.cli(["--resume", str(ckpt), "--total-timesteps", "512", "--no-progress"]))
    assert out2["run_dir"] == out["run_dir"] and out2["global_step"] == 512
    assert _metrics(out["run_dir"])[-1]["global_step"] == 512


def test_bad_input(tmp_path):
    impala = load_script("impala")
    from rltrain.config import ConfigError
    with pytest.raises(ConfigError, match="env-batch-size"):
        impala.main(impala.cli(["--runs-dir", str(tmp_path), "--num-envs", "4", "--env-batch-size", "9"]))
    with pytest.raises(ConfigError, match="discrete"):
        impala.main(impala.cli(["--runs-dir", str(tmp_path), "--env-id", "Pendulum-v1", "--correction", "retrace"]))


def test_ctrl_c_without_checkpoint_every_keeps_the_last_update_and_names_it(tmp_path):
    """Ctrl-C shuts the actors down (exit 0, no hang) and, with no --checkpoint-every, ``latest.pt`` holds the
    last finished update; the line names that update and the --resume path, and the resumed run goes on
    from its global step."""
    impala = load_script("impala")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    batch = 4 * 8  # envs x steps of a learner batch
    p = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "impala.py"), "--runs-dir", str(tmp_path),
                          "--no-progress", "--num-envs", "4", "--num-steps", "8", "--total-timesteps", "100000000"],
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 90
        while not any(len(m.read_text().splitlines()) >= 2 for m in tmp_path.glob("*/metrics.jsonl")):
            assert p.poll() is None and time.time() < deadline, "the trainer did not start updating"
            time.sleep(0.1)
        p.send_signal(signal.SIGINT)
        out, _ = p.communicate(timeout=60)
    finally:
        p.kill()
    assert p.returncode == 0, out[-2000:]
    (ckpt,) = tmp_path.glob("*/checkpoints/latest.pt")
    saved = torch.load(ckpt, weights_only=False)
    rows = _metrics(ckpt.parents[1])
    done = saved["iteration"]
    assert done == rows[-1]["charts/iteration"] == len(rows) >= 2
    assert saved["global_step"] == rows[-1]["global_step"] == done * batch
    assert f"interrupted at update {done}; continue with --resume {ckpt}\n" in out
    out2 = impala.main(impala.cli(["--resume", str(ckpt), "--total-timesteps", str((done + 2) * batch),
                                   "--no-progress"]))
    assert out2["global_step"] == (done + 2) * batch
    assert [(r["charts/iteration"], r["global_step"]) for r in _metrics(ckpt.parents[1])[done:]] == [
        (done + 1, (done + 1) * batch), (done + 2, (done + 2) * batch)]


def test_actor_stacks_atari_frames_as_envpool():
    """An actor on Breakout whose EnvPool sends only the newest frame (async batches of 2 of 4 envs)
    assembles the observations a ``stack_num=4`` pool returns for the same actions: life losses and
    time-limit truncations included."""
    from envs import make_envs
    N, B, T, batches, seed = 4, 2, 16, 6, 11
    envs, info = make_envs("Breakout-v5", N, seed, 1, batch_size=B, stack_on_device=True, max_episode_steps=40)
    torch.manual_seed(0)
    policy = make_agent("nature_cnn", info.obs_shape, True, info.num_actions)
    q, stop = queue.Queue(maxsize=100), threading.Event()
    actor = Actor(0, envs, policy, ParamServer(policy), q, stop, num_envs=N, num_steps=T, obs_shape=info.obs_shape,
                  obs_dtype=torch.uint8, action_shape=(), action_dtype=torch.long, device=torch.device("cpu"),
                  num_actions=info.num_actions, batch_size=B, stack_frames=True)
    pool = ActorPool([actor], q, stop)
    pool.start()
    items = [pool.get() for _ in range(batches)]
    pool.close()
    cols = [torch.argsort(b.env_ids) for b in items]  # columns in env order
    assert all(torch.equal(b.env_ids[c], torch.arange(N)) for b, c in zip(items, cols))
    obs = torch.cat([b.obs[:T, c] for b, c in zip(items, cols)] + [items[-1].obs[T:, cols[-1]]])
    actions = torch.cat([b.actions[:, c] for b, c in zip(items, cols)])
    term = torch.cat([b.terminated[:, c] for b, c in zip(items, cols)])
    trunc = torch.cat([b.truncated[:, c] for b, c in zip(items, cols)])
    assert term.any() and trunc.any()  # life losses (terminated) and the 40-step limit (truncated)
    ref, _ = make_envs("Breakout-v5", N, seed, 1, max_episode_steps=40)
    expected = ref.reset()[0]
    for t in range(batches * T):
        assert torch.equal(obs[t], torch.from_numpy(expected)), t
        expected, _, ref_term, ref_trunc, _ = ref.step(actions[t].numpy().astype(np.int32))
        assert np.array_equal(ref_term, term[t].numpy()) and np.array_equal(ref_trunc, trunc[t].numpy()), t
    assert torch.equal(obs[batches * T], torch.from_numpy(expected))
