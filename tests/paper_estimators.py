"""The credit-assignment estimators as their papers write them: explicit sums over the rest of the episode
in the window, in float64, one env column and one step at a time.  The trainer tests check the trainers
against these (never against the code under test).

Conventions (the trainers' storage): ``[T, N]`` time-major; ``values`` / ``q`` / ``probs`` have ``T + 1``
rows, the last one the bootstrap state ``s_T``.  ``terminated[t]``: the episode ended at ``t`` in a terminal
state (no bootstrap); ``truncated[t]``: a time limit cut it at ``t`` (bootstrap from ``s_{t+1}``, the final
observation under next-step autoreset).  Either ends the sum: nothing after an episode's end is credited
to it.  ``end(t)``: the first step ``u >= t`` that ends an episode, else ``T - 1``.
"""

from __future__ import annotations

from typing import Tuple

import torch

F64 = torch.float64


def _end(done: torch.Tensor, t: int, n: int) -> int:
    T = done.shape[0]
    u = t
    while u < T - 1 and not done[u, n]:
        u += 1
    return u


def gae(rewards, values, terminated, truncated, gamma: float, lam: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """Schulman et al. 2016, eq. 16: ``A_t = sum_{u=t}^{end(t)} (gamma lam)^(u-t) delta_u`` with
    ``delta_u = r_u + gamma (1 - term_u) V(s_{u+1}) - V(s_u)``; returns ``(A, A + V)``."""
    r, v = rewards.to(F64), values.to(F64)
    term, done = terminated.bool(), terminated.bool() | truncated.bool()
    T, N = r.shape
    adv = torch.zeros(T, N, dtype=F64)
    for n in range(N):
        for t in range(T):
            for u in range(t, _end(done, t, n) + 1):
                delta = r[u, n] + gamma * (0.0 if term[u, n] else v[u + 1, n]) - v[u, n]
                adv[t, n] += (gamma * lam) ** (u - t) * delta
    return adv, adv + v[:T]


def vtrace(rewards, values, log_rhos, terminated, truncated, gamma: float, lam: float, rho_bar: float,
           c_bar: float, pg_rho_bar: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """Espeholt et al. 2018 (IMPALA), eq. 1, with ``c_i = lam min(c_bar, pi/mu)`` (their Remark 2's lambda):

    ``v_s = V(x_s) + sum_{t=s}^{end(s)} gamma^(t-s) (prod_{i=s}^{t-1} c_i) rho_t (r_t + gamma (1 - term_t)
    V(x_{t+1}) - V(x_t))``, ``rho_t = min(rho_bar, pi/mu)``;

    and the policy-gradient advantage of Sec. 4.2, ``min(pg_rho_bar, pi/mu) (r_s + gamma (1 - term_s) q_s -
    V(x_s))`` with ``q_s = v_{s+1}`` inside the episode and the window, ``V(x_{s+1})`` at its end; with
    ``lam < 1`` the inside value is ``lam v_{s+1} + (1 - lam) V(x_{s+1})`` (rlax's form).
    Returns ``(v_s, pg_adv)``."""
    r, v, ratio = rewards.to(F64), values.to(F64), log_rhos.to(F64).exp()
    term, done = terminated.bool(), terminated.bool() | truncated.bool()
    T, N = r.shape
    rho, c, pg_rho = ratio.clamp(max=rho_bar), lam * ratio.clamp(max=c_bar), ratio.clamp(max=pg_rho_bar)
    vs = v[:T].clone()
    for n in range(N):
        for s in range(T):
            trace = 1.0
            for t in range(s, _end(done, s, n) + 1):
                delta = rho[t, n] * (r[t, n] + gamma * (0.0 if term[t, n] else v[t + 1, n]) - v[t, n])
                vs[s, n] += gamma ** (t - s) * trace * delta
                trace *= c[t, n]
    pg_adv = torch.zeros(T, N, dtype=F64)
    for n in range(N):
        for s in range(T):
            inside = s < T - 1 and not done[s, n]
            q = lam * vs[s + 1, n] + (1 - lam) * v[s + 1, n] if inside else v[s + 1, n]
            pg_adv[s, n] = pg_rho[s, n] * (r[s, n] + gamma * (0.0 if term[s, n] else q) - v[s, n])
    return vs, pg_adv


def retrace(rewards, q, probs, actions, log_rhos, terminated, truncated, gamma: float, lam: float, c_bar: float,
            pg_rho_bar: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """Munos et al. 2016 (Retrace), eq. 4 as ACER's target (Wang et al. 2017), with ``c_i = lam min(c_bar,
    pi/mu)`` and ``Q_t = Q(x_t, a_t)``:

    ``Q_ret_s = Q_s + sum_{t=s}^{end(s)} gamma^(t-s) (prod_{i=s+1}^{t} c_i) (r_t + gamma (1 - term_t)
    E_pi Q(x_{t+1}, .) - Q_t)``;

    and ACER's truncated policy-gradient advantage ``min(pg_rho_bar, pi/mu) (Q_ret_s - V(x_s))`` with
    ``V(x_s) = E_pi Q(x_s, .)``.  ``q``, ``probs``: ``[T + 1, N, A]``.  Returns ``(Q_ret, advantage)``."""
    r, q, probs, ratio = rewards.to(F64), q.to(F64), probs.to(F64), log_rhos.to(F64).exp()
    term, done = terminated.bool(), terminated.bool() | truncated.bool()
    T, N = r.shape
    c = lam * ratio.clamp(max=c_bar)
    q_taken = q[:T].gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
    expected_q = (probs * q).sum(-1)  # E_pi Q(x_t, .), t = 0 .. T
    q_ret = q_taken.clone()
    for n in range(N):
        for s in range(T):
            trace = 1.0
            for t in range(s, _end(done, s, n) + 1):
                if t > s:
                    trace *= c[t, n]
                td = r[t, n] + gamma * (0.0 if term[t, n] else expected_q[t + 1, n]) - q_taken[t, n]
                q_ret[s, n] += gamma ** (t - s) * trace * td
    return q_ret, ratio.clamp(max=pg_rho_bar) * (q_ret - expected_q[:T])
