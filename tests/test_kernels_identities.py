"""Identities between the public estimators; no reference involved.

Each identity follows from the math in docs/estimators.md (worked in the
docstrings).  They run in float64 (tolerance 1e-12) unless stated otherwise,
on random rollouts with terminations and truncations.
"""

from __future__ import annotations

import pytest
import torch

import kernels
from conftest import OPS, call, make_flags, make_generator, make_inputs, rel_err, to_time_dim1

F64 = torch.float64
T, N = 150, 13  # T > 128: more than one time chunk in the interpreter's tiling


def close(a, b, tol=1e-12):
    err = rel_err(a, b)
    assert err < tol, f"rel err {err:.3e} >= {tol:.0e}"


def rollout(seed, device, T=T, N=N, dtype=F64, density=0.08):
    """Rewards, values, bootstrap, flags and *consistent* next values:
    ``next_values[t] = V_{t+1}`` where not done (``bootstrap`` at T-1) and the
    true next-state value (random) where the episode ended at t."""
    g = make_generator(seed)
    r = torch.randn(T, N, generator=g, dtype=F64)
    v = torch.randn(T, N, generator=g, dtype=F64)
    boot = torch.randn(N, generator=g, dtype=F64)
    term, trunc = make_flags(T, N, g, density=density)
    done = term | trunc
    shifted = torch.cat([v[1:], boot[None]])
    nv = torch.where(done, torch.randn(T, N, generator=g, dtype=F64), shifted)
    cast = lambda x: x.to(dtype).to(device)  # noqa: E731
    return dict(r=cast(r), v=cast(v), boot=cast(boot), nv=cast(nv), shifted=cast(shifted),
                term=term.to(device), trunc=trunc.to(device), done=done.to(device))


# --------------------------------------------------------------------------- #
# GAE / returns
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("with_next_values", [False, True])
def test_gae_lam1_is_discounted_return_minus_value(device, with_next_values):
    # lam=1: A_t + V_t = r_t + g(1-term)V'_t + g(1-done)(A_{t+1}+V_{t+1} - V_{t+1}) and, as
    # V'_t = V_{t+1} where not done, that is r_t + g(1-done)G_{t+1} + g trunc(1-term)V'_t.
    x = rollout(1, device)
    nv = x["nv"] if with_next_values else x["shifted"]
    kw = dict(next_values=x["nv"]) if with_next_values else {}
    adv, ret = kernels.gae(x["r"], x["v"], x["term"], x["boot"], truncated=x["trunc"],
                           gamma=0.97, lam=1.0, **kw)
    g = kernels.discounted_returns(x["r"], x["term"], truncated=x["trunc"], next_values=nv,
                                   bootstrap_value=x["boot"], gamma=0.97)
    close(adv, g - x["v"])
    close(ret, g)


@pytest.mark.parametrize("lam", [0.0, 0.6, 1.0])
def test_gae_return_is_lambda_return(device, lam):
    # with V'_t = V_{t+1} where not done, GAE's A + V satisfies the TD(lambda) recursion
    x = rollout(2, device)
    _, ret = kernels.gae(x["r"], x["v"], x["term"], x["boot"], truncated=x["trunc"],
                         next_values=x["nv"], gamma=0.95, lam=lam)
    g = kernels.lambda_returns(x["r"], x["nv"], x["term"], truncated=x["trunc"], gamma=0.95, lam=lam)
    close(ret, g)


def test_lambda_returns_lam1_is_discounted_return(device):
    # holds for *any* next_values: not done -> r + g G_{t+1}; done -> r + g trunc(1-term) V'_t;
    # G_T = next_values[T-1] on both sides
    x = rollout(3, device)
    nv = torch.randn_like(x["nv"])
    g1 = kernels.lambda_returns(x["r"], nv, x["term"], truncated=x["trunc"], gamma=0.9, lam=1.0)
    g2 = kernels.discounted_returns(x["r"], x["term"], truncated=x["trunc"], next_values=nv, gamma=0.9)
    close(g1, g2)


def test_gae_is_linear_scan_of_deltas(device):
    # A = reverse scan of (delta_t, gamma lam (1-done_t))
    x = rollout(4, device)
    gamma, lam = 0.99, 0.9
    adv, _ = kernels.gae(x["r"], x["v"], x["term"], x["boot"], truncated=x["trunc"],
                         next_values=x["nv"], gamma=gamma, lam=lam)
    delta = x["r"] + gamma * x["nv"] * (~x["term"]) - x["v"]  # (float first: keep float64)
    y = kernels.linear_scan(delta, (~x["done"]).to(F64) * (gamma * lam), reverse=True)
    close(adv, y)


# --------------------------------------------------------------------------- #
# V-trace on-policy
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("with_next_values", [False, True])
def test_vtrace_on_policy_lam1_is_lambda1_return(device, with_next_values):
    # rho = 1: no clipping at 1, c_t = 1, so vs - V follows the lambda=1 TD recursion;
    # pg_adv_t = r_t + g(1-term) q_t - V_t with q_t = vs_{t+1} (not done) equals vs_t - V_t.
    x = rollout(5, device)
    nv = x["nv"] if with_next_values else x["shifted"]
    kw = dict(next_values=x["nv"]) if with_next_values else {}
    vs, pg = kernels.vtrace(x["r"], x["v"], torch.zeros_like(x["r"]), x["term"], x["boot"],
                            truncated=x["trunc"], gamma=0.98, lam=1.0, **kw)
    g = kernels.lambda_returns(x["r"], nv, x["term"], truncated=x["trunc"], gamma=0.98, lam=1.0)
    close(vs, g)
    close(pg, g - x["v"])


@pytest.mark.parametrize("lam", [0.0, 0.5, 0.95])
def test_vtrace_on_policy_is_gae(device, lam):
    # rho = 1: c_t = lam, so vs - V is GAE's advantage, and pg_adv_t = delta_t + g lam A_{t+1} = A_t
    x = rollout(6, device)
    vs, pg = kernels.vtrace(x["r"], x["v"], torch.zeros_like(x["r"]), x["term"], x["boot"],
                            truncated=x["trunc"], next_values=x["nv"], gamma=0.97, lam=lam,
                            rho_bar=1.0, c_bar=1.0, pg_rho_bar=1.0)
    adv, ret = kernels.gae(x["r"], x["v"], x["term"], x["boot"], truncated=x["trunc"],
                           next_values=x["nv"], gamma=0.97, lam=lam)
    close(vs, ret)
    close(pg, adv)


def test_vtrace_clipping_is_invariant_above_max_ratio(device):
    # all rho <= e^0.5 < 2: thresholds at 2 and at 50 give the same result
    x = rollout(7, device)
    lr = torch.rand_like(x["r"]) - 0.5
    a = kernels.vtrace(x["r"], x["v"], lr, x["term"], x["boot"], rho_bar=2.0, c_bar=2.0, pg_rho_bar=2.0)
    b = kernels.vtrace(x["r"], x["v"], lr, x["term"], x["boot"], rho_bar=50.0, c_bar=50.0, pg_rho_bar=50.0)
    for p, q in zip(a, b):
        close(p, q)


def test_retrace_is_invariant_to_first_log_rho(device):
    # the trace at t uses c_{t+1}: c_0 never enters
    x = rollout(8, device)
    lr = torch.randn_like(x["r"]) * 0.5
    q, eq = torch.randn_like(x["r"]), torch.randn_like(x["r"])
    a = kernels.retrace(x["r"], q, eq, lr, x["term"], truncated=x["trunc"])
    lr2 = lr.clone()
    lr2[0] = torch.randn(N, dtype=F64, device=device) * 3
    b = kernels.retrace(x["r"], q, eq, lr2, x["term"], truncated=x["trunc"])
    assert not torch.equal(lr, lr2)
    close(a, b)


def test_retrace_lam0_is_one_step_target(device):
    x = rollout(9, device)
    q, eq = torch.randn_like(x["r"]), torch.randn_like(x["r"])
    lr = torch.randn_like(x["r"]) * 0.5
    out = kernels.retrace(x["r"], q, eq, lr, x["term"], truncated=x["trunc"], gamma=0.9, lam=0.0)
    close(out, x["r"] + 0.9 * eq * (~x["term"]))


# --------------------------------------------------------------------------- #
# splitting a batch at an episode boundary
# --------------------------------------------------------------------------- #
S = 61  # the split step (the first half is 0..S)


def _boundary_rollout(device, kind):
    x = rollout(10 + (kind == "terminated"), device)
    flag = x["term"] if kind == "terminated" else x["trunc"]
    flag[S] = True
    if kind == "truncated":
        x["term"][S] = False
    x["done"] = x["term"] | x["trunc"]
    return x


def _cat(a, b):
    return [torch.cat([p, q]) for p, q in zip(a, b)]


@pytest.mark.parametrize("kind", ["truncated", "terminated"])
@pytest.mark.parametrize("op", ["gae", "vtrace", "retrace", "lambda_returns", "discounted_returns"])
def test_split_at_episode_end(device, op, kind):
    """A batch whose episodes all end at step S equals the two halves [0..S] and
    [S+1..T) computed separately; the first half bootstraps from V'_S."""
    x = _boundary_rollout(device, kind)
    r, v, term, trunc, boot = x["r"], x["v"], x["term"], x["trunc"], x["boot"]
    lo, hi = slice(0, S + 1), slice(S + 1, None)
    if op == "gae":
        # no next_values: V'_S = V_{S+1}, so the first half's bootstrap is values[S+1]
        f = lambda s, b: kernels.gae(r[s], v[s], term[s], b, truncated=trunc[s], gamma=0.96, lam=0.9)  # noqa
        full, halves = f(slice(None), boot), _cat(f(lo, v[S + 1]), f(hi, boot))
    elif op == "vtrace":
        lr = torch.randn_like(r) * 0.5
        f = lambda s, b: kernels.vtrace(r[s], v[s], lr[s], term[s], b, truncated=trunc[s],  # noqa
                                        next_values=x["nv"][s], gamma=0.96, lam=0.9, c_bar=1.2)
        full, halves = f(slice(None), boot), _cat(f(lo, x["nv"][S]), f(hi, boot))
    elif op == "retrace":
        lr, q, eq = torch.randn_like(r) * 0.5, torch.randn_like(r), torch.randn_like(r)
        f = lambda s: (kernels.retrace(r[s], q[s], eq[s], lr[s], term[s], truncated=trunc[s],  # noqa
                                       gamma=0.96, lam=0.9),)
        full, halves = f(slice(None)), _cat(f(lo), f(hi))
    elif op == "lambda_returns":
        f = lambda s: (kernels.lambda_returns(r[s], x["nv"][s], term[s], truncated=trunc[s],  # noqa
                                              gamma=0.96, lam=0.9),)
        full, halves = f(slice(None)), _cat(f(lo), f(hi))
    else:
        f = lambda s, b: (kernels.discounted_returns(r[s], term[s], truncated=trunc[s],  # noqa
                                                     next_values=x["nv"][s], bootstrap_value=b,
                                                     gamma=0.96),)
        # the first half's bootstrap_value is irrelevant (step S is done): use garbage
        full, halves = f(slice(None), boot), _cat(f(lo, boot * 100 + 7), f(hi, boot))
    for a, b in zip(full, halves):
        close(a, b)


def test_split_forward_scans(device):
    """Forward scans continued from the last value of the first half (passed as
    ``initial``) equal the scan of the whole; an end at S resets instead."""
    g = make_generator(12)
    xs = torch.randn(T, N, generator=g, dtype=F64).to(device)
    term, trunc = make_flags(T, N, g)
    dones = (term | trunc).to(device)
    # continuation through a non-boundary step S
    dones[S] = False
    starts = dones.clone()
    starts[S + 1] = False
    lo, hi = slice(0, S + 1), slice(S + 1, None)
    for fn in (
        lambda s, init, d: kernels.eligibility_traces(xs[s], d[s], gamma=0.9, lam=0.8, initial=init),
        lambda s, init, d: kernels.episodic_prefix_sum(xs[s], d[s], initial=init),
    ):
        full = fn(slice(None), None, dones)
        first = fn(lo, None, dones)
        second = fn(hi, first[-1], dones)
        close(full, torch.cat([first, second]))
    full = kernels.episodic_prefix_sum(xs, starts, boundary="starts_at")
    first = kernels.episodic_prefix_sum(xs[lo], starts[lo], boundary="starts_at")
    second = kernels.episodic_prefix_sum(xs[hi], starts[hi], boundary="starts_at", initial=first[-1])
    close(full, torch.cat([first, second]))
    # an episode end at S: the second half restarts from 0 whatever the first half held
    dones[S] = True
    for fn in (
        lambda s, d: kernels.eligibility_traces(xs[s], d[s], gamma=0.9, lam=0.8),
        lambda s, d: kernels.episodic_prefix_sum(xs[s], d[s]),
    ):
        close(fn(slice(None), dones), torch.cat([fn(lo, dones), fn(hi, dones)]))


@pytest.mark.parametrize("reverse", [False, True])
def test_linear_scan_split_with_initial(device, reverse):
    g = make_generator(13)
    a = torch.randn(T, N, generator=g, dtype=F64).to(device)
    b = (torch.rand(T, N, generator=g, dtype=F64) * 1.6 - 0.8).to(device)
    full = kernels.linear_scan(a, b, reverse=reverse)
    if reverse:
        second = kernels.linear_scan(a[S + 1:], b[S + 1:], reverse=True)
        first = kernels.linear_scan(a[:S + 1], b[:S + 1], reverse=True, initial=second[0])
    else:
        first = kernels.linear_scan(a[:S + 1], b[:S + 1])
        second = kernels.linear_scan(a[S + 1:], b[S + 1:], initial=first[-1])
    close(full, torch.cat([first, second]))


# --------------------------------------------------------------------------- #
# layouts, precision, simple closed forms
# --------------------------------------------------------------------------- #
OP_KW = {
    "gae": dict(next_values=True),
    "vtrace": dict(scalars=dict(lam=0.9, c_bar=1.3)),
    "retrace": dict(),
    "lambda_returns": dict(),
    "discounted_returns": dict(),
    "eligibility_traces": dict(initial=True),
    "episodic_prefix_sum": dict(initial=True, scalars=dict(boundary="starts_at")),
    "linear_scan": dict(initial=True, scalars=dict(reverse=True)),
}


@pytest.mark.parametrize("op", OPS)
def test_layouts_agree(device, op):
    # [N, T] (contiguous, and transposed view) vs [T, N]; float32
    tm = make_inputs(op, T, N, seed=14, device=device, **OP_KW[op])
    a = call(kernels, tm)
    for contiguous in (True, False):
        b = call(kernels, to_time_dim1(tm, contiguous=contiguous), time_dim=1)
        for p, q in zip(a, b):
            assert q.shape == (N, T)
            close(q.t(), p, tol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("op", OPS)
def test_low_precision_inputs_near_float32(device, op, dtype):
    # rounding the inputs to 8 (bf16) / 11 (fp16) mantissa bits moves the result by
    # about that much; outputs come back in the input dtype
    tm = make_inputs(op, T, N, seed=15, device=device, **OP_KW[op])
    low = tm.map(lambda k, t: t.to(dtype) if t.is_floating_point() else t)
    a, b = call(kernels, tm), call(kernels, low)
    tol = 3e-2 if dtype == torch.bfloat16 else 4e-3
    for p, q in zip(a, b):
        assert q.dtype == dtype and p.dtype == torch.float32
        close(q, p, tol=tol)


def test_episodic_prefix_sum_without_dones_is_cumsum(device):
    x = torch.randn(T, N, dtype=F64, device=device)
    none = torch.zeros(T, N, dtype=torch.bool, device=device)
    init = torch.randn(N, dtype=F64, device=device)
    close(kernels.episodic_prefix_sum(x, none), torch.cumsum(x, 0))
    close(kernels.episodic_prefix_sum(x, none, initial=init), torch.cumsum(x, 0) + init)
    close(kernels.episodic_prefix_sum(x, none, boundary="starts_at"), torch.cumsum(x, 0))


def test_episodic_prefix_sum_counts_episode_length(device):
    # x = 1: C_t is the step count within the episode (1-based)
    T_, N_ = 40, 3
    dones = torch.zeros(T_, N_, dtype=torch.bool, device=device)
    dones[9, 0] = dones[10, 1] = dones[20, 1] = True
    c = kernels.episodic_prefix_sum(torch.ones(T_, N_, dtype=F64, device=device), dones)
    t = torch.arange(1, T_ + 1, dtype=F64, device=device)
    torch.testing.assert_close(c[:, 0], torch.where(t <= 10, t, t - 10))
    torch.testing.assert_close(c[:, 1], torch.where(t <= 11, t, torch.where(t <= 21, t - 11, t - 21)))
    torch.testing.assert_close(c[:, 2], t)


def test_eligibility_traces_unit_decay_is_cumsum(device):
    x = torch.randn(T, N, dtype=F64, device=device)
    none = torch.zeros(T, N, dtype=torch.uint8, device=device)
    init = torch.randn(N, dtype=F64, device=device)
    close(kernels.eligibility_traces(x, none, gamma=1.0, lam=1.0), torch.cumsum(x, 0))
    close(kernels.eligibility_traces(x, none, gamma=1.0, lam=1.0, initial=init), torch.cumsum(x, 0) + init)
    # gamma*lam = 0: the trace is the input itself
    close(kernels.eligibility_traces(x, none, gamma=0.0, lam=0.5, initial=init), x)


@pytest.mark.parametrize("initial", [False, True])
def test_linear_scan_reverse_is_flipped_forward(device, initial):
    g = make_generator(16)
    a = torch.randn(T, N, generator=g, dtype=F64).to(device)
    b = (torch.rand(T, N, generator=g, dtype=F64) * 2 - 1).to(device)
    init = torch.randn(N, generator=g, dtype=F64).to(device) if initial else None
    rev = kernels.linear_scan(a, b, reverse=True, initial=init)
    fwd = kernels.linear_scan(a.flip(0), b.flip(0), initial=init).flip(0)
    close(rev, fwd)


def test_linear_scan_constant_decay_closed_form(device):
    # beta = 1: cumsum ; beta = 0: alpha ; beta = c: y_t = sum_k c^(t-k) alpha_k
    a = torch.randn(T, N, dtype=F64, device=device)
    close(kernels.linear_scan(a, torch.ones_like(a)), torch.cumsum(a, 0))
    close(kernels.linear_scan(a, torch.zeros_like(a)), a)
    c = 0.9
    t = torch.arange(T, dtype=F64, device=device)
    w = torch.tril(c ** (t[:, None] - t[None, :]))
    close(kernels.linear_scan(a, torch.full_like(a, c)), w @ a)


def test_discounted_returns_closed_form(device):
    # one episode, no flags: G_t = sum_k gamma^(k-t) r_k + gamma^(T-t) G_T
    r = torch.randn(T, N, dtype=F64, device=device)
    boot = torch.randn(N, dtype=F64, device=device)
    none = torch.zeros(T, N, dtype=torch.bool, device=device)
    gamma = 0.95
    t = torch.arange(T, dtype=F64, device=device)
    w = torch.triu(gamma ** (t[None, :] - t[:, None]))
    expected = w @ r + (gamma ** (T - t))[:, None] * boot
    close(kernels.discounted_returns(r, none, bootstrap_value=boot, gamma=gamma), expected)
