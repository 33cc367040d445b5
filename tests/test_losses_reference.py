"""The trainers' losses against values worked out from the papers, on tiny hand-built batches.

The network is a stub whose outputs the test sets row by row (each observation holds its row's index), so
every term of the loss is known:

* PPO (Schulman et al. 2017, eq. 7 and 9; the value clip of their implementation): ``scripts/ppo.py``'s
  ``minibatch_loss`` on rows where each branch of the clipped objective and of the clipped value loss wins
  somewhere, an entropy bonus, advantage normalisation on and off, and an autoreset dummy row with
  outrageous numbers that ``valid`` must keep out.
* IMPALA: ``scripts/impala.py``'s learner step (``policy_and_critic``, ``assign_credit``,
  ``minibatch_loss``) with V-trace (Espeholt et al. 2018) or Retrace (Munos et al. 2016) and ACER's
  truncated importance weight (Wang et al. 2017), with ``rho_bar``, ``c_bar`` and ``pg_rho_bar`` apart.
"""

import math

import pytest
import torch
import torch.nn as nn
from torch.distributions import Categorical

import paper_estimators as paper
from conftest import load_script
from envs.async_collector import Trajectory
from rltrain.credit import CreditAssignment
from rltrain.timers import PhaseTimer

ppo = load_script("ppo")
impala = load_script("impala")


# ------------------------------------------------------------------ PPO
class FixedPPOOutputs(nn.Module):
    """The agent's ``get_action_and_value`` with given new log-probabilities, entropies and values per row."""

    def __init__(self, newlogprob, entropy, value):
        super().__init__()
        self.newlogprob, self.entropy, self.value = (torch.tensor(x, dtype=torch.float32)
                                                     for x in (newlogprob, entropy, value))

    def forward(self, method, obs, actions, normalized_value=False):
        assert method == "get_action_and_value"  # no value normalisation: the head's output is the value
        row = obs[:, 0].long()
        return actions, self.newlogprob[row], self.entropy[row], self.value[row]


CLIP = 0.2
# (advantage, ratio pi/pi_old, old value, new value, return, entropy, valid); each row's comment: which
# side of the clipped objective min(r A, clip(r) A) and of the value loss max(unclipped, clipped) wins
PPO_ROWS = [
    (1.0, 1.5, 0.0, 1.0, 1.0, 0.6, True),      # A > 0, r > 1 + eps: clipped; value: the clipped one
    (-0.5, 0.6, 0.0, 1.0, 0.1, 0.5, True),     # A < 0, r < 1 - eps: clipped; value: unclipped
    (0.8, 0.5, 0.5, 0.55, 2.0, 0.4, True),     # A > 0, r < 1 - eps: r A; value: inside the clip range
    (-1.2, 1.4, 1.0, 0.3, 0.2, 0.7, True),     # A < 0, r > 1 + eps: r A; value: clipped (from below)
    (0.3, 1.05, -0.2, -0.1, 0.4, 0.65, True),  # inside the clip range
    (-0.2, 0.95, 0.3, 0.9, 1.0, 0.3, True),    # inside; value: the clipped one
    (40.0, 3.0, 9.0, -9.0, 50.0, 9.0, False),  # autoreset dummy row: must not count anywhere
    (0.6, 1.1, 0.1, 0.0, 0.15, 0.55, True),
]


def ppo_reference(rows, norm_adv: bool, clip_vloss: bool, ent_coef: float, vf_coef: float, moments=None):
    """The loss and its diagnostics, in float64 from the formulas, over the valid rows."""
    valid = [r for r in rows if r[-1]]
    n = len(valid)
    advs = [r[0] for r in valid]
    if moments is None:
        mean = sum(advs) / n
        std = math.sqrt(sum((a - mean) ** 2 for a in advs) / n)  # the population std, as the trainer's
    else:
        mean, std, n = moments
    pg = v = ent = kl_old = kl = clipped = 0.0
    for a, ratio, v_old, v_new, ret, h, _ in valid:
        a = (a - mean) / (std + 1e-8) if norm_adv else a
        pg += -min(ratio * a, min(max(ratio, 1 - CLIP), 1 + CLIP) * a)
        v_loss = (v_new - ret) ** 2
        if clip_vloss:
            v_loss = max(v_loss, (v_old + min(max(v_new - v_old, -CLIP), CLIP) - ret) ** 2)
        v += 0.5 * v_loss
        ent += h
        kl_old += -math.log(ratio)
        kl += (ratio - 1) - math.log(ratio)
        clipped += abs(ratio - 1) > CLIP
    pg, v, ent = pg / n, v / n, ent / n
    return [pg - ent_coef * ent + vf_coef * v, pg, v, ent, kl_old / n, kl / n, clipped / n]


def ppo_batch(rows):
    old_logprob = [-0.3 - 0.1 * i for i in range(len(rows))]
    learner = FixedPPOOutputs([lp + math.log(r[1]) for lp, r in zip(old_logprob, rows)], [r[5] for r in rows],
                              [r[3] for r in rows])
    f32 = lambda i: torch.tensor([r[i] for r in rows], dtype=torch.float32)  # noqa: E731
    batch = {"obs": torch.arange(len(rows), dtype=torch.float32)[:, None], "actions": torch.zeros(len(rows)),
             "logprobs": torch.tensor(old_logprob), "advantages": f32(0), "returns": f32(4), "values": f32(2),
             "valid": torch.tensor([float(r[-1]) for r in rows])}
    return learner, batch


@pytest.mark.parametrize("norm_adv", [True, False])
@pytest.mark.parametrize("clip_vloss", [True, False])
def test_ppo_loss_is_the_clipped_objective(norm_adv, clip_vloss):
    args = ppo.Args(norm_adv=norm_adv, clip_vloss=clip_vloss, clip_coef=CLIP, ent_coef=0.05, vf_coef=0.7)
    learner, batch = ppo_batch(PPO_ROWS)
    loss, stats, approx_kl = ppo.minibatch_loss(args, learner, batch)
    expected = ppo_reference(PPO_ROWS, norm_adv, clip_vloss, args.ent_coef, args.vf_coef)
    torch.testing.assert_close(stats.double(), torch.tensor(expected, dtype=torch.float64), rtol=1e-5, atol=1e-6)
    assert loss.item() == pytest.approx(expected[0], rel=1e-5)
    assert approx_kl.item() == pytest.approx(expected[5], rel=1e-5)


def test_ppo_loss_normalises_with_the_given_moments():
    """Under torchrun the advantage moments and the denominator are every rank's: the loss uses them."""
    args = ppo.Args(norm_adv=True, clip_coef=CLIP, ent_coef=0.05)
    learner, batch = ppo_batch(PPO_ROWS)
    moments = (0.25, 0.8, 10.0)
    _, stats, _ = ppo.minibatch_loss(args, learner, batch, torch.tensor(moments))
    expected = ppo_reference(PPO_ROWS, True, True, args.ent_coef, args.vf_coef, moments)
    torch.testing.assert_close(stats.double(), torch.tensor(expected, dtype=torch.float64), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ IMPALA
T, M, A = 6, 3, 3


class FixedPolicyAndCritic(nn.Module):
    """The agent's ``dist_and_critic`` with given logits and critic outputs (V or Q) per row."""

    def __init__(self, logits: torch.Tensor, critic: torch.Tensor):
        super().__init__()
        self.logits, self.critic = logits, critic

    def forward(self, method, obs):
        assert method == "dist_and_critic"
        row = obs[:, 0].long()
        return Categorical(logits=self.logits[row]), self.critic[row]


def impala_batch(retrace: bool):
    """A ``[T, M]`` batch with a termination, a truncation (each followed by its dummy step) and log-ratios
    from -1.5 to 1.5, and the stub whose policy and critic produce it; plus the reference's float64 inputs."""
    g = torch.Generator().manual_seed(7)
    logits = 1.5 * torch.randn((T + 1) * M, A, generator=g)
    critic = torch.randn((T + 1) * M, *((A,) if retrace else ()), generator=g)
    actions = torch.randint(0, A, (T, M), generator=g)
    log_pi = Categorical(logits=logits).log_prob(torch.cat([actions, actions[-1:]]).flatten()).view(T + 1, M)[:T]
    log_rho = torch.linspace(-1.5, 1.5, T * M).view(T, M)[:, torch.tensor([2, 0, 1])]
    terminated, truncated = torch.zeros(T, M, dtype=torch.bool), torch.zeros(T, M, dtype=torch.bool)
    terminated[1, 0] = truncated[3, 1] = truncated[0, 2] = terminated[4, 2] = True
    valid = torch.ones(T, M, dtype=torch.bool)
    valid[1:] = ~(terminated | truncated)[:-1]
    rewards = torch.where(valid, torch.randn(T, M, generator=g), 0.0)
    traj = Trajectory(obs=torch.arange((T + 1) * M, dtype=torch.float32).view(T + 1, M, 1), actions=actions,
                      logprobs=log_pi - log_rho, rewards=rewards, terminated=terminated, truncated=truncated,
                      valid=valid, versions=torch.zeros(T, M, dtype=torch.long), env_ids=torch.arange(M))
    return FixedPolicyAndCritic(logits, critic), traj, logits.double().view(T + 1, M, A), critic.double()


def impala_reference(args, traj, logits, critic):
    """Log-ratios, targets, advantages and the loss's terms in float64 from the formulas."""
    retrace = args.correction == "retrace"
    dist = Categorical(logits=logits)
    log_pi = dist.log_prob(torch.cat([traj.actions, traj.actions[-1:]])).view(T + 1, M)[:T]
    valid = traj.valid
    log_rho = torch.where(valid, log_pi - traj.logprobs.double(), 0.0)  # the dummy step's action is ignored
    flags = (traj.terminated, traj.truncated, args.gamma, args.vtrace_lambda)
    if retrace:
        critic = critic.view(T + 1, M, A)
        target, adv = paper.retrace(traj.rewards, critic, dist.probs, traj.actions, log_rho, *flags, args.c_bar,
                                    args.pg_rho_bar)
        pred = critic[:T].gather(-1, traj.actions.unsqueeze(-1)).squeeze(-1)
    else:
        critic = critic.view(T + 1, M)
        target, adv = paper.vtrace(traj.rewards, critic, log_rho, *flags, args.rho_bar, args.c_bar, args.pg_rho_bar)
        pred = critic[:T]
    w = valid.double()
    n = w.sum()
    mean = lambda x: (x * w).sum() / n  # noqa: E731
    a = adv
    if args.norm_adv:
        a = (adv - mean(adv)) / ((mean((adv - mean(adv)) ** 2)).sqrt() + 1e-8)
    pg = -mean(a * log_pi)
    v = 0.5 * mean((pred - target) ** 2)
    ent = mean(dist.entropy()[:T])
    ratio = log_rho.exp()

    def var(x):
        return (((x - mean(x)) ** 2) * w).sum() / (n - 1)

    stats = [pg + args.vf_coef * v - args.ent_coef * ent, pg, v, ent, mean(-log_rho), mean((ratio - 1) - log_rho),
             mean((ratio > args.rho_bar).double()), mean(ratio), 1 - var(target - pred) / var(target)]
    return log_rho, target, adv, torch.stack(stats)


@pytest.mark.parametrize("correction,rho_bar,c_bar,pg_rho_bar,lam,norm_adv", [
    ("vtrace", 1.0, 1.0, 1.0, 1.0, True),
    ("vtrace", 2.0, 0.5, 1.0, 1.0, True),    # rho_bar > c_bar
    ("vtrace", 0.5, 2.0, 1.5, 1.0, False),   # rho_bar < c_bar
    ("vtrace", 1.5, 0.8, 0.6, 0.9, True),    # lambda < 1
    ("retrace", 1.0, 1.0, 1.0, 1.0, True),
    ("retrace", 1.0, 0.6, 1.4, 0.9, False),
])
def test_impala_learner_step_is_the_papers(correction, rho_bar, c_bar, pg_rho_bar, lam, norm_adv):
    args = impala.Args(correction=correction, gamma=0.9, vtrace_lambda=lam, rho_bar=rho_bar, c_bar=c_bar,
                       pg_rho_bar=pg_rho_bar, norm_adv=norm_adv, ent_coef=0.05, vf_coef=0.7)
    model, traj, logits, critic = impala_batch(correction == "retrace")
    timer = PhaseTimer("cpu")
    credit = CreditAssignment("auto", "cpu", timer, "learner/ca")

    logp, entropy, log_rhos, critic_out, probs = impala.policy_and_critic(args, model, traj)
    target, adv = impala.assign_credit(args, credit, timer, traj, log_rhos, critic_out, probs)
    loss, stats = impala.minibatch_loss(args, traj, logp, entropy, log_rhos, critic_out, target, adv)

    ref_log_rho, ref_target, ref_adv, ref_stats = impala_reference(args, traj, logits, critic)
    valid = traj.valid
    close = dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(log_rhos.double()[valid], ref_log_rho[valid], **close)
    torch.testing.assert_close(target.double()[valid], ref_target[valid], **close)
    torch.testing.assert_close(adv.double()[valid], ref_adv[valid], **close)
    torch.testing.assert_close(stats.double(), ref_stats, **close)
    assert loss.item() == pytest.approx(ref_stats[0].item(), rel=1e-5)
    assert "learner/ca" in timer.read()  # the estimator call is timed as the trainer's phase
