"""The rollout's policy step and collector (CPU; the CUDA-graph tests need a GPU).

* graph-safe sampling draws from the right distributions;
* the static-buffer policy step gives the agent's eager actions, log-probs and values for the same seed,
  and sees parameters changed in place (as the optimizer changes them) without being rebuilt;
* env groups seed env i as one pool of N would;
* grouped (send / recv) rollouts store the same transitions as a plain synchronous EnvPool loop.
"""

from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from agents import make_agent, sample_action
from envs import EnvGroups, EpisodeStats, RewardNormalizer, make_envs
from rltrain.collector import RolloutCollector
from rltrain.config import ConfigError
from rltrain.policy_step import PolicyStep
from rltrain.timers import PhaseTimer

CUDA = torch.cuda.is_available()


# ------------------------------------------------------------------ sampling
def test_gumbel_max_draws_the_categorical_distribution():
    torch.manual_seed(0)
    logits = torch.tensor([[2.0, 0.0, -1.0, 0.5]])
    dist = torch.distributions.Categorical(logits=logits.expand(200_000, 4))
    counts = torch.bincount(sample_action(dist), minlength=4).double()
    probs = torch.softmax(logits[0].double(), 0)
    expected = probs * counts.sum()
    # each count within 5 standard deviations of its binomial expectation
    assert torch.all((counts - expected).abs() < 5 * (expected * (1 - probs)).sqrt()), (counts, expected)


def test_gaussian_draws_mean_plus_std_noise():
    torch.manual_seed(0)
    agent = make_agent("mlp", (3,), discrete=False, num_actions=2)
    with torch.no_grad():
        agent.policy_head.log_std.copy_(torch.tensor([0.0, -1.0]))
    dist = agent.policy_head(agent.torso(torch.zeros(100_000, 3)))
    a = sample_action(dist)
    mean = dist.base_dist.loc[0]
    assert torch.allclose(a.mean(0), mean, atol=0.02)
    assert torch.allclose(a.std(0), torch.tensor([1.0, np.exp(-1.0)], dtype=torch.float32), rtol=0.02)


# ------------------------------------------------------------------ policy step
def _step_and_eager(agent, obs, discrete, low=None, high=None, capture=False, device="cpu"):
    num_actions = agent.policy_head.logits.out_features if discrete else agent.policy_head.mean.out_features
    step = PolicyStep(agent, obs.shape[0], obs.shape[1:], obs.dtype, device, discrete=discrete,
                      num_actions=num_actions, action_low=low, action_high=high, capture=capture)
    step.obs.copy_(obs)
    torch.manual_seed(7)
    step()
    torch.manual_seed(7)
    with torch.no_grad():
        a, logp, _, v = agent.get_action_and_value(obs)
    return step, (a, logp, v)


@pytest.mark.parametrize("discrete", [True, False])
def test_policy_step_matches_eager_for_the_same_seed(discrete):
    agent = make_agent("mlp", (4,), discrete=discrete, num_actions=3)
    obs = torch.randn(64, 4)
    low, high = (None, None) if discrete else (np.full(3, -0.5, np.float32), np.full(3, 0.5, np.float32))
    step, (a, logp, v) = _step_and_eager(agent, obs, discrete, low, high)
    assert not step.captured
    assert torch.equal(step.action, a) and torch.equal(step.logprob, logp) and torch.equal(step.value, v)
    host = step.actions_to_host()
    if discrete:
        assert host.dtype == np.int32 and np.array_equal(host, a.numpy())
    else:  # the env gets the action clipped to its bounds; the stored action is the sampled one
        assert np.array_equal(host, a.clamp(-0.5, 0.5).numpy()) and (a.abs() > 0.5).any()


def test_policy_step_sees_parameters_changed_in_place():
    agent = make_agent("mlp", (4,), discrete=True, num_actions=3)
    obs = torch.randn(32, 4)
    step, _ = _step_and_eager(agent, obs, True)
    before = step.value.clone()
    optimizer = torch.optim.SGD(agent.parameters(), lr=0.5)
    agent.get_value(obs).sum().backward()
    optimizer.step()  # in place, as the trainer's Adam
    torch.manual_seed(3)
    step()
    torch.manual_seed(3)
    with torch.no_grad():
        a, logp, _, v = agent.get_action_and_value(obs)
    assert not torch.allclose(step.value, before)
    assert torch.equal(step.value, v) and torch.equal(step.action, a) and torch.equal(step.logprob, logp)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs CUDA: records a CUDA graph")
@pytest.mark.parametrize("arch,obs_shape,discrete", [("mlp", (4,), True), ("mlp", (17,), False),
                                                     ("nature_cnn", (4, 84, 84), True)])
def test_captured_policy_step_matches_eager_cuda(arch, obs_shape, discrete):
    device = torch.device("cuda")
    agent = make_agent(arch, obs_shape, discrete=discrete, num_actions=6).to(device)
    dtype = torch.uint8 if len(obs_shape) == 3 else torch.float32
    obs = torch.randint(0, 255, (256, *obs_shape), device=device).to(dtype)
    low, high = (None, None) if discrete else (np.full(6, -0.5, np.float32), np.full(6, 0.5, np.float32))
    step, (a, logp, v) = _step_and_eager(agent, obs, discrete, low, high, capture=True, device=device)
    assert step.captured
    assert torch.equal(step.action, a)
    assert torch.allclose(step.logprob, logp, rtol=1e-5, atol=1e-6) and torch.allclose(step.value, v, rtol=1e-5, atol=1e-6)
    draws = {tuple(step.action.flatten().tolist())}
    for _ in range(3):  # each replay draws new random numbers
        step()
        draws.add(tuple(step.action.flatten().tolist()))
    assert len(draws) == 4
    with torch.no_grad():  # parameters changed in place: the next replay uses them
        for p in agent.parameters():
            p.mul_(1.5)
    torch.manual_seed(11)
    step()
    torch.manual_seed(11)
    with torch.no_grad():
        a2, _, _, v2 = agent.get_action_and_value(obs)
    assert torch.equal(step.action, a2) and torch.allclose(step.value, v2, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(v2, v)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs CUDA: records CUDA graphs")
def test_captured_calls_replayed_at_once_on_two_streams_stay_correct_cuda():
    """Two recorded matrix products replayed together from two threads on two streams (IMPALA's actors)
    keep giving the eager results and finish: each recording has its own cuBLAS workspace."""
    import threading

    from rltrain.cuda_graph import CapturedCall
    device = torch.device("cuda")
    gen = torch.Generator(device=device).manual_seed(0)
    pairs = [(torch.randn(2048, 512, device=device, generator=gen), torch.randn(512, 1024, device=device, generator=gen))
             for _ in range(2)]
    calls = [CapturedCall(lambda a=a, b=b: a @ b, device) for a, b in pairs]
    expected = [a @ b for a, b in pairs]
    errors = []

    def replay(call, want):
        with torch.cuda.stream(torch.cuda.Stream(device)):
            for _ in range(300):
                got = call()
                if not torch.allclose(got, want, rtol=1e-3, atol=1e-3):
                    errors.append("replay differs from the eager product")
                    return
            torch.cuda.current_stream(device).synchronize()
    threads = [threading.Thread(target=replay, args=(c, e), daemon=True) for c, e in zip(calls, expected)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "concurrent replays did not finish in 60 s"
    assert not errors, errors


# ------------------------------------------------------------------ env groups
def test_env_groups_seed_env_i_as_one_pool():
    groups = EnvGroups("CartPole-v1", 6, 3, seed=10)
    single, _ = make_envs("CartPole-v1", 6, 10)
    obs = single.reset()[0]
    assert np.array_equal(obs, np.concatenate([groups.reset(g) for g in range(3)]))
    rng = np.random.default_rng(0)
    for _ in range(60):
        action = rng.integers(0, 2, 6).astype(np.int32)
        expected = single.step(action)
        for g in range(3):
            groups.send(g, action[groups.envs_of(g)])
        got = [groups.recv(g) for g in range(3)]
        for k in range(4):
            assert np.array_equal(expected[k], np.concatenate([x[k] for x in got]))
    with pytest.raises(ConfigError, match="--env-groups 4 must be >= 1 and divide --num-envs 6"):
        EnvGroups("CartPole-v1", 6, 4, seed=0)


def test_classic_control_groups_divide_the_threads_atari_groups_take_them_all():
    assert [p.config["num_threads"] for p in EnvGroups("CartPole-v1", 8, 2, seed=0, num_threads=6).pools] == [3, 3]
    assert [p.config["num_threads"] for p in EnvGroups("CartPole-v1", 8, 4, seed=0, num_threads=2).pools] == [1] * 4
    assert [p.config["num_threads"] for p in EnvGroups("Pong-v5", 2, 2, seed=0, num_threads=2).pools] == [2, 2]


# ------------------------------------------------------------------ grouped rollouts == synchronous rollouts
def _greedy(agent):
    """A deterministic policy (argmax of the logits), so rollouts of different schedules compare exactly."""
    def act(self, x, with_value=True, noise=None):
        dist = self.policy_head(self.torso(x))
        a = dist.logits.argmax(-1)
        return a, dist.log_prob(a), self.get_value(x) if with_value else None
    agent.act = types.MethodType(act, agent)
    return agent


def _sync_reference(env_id, N, T, iterations, agent, seed, rew_norm=None, **kwargs):
    """The plain loop: one synchronous EnvPool, ``step`` after ``step``."""
    envs, info = make_envs(env_id, N, seed, **kwargs)
    stats = EpisodeStats(N)
    obs = envs.reset()[0]
    prev_done = np.zeros(N, bool)
    out, returns = [], []
    for _ in range(iterations):
        rec = {k: [] for k in ("obs", "actions", "logprobs", "values", "rewards", "terminated", "truncated", "valid")}
        for t in range(T + 1):
            with torch.no_grad():
                x = torch.as_tensor(obs).to(torch.uint8 if obs.dtype == np.uint8 else torch.float32)
                a, logp, v = agent.act(x)
            if t == T:
                rec["bootstrap"] = v
                break
            rec["obs"].append(x)
            rec["actions"].append(a)
            rec["logprobs"].append(logp)
            rec["values"].append(v)
            rec["valid"].append(torch.as_tensor(~prev_done))
            obs, r, term, trunc, env_info = envs.step(a.numpy().astype(np.int32))
            returns += stats.step(r, term, trunc, env_info)[0].tolist()
            done = torch.as_tensor(term | trunc)
            r = torch.as_tensor(r, dtype=torch.float32)
            rec["rewards"].append(rew_norm(r, done) if rew_norm is not None else r)
            rec["terminated"].append(torch.as_tensor(term))
            rec["truncated"].append(torch.as_tensor(trunc))
            prev_done = term | trunc
        out.append({k: (torch.stack(v) if isinstance(v, list) else v) for k, v in rec.items()})
    return out, returns


@pytest.mark.parametrize("env_id,N,groups,T,kwargs", [
    ("CartPole-v1", 6, 2, 40, {"max_episode_steps": 15}),  # time-limit truncations and terminations
    ("CartPole-v1", 6, 3, 40, {"max_episode_steps": 15}),
    ("CartPole-v1", 5, 1, 30, {}),
    # uint8 frames stay uint8, stacked on the device: life losses (terminated) and truncations at 50 steps
    ("Breakout-v5", 4, 2, 30, {"max_episode_steps": 50}),
])
def test_grouped_rollouts_store_the_synchronous_transitions(env_id, N, groups, T, kwargs):
    torch.manual_seed(0)
    agent = _greedy(make_agent("auto", (4, 84, 84) if env_id.startswith("Breakout") else (4,), True,
                               4 if env_id.startswith("Breakout") else 2))
    iterations = 3
    norm = env_id == "CartPole-v1" and groups == 2  # also: reward normalisation over the whole N per step
    expected, expected_returns = _sync_reference(env_id, N, T, iterations, agent, seed=3,
                                                 rew_norm=RewardNormalizer(N, "cpu") if norm else None, **kwargs)
    envs = EnvGroups(env_id, N, groups, seed=3, **kwargs)
    collector = RolloutCollector(envs, agent, T, torch.device("cpu"),
                                 rew_norm=RewardNormalizer(N, "cpu") if norm else None)
    timer = PhaseTimer("cpu")
    returns = []
    for it in range(iterations):
        with torch.inference_mode():
            returns += collector.collect(timer)[0]
        ref, buf = expected[it], collector.buf
        for k in ("obs", "actions", "rewards", "terminated", "truncated", "valid"):
            assert torch.equal(getattr(buf, k), ref[k].to(getattr(buf, k).dtype)), (it, k)
        assert buf.obs.dtype == (torch.uint8 if env_id.startswith("Breakout") else torch.float32)
        for k in ("logprobs", "values"):
            assert torch.allclose(getattr(buf, k), ref[k], rtol=1e-5, atol=1e-6), (it, k)
        assert torch.allclose(collector.bootstrap_value, ref["bootstrap"], rtol=1e-5, atol=1e-6)
    if kwargs:
        assert any(e["truncated"].any() for e in expected) and any(e["terminated"].any() for e in expected)
        assert not expected[1]["valid"].all()
    assert sorted(returns) == sorted(expected_returns)
    assert returns or env_id.startswith("Breakout")  # Breakout's games outlast these rollouts
    secs = timer.read()
    assert {"rollout/env", "rollout/h2d", "rollout/inference", "rollout/d2h"} <= set(secs)


def test_phase_timer_laps_cover_the_loop(clock):
    """Each lap is charged the time since the previous lap (or ``mark``), so the laps of a loop sum to
    its wall clock."""
    timer = PhaseTimer("cpu")
    with pytest.raises(RuntimeError, match="before mark"):
        timer.lap("rollout/env")
    t0 = clock()
    timer.mark()
    for _ in range(3):
        clock.advance(0.004)
        timer.lap("rollout/env")
        clock.advance(0.001)
        timer.lap("rollout/inference")
    secs = timer.read()
    assert secs["rollout/env"] == pytest.approx(0.012)
    assert secs["rollout/inference"] == pytest.approx(0.003)
    assert sum(secs.values()) == pytest.approx(clock() - t0)
    with pytest.raises(RuntimeError):  # a read ends the run of laps
        timer.lap("rollout/env")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: the captured policy step")
def test_captured_atari_rollout_reads_the_device_stacks():
    """The CUDA graph reads the policy's static input, which the frame stacker updates in place: the
    observations it records equal those of a ``stack_num=4`` pool stepped with the recorded actions."""
    N, K, T, device = 8, 2, 24, torch.device("cuda")
    envs = EnvGroups("Breakout-v5", N, K, seed=3, max_episode_steps=40)
    collector = RolloutCollector(envs, make_agent("auto", (4, 84, 84), True, 4).to(device), T, device)
    assert collector.captured
    ref, _ = make_envs("Breakout-v5", N, 3, max_episode_steps=40)
    expected = ref.reset()[0]
    ended = 0
    for _ in range(3):
        with torch.inference_mode():
            collector.collect(PhaseTimer(device))
        obs, actions = collector.buf.obs.cpu(), collector.buf.actions.cpu()
        for t in range(T):
            assert torch.equal(obs[t], torch.from_numpy(expected)), t
            expected, _, term, trunc, _ = ref.step(actions[t].numpy().astype(np.int32))
            ended += int((term | trunc).sum())
    assert ended > 0
