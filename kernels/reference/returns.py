"""Float64 references of the returns and forward scans (see the package docstring)."""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from kernels.reference._common import _F64, _as_2d, _flag, _out, _vec


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
