"""GAE and V-trace with one of their two outputs skipped (``returns=False``, ``advantages=False``,
``pg_advantages=False``, ``value_targets=False``): the other output alone, equal to the float64
reference's, from every implementation (the fused kernels, the reference, the baselines,
``kernels.capture``), and no buffer handed to the kernel for the skipped one.
"""

from __future__ import annotations

import importlib

import pytest
import torch

import kernels
from conftest import DEVICE, as_tuple, make_inputs, rel_err, to_1d, to_time_dim1, upcast
from kernels import reference as R
from kernels.backends import get_backend

# estimator: (first output's switch, second output's switch)
SWITCHES = {"gae": ("advantages", "returns"), "vtrace": ("value_targets", "pg_advantages")}
# (estimator, the switch turned off, index of the output that remains, make_inputs keywords)
CASES = [
    ("gae", "returns", 0, dict()),
    ("gae", "returns", 0, dict(truncated=False)),
    ("gae", "advantages", 1, dict(next_values=True)),
    ("vtrace", "pg_advantages", 0, dict(scalars=dict(c_bar=0.9, pg_rho_bar=1.3))),
    ("vtrace", "pg_advantages", 0, dict(truncated=False)),
    ("vtrace", "value_targets", 1, dict(scalars=dict(lam=0.9, rho_bar=1.2))),
    ("vtrace", "value_targets", 1, dict(next_values=True)),
]
TOL = 1e-5


def case_id(case) -> str:
    op, off, _, kw = case
    return f"{op}-{off}=False-" + ("-".join(kw) or "plain")


@pytest.mark.parametrize("case", CASES, ids=case_id)
@pytest.mark.parametrize("T, N, time_dim", [(37, 5, 0), (150, 9, 1), (1, 3, 0)])
def test_the_kept_output_alone_matches_the_reference(case, T, N, time_dim):
    op, off, kept, kw = case
    inputs = make_inputs(op, T, N, seed=T * N + kept, **kw)
    full_ref = as_tuple(getattr(R, op)(*upcast(inputs).args, **upcast(inputs).kwargs))
    assert len(full_ref) == 2
    given = to_time_dim1(inputs) if time_dim else inputs
    before = [t.clone() for t in given.tensors()]
    out = getattr(kernels, op)(*given.args, **given.kwargs, time_dim=time_dim, **{off: False})
    assert all(torch.equal(b, a) for b, a in zip(before, given.tensors())), "an input was written"
    assert isinstance(out, torch.Tensor), "one output kept: the tensor alone, not a tuple"
    ref = full_ref[kept].t() if time_dim else full_ref[kept]
    assert out.shape == ref.shape and out.dtype == torch.float32
    assert rel_err(out, ref) < TOL


@pytest.mark.parametrize("op", list(SWITCHES))
def test_one_environment_and_no_steps(op):
    """1-D inputs give a 1-D output; T = 0 an empty one, the skipped output still not returned."""
    first, second = SWITCHES[op]
    inputs = make_inputs(op, 23, 1, seed=3)
    one = to_1d(inputs)
    out = getattr(kernels, op)(*one.args, **one.kwargs, **{second: False})
    ref = as_tuple(getattr(R, op)(*upcast(inputs).args, **upcast(inputs).kwargs))[0][:, 0]
    assert out.shape == (23,) and rel_err(out, ref) < TOL
    empty = make_inputs(op, 0, 4, seed=0)
    out = getattr(kernels, op)(*empty.args, **empty.kwargs, **{first: False})
    assert isinstance(out, torch.Tensor) and out.shape == (0, 4)


def test_gae_worked_example():
    """T = 3, one environment, gamma = lam = 0.5, V = 0.5 everywhere, bootstrap 1, rewards (1, 0, 2):
    delta = (0.75, -0.25, 2), A = (0.8125, 0.25, 2), returns A + V = (1.3125, 0.75, 2.5)."""
    args = (torch.tensor([1.0, 0.0, 2.0]), torch.full((3,), 0.5), torch.zeros(3, dtype=torch.bool),
            torch.tensor(1.0))
    advantages = torch.tensor([0.8125, 0.25, 2.0])
    returns = torch.tensor([1.3125, 0.75, 2.5])
    for implementation in (kernels, R):
        adv = implementation.gae(*(a.to(DEVICE) for a in args), gamma=0.5, lam=0.5, returns=False)
        ret = implementation.gae(*(a.to(DEVICE) for a in args), gamma=0.5, lam=0.5, advantages=False)
        torch.testing.assert_close(adv.cpu().float(), advantages)
        torch.testing.assert_close(ret.cpu().float(), returns)


@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[5]], ids=case_id)
def test_the_kernel_gets_no_buffer_for_the_skipped_output(monkeypatch, case):
    """The launch's tensors are the inputs and the one output returned (a skipped output has no
    allocation to pass), and the kernel is compiled without the skipped store."""
    op, off, _, kw = case
    module = importlib.import_module(f"kernels.estimators.{op}")
    launches = []
    launch = module.launch

    def recording(kernel, batch, config, family, tensors, coefficients, **constexprs):
        launches.append((tensors, constexprs))
        return launch(kernel, batch, config, family, tensors, coefficients, **constexprs)

    monkeypatch.setattr(module, "launch", recording)
    getattr(kernels, op).plans.clear()  # a GPU call would otherwise replay an earlier plan
    inputs = make_inputs(op, 40, 6, seed=1, **kw)
    out = getattr(kernels, op)(*inputs.args, **inputs.kwargs, **{off: False})
    if not launches:
        pytest.skip("this device runs the float64 reference, not the kernels")
    (tensors, constexprs), = launches
    given = {id(t) for t in inputs.tensors()} | {id(out)}
    assert {id(t) for t in tensors if isinstance(t, torch.Tensor)} <= given
    assert sum(t is out for t in tensors) == 1
    store = {"returns": "STORE_RET", "advantages": "STORE_ADV", "pg_advantages": "STORE_PG",
             "value_targets": "STORE_VS"}
    assert constexprs[store[off]] is False


@pytest.mark.parametrize("backend", ["loop", "compile", "sequential"])
@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[6]], ids=case_id)
def test_baselines_skip_the_same_output(backend, case):
    op, off, kept, kw = case
    if backend == "compile" and op == "vtrace" and kept == 1:
        pytest.skip("one compiled case per estimator keeps the test short")
    inputs = make_inputs(op, 29, 7, seed=2, **kw)
    ref = as_tuple(getattr(R, op)(*upcast(inputs).args, **upcast(inputs).kwargs))[kept]
    out = getattr(get_backend(backend), op)(*inputs.args, **inputs.kwargs, **{off: False})
    assert isinstance(out, torch.Tensor)
    assert rel_err(out, ref) < TOL


@pytest.mark.parametrize("op", list(SWITCHES))
def test_a_captured_call_returns_the_kept_output_refilled_in_place(op):
    first, second = SWITCHES[op]
    inputs = make_inputs(op, 33, 5, seed=4)
    call = kernels.capture(getattr(kernels, op), *inputs.args, **inputs.kwargs, **{second: False})
    out = call()
    assert isinstance(out, torch.Tensor) and out is call.outputs
    fresh = make_inputs(op, 33, 5, seed=5)
    for mine, new in zip(inputs.tensors(), fresh.tensors()):
        mine.copy_(new)
    again = call()
    ref = as_tuple(getattr(R, op)(*upcast(fresh).args, **upcast(fresh).kwargs))[0]
    assert again is out and rel_err(again, ref) < TOL


@pytest.mark.parametrize("op", list(SWITCHES))
def test_skipping_both_outputs_or_a_non_bool_switch_is_refused(op):
    first, second = SWITCHES[op]
    inputs = make_inputs(op, 6, 3, seed=0)
    fn = getattr(kernels, op)
    with pytest.raises(ValueError, match=f"{first}=False and {second}=False"):
        fn(*inputs.args, **inputs.kwargs, **{first: False, second: False})
    with pytest.raises(TypeError, match=f"{second} must be a bool"):
        fn(*inputs.args, **inputs.kwargs, **{second: 0})
    with pytest.raises(ValueError, match="at least one output"):
        get_backend("loop").__dict__[op](*inputs.args, **inputs.kwargs, **{first: False, second: False})
