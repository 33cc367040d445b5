"""Float64 sequential reference implementations of the credit-assignment estimators.

This module is the *specification* of every estimator exposed by :mod:`kernels`
and also the CPU fallback path used when the Triton kernels are not run.

Every function here is written straight from the published math, as a literal
loop over time steps (vectorised over the batch dimension ``N``), in float64.
None of them goes through a generic ``y_t = alpha_t + beta_t y_{t+1}`` scan:
the point of this module is to be an independent statement of the math
against which the fused kernels (which *are* such scans) are checked.

Conventions (shared by all functions)
-------------------------------------
* Tensors are time-major ``[T, N]`` (a 1-D ``[T]`` tensor is accepted as a
  single environment and the outputs are then 1-D as well).  ``bootstrap_value``
  and ``initial`` are ``[N]`` (or scalars / 0-d for 1-D inputs).
* Float inputs may have any floating dtype; they are upcast to float64.  Flag
  tensors (``terminated``, ``truncated``, ``dones``) may have any dtype and are
  interpreted as ``x != 0``.
* Outputs are float64 tensors on the device of the first input.  ``T == 0``
  returns empty ``[0, N]`` outputs.
* No argument validation is done here (the public wrappers in
  :mod:`kernels` validate); optional arguments may be ``None``.

Terminated vs truncated (t = 0..T-1)
------------------------------------
``r_t`` is the reward after action ``a_t``.  ``terminated_t``: the episode
ended at step t in a terminal state (no bootstrap).  ``truncated_t``: it was
cut at step t (time limit): bootstrap from the value of the state after step
t.  ``done_t = terminated_t or truncated_t``; terminated wins if both are set.
``V_t = values[t]``; ``bootstrap_value = V(s_T)``.  The value of the state
after step t is ``V'_t = next_values[t]`` when given, else ``V_{t+1}`` for
``t < T-1`` and ``bootstrap_value`` for ``t = T-1``.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

__all__ = [
    "gae",
    "vtrace",
    "retrace",
    "lambda_returns",
    "discounted_returns",
    "eligibility_traces",
    "episodic_prefix_sum",
    "linear_scan",
]

_F64 = torch.float64


# --------------------------------------------------------------------------- #
# shared pieces
# --------------------------------------------------------------------------- #
def _as_2d(x: Tensor) -> Tuple[Tensor, bool]:
    """Return ``x`` as ``[T, N]`` float64 and whether it was 1-D."""
    x = torch.as_tensor(x)
    if x.dim() == 1:
        return x.to(_F64).unsqueeze(1), True
    return x.to(_F64), False


def _flag(x: Optional[Tensor], like: Tensor) -> Tensor:
    """Flags of any dtype -> float64 0/1 of ``like``'s shape (``None`` -> zeros)."""
    if x is None:
        return torch.zeros_like(like)
    x = torch.as_tensor(x, device=like.device)
    if x.dim() == 1:
        x = x.unsqueeze(1)
    return (x != 0).to(_F64).expand_as(like)


def _vec(x: Optional[Tensor], like: Tensor) -> Tensor:
    """An ``[N]`` vector (``None`` -> zeros) as float64 on ``like``'s device."""
    n = like.shape[1]
    if x is None:
        return torch.zeros(n, dtype=_F64, device=like.device)
    x = torch.as_tensor(x, device=like.device).to(_F64)
    return x.reshape(-1).expand(n) if x.numel() == 1 else x.reshape(n)


def _out(x: Tensor, one_d: bool) -> Tensor:
    return x.squeeze(1) if one_d else x


def _next_value_fn(values: Tensor, next_values: Optional[Tensor], bootstrap: Tensor):
    """``V'_t``: next_values[t] if given, else V_{t+1} (t < T-1) / bootstrap (t = T-1)."""
    T = values.shape[0]
    if next_values is not None:
        nv = next_values
        return lambda t: nv[t]
    return lambda t: values[t + 1] if t < T - 1 else bootstrap


# --------------------------------------------------------------------------- #
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
) -> Tuple[Tensor, Tensor]:
    r"""Generalized Advantage Estimation (Schulman et al. 2016, "High-Dimensional
    Continuous Control Using Generalized Advantage Estimation", eq. 16).

    .. math::
        \delta_t = r_t + \gamma (1-\mathrm{term}_t) V'_t - V_t \\
        A_t = \delta_t + \gamma \lambda (1-\mathrm{done}_t) A_{t+1}, \quad A_T = 0 \\
        \mathrm{ret}_t = A_t + V_t

    A truncation at t cuts the recursion (``done_t``) but still bootstraps
    ``delta_t`` from ``V'_t``; a termination also drops the bootstrap.

    Returns ``(advantages, returns)``, float64 ``[T, N]``.
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
    ret = adv + v
    return _out(adv, one_d), _out(ret, one_d)


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
) -> Tuple[Tensor, Tensor]:
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

    Returns ``(vs, pg_adv)``, float64 ``[T, N]``.
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

    pg_adv = torch.empty_like(r)
    for t in range(T):
        if t < T - 1:
            mixed = lam * vs[t + 1] + (1.0 - lam) * v[t + 1]
            q = torch.where(done[t] > 0, v_next(t), mixed)
        else:
            q = v_next(t)
        pg_adv[t] = pg_rho[t] * (r[t] + gamma * (1.0 - term[t]) * q - v[t])
    return _out(vs, one_d), _out(pg_adv, one_d)


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
def lambda_returns(
    rewards: Tensor,
    next_values: Tensor,
    terminated: Tensor,
    *,
    truncated: Optional[Tensor] = None,
    gamma: float = 0.99,
    lam: float = 0.95,
) -> Tensor:
    r"""TD(lambda) / lambda-returns (Sutton & Barto 2018, ch. 12.1, recursive
    form eq. 12.18 without the time limit), with torchrl's ``td_lambda_return_estimate``
    terminated-vs-truncated semantics: a termination drops the bootstrap, a
    truncation keeps the one-step bootstrap ``V'_t`` but cuts the lambda trace.

    .. math::
        G_t = r_t + \gamma (1-\mathrm{term}_t) V'_t
              + \gamma\lambda (1-\mathrm{done}_t) (G_{t+1} - V'_t),
        \quad G_T = V'_{T-1}, \quad V'_t = \mathrm{next\_values}[t]

    Returns ``G``, float64 ``[T, N]``.
    """
    r, one_d = _as_2d(rewards)
    nv, _ = _as_2d(next_values)
    T = r.shape[0]
    term = _flag(terminated, r)
    done = torch.maximum(term, _flag(truncated, r))

    g = torch.empty_like(r)
    if T == 0:
        return _out(g, one_d)
    g_next = nv[T - 1].clone()  # G_T = V'_{T-1}
    for t in range(T - 1, -1, -1):
        g_t = r[t] + gamma * (1.0 - term[t]) * nv[t] + gamma * lam * (1.0 - done[t]) * (g_next - nv[t])
        g[t] = g_t
        g_next = g_t
    return _out(g, one_d)


# --------------------------------------------------------------------------- #
# Discounted returns
# --------------------------------------------------------------------------- #
def discounted_returns(
    rewards: Tensor,
    terminated: Tensor,
    *,
    truncated: Optional[Tensor] = None,
    next_values: Optional[Tensor] = None,
    bootstrap_value: Optional[Tensor] = None,
    gamma: float = 0.99,
) -> Tensor:
    r"""Discounted (Monte-Carlo) returns with episode boundaries (Sutton & Barto
    2018, eq. 3.9, ``G_t = R_{t+1} + gamma G_{t+1}``).

    .. math::
        G_t = r_t + \gamma (1-\mathrm{done}_t) G_{t+1}
              + \gamma\, \mathrm{trunc}_t (1-\mathrm{term}_t) V'_t

    with ``G_T = bootstrap_value`` (or ``next_values[T-1]`` when only that is
    given, else 0) and ``V'_t = next_values[t]``.  A truncation bootstraps from
    ``V'_t``; a termination bootstraps from nothing.  ``truncated`` given
    without ``next_values`` has no defined bootstrap (the public wrapper
    rejects it; this reference raises ``ValueError`` too).

    Returns ``G``, float64 ``[T, N]``.
    """
    r, one_d = _as_2d(rewards)
    T = r.shape[0]
    term = _flag(terminated, r)
    trunc = _flag(truncated, r)
    done = torch.maximum(term, trunc)
    nv = None if next_values is None else _as_2d(next_values)[0]
    if truncated is not None and nv is None and T > 0 and bool((trunc > 0).any()):
        raise ValueError("discounted_returns: `truncated` requires `next_values`")

    g = torch.empty_like(r)
    if T == 0:
        return _out(g, one_d)
    if bootstrap_value is not None:
        g_next = _vec(bootstrap_value, r)
    elif nv is not None:
        g_next = nv[T - 1].clone()
    else:
        g_next = torch.zeros(r.shape[1], dtype=_F64, device=r.device)
    for t in range(T - 1, -1, -1):
        g_t = r[t] + gamma * (1.0 - done[t]) * g_next
        if nv is not None:
            g_t = g_t + gamma * trunc[t] * (1.0 - term[t]) * nv[t]
        g[t] = g_t
        g_next = g_t
    return _out(g, one_d)


# --------------------------------------------------------------------------- #
# Eligibility traces (forward)
# --------------------------------------------------------------------------- #
def eligibility_traces(
    inputs: Tensor, dones: Tensor, *, gamma: float = 0.99, lam: float = 0.95, initial: Optional[Tensor] = None
) -> Tensor:
    r"""Accumulating eligibility traces (Sutton & Barto 2018, ch. 12.2, eq. 12.5
    ``z_t = gamma lambda z_{t-1} + grad v``), with ``inputs`` in the role of the
    gradient and the trace reset after an episode end.

    .. math::
        z_t = x_t + \gamma\lambda (1-\mathrm{done}_{t-1}) z_{t-1},
        \quad z_{-1} = \mathrm{initial}\ (0), \quad \mathrm{done}_{-1} = 0

    Returns ``z``, float64 ``[T, N]``.
    """
    x, one_d = _as_2d(inputs)
    T = x.shape[0]
    d = _flag(dones, x)
    z = torch.empty_like(x)
    z_prev = _vec(initial, x)
    d_prev = torch.zeros_like(z_prev)
    for t in range(T):
        z_t = x[t] + gamma * lam * (1.0 - d_prev) * z_prev
        z[t] = z_t
        z_prev = z_t
        d_prev = d[t]
    return _out(z, one_d)


# --------------------------------------------------------------------------- #
# Episodic prefix sum (forward)
# --------------------------------------------------------------------------- #
def episodic_prefix_sum(
    inputs: Tensor, dones: Tensor, *, initial: Optional[Tensor] = None, boundary: str = "ends_at"
) -> Tensor:
    r"""Cumulative sum that restarts at episode boundaries (e.g. running episode
    return / length).

    * ``boundary="ends_at"``: ``dones[t]`` marks the *last* step of an episode,
      ``C_t = x_t + (1-done_{t-1}) C_{t-1}`` (``done_{-1} = 0``).
    * ``boundary="starts_at"``: the flags mark *first* steps,
      ``C_t = x_t + (1-start_t) C_{t-1}``.

    ``C_{-1} = initial`` (default 0).  Returns ``C``, float64 ``[T, N]``.
    """
    x, one_d = _as_2d(inputs)
    T = x.shape[0]
    f = _flag(dones, x)
    c = torch.empty_like(x)
    c_prev = _vec(initial, x)
    if boundary == "ends_at":
        reset_prev = torch.zeros_like(c_prev)
        for t in range(T):
            c_t = x[t] + (1.0 - reset_prev) * c_prev
            c[t] = c_t
            c_prev = c_t
            reset_prev = f[t]
    elif boundary == "starts_at":
        for t in range(T):
            c_t = x[t] + (1.0 - f[t]) * c_prev
            c[t] = c_t
            c_prev = c_t
    else:
        raise ValueError(f"boundary must be 'ends_at' or 'starts_at', got {boundary!r}")
    return _out(c, one_d)


# --------------------------------------------------------------------------- #
# Generic first-order linear recurrence
# --------------------------------------------------------------------------- #
def linear_scan(alpha: Tensor, beta: Tensor, *, reverse: bool = False, initial: Optional[Tensor] = None) -> Tensor:
    r"""First-order linear recurrence.

    * forward: ``y_t = alpha_t + beta_t y_{t-1}``, ``y_{-1} = initial`` (0).
    * ``reverse=True``: ``y_t = alpha_t + beta_t y_{t+1}``, ``y_T = initial`` (0).

    Returns ``y``, float64 ``[T, N]``.
    """
    a, one_d = _as_2d(alpha)
    b, _ = _as_2d(beta)
    T = a.shape[0]
    y = torch.empty_like(a)
    y_prev = _vec(initial, a)
    steps = range(T - 1, -1, -1) if reverse else range(T)
    for t in steps:
        y_t = a[t] + b[t] * y_prev
        y[t] = y_t
        y_prev = y_t
    return _out(y, one_d)
