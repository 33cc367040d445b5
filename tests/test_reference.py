"""The float64 reference (kernels/reference.py) against hand-worked tiny cases.

All cases are T = 3, N = 1 with small dyadic numbers, so every expected value
below is exact in binary floating point; the arithmetic is worked in the
comments.  Common data unless stated otherwise:

    r = [1, 2, 4],  V = [2, 4, 8],  bootstrap V(s_3) = 16,  gamma = 0.5
"""

from __future__ import annotations

import math

import pytest
import torch

from kernels import reference as R

from conftest import make_flags, make_generator

F64 = torch.float64
R3 = [1.0, 2.0, 4.0]
V3 = [2.0, 4.0, 8.0]
BOOT = 16.0


def col(xs, dtype=torch.float32):
    """A [3, 1] time-major column."""
    return torch.tensor(xs, dtype=dtype).reshape(-1, 1)


def flags(*steps, dtype=torch.bool):
    f = torch.zeros(3, 1, dtype=dtype)
    for s in steps:
        f[s, 0] = 1
    return f


def vec(x):
    return torch.tensor([x], dtype=torch.float32)


def check(out, expected):
    assert out.dtype == F64
    assert out.shape == (3, 1)
    torch.testing.assert_close(out, col(expected, F64), rtol=0, atol=1e-12)


NONE = flags()


# --------------------------------------------------------------------------- #
# GAE, gamma = lam = 0.5 (gamma*lam = 0.25)
# --------------------------------------------------------------------------- #
def test_gae_no_flags():
    # delta_2 = 4 + .5*16 - 8 = 4 ; delta_1 = 2 + .5*8 - 4 = 2 ; delta_0 = 1 + .5*4 - 2 = 1
    # A_2 = 4 ; A_1 = 2 + .25*4 = 3 ; A_0 = 1 + .25*3 = 1.75 ; ret = A + V
    adv, ret = R.gae(col(R3), col(V3), NONE, vec(BOOT), gamma=0.5, lam=0.5)
    check(adv, [1.75, 3.0, 4.0])
    check(ret, [3.75, 7.0, 12.0])


def test_gae_termination():
    # terminated at t=1: delta_1 = 2 - 4 = -2 (no bootstrap), A_1 = -2 (trace cut)
    # A_0 = 1 + .25*(-2) = 0.5
    adv, ret = R.gae(col(R3), col(V3), flags(1), vec(BOOT), gamma=0.5, lam=0.5)
    check(adv, [0.5, -2.0, 4.0])
    check(ret, [2.5, 2.0, 12.0])


def test_gae_truncation_bootstraps_from_next_values():
    # truncated at t=1, V'_1 = next_values[1] = 12 (the true s_2 of that episode)
    # delta_1 = 2 + .5*12 - 4 = 4, A_1 = 4 (cut) ; A_0 = 1 + .25*4 = 2
    nv = col([4.0, 12.0, 16.0])
    adv, ret = R.gae(col(R3), col(V3), NONE, vec(BOOT), truncated=flags(1), next_values=nv,
                     gamma=0.5, lam=0.5)
    check(adv, [2.0, 4.0, 4.0])
    check(ret, [4.0, 8.0, 12.0])


def test_gae_truncation_without_next_values_uses_next_V():
    # truncated at t=1, V'_1 = V_2 = 8: delta_1 = 2 ; A_1 = 2 ; A_0 = 1 + .25*2 = 1.5
    adv, _ = R.gae(col(R3), col(V3), NONE, vec(BOOT), truncated=flags(1), gamma=0.5, lam=0.5)
    check(adv, [1.5, 2.0, 4.0])


def test_gae_terminated_wins_over_truncated():
    nv = col([4.0, 12.0, 16.0])
    adv, _ = R.gae(col(R3), col(V3), flags(1), vec(BOOT), truncated=flags(1), next_values=nv,
                   gamma=0.5, lam=0.5)
    check(adv, [0.5, -2.0, 4.0])


def test_gae_truncation_at_last_step_uses_bootstrap():
    # truncation at T-1 changes nothing: V'_2 = bootstrap, A_3 = 0 anyway
    adv, _ = R.gae(col(R3), col(V3), NONE, vec(BOOT), truncated=flags(2), gamma=0.5, lam=0.5)
    check(adv, [1.75, 3.0, 4.0])


# --------------------------------------------------------------------------- #
# V-trace, gamma = 0.5, rho = [1, 2, 0.5], all clips at 1
#   clipped rho = [1, 1, .5], c = lam * [1, 1, .5]
#   one-step TD errors e = [1, 2, 4] (as in GAE), delta = rho_clip * e = [1, 2, 2]
# --------------------------------------------------------------------------- #
LOG_RHOS = col([0.0, math.log(2.0), math.log(0.5)], F64)


def test_vtrace_lambda_one():
    # vs-V: d_2 = 2 ; d_1 = 2 + .5*1*2 = 3 ; d_0 = 1 + .5*1*3 = 2.5 -> vs = [4.5, 7, 10]
    # pg: q_0 = vs_1 = 7 : 1*(1 + 3.5 - 2) = 2.5 ; q_1 = vs_2 = 10 : 1*(2 + 5 - 4) = 3
    #     q_2 = V'_2 = 16 : .5*(4 + 8 - 8) = 2
    vs, pg = R.vtrace(col(R3), col(V3), LOG_RHOS, NONE, vec(BOOT), gamma=0.5, lam=1.0)
    check(vs, [4.5, 7.0, 10.0])
    check(pg, [2.5, 3.0, 2.0])


def test_vtrace_lambda_half():
    # c = [.5, .5, .25]; d_2 = 2 ; d_1 = 2 + .5*.5*2 = 2.5 ; d_0 = 1 + .5*.5*2.5 = 1.625
    # vs = [3.625, 6.5, 10]
    # q_0 = .5*6.5 + .5*4 = 5.25 : 1 + 2.625 - 2 = 1.625 ; q_1 = .5*10 + .5*8 = 9 : 2 + 4.5 - 4 = 2.5
    vs, pg = R.vtrace(col(R3), col(V3), LOG_RHOS, NONE, vec(BOOT), gamma=0.5, lam=0.5)
    check(vs, [3.625, 6.5, 10.0])
    check(pg, [1.625, 2.5, 2.0])


def test_vtrace_truncation():
    # truncated at 1, next_values[1] = 12: e_1 = 2 + 6 - 4 = 4 = d_1 (cut) ; d_0 = 1 + .5*4 = 3
    # vs = [5, 8, 10] ; pg_0 = 1 + .5*8 - 2 = 3 ; pg_1 uses q_1 = V'_1 = 12: 2 + 6 - 4 = 4
    nv = col([4.0, 12.0, 16.0])
    vs, pg = R.vtrace(col(R3), col(V3), LOG_RHOS, NONE, vec(BOOT), truncated=flags(1),
                      next_values=nv, gamma=0.5, lam=1.0)
    check(vs, [5.0, 8.0, 10.0])
    check(pg, [3.0, 4.0, 2.0])


def test_vtrace_termination():
    # terminated at 1: e_1 = 2 - 4 = -2 = d_1 ; d_0 = 1 + .5*(-2) = 0 ; vs = [2, 2, 10]
    # pg_0 = 1 + .5*2 - 2 = 0 ; pg_1 = 1*(2 - 4) = -2
    vs, pg = R.vtrace(col(R3), col(V3), LOG_RHOS, flags(1), vec(BOOT), gamma=0.5, lam=1.0)
    check(vs, [2.0, 2.0, 10.0])
    check(pg, [0.0, -2.0, 2.0])


def test_vtrace_clipping_thresholds():
    # rho_bar = .5: delta = [.5, 1, 2]; c_bar = 2: c = [1, 2, .5]; pg_rho_bar = 4: pg rho = [1, 2, .5]
    # d_2 = 2 ; d_1 = 1 + .5*2*2 = 3 ; d_0 = .5 + .5*1*3 = 2 -> vs = [4, 7, 10]
    # pg_0 = 1*(1 + .5*7 - 2) = 2.5 ; pg_1 = 2*(2 + .5*10 - 4) = 6 ; pg_2 = .5*4 = 2
    vs, pg = R.vtrace(col(R3), col(V3), LOG_RHOS, NONE, vec(BOOT), gamma=0.5, lam=1.0,
                      rho_bar=0.5, c_bar=2.0, pg_rho_bar=4.0)
    check(vs, [4.0, 7.0, 10.0])
    check(pg, [2.5, 6.0, 2.0])


# --------------------------------------------------------------------------- #
# Retrace, gamma = .5, Q = [2, 4, 8], E_pi Q(s_{t+1}) = [3, 6, 10], rho = [1, 2, .5]
#   c = lam*min(1, rho) = [1, 1, .5]
#   b_t = r_t + .5*EQ_t - Q_t = [1 + 1.5 - 2, 2 + 3 - 4, 4 + 5 - 8] = [.5, 1, 1]
# --------------------------------------------------------------------------- #
EQ3 = [3.0, 6.0, 10.0]


def test_retrace_no_flags():
    # D_2 = 1 ; D_1 = 1 + .5*c_2*D_2 = 1 + .25 = 1.25 ; D_0 = .5 + .5*c_1*1.25 = 1.125
    q = R.retrace(col(R3), col(V3), col(EQ3), LOG_RHOS, NONE, gamma=0.5, lam=1.0)
    check(q, [3.125, 5.25, 9.0])


def test_retrace_c0_and_last_c_do_not_matter_at_edges():
    # c_0 is never used (the trace at t uses c_{t+1}); a huge rho at t=0 changes nothing.
    lr = LOG_RHOS.clone()
    lr[0] = 50.0
    q = R.retrace(col(R3), col(V3), col(EQ3), lr, NONE, gamma=0.5, lam=1.0)
    check(q, [3.125, 5.25, 9.0])


def test_retrace_termination():
    # terminated at 1: b_1 = 2 - 4 = -2 = D_1 ; D_0 = .5 + .5*1*(-2) = -.5
    q = R.retrace(col(R3), col(V3), col(EQ3), LOG_RHOS, flags(1), gamma=0.5, lam=1.0)
    check(q, [1.5, 2.0, 9.0])


def test_retrace_truncation():
    # truncated at 1: b_1 = 1 kept, trace cut: D_1 = 1 ; D_0 = .5 + .5*1 = 1
    q = R.retrace(col(R3), col(V3), col(EQ3), LOG_RHOS, NONE, truncated=flags(1), gamma=0.5,
                  lam=1.0)
    check(q, [3.0, 5.0, 9.0])


def test_retrace_lambda_and_cbar():
    # lam = .5, c_bar = .5 -> c = .5*min(.5, rho) = [.25, .25, .25]
    # D_2 = 1 ; D_1 = 1 + .5*.25*1 = 1.125 ; D_0 = .5 + .5*.25*1.125 = .640625
    q = R.retrace(col(R3), col(V3), col(EQ3), LOG_RHOS, NONE, gamma=0.5, lam=0.5, c_bar=0.5)
    check(q, [2.640625, 5.125, 9.0])


# --------------------------------------------------------------------------- #
# lambda-returns, gamma = lam = .5, next_values V' = [4, 8, 16] (= GAE's V_{t+1})
# --------------------------------------------------------------------------- #
NV3 = [4.0, 8.0, 16.0]


def test_lambda_returns_no_flags():
    # G_3 = V'_2 = 16 ; G_2 = 4 + 8 + .25*(16-16) = 12 ; G_1 = 2 + 4 + .25*(12-8) = 7
    # G_0 = 1 + 2 + .25*(7-4) = 3.75   (= GAE ret)
    check(R.lambda_returns(col(R3), col(NV3), NONE, gamma=0.5, lam=0.5), [3.75, 7.0, 12.0])


def test_lambda_returns_termination():
    # G_1 = 2 ; G_0 = 1 + 2 + .25*(2-4) = 2.5
    check(R.lambda_returns(col(R3), col(NV3), flags(1), gamma=0.5, lam=0.5), [2.5, 2.0, 12.0])


def test_lambda_returns_truncation():
    # V' = [4, 12, 16], truncated at 1: G_1 = 2 + 6 = 8 ; G_0 = 1 + 2 + .25*(8-4) = 4
    g = R.lambda_returns(col(R3), col([4.0, 12.0, 16.0]), NONE, truncated=flags(1), gamma=0.5,
                         lam=0.5)
    check(g, [4.0, 8.0, 12.0])


def test_lambda_returns_lam_one_is_monte_carlo():
    # lam=1: G_2 = 4 + 8 = 12 ; G_1 = 2 + .5*12 = 8 ; G_0 = 1 + .5*8 = 5
    check(R.lambda_returns(col(R3), col(NV3), NONE, gamma=0.5, lam=1.0), [5.0, 8.0, 12.0])


# --------------------------------------------------------------------------- #
# discounted returns, gamma = .5
# --------------------------------------------------------------------------- #
def test_discounted_returns_bootstrap():
    # G_2 = 4 + .5*16 = 12 ; G_1 = 2 + 6 = 8 ; G_0 = 1 + 4 = 5
    check(R.discounted_returns(col(R3), NONE, bootstrap_value=vec(BOOT), gamma=0.5), [5, 8, 12])


def test_discounted_returns_no_bootstrap():
    # G_2 = 4 ; G_1 = 2 + 2 = 4 ; G_0 = 1 + 2 = 3
    check(R.discounted_returns(col(R3), NONE, gamma=0.5), [3.0, 4.0, 4.0])


def test_discounted_returns_termination():
    # G_2 = 12 ; G_1 = 2 ; G_0 = 1 + 1 = 2
    g = R.discounted_returns(col(R3), flags(1), bootstrap_value=vec(BOOT), gamma=0.5)
    check(g, [2.0, 2.0, 12.0])


def test_discounted_returns_truncation():
    # next_values = [0, 10, 16], no bootstrap_value -> G_3 = next_values[2] = 16
    # G_2 = 4 + 8 = 12 ; truncated at 1: G_1 = 2 + .5*10 = 7 ; G_0 = 1 + 3.5 = 4.5
    nv = col([0.0, 10.0, 16.0])
    g = R.discounted_returns(col(R3), NONE, truncated=flags(1), next_values=nv, gamma=0.5)
    check(g, [4.5, 7.0, 12.0])
    # terminated and truncated at 1: terminated wins -> G_1 = 2 ; G_0 = 2
    g = R.discounted_returns(col(R3), flags(1), truncated=flags(1), next_values=nv, gamma=0.5)
    check(g, [2.0, 2.0, 12.0])


def test_discounted_returns_bootstrap_value_wins_over_next_values_at_end():
    # bootstrap 20 given together with next_values: G_2 = 4 + 10 = 14 ; G_1 = 7 (truncated)
    nv = col([0.0, 10.0, 16.0])
    g = R.discounted_returns(col(R3), NONE, truncated=flags(1), next_values=nv,
                             bootstrap_value=vec(20.0), gamma=0.5)
    check(g, [4.5, 7.0, 14.0])


# --------------------------------------------------------------------------- #
# forward scans: x = [1, 2, 4]
# --------------------------------------------------------------------------- #
def test_eligibility_traces():
    # gamma = lam = .5 (.25), dones = [0, 1, 0], initial 8:
    # z_0 = 1 + .25*8 = 3 ; z_1 = 2 + .25*3 = 2.75 ; z_2 = 4 (done_1 resets)
    z = R.eligibility_traces(col(R3), flags(1), gamma=0.5, lam=0.5, initial=vec(8.0))
    check(z, [3.0, 2.75, 4.0])
    # no dones, no initial: 1 ; 2 + .25 = 2.25 ; 4 + .5625 = 4.5625 (done at T-1 is irrelevant)
    z = R.eligibility_traces(col(R3), flags(2), gamma=0.5, lam=0.5)
    check(z, [1.0, 2.25, 4.5625])


def test_episodic_prefix_sum_ends_at():
    # flags = [0, 1, 0], initial 8: C_0 = 9 ; C_1 = 11 ; C_2 = 4 (episode ended at 1)
    c = R.episodic_prefix_sum(col(R3), flags(1), initial=vec(8.0))
    check(c, [9.0, 11.0, 4.0])


def test_episodic_prefix_sum_starts_at():
    # flags = [0, 1, 0] mark first steps: C_0 = 9 ; C_1 = 2 ; C_2 = 6
    c = R.episodic_prefix_sum(col(R3), flags(1), initial=vec(8.0), boundary="starts_at")
    check(c, [9.0, 2.0, 6.0])
    # a start at t=0 discards `initial`: C = [1, 3, 7]
    c = R.episodic_prefix_sum(col(R3), flags(0), initial=vec(8.0), boundary="starts_at")
    check(c, [1.0, 3.0, 7.0])


def test_linear_scan():
    a, b = col(R3), col([0.5, 2.0, -1.0])
    # forward, y_-1 = 8: y_0 = 1 + 4 = 5 ; y_1 = 2 + 10 = 12 ; y_2 = 4 - 12 = -8
    check(R.linear_scan(a, b, initial=vec(8.0)), [5.0, 12.0, -8.0])
    # reverse, y_3 = 8: y_2 = 4 - 8 = -4 ; y_1 = 2 - 8 = -6 ; y_0 = 1 - 3 = -2
    check(R.linear_scan(a, b, reverse=True, initial=vec(8.0)), [-2.0, -6.0, -4.0])
    # no initial: forward 1, 4, 0 ; reverse y_2 = 4, y_1 = 10, y_0 = 6
    check(R.linear_scan(a, b), [1.0, 4.0, 0.0])
    check(R.linear_scan(a, b, reverse=True), [6.0, 10.0, 4.0])


# --------------------------------------------------------------------------- #
# generic behaviour
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("flag_dtype", [torch.bool, torch.uint8, torch.int32, torch.float32])
def test_flag_dtypes_are_nonzero_tests(flag_dtype):
    # the GAE termination case with flags given as any dtype
    adv, _ = R.gae(col(R3), col(V3), flags(1, dtype=flag_dtype), vec(BOOT), gamma=0.5, lam=0.5)
    check(adv, [0.5, -2.0, 4.0])


def test_input_dtypes_are_upcast():
    adv, ret = R.gae(col(R3, torch.bfloat16), col(V3, torch.float16), NONE,
                     vec(BOOT).to(torch.float64), gamma=0.5, lam=0.5)
    check(adv, [1.75, 3.0, 4.0])
    check(ret, [3.75, 7.0, 12.0])


def test_one_dimensional_input():
    adv, ret = R.gae(col(R3)[:, 0], col(V3)[:, 0], flags(1)[:, 0], torch.tensor(BOOT), gamma=0.5,
                     lam=0.5)
    assert adv.shape == (3,) and ret.shape == (3,)
    torch.testing.assert_close(adv, torch.tensor([0.5, -2.0, 4.0], dtype=F64))


def test_batch_columns_are_independent():
    # column 1 is the hand case, column 0 random: the reference must not mix columns
    r = torch.cat([torch.randn(3, 1), col(R3)], 1)
    v = torch.cat([torch.randn(3, 1), col(V3)], 1)
    term = torch.cat([torch.ones(3, 1, dtype=torch.bool), flags(1)], 1)
    adv, _ = R.gae(r, v, term, torch.tensor([3.0, BOOT]), gamma=0.5, lam=0.5)
    check(adv[:, 1:], [0.5, -2.0, 4.0])


@pytest.mark.parametrize("clip", [1.0, 0.5, 3.0, 1e6])
@pytest.mark.parametrize("lam", [0.0, 0.6, 1.0])
def test_vtrace_pg_advantages_are_vs_minus_v_when_the_clips_are_equal(clip, lam):
    # kernels.estimators.vtrace.pg_is_x: with rho_bar = c_bar = pg_rho_bar and V'_t = V_{t+1} before the last step,
    # pg_t = min(rho_bar, rho_t)(r_t + g V_{t+1} - V_t) + g lam min(c_bar, rho_t) x_{t+1} = x_t where not
    # done, delta_t = x_t where done and at T-1 (x_T = 0). Random rollouts with terminations and truncations.
    g = make_generator(11)
    T, N = 200, 7
    r, v, lr = (torch.randn(T, N, generator=g, dtype=F64) for _ in range(3))
    terminated, truncated = make_flags(T, N, g)
    boot = torch.randn(N, generator=g, dtype=F64)
    coefficients = dict(gamma=0.97, lam=lam, rho_bar=clip, c_bar=clip, pg_rho_bar=clip)
    vs, pg = R.vtrace(r, v, lr, terminated, boot, truncated=truncated, **coefficients)
    torch.testing.assert_close(pg, vs - v, rtol=1e-12, atol=1e-12)
    # given next values that differ from the next row's, or unequal clips, the identity fails
    shifted = torch.cat([v[1:], boot[None]])
    vs, pg = R.vtrace(r, v, lr, terminated, boot, truncated=truncated, next_values=shifted + 0.5, **coefficients)
    assert (pg - (vs - v)).abs().max() > 1e-3
    vs, pg = R.vtrace(r, v, lr, terminated, boot, truncated=truncated,
                      **dict(coefficients, pg_rho_bar=min(clip, 2.0) / 2))
    assert (pg - (vs - v)).abs().max() > 1e-3


N0 = 4


@pytest.mark.parametrize(
    "fn, args, kwargs, n_out",
    [
        (R.gae, ("x", "x", "f", "b"), {}, 2),
        (R.vtrace, ("x", "x", "x", "f", "b"), {}, 2),
        (R.retrace, ("x", "x", "x", "x", "f"), {}, 1),
        (R.lambda_returns, ("x", "x", "f"), {}, 1),
        (R.discounted_returns, ("x", "f"), {"bootstrap_value": "b"}, 1),
        (R.eligibility_traces, ("x", "f"), {"initial": "b"}, 1),
        (R.episodic_prefix_sum, ("x", "f"), {"initial": "b"}, 1),
        (R.linear_scan, ("x", "x"), {"initial": "b"}, 1),
    ],
    ids=lambda p: getattr(p, "__name__", None),
)
def test_empty_time(fn, args, kwargs, n_out):
    make = {
        "x": lambda: torch.empty(0, N0),
        "f": lambda: torch.empty(0, N0, dtype=torch.bool),
        "b": lambda: torch.randn(N0),
    }
    out = fn(*[make[a]() for a in args], **{k: make[v]() for k, v in kwargs.items()})
    out = out if isinstance(out, tuple) else (out,)
    assert len(out) == n_out
    for o in out:
        assert o.shape == (0, N0) and o.dtype == F64
