"""``kernels.capture``: one estimator call captured (a CUDA graph on a GPU) and called again on the
same tensors, whose contents change in place between calls."""

from __future__ import annotations

import pytest
import torch
from conftest import DEVICE, OPS, as_tuple, call, make_inputs, sampled

import kernels
from kernels._triton import INTERPRET


def write_into(case, new_case) -> None:
    """Copy every tensor of ``new_case`` into ``case``'s tensor in the same slot (a rollout buffer
    refilled in place)."""
    for a, b in zip(case.args, new_case.args):
        if isinstance(a, torch.Tensor):
            a.copy_(b)
    for k, v in case.kwargs.items():
        if isinstance(v, torch.Tensor):
            v.copy_(new_case.kwargs[k])


@pytest.mark.parametrize(*sampled(("op", OPS), ("T, N", [(37, 130), (1000, 40)])))  # one chunk; several joined by look-back
def test_a_captured_call_reads_its_tensors_as_they_are_at_each_call(op, T, N):
    case = make_inputs(op, T, N, seed=1)
    captured = kernels.capture(getattr(kernels, op), *case.args, **case.kwargs)
    assert captured.graphed == (DEVICE == "cuda" and not INTERPRET)
    first = tuple(o.clone() for o in as_tuple(captured.outputs))
    for seed in (2, 3):
        new_case = make_inputs(op, T, N, seed=seed)
        write_into(case, new_case)
        outputs = as_tuple(captured())
        assert all(o is c for o, c in zip(outputs, as_tuple(captured.outputs)))  # the same tensors each call
        for got, expected, before in zip(outputs, call(kernels, new_case), first):
            assert torch.equal(got, expected)
            assert not torch.equal(got, before)


def test_a_captured_call_keeps_its_scalars():
    case = make_inputs("gae", 50, 20, seed=4)
    captured = kernels.capture(kernels.gae, *case.args, **case.kwargs, gamma=0.9, lam=0.8)
    for got, expected in zip(as_tuple(captured()), call(kernels, case, gamma=0.9, lam=0.8)):
        assert torch.equal(got, expected)


def test_capture_validates_its_arguments_once_with_the_estimators_errors():
    case = make_inputs("gae", 16, 8)
    with pytest.raises(TypeError, match="gamma"):
        kernels.capture(kernels.gae, *case.args, **case.kwargs, gamma=True)
    with pytest.raises(ValueError, match="rewards|values"):
        kernels.capture(kernels.gae, case.args[0][:, :4], *case.args[1:], **case.kwargs)


def test_capture_names_what_it_cannot_capture():
    with pytest.raises(TypeError, match="fn must be an estimator"):
        kernels.capture("gae", torch.zeros(4, 2))
    with pytest.raises(ValueError, match="no tensors"):
        kernels.capture(lambda gamma: gamma, gamma=0.9)


@pytest.mark.cuda
@pytest.mark.skipif(DEVICE != "cuda", reason="needs CUDA: CUDA graphs")
def test_capture_while_another_thread_steps_its_own_stream():
    """A trainer's actor threads keep running inference and copying actions to the host while the
    learner captures: the capture is thread-local, so neither side fails."""
    import threading

    stop, errors = threading.Event(), []

    def actor():
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                x = torch.randn(256, 64, device="cuda")
                while not stop.is_set():
                    (x @ x.T).sum().cpu()  # a kernel, an allocation and a synchronising copy
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    thread = threading.Thread(target=actor)
    thread.start()
    try:
        for seed in range(5):
            case = make_inputs("gae", 128, 64, seed=seed)
            captured = kernels.capture(kernels.gae, *case.args, **case.kwargs)
            for got, expected in zip(as_tuple(captured()), call(kernels, case)):
                assert torch.equal(got, expected)
    finally:
        stop.set()
        thread.join()
    assert not errors
