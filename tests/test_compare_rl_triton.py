"""``scripts/compare_rl_triton.py``'s adapters (``rltrain.bench.rl_triton``): our inputs, converted to rl-triton 0.1.3's arguments,
mean the same numbers to it as to our float64 reference.

rl-triton runs only on CUDA and is not a dependency, so a float64 stand-in plays it here: one loop per
function, written from the recurrences and argument descriptions of rl-triton 0.1.3's ``compute_*``
docstrings, with their signatures (an argument the adapter misnames is a ``TypeError``).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from rltrain.bench import cells
from rltrain.bench import rl_triton as C

F64 = torch.float64


def _next(x, truncateds, bootstrap_values, last_value):
    """``x[t+1]`` at untruncated steps before the last, plus the continuation values: rl-triton's
    ``bootstrap_values`` (``last_value`` fills its last column)."""
    nxt = torch.zeros_like(x)
    nxt[:, :-1] = x[:, 1:]
    nxt = nxt * (1.0 - truncateds)
    nxt[:, -1] = 0.0
    if last_value is not None:
        bootstrap_values = torch.zeros_like(x)
        bootstrap_values[:, -1] = last_value
    return nxt + (0.0 if bootstrap_values is None else bootstrap_values.to(F64))


def _backward(u, v, carry=0.0):
    """``A[t] = u[t] + v[t] A[t+1]``, ``A[T] = carry``."""
    out, a = torch.empty_like(u), torch.zeros_like(u[:, 0]) + carry
    for t in range(u.shape[1] - 1, -1, -1):
        a = u[:, t] + v[:, t] * a
        out[:, t] = a
    return out


def compute_gae(rewards, values, terminateds, truncateds=None, gamma=0.99, lambda_=0.95,
                bootstrap_values=None, last_value=None):
    """A[t] = delta[t] + gamma lambda (1 - done[t]) A[t+1], A[T] = 0 (the last column of
    ``bootstrap_values`` is the last step's next value only); ``truncateds`` None: done = terminated."""
    r, v, term = rewards.to(F64), values.to(F64), terminateds.to(F64)
    trunc = torch.zeros_like(term) if truncateds is None else truncateds.to(F64)
    done = (term + trunc).clamp(max=1.0)
    delta = r + gamma * (1.0 - term) * _next(v, trunc, bootstrap_values, last_value) - v
    return _backward(delta, gamma * lambda_ * (1.0 - done))


def compute_vtrace(log_pi_target, log_pi_behavior, values, rewards, terminateds, truncateds=None, gamma=0.99,
                   rho_bar=1.0, c_bar=1.0, bootstrap_values=None, last_value=None):
    """Delta[t] = rho (r + gamma V(s_{t+1}) (1 - term) - V) + gamma c (1 - done) Delta[t+1], Delta[T] = 0;
    vs = Delta + V; A = rho (r + gamma vs[t+1] (1 - term) - V), vs[t+1] replaced as V(s_{t+1}) is."""
    r, v, term = rewards.to(F64), values.to(F64), terminateds.to(F64)
    trunc = torch.zeros_like(term) if truncateds is None else truncateds.to(F64)
    done = (term + trunc).clamp(max=1.0)
    ratio = torch.exp(log_pi_target.to(F64) - log_pi_behavior.to(F64))
    rho, c = ratio.clamp(max=rho_bar), ratio.clamp(max=c_bar)
    u = rho * (r + gamma * _next(v, trunc, bootstrap_values, last_value) * (1.0 - term) - v)
    vs = _backward(u, gamma * c * (1.0 - done)) + v
    adv = rho * (r + gamma * _next(vs, trunc, bootstrap_values, last_value) * (1.0 - term) - v)
    return vs, adv


def compute_discounted_returns(rewards, terminateds, truncateds=None, gamma=0.99, bootstrap_values=None):
    """G[t] = r[t] + gamma (1 - done[t]) G[t+1] + gamma truncated[t] bootstrap[t], G[T] = bootstrap[T-1]."""
    r, term = rewards.to(F64), terminateds.to(F64)
    trunc = torch.zeros_like(term) if truncateds is None else truncateds.to(F64)
    bv = torch.zeros_like(r) if bootstrap_values is None else bootstrap_values.to(F64)
    done = (term + trunc).clamp(max=1.0)
    return _backward(r + gamma * trunc * bv, gamma * (1.0 - done), bv[:, -1])


def _forward(x, decay):
    """``C[t] = x[t] + decay[t] C[t-1]``, ``C[-1] = 0``."""
    out, c = torch.empty_like(x), torch.zeros_like(x[:, 0])
    for t in range(x.shape[1]):
        c = x[:, t] + decay[:, t] * c
        out[:, t] = c
    return out


def _previous(d):
    """``d[t-1]``, with ``d[-1] = 0``."""
    return torch.cat([torch.zeros_like(d[:, :1]), d[:, :-1]], dim=1)


def compute_eligibility_traces(gradients, dones, gamma, lambda_, seed_values=None):
    """z[t] = g[t] + gamma lambda (1 - done[t-1]) z[t-1]; ``dones`` not pre-shifted."""
    return _forward(gradients.to(F64), gamma * lambda_ * (1.0 - _previous(dones.to(F64))))


def compute_episodic_prefix_sum(inputs, dones, seed_values=None, boundary="ends_at"):
    """C[t] = x[t] + (1 - done[t-1]) C[t-1] ("ends_at") or (1 - done[t]) C[t-1] ("starts_at")."""
    d = dones.to(F64)
    return _forward(inputs.to(F64), 1.0 - (_previous(d) if boundary == "ends_at" else d))


RL_TRITON_0_1_3 = SimpleNamespace(**{name: globals()[name] for name, _ in C.RIVAL.values()})

CELLS = [(est, trunc) for est in C.RIVAL
         for trunc in ((True, False) if "truncated" in dict(cells.SPECS[est]["kw"]) else (False,))]


def _cell(est, truncations, seed):
    """A prepared cell's inputs, float64, with terminations and truncations forced onto the last step of
    some environments (one of them both), where the window's end and a flagged step meet."""
    args, kw = cells.make_inputs(est, 12, 24, "nt", F64, "cpu", seed)
    if "truncated" in kw:
        terminated = args[[name for name, _ in cells.SPECS[est]["pos"]].index("terminated")]
        kw["truncated"][0:3, -1] = True
        terminated[2:5, -1] = True
        terminated[5:, -1] = False
    return C.prepare(est, truncations)(args, kw)


@pytest.mark.parametrize("est,truncations", CELLS)
def test_adapter_means_the_same_numbers(est, truncations):
    for seed in (0, 1):
        args, kw = _cell(est, truncations, seed)
        refs, k, kind = cells.reference_outputs(est, args, kw, "nt", 12, 16384, "cpu")
        assert kind == "reference"
        out = C.rival_call(est, RL_TRITON_0_1_3)(args, kw)
        assert cells.rel_err(out, refs, k, "nt") < 1e-12, (est, truncations, seed)


def test_cells_keep_nonzero_bootstrap_values():
    for est in ("gae", "vtrace"):
        args, _ = _cell(est, True, 0)
        assert bool((args[-1] != 0).all())
    _, kw = _cell("discounted_returns", True, 0)
    assert bool((kw["bootstrap_value"] != 0).all())


def test_rl_triton_vtrace_without_lambda_is_refused():
    args, kw = _cell("vtrace", True, 0)
    with pytest.raises(ValueError, match="lam"):
        C.vtrace_inputs(args, dict(kw, lam=0.9))
