"""Replaying a known call signature (kernels/fast_path.py).

On any machine, with a fake estimator that records a fake launch: the signature separates
everything validation depends on (types, shapes, strides, dtypes, devices, alignment, scalar
types and values); a replay puts each parameter's new pointer in its slot and allocates new
outputs; calls that cannot be replayed safely (aliased arguments, outputs that are not the
kernel's, several launches, an error) make no plan, and launches left unrecorded do not count; a
plan keeps no tensor alive. On a GPU: every estimator makes a plan, and a replay matches the
ordinary path bit for bit, with and without look-back, while bad arguments still raise.
"""

from __future__ import annotations

import gc
import weakref

import pytest
import torch
from conftest import DEVICE, OPS, as_tuple, call, make_inputs

import kernels
from kernels import fast_path
from kernels._args import check_scalar


class Compiled:
    """What a Triton launch returns, as far as a plan reads it."""

    def __init__(self, run):
        self.run, self.function, self.packed_metadata = run, "fn", "meta"


class FakeRun:
    def __init__(self):
        self.calls = []

    def __call__(self, *call):
        self.calls.append(call)


def fake_estimator(run: FakeRun, *, launches: int = 1, return_fresh: bool = False):
    """A replayable ``f(x, y, *, scale)`` returning one output; launch args ``(x, 7, y, out, scale)``."""
    made = []

    @fast_path.replayable
    def estimator(x, y, *, scale=1.0):
        check_scalar("scale", scale, high=10.0)
        out = torch.empty_like(x)
        made.append(out)
        for _ in range(launches):
            fast_path.record(Compiled(run), 3, (x, 7, y, out, scale), (16,), (), x.device)
        return torch.empty_like(x) if return_fresh else out

    return estimator, made


@pytest.fixture
def no_device_switch(monkeypatch):
    """Replay on (it is off under the interpreter), on CPU tensors, with a fake stream."""
    monkeypatch.setattr(fast_path, "_ENABLED", True)
    monkeypatch.setattr(fast_path, "_current_stream", lambda index: 99)


def test_replay_puts_each_parameters_pointer_in_its_slot(no_device_switch):
    run = FakeRun()
    estimator, made = fake_estimator(run)
    x, y = torch.zeros(8), torch.ones(8)
    first = estimator(x, y, scale=0.5)
    assert len(made) == 1 and len(estimator.plans) == 1 and run.calls == []
    x2, y2 = torch.zeros(8), torch.ones(8)
    second = estimator(x2, y2, scale=0.5)
    assert len(made) == 1  # the estimator's Python did not run again
    (grid_x, grid_y, grid_z, stream, function, metadata, _, _, _, *args) = run.calls[0]
    assert (grid_x, grid_y, grid_z, stream, function, metadata) == (3, 1, 1, 99, "fn", "meta")
    assert args == [x2.data_ptr(), 7, y2.data_ptr(), second.data_ptr(), 0.5, 16]
    assert second is not first and second.shape == first.shape and second.dtype == first.dtype


def test_launches_left_unrecorded_do_not_stop_a_plan(no_device_switch):
    """Launches inside ``fast_path.unrecorded()`` (an autotuned call timing candidates) are not the
    call's: a call that makes them and then its own one launch still makes a plan."""
    run = FakeRun()

    @fast_path.replayable
    def estimator(x, y, *, scale=1.0):
        out = torch.empty_like(x)
        with fast_path.unrecorded():
            for _ in range(3):
                fast_path.record(Compiled(run), 5, (x, 7, y, out, scale), (16,), (), x.device)
        fast_path.record(Compiled(run), 3, (x, 7, y, out, scale), (16,), (), x.device)
        return out

    x, y = torch.zeros(8), torch.ones(8)
    estimator(x, y, scale=0.5)
    assert len(estimator.plans) == 1
    estimator(torch.zeros(8), torch.ones(8), scale=0.5)
    assert [c[0] for c in run.calls] == [3]  # the replay is the call's own launch


@pytest.mark.parametrize(
    "other",
    [
        lambda x, y: ((x.double(), y), {"scale": 0.5}),              # dtype
        lambda x, y: ((x[:4], y[:4]), {"scale": 0.5}),               # shape
        lambda x, y: ((x[::2], y[:4]), {"scale": 0.5}),              # stride
        lambda x, y: ((torch.zeros(9)[1:], y), {"scale": 0.5}),      # pointer alignment
        lambda x, y: ((x, y), {"scale": 0.25}),                      # scalar value
        lambda x, y: ((x, y), {}),                                   # scalar absent
        lambda x, y: ((x, y.bool()), {"scale": 0.5}),                # flag dtype
    ],
)
def test_a_different_signature_runs_the_estimator(no_device_switch, other):
    run = FakeRun()
    estimator, made = fake_estimator(run)
    x, y = torch.zeros(8), torch.ones(8)
    estimator(x, y, scale=0.5)
    args, kwargs = other(torch.zeros(8), torch.ones(8))
    estimator(*args, **kwargs)
    assert len(made) == 2 and run.calls == []


def test_a_cached_signature_does_not_let_bad_scalars_through(no_device_switch):
    estimator, _ = fake_estimator(FakeRun())
    x, y = torch.zeros(8), torch.ones(8)
    estimator(x, y, scale=1.0)
    with pytest.raises(TypeError, match="scale"):
        estimator(x, y, scale=True)  # True == 1.0 and hashes alike: the key holds the type too
    with pytest.raises(ValueError, match="scale"):
        estimator(x, y, scale=float("nan"))


@pytest.mark.parametrize(
    "kind",
    ["aliased", "fresh_output", "two_launches", "raises", "unhashable"],
)
def test_calls_that_cannot_be_replayed_safely_make_no_plan(no_device_switch, kind):
    run = FakeRun()
    estimator, made = fake_estimator(run, launches=2 if kind == "two_launches" else 1,
                                     return_fresh=kind == "fresh_output")
    x, y = torch.zeros(8), torch.ones(8)
    if kind == "aliased":
        estimator(x, x)
    elif kind == "raises":
        with pytest.raises(ValueError):
            estimator(x, y, scale=-1.0)
    elif kind == "unhashable":
        with pytest.raises(TypeError, match="scale"):
            estimator(x, y, scale=[1.0])
    else:
        estimator(x, y)
    assert estimator.plans == {}


def test_positional_and_keyword_calls_have_plans_of_their_own(no_device_switch):
    run = FakeRun()

    @fast_path.replayable
    def estimator(x, y=None):
        out = torch.empty_like(x)
        fast_path.record(Compiled(run), 1, (x, y, out), (), (), x.device)
        return out

    x, y = torch.zeros(8), torch.ones(8)
    estimator(x, y)
    estimator(x, y=y)
    assert len(estimator.plans) == 2
    estimator(x, y=y)
    estimator(x, y)
    assert [c[10] for c in run.calls] == [y.data_ptr()] * 2


def test_a_call_with_aliased_arguments_uses_the_plan_by_parameter(no_device_switch):
    run = FakeRun()
    estimator, _ = fake_estimator(run)
    estimator(torch.zeros(8), torch.ones(8))
    x = torch.zeros(8)
    estimator(x, x)
    args = run.calls[0][9:]
    assert args[0] == args[2] == x.data_ptr()


def test_a_plan_keeps_no_tensor_alive(no_device_switch):
    estimator, made = fake_estimator(FakeRun())
    x, y = torch.zeros(8), torch.ones(8)
    refs = [weakref.ref(t) for t in (x, y)]
    estimator(x, y)
    refs.append(weakref.ref(made.pop()))
    del x, y
    gc.collect()
    assert len(estimator.plans) == 1 and all(r() is None for r in refs)


def test_every_estimator_is_replayable_and_keeps_its_signature():
    import inspect

    for op in OPS:
        fn = getattr(kernels, op)
        assert hasattr(fn, "plans"), op
        assert "time_dim" in inspect.signature(fn).parameters, op


@pytest.mark.skipif(DEVICE == "cuda", reason="checks the CPU paths")
def test_cpu_and_interpreter_calls_make_no_plan():
    for op in OPS:
        getattr(kernels, op).plans.clear()
        case = make_inputs(op, 5, 3, device="cpu")
        call(kernels, case)
        call(kernels, case)
        assert getattr(kernels, op).plans == {}, op


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: real plans replay compiled kernels")
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("T, N", [(37, 130), (1000, 9)])  # one chunk; several chunks joined by look-back
def test_replay_matches_the_ordinary_path_on_gpu(op, T, N):
    fn = getattr(kernels, op)
    fn.plans.clear()
    call(kernels, make_inputs(op, T, N, seed=1))
    assert len(fn.plans) == 1
    case = make_inputs(op, T, N, seed=2)
    replayed = call(kernels, case)
    fn.plans.clear()
    ordinary = call(kernels, case)
    assert len(fn.plans) == 1
    for a, b in zip(replayed, ordinary):
        assert torch.equal(a, b)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: real plans replay compiled kernels")
def test_bad_arguments_still_raise_after_a_replay_on_gpu():
    case = make_inputs("gae", 16, 8)
    kernels.gae(*case.args, **case.kwargs)
    kernels.gae(*case.args, **case.kwargs)
    with pytest.raises(TypeError, match="gamma"):
        kernels.gae(*case.args, **case.kwargs, gamma=True)
    with pytest.raises(ValueError, match="rewards|values"):
        kernels.gae(case.args[0][:, :4], *case.args[1:], **case.kwargs)
    out = as_tuple(kernels.gae(*case.args, **case.kwargs))
    assert all(torch.isfinite(o).all() for o in out)
