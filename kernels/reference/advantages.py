"""Float64 references of the advantage estimators: GAE, V-trace, Retrace (see the package docstring)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from kernels._args import selected
from kernels.reference._common import _as_2d, _flag, _next_value_fn, _out, _vec


# GAE
# --------------------------------------------------------------------------- #
def gae(
    rewards: Tensor,
    values: Tensor,
    terminated: Tensor,
    bootstrap_value: Optional[Tensor],
    *,
    truncated: Optional[Tensor] = None,
    next_values: Optional[Tensor] = None,
    gamma: float = 0.99,
    lam: float = 0.95,
    advantages: bool = True,
    returns: bool = True,
):
    r"""Generalized Advantage Estimation (Schulman et al. 2016, "High-Dimensional
    Continuous Control Using Generalized Advantage Estimation", eq. 16).

    .. math::
        \delta_t = r_t + \gamma (1-\mathrm{term}_t) V'_t - V_t \\
        A_t = \delta_t + \gamma \lambda (1-\mathrm{done}_t) A_{t+1}, \quad A_T = 0 \\
        \mathrm{ret}_t = A_t + V_t

    A truncation at t cuts the recursion (``done_t``) but still bootstraps
    ``delta_t`` from ``V'_t``; a termination also drops the bootstrap.

    Returns ``(advantages, returns)``, float64 ``[T, N]``; ``returns=False`` (``advantages=False``)
    leaves that one out and returns the other alone.
    """
    r, one_d = _as_2d(rewards)
    v, _ = _as_2d(values)
    T = r.shape[0]
    term = _flag(terminated, r)
    done = torch.maximum(term, _flag(truncated, r))
    nv = None if next_values is None else _as_2d(next_values)[0]
    boot = _vec(bootstrap_value, r)
    v_next = _next_value_fn(v, nv, boot)

    adv = torch.empty_like(r)
    a_next = torch.zeros_like(boot)  # A_T = 0
    for t in range(T - 1, -1, -1):
        delta = r[t] + gamma * (1.0 - term[t]) * v_next(t) - v[t]
        a_next = delta + gamma * lam * (1.0 - done[t]) * a_next
        adv[t] = a_next
    ret = adv + v if returns else None
    return selected(_out(adv, one_d) if advantages else None, None if ret is None else _out(ret, one_d))


# --------------------------------------------------------------------------- #
# V-trace
# --------------------------------------------------------------------------- #
def vtrace(
    rewards: Tensor,
    values: Tensor,
    log_rhos: Tensor,
    terminated: Tensor,
    bootstrap_value: Optional[Tensor],
    *,
    truncated: Optional[Tensor] = None,
    next_values: Optional[Tensor] = None,
    gamma: float = 0.99,
    lam: float = 1.0,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    pg_rho_bar: float = 1.0,
    value_targets: bool = True,
    pg_advantages: bool = True,
):
    r"""V-trace targets and policy-gradient advantages (Espeholt et al. 2018,
    "IMPALA", Sec. 4.1, Remark 1 recursion), with the ``lambda`` of rlax's
    ``vtrace_td_error_and_advantage`` (``c_t = lambda min(c_bar, rho_t)`` and the
    lambda-mixed policy-gradient bootstrap).

    .. math::
        \rho_t = \exp(\log\rho_t), \quad c_t = \lambda \min(\bar c, \rho_t) \\
        \delta_t = \min(\bar\rho, \rho_t)\,(r_t + \gamma (1-\mathrm{term}_t) V'_t - V_t) \\
        v_{s,t} - V_t = \delta_t + \gamma (1-\mathrm{done}_t)\, c_t\, (v_{s,t+1} - V_{t+1}),
            \quad (v_{s,T} - V_T) = 0 \\
        q_t = \lambda v_{s,t+1} + (1-\lambda) V_{t+1}
            \ \text{if } t < T-1 \text{ and not done}_t, \text{ else } V'_t \\
        \mathrm{pg\_adv}_t = \min(\bar\rho_{pg}, \rho_t)\,(r_t + \gamma (1-\mathrm{term}_t) q_t - V_t)

    Note that ``pg_adv_t`` uses the *exclusive* value ``vs_{t+1}`` of the scan.
    At ``t = T-1`` ``V_{t+1}`` is never needed (``q_t = V'_t`` there).

    Returns ``(vs, pg_adv)``, float64 ``[T, N]``; ``pg_advantages=False`` (``value_targets=False``)
    leaves that one out and returns the other alone.
    """
    r, one_d = _as_2d(rewards)
    v, _ = _as_2d(values)
    lr, _ = _as_2d(log_rhos)
    T = r.shape[0]
    term = _flag(terminated, r)
    done = torch.maximum(term, _flag(truncated, r))
    nv = None if next_values is None else _as_2d(next_values)[0]
    boot = _vec(bootstrap_value, r)
    v_next = _next_value_fn(v, nv, boot)

    rho = torch.exp(lr)
    clipped_rho = torch.clamp(rho, max=rho_bar)
    cs = lam * torch.clamp(rho, max=c_bar)
    pg_rho = torch.clamp(rho, max=pg_rho_bar)

    vs = torch.empty_like(r)
    diff_next = torch.zeros_like(boot)  # vs_T - V_T = 0
    for t in range(T - 1, -1, -1):
        delta = clipped_rho[t] * (r[t] + gamma * (1.0 - term[t]) * v_next(t) - v[t])
        diff = delta + gamma * (1.0 - done[t]) * cs[t] * diff_next
        vs[t] = v[t] + diff
        diff_next = diff

    if not pg_advantages:
        return _out(vs, one_d)
    pg_adv = torch.empty_like(r)
    for t in range(T):
        if t < T - 1:
            mixed = lam * vs[t + 1] + (1.0 - lam) * v[t + 1]
            q = torch.where(done[t] > 0, v_next(t), mixed)
        else:
            q = v_next(t)
        pg_adv[t] = pg_rho[t] * (r[t] + gamma * (1.0 - term[t]) * q - v[t])
    return selected(_out(vs, one_d) if value_targets else None, _out(pg_adv, one_d))


# --------------------------------------------------------------------------- #
# Retrace
# --------------------------------------------------------------------------- #
def retrace(
    rewards: Tensor,
    q_taken: Tensor,
    expected_next_q: Tensor,
    log_rhos: Tensor,
    terminated: Tensor,
    *,
    truncated: Optional[Tensor] = None,
    gamma: float = 0.99,
    lam: float = 1.0,
    c_bar: float = 1.0,
) -> Tensor:
    r"""Retrace(lambda) Q targets (Munos et al. 2016, "Safe and Efficient
    Off-Policy Reinforcement Learning", eq. 3/4, written as a backward recursion).

    ``expected_next_q[t] = sum_a pi(a|s_{t+1}) Q(s_{t+1}, a)`` is supplied by
    the caller; ``q_taken[t] = Q(s_t, a_t)``; ``log_rhos[t] = log pi/mu (a_t|s_t)``.

    .. math::
        c_t = \lambda \min(\bar c, \exp(\log\rho_t)) \\
        D_t = r_t + \gamma (1-\mathrm{term}_t)\, \mathbb{E}Q_t - Q_t
              + \gamma (1-\mathrm{done}_t)\, c_{t+1} D_{t+1}, \quad D_T = 0 \\
        q^{ret}_t = Q_t + D_t

    At ``t = T-1`` the trace term is dropped (it multiplies ``D_T = 0``;
    ``c_T`` does not exist).

    Returns ``q_ret``, float64 ``[T, N]``.
    """
    r, one_d = _as_2d(rewards)
    q, _ = _as_2d(q_taken)
    eq, _ = _as_2d(expected_next_q)
    lr, _ = _as_2d(log_rhos)
    T = r.shape[0]
    term = _flag(terminated, r)
    done = torch.maximum(term, _flag(truncated, r))
    cs = lam * torch.clamp(torch.exp(lr), max=c_bar)

    q_ret = torch.empty_like(r)
    d_next = None  # D_{t+1}; D_T = 0
    for t in range(T - 1, -1, -1):
        d = r[t] + gamma * (1.0 - term[t]) * eq[t] - q[t]
        if t < T - 1:
            d = d + gamma * (1.0 - done[t]) * cs[t + 1] * d_next
        q_ret[t] = q[t] + d
        d_next = d
    return _out(q_ret, one_d)


# --------------------------------------------------------------------------- #
# TD(lambda) returns
# --------------------------------------------------------------------------- #
