"""rltrain.credit: backends by name, rotation, the equivalence check, the captured backend's buffers,
the shadow's measurement and the Amdahl arithmetic (CPU; the fused kernels under the interpreter)."""

from __future__ import annotations

import math

import pytest
import torch

import kernels
from conftest import DEVICE
from rltrain.config import ConfigError
from rltrain.credit import (EQUIVALENCE_TOL, CreditAssignment, CreditMismatchError, baseline_share,
                            kernel_speedup, parse_backends, rel_err, targets_due)
from rltrain.timers import PhaseTimer, amdahl_speedup

T, N = 16, 4


def gae_inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    ends = torch.rand(T, N, generator=g) < 0.1
    truncated = ends & (torch.rand(T, N, generator=g) < 0.5)
    args = (torch.randn(T, N, generator=g), torch.randn(T, N, generator=g), ends & ~truncated,
            torch.randn(N, generator=g))
    return [a.to(DEVICE) for a in args], dict(truncated=truncated.to(DEVICE), gamma=0.99, lam=0.95)


def make(backends, **kw):
    timer = PhaseTimer(DEVICE)
    return CreditAssignment(backends, DEVICE, timer, "ca", **kw), timer


@pytest.mark.parametrize("spec,message", [
    ("", "give one backend"), ("loop,,triton", "give one backend"),
    ("lop", "unknown backend 'lop'.*Did you mean: loop"), ("loop,triton,loop", "names a backend twice"),
])
def test_bad_backend_lists_name_the_flag(spec, message):
    with pytest.raises(ConfigError, match="--ca-backend.*" + message):
        parse_backends(spec)


def test_bad_shadow_and_sequential_without_triton():
    with pytest.raises(ConfigError, match="--ca-shadow-backend takes one backend"):
        make("triton", shadow="loop,compile", shadow_every=5)
    with pytest.raises(ConfigError, match="--ca-shadow-every must be >= 0"):
        make("triton", shadow_every=-1)
    if not kernels._triton.runs_triton(torch.device(DEVICE)):
        with pytest.raises(ConfigError, match="--ca-backend sequential runs the Triton kernels"):
            make("sequential")


class Spy:
    """A backend that records its calls by name."""

    def __init__(self, backend, ran):
        self.backend, self.ran, self.name, self.label = backend, ran, backend.name, backend.label

    def __call__(self, estimator, *args, **kwargs):
        self.ran.append(self.name)
        return self.backend(estimator, *args, **kwargs)


def test_rotation_gives_each_backend_its_iterations_in_order():
    credit, _ = make("loop,triton,captured")
    ran = []
    credit.backends = [Spy(b, ran) for b in credit.backends]
    args, kw = gae_inputs()
    names, per_iteration = ["loop", "triton", "captured"], []
    for iteration in range(1, 8):
        credit.start_iteration(iteration)
        ran.clear()
        for _ in range(2):  # two calls in the iteration: both on its backend
            out = credit.gae(*args, **kw)
        per_iteration.append((credit.name, list(ran)))
        assert credit.end_iteration({}, 1.0)["perf/ca_backend_index"] == (iteration - 1) % 3
    assert [n for n, _ in per_iteration] == [names[(i - 1) % 3] for i in range(1, 8)]
    # the first call also ran the equivalence check on every backend; after it, only the iteration's
    assert per_iteration[0][1] == names + ["loop", "loop"]
    assert all(r == [n, n] for n, r in per_iteration[1:])
    assert isinstance(out, tuple) and out[0].shape == (T, N)


def test_equivalence_check_catches_a_wrong_backend(monkeypatch):
    from kernels.baselines import loop

    good = loop.gae
    monkeypatch.setattr(loop, "gae", lambda *a, **k: tuple(x * 1.001 for x in good(*a, **k)))
    credit, timer = make("triton,loop")
    credit.start_iteration(1)
    args, kw = gae_inputs()
    with pytest.raises(CreditMismatchError, match=r"gae of loop \(relative error 0.001\) disagrees"):
        credit.gae(*args, **kw)
    assert timer.read() == {}  # raised before anything was timed or learned from


def test_check_errors_are_reported_once_and_small():
    credit, _ = make("loop,triton,captured")
    credit.start_iteration(1)
    args, kw = gae_inputs()
    credit.gae(*args, **kw)
    first = credit.end_iteration({}, 1.0)
    errs = {k: v for k, v in first.items() if k.startswith("check/")}
    assert set(errs) == {"check/ca_rel_err_loop", "check/ca_rel_err_triton", "check/ca_rel_err_captured"}
    assert all(0 <= e < EQUIVALENCE_TOL for e in errs.values())
    credit.start_iteration(2)
    credit.gae(*args, **kw)
    assert not any(k.startswith("check/") for k in credit.end_iteration({}, 1.0))


def test_captured_replays_on_pinned_buffers_and_copies_the_rest():
    credit, _ = make("captured")
    credit.start_iteration(1)
    (rewards, values, terminated, bootstrap), kw = gae_inputs(0)
    credit.pin(rewards, values, terminated, kw["truncated"])
    first = credit.gae(rewards, values, terminated, bootstrap, **kw)
    first = tuple(x.clone() for x in first)
    (r2, v2, _, b2), _ = gae_inputs(1)
    rewards.copy_(r2)                         # new data in the pinned buffer, in place
    fresh_bootstrap = b2.clone()              # a new tensor where a pinned one is not
    out = credit.gae(rewards, values, terminated, fresh_bootstrap, **kw)
    want = kernels.gae(rewards, values, terminated, fresh_bootstrap, **kw)
    assert all(torch.allclose(o, w, atol=1e-6) for o, w in zip(out, want))
    assert not torch.allclose(out[0], first[0])
    other_values = v2.clone()                 # another values tensor: its own capture, then replays
    out2 = credit.gae(rewards, other_values, terminated, fresh_bootstrap, **kw)
    want2 = kernels.gae(rewards, other_values, terminated, fresh_bootstrap, **kw)
    assert all(torch.allclose(o, w, atol=1e-6) for o, w in zip(out2, want2))
    assert len(credit.backends[0]._calls) == 2


def test_shadow_metrics_and_arithmetic():
    credit, timer = make("triton", shadow="loop", shadow_every=2)
    args, kw = gae_inputs()
    rows = []
    for iteration in (1, 2, 3, 4):
        credit.start_iteration(iteration)
        for _ in range(3):
            credit.gae(*args, **kw)
        secs = timer.read()
        rows.append((secs, credit.end_iteration(secs, wall=1.0)))
    assert "perf/ca_kernel_speedup" not in rows[0][1] and "perf/ca_kernel_speedup" not in rows[2][1]
    for secs, m in (rows[1], rows[3]):
        t_kernel, t_base, t_iter = secs["ca"], m["perf/ca_shadow_s"], 1.0 - m["perf/ca_shadow_wall_s"]
        assert 0 < t_base <= m["perf/ca_shadow_wall_s"] < 1.0
        assert m["perf/ca_kernel_speedup"] == pytest.approx(t_base / t_kernel)
        assert m["perf/ca_share"] == pytest.approx(t_base / (t_iter - t_kernel + t_base))
        s, k = m["perf/ca_share"], m["perf/ca_kernel_speedup"]
        assert m["perf/amdahl_predicted_speedup"] == pytest.approx(1 / ((1 - s) + s / k))
        # Amdahl with these definitions: the baseline's iteration over this one
        assert m["perf/amdahl_predicted_speedup"] == pytest.approx((t_iter - t_kernel + t_base) / t_iter)
        assert 0 <= m["perf/ca_shadow_rel_err"] < EQUIVALENCE_TOL


def test_a_good_critic_passes_the_shadow_check():
    """CartPole solved: reward 1 a step, values near their discounted sum (~100), advantages ~0.01. The
    float32 loop's rounding of the values is then large against the advantages' own norm; the check
    measures it against the returns', so a correct baseline is not mistaken for a wrong one."""
    g = torch.Generator().manual_seed(3)
    values = (1 / (1 - 0.99)) * torch.ones(128, 64) + 0.01 * torch.randn(128, 64, generator=g)
    args = [torch.ones(128, 64), values, torch.zeros(128, 64, dtype=torch.bool), values[-1].clone()]
    kw = dict(truncated=torch.zeros(128, 64, dtype=torch.bool), gamma=0.99, lam=0.95)
    credit, timer = make("triton", shadow="loop", shadow_every=1)
    for it in (1, 2):
        credit.start_iteration(it)
        credit.gae(*[a.to(DEVICE) for a in args], **{k: v.to(DEVICE) if torch.is_tensor(v) else v for k, v in kw.items()})
        metrics = credit.end_iteration(timer.read(), 1.0)
    assert metrics["perf/ca_shadow_rel_err"] < EQUIVALENCE_TOL


def test_shadow_disagreement_raises(monkeypatch):
    from kernels.baselines import loop

    credit, timer = make("triton", shadow="loop", shadow_every=1)
    args, kw = gae_inputs()
    credit.start_iteration(1)
    credit.gae(*args, **kw)  # checked: the loop is not in the rotation, so only the shadow can tell
    good = loop.gae
    monkeypatch.setattr(credit.shadow._ns, "gae", lambda *a, **k: tuple(x + 1 for x in good(*a, **k)))
    credit.start_iteration(2)
    credit.gae(*args, **kw)
    with pytest.raises(CreditMismatchError, match="triton and the shadow loop disagree"):
        credit.end_iteration(timer.read(), 1.0)


def test_no_shadow_when_the_backend_is_the_baseline():
    credit, timer = make("loop,triton", shadow="loop", shadow_every=1)
    args, kw = gae_inputs()
    shadowed = []
    for iteration in (1, 2, 3, 4):
        credit.start_iteration(iteration)
        credit.gae(*args, **kw)
        shadowed.append("perf/ca_share" in credit.end_iteration(timer.read(), 1.0))
    assert shadowed == [False, True, False, True]


def test_targets_due():
    sched = {m: [(e, i) for e in range(3) for i in range(2) if targets_due(m, e, i)]
             for m in ("once", "epoch", "minibatch")}
    assert sched["once"] == [(0, 0)]
    assert sched["epoch"] == [(0, 0), (1, 0), (2, 0)]
    assert sched["minibatch"] == [(e, i) for e in range(3) for i in range(2)]
    with pytest.raises(ValueError):
        targets_due("sometimes", 0, 0)


def test_amdahl_arithmetic():
    assert kernel_speedup(2.0, 0.5) == 4.0 and kernel_speedup(1.0, 0.0) == math.inf
    # an iteration of 10 s with 1 s of kernel; the baseline takes 3 s: its iteration is 12 s
    s = baseline_share(3.0, 1.0, 10.0)
    assert s == pytest.approx(3 / 12)
    assert amdahl_speedup(s, kernel_speedup(3.0, 1.0)) == pytest.approx(12 / 10)
    assert amdahl_speedup(0.5, math.inf) == pytest.approx(2.0)


def test_rel_err():
    a = torch.ones(3)
    assert float(rel_err((a, a), (a, a))) == 0.0
    assert float(rel_err(a * 1.01, a)) == pytest.approx(0.01)
    assert math.isnan(float(rel_err(torch.tensor([1.0, float("nan")]), torch.ones(2))))
    # an output much smaller than another (advantages beside returns): its error counts against the largest
    adv, ret = torch.full((4,), 0.01, dtype=torch.float64), torch.full((4,), 100.0, dtype=torch.float64)
    assert float(rel_err((adv + 1e-4, ret), (adv, ret))) == pytest.approx(1e-6)
    assert float(rel_err((adv, ret * 1.001), (adv, ret))) == pytest.approx(1e-3)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: CUDA graphs")
def test_captured_replays_a_cuda_graph():
    credit, _ = make("captured")
    credit.start_iteration(1)
    (rewards, values, terminated, bootstrap), kw = gae_inputs(0)
    credit.pin(rewards, values, terminated, kw["truncated"])
    credit.gae(rewards, values, terminated, bootstrap, **kw)
    (call, _), = credit.backends[0]._calls.values()
    assert call.graphed and credit.labels == {"captured": "captured"}
    rewards.copy_(gae_inputs(1)[0][0])
    out = credit.gae(rewards, values, terminated, bootstrap + 1, **kw)
    want = kernels.gae(rewards, values, terminated, bootstrap + 1, **kw)
    assert all(torch.allclose(o, w, atol=1e-6) for o, w in zip(out, want))
