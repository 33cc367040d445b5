"""The cached direct launch (kernels/_direct_launch.py).

On any machine: with a fake kernel, the cache key separates every specialisation Triton makes
(pointer alignment, integer values, dtypes, constexprs, warps) and ignores floats; a hit passes
raw pointers and the constexprs in signature order to the compiled kernel's launcher. On a GPU:
the direct launch of the real estimators matches Triton's own launch bit for bit, including
misaligned views and strides of 1, and a second call is a cache hit.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import kernels
from kernels import _direct_launch, _launch
from kernels._direct_launch import DirectLauncher


class FakeCompiled:
    def __init__(self, log):
        self.log, self.function, self.packed_metadata = log, "fn-handle", "meta"

    def run(self, *call):
        self.log.append(("direct", call))


class FakeKernel:
    """Signature ``(x_ptr, n, scale, BLOCK: constexpr, FLAG: constexpr)``."""

    params = [SimpleNamespace(name=n, is_constexpr=c) for n, c in
              (("x_ptr", False), ("n", False), ("scale", False), ("BLOCK", True), ("FLAG", True))]

    def __init__(self):
        self.log = []

    def __getitem__(self, grid):
        def launch(*args, num_warps, **constexprs):
            self.log.append(("triton", grid, args, constexprs, num_warps))
            return FakeCompiled(self.log)
        return launch


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(_direct_launch, "current_stream", lambda index: 1234)
    kernel = FakeKernel()
    launcher = DirectLauncher(kernel)
    launcher.enabled = True  # the interpreter disables it; the logic under test is the same
    return kernel, launcher


def _call(launcher, x, n=64, scale=0.5, block=16, flag=True, warps=4):
    launcher(3, torch.device("cuda", 0), (x, n, scale), {"FLAG": flag, "BLOCK": block}, warps)


def test_first_call_goes_through_triton_then_hits(fake):
    kernel, launcher = fake
    x = torch.zeros(64)
    _call(launcher, x)
    _call(launcher, x, scale=0.25)  # floats are not specialised: same entry
    assert [entry[0] for entry in kernel.log] == ["triton", "direct"]
    call = kernel.log[1][1]
    assert call[:9] == (3, 1, 1, 1234, "fn-handle", "meta", None, None, None)
    assert call[9:] == (x.data_ptr(), 64, 0.25, 16, True)  # raw pointer, constexprs in signature order


@pytest.mark.parametrize(
    "change",
    [
        dict(n=65),                     # another integer value (Triton: ==1, %16)
        dict(block=32),                 # constexpr
        dict(flag=False),               # constexpr
        dict(warps=8),                  # launch option
    ],
)
def test_every_specialisation_gets_its_own_entry(fake, change):
    kernel, launcher = fake
    x = torch.zeros(64)
    _call(launcher, x)
    _call(launcher, x, **change)
    assert [entry[0] for entry in kernel.log] == ["triton", "triton"]


def test_alignment_and_dtype_are_in_the_key(fake):
    kernel, launcher = fake
    base = torch.zeros(64)
    _call(launcher, base)
    _call(launcher, base[1:])           # 4-byte offset: not 16-byte aligned
    _call(launcher, base[4:])           # 16-byte offset: aligned again, hits the first entry
    _call(launcher, base.double())      # another dtype
    assert [entry[0] for entry in kernel.log] == ["triton", "triton", "direct", "triton"]


def test_launch_hooks_force_tritons_launch(fake, monkeypatch):
    kernel, launcher = fake
    x = torch.zeros(64)
    _call(launcher, x)
    monkeypatch.setattr(_direct_launch, "launch_hooks_active", lambda: True)
    _call(launcher, x)
    assert [entry[0] for entry in kernel.log] == ["triton", "triton"]


def test_unexpected_signature_disables_the_direct_path(fake):
    kernel, launcher = fake
    launcher(1, torch.device("cuda", 0), (torch.zeros(4), 4, 1.0, 16), {"FLAG": True}, 4)  # BLOCK passed positionally
    assert not launcher.enabled


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: compares against Triton's own launch")
@pytest.mark.parametrize("offset", [0, 1])
@pytest.mark.parametrize("time_dim", [0, 1])
def test_direct_launch_matches_tritons_launch_on_gpu(offset, time_dim):
    g = torch.Generator(device="cuda").manual_seed(offset + 2 * time_dim)
    T, N = 37, 130
    shape = (T, N) if time_dim == 0 else (N, T)
    flat = lambda: torch.randn(T * N + offset, device="cuda", generator=g)[offset:].view(shape)  # noqa: E731
    rewards, values = flat(), flat()
    terminated = torch.rand(shape, device="cuda", generator=g) < 0.1
    bootstrap = torch.randn(N, device="cuda", generator=g)
    _launch._LAUNCHERS.clear()
    first = kernels.gae(rewards, values, terminated, bootstrap, time_dim=time_dim)   # through Triton
    second = kernels.gae(rewards, values, terminated, bootstrap, time_dim=time_dim)  # direct
    launcher = next(iter(_launch._LAUNCHERS.values()))
    assert launcher.enabled and len(launcher.entries) == 1
    for a, b in zip(first, second):
        assert torch.equal(a, b)


def test_a_launcher_that_rejects_the_arguments_falls_back(fake):
    kernel, launcher = fake
    x = torch.zeros(64)
    _call(launcher, x)

    def reject(*call):
        raise TypeError("function takes exactly 12 arguments")

    key = next(iter(launcher.entries))
    launcher.entries[key] = launcher.entries[key]._replace(run=reject)
    _call(launcher, x)
    assert [entry[0] for entry in kernel.log] == ["triton", "triton"] and not launcher.enabled


def test_environment_switch_turns_the_direct_launch_off(monkeypatch):
    monkeypatch.setenv("RLTRAIN_TRITON_LAUNCH", "1")
    monkeypatch.setattr(_direct_launch, "INTERPRET", False)
    assert not DirectLauncher(FakeKernel()).enabled
    monkeypatch.setenv("RLTRAIN_TRITON_LAUNCH", "0")
    assert DirectLauncher(FakeKernel()).enabled == _direct_launch.HAVE_TRITON


@pytest.mark.parametrize(
    "enter, exit_, active",
    [
        (None, None, False),                                 # older Triton, no hook
        (SimpleNamespace(calls=[]), SimpleNamespace(calls=[]), False),  # newer Triton: empty chains
        (SimpleNamespace(calls=[print]), SimpleNamespace(calls=[]), True),
        (None, print, True),                                 # a plain function set as the hook
    ],
)
def test_launch_hooks_detection(monkeypatch, enter, exit_, active):
    monkeypatch.setattr(_direct_launch, "_RUNTIME_KNOBS",
                        SimpleNamespace(launch_enter_hook=enter, launch_exit_hook=exit_))
    assert _direct_launch.launch_hooks_active() is active
