"""Credit wiring end to end: a scripted rollout (every reward, termination and truncation known) goes through
the trainer's collector into its credit-assignment step, and the advantages equal the papers' formulas
(tests/paper_estimators.py) in float64 on the script's rewards and flags and the critic's values.

* PPO: ``scripts/ppo.py``'s own run (:func:`main`) on scripted env groups; the collector's storage and the
  GAE the trainer computes from it are recorded each iteration.
* IMPALA: an actor thread (:class:`rltrain.actor_learner.Actor`) on a scripted asynchronous pool hands its
  trajectory batches to the learner step of ``scripts/impala.py`` (:func:`policy_and_critic`,
  :func:`assign_credit`), with a learner policy other than the actor's so that the importance weights
  differ from 1 and are clipped.

Comparisons are on the valid steps: next-step autoreset's dummy steps are masked out of every loss.
"""

import copy
import queue
import threading

import pytest
import torch

import paper_estimators as paper
from agents import make_agent
from conftest import load_script
from rltrain import overlap
from rltrain.actor_learner import Actor, ActorPool, ParamServer
from rltrain.credit import CreditAssignment
from rltrain.timers import PhaseTimer
from scripted_envs import OBS_DIM, NUM_ACTIONS, ScriptedAsyncPool, ScriptedGroups, expected_rollout

ppo = load_script("ppo")
impala = load_script("impala")

T = 8
# Episodes cross rollout boundaries, end on a rollout's last step (the next rollout starts with a dummy
# step), and end by termination and by truncation in the same env.
SCRIPTS = [
    [(3, "terminated"), (4, "truncated")],   # ends at steps 2, 7 (the first rollout's last step), 11, 16, ...
    [(6, "truncated"), (2, "terminated")],   # ends at steps 5, 8, 15, 18, ...
    [(11, "truncated")],                     # ends at steps 10, 22: inside the second and third rollouts
    [],                                      # never ends
]


def _assert_rollout_is_the_script(got: dict, expected: dict, where: str) -> None:
    for k in ("rewards", "terminated", "truncated", "valid"):
        assert torch.equal(got[k].to(expected[k].dtype), expected[k]), (where, k)
    assert torch.equal(got["obs"], expected["obs"][:got["obs"].shape[0]]), (where, "obs")


def test_the_scripts_end_episodes_in_every_way():
    """The scripted rollouts below hold terminations, truncations and a rollout that starts with a dummy step."""
    envs = ScriptedGroups(SCRIPTS).envs
    rollouts = [expected_rollout(envs, k * T, T) for k in range(3)]
    assert all(r["terminated"].any() and r["truncated"].any() for r in rollouts)
    assert not rollouts[1]["valid"][0].all()


def test_ppo_advantages_are_gae_of_the_scripted_rollout(tmp_path, monkeypatch):
    iterations, gamma, lam = 3, 0.9, 0.8
    envs, rollouts, credited = [], [], []

    def scripted_groups(env_id, num_envs, num_groups, seed, num_threads):
        envs.append(ScriptedGroups(SCRIPTS, num_groups))
        return envs[-1]

    class RecordingCollector(overlap.RolloutCollector):
        def collect(self, timer):
            out = super().collect(timer)
            rollouts.append({**{k: getattr(self.buf, k).clone() for k in
                                ("obs", "rewards", "terminated", "truncated", "valid", "values")},
                             "bootstrap": self.bootstrap_value.clone()})
            return out

    class RecordingCredit(ppo.CreditAssignment):
        def gae(self, *args, **kwargs):
            advantages, returns = super().gae(*args, **kwargs)
            credited.append((advantages.clone(), returns.clone()))
            return advantages, returns

    monkeypatch.setattr(ppo, "EnvGroups", scripted_groups)
    monkeypatch.setattr(overlap, "RolloutCollector", RecordingCollector)  # the trainer's collector
    monkeypatch.setattr(ppo, "CreditAssignment", RecordingCredit)
    ppo.main(ppo.cli(["--runs-dir", str(tmp_path), "--num-envs", str(len(SCRIPTS)), "--env-groups", "2",
                      "--num-steps", str(T), "--total-timesteps", str(iterations * T * len(SCRIPTS)),
                      "--num-minibatches", "2", "--update-epochs", "1", "--gamma", str(gamma),
                      "--gae-lambda", str(lam), "--ca-shadow-every", "0", "--no-progress"]))

    assert len(rollouts) == len(credited) == iterations
    for k, (rollout, (advantages, returns)) in enumerate(zip(rollouts, credited)):
        script = expected_rollout(envs[0].envs, k * T, T)
        _assert_rollout_is_the_script(rollout, script, f"rollout {k}")
        values = torch.cat([rollout["values"], rollout["bootstrap"][None]])
        ref_adv, ref_ret = paper.gae(script["rewards"], values, script["terminated"], script["truncated"], gamma, lam)
        valid = script["valid"]
        torch.testing.assert_close(advantages.double()[valid], ref_adv[valid], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(returns.double()[valid], ref_ret[valid], rtol=1e-5, atol=1e-5)


def _actor_batches(num_batches: int, behaviour: torch.nn.Module) -> list:
    """The first ``num_batches`` trajectory batches ``[T, N]`` of one actor on the scripted pool."""
    N = len(SCRIPTS)
    out, stop = queue.Queue(maxsize=2), threading.Event()
    actor = Actor(0, ScriptedAsyncPool(SCRIPTS), behaviour, ParamServer(behaviour), out, stop, num_envs=N,
                  num_steps=T, obs_shape=(OBS_DIM,), obs_dtype=torch.float32, action_shape=(),
                  action_dtype=torch.long, device=torch.device("cpu"), num_actions=NUM_ACTIONS, capture=False)
    pool = ActorPool([actor], out, stop, stall_timeout_s=60)
    pool.start()
    try:
        return [pool.get() for _ in range(num_batches)]
    finally:
        pool.close()


@pytest.mark.parametrize("correction,rho_bar,c_bar,pg_rho_bar", [
    ("vtrace", 1.0, 1.0, 1.0),
    ("vtrace", 1.6, 0.7, 1.2),   # rho_bar above c_bar: each clips its own term
    ("vtrace", 0.7, 1.6, 0.9),   # and below it
    ("retrace", 1.0, 0.7, 1.3),
])
def test_impala_targets_are_the_papers_on_the_scripted_rollout(correction, rho_bar, c_bar, pg_rho_bar):
    gamma = 0.9
    torch.manual_seed(0)
    retrace = correction == "retrace"
    agent = make_agent("auto", (OBS_DIM,), True, NUM_ACTIONS, q_head=retrace)
    behaviour = copy.deepcopy(agent).requires_grad_(False)
    with torch.no_grad():  # the learner has moved on since the actor's policy: pi != mu
        for p in agent.parameters():
            p.add_(0.5 * torch.randn_like(p))
    batches = _actor_batches(3, behaviour)

    args = impala.Args(correction=correction, gamma=gamma, rho_bar=rho_bar, c_bar=c_bar, pg_rho_bar=pg_rho_bar)
    timer = PhaseTimer("cpu")
    credit = CreditAssignment("auto", "cpu", timer, "learner/ca")
    clipped = 0
    for k, traj in enumerate(batches):
        script = expected_rollout(ScriptedAsyncPool(SCRIPTS).envs, k * T, T)
        _assert_rollout_is_the_script({"obs": traj.obs, **{f: getattr(traj, f) for f in
                                       ("rewards", "terminated", "truncated", "valid")}}, script, f"batch {k}")
        with torch.no_grad():
            _, _, log_rhos, critic, probs = impala.policy_and_critic(args, agent, traj)
        target, adv = impala.assign_credit(args, credit, timer, traj, log_rhos, critic, probs)

        # the reference's inputs from the script's observations and the two policies, not from the batch
        obs, valid = script["obs"], script["valid"]
        with torch.no_grad():
            pi, critic_ref = agent.dist_and_critic(obs.flatten(0, 1))
            mu = behaviour.policy_head(behaviour.torso(obs[:T].flatten(0, 1)))
        actions = traj.actions
        log_pi = pi.log_prob(torch.cat([actions, actions[-1:]]).flatten()).view(T + 1, -1)[:T].double()
        ref_log_rhos = torch.where(valid, log_pi - mu.log_prob(actions.flatten()).view(T, -1).double(), 0.0)
        torch.testing.assert_close(log_rhos.double()[valid], ref_log_rhos[valid], rtol=1e-5, atol=1e-5)
        clipped += int((ref_log_rhos.exp() > min(rho_bar, c_bar, pg_rho_bar))[valid].sum())
        if retrace:
            ref_target, ref_adv = paper.retrace(
                script["rewards"], critic_ref.view(T + 1, -1, NUM_ACTIONS), pi.probs.view(T + 1, -1, NUM_ACTIONS),
                actions, ref_log_rhos, script["terminated"], script["truncated"], gamma, args.vtrace_lambda,
                c_bar, pg_rho_bar)
        else:
            ref_target, ref_adv = paper.vtrace(
                script["rewards"], critic_ref.view(T + 1, -1), ref_log_rhos, script["terminated"],
                script["truncated"], gamma, args.vtrace_lambda, rho_bar, c_bar, pg_rho_bar)
        torch.testing.assert_close(target.double()[valid], ref_target[valid], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(adv.double()[valid], ref_adv[valid], rtol=1e-4, atol=1e-5)
    assert clipped > 0  # the clips are exercised
