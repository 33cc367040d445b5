"""Where the microseconds of a short estimator call go, on the GPU (prints one line per probe).

    python scripts/probe_host_overhead.py [--N 4096 --T 128]

Each probe is the wall time per call of back-to-back calls after a warm-up, with one device sync
at the end (a trainer's view: host cost when the host is slower than the device). Probes: empty
Triton kernels (Triton's own launch path), ``torch.empty``, and each of ``gae`` / ``vtrace`` /
``retrace`` through the three launch paths: a replayed plan (the default), the direct launcher
without replay, and Triton's ``kernel[grid]`` launch; finally each call captured by
``kernels.capture`` (one CUDA-graph launch per call).
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import kernels  # noqa: E402
from kernels import _direct_launch, _launch, _replay  # noqa: E402


@triton.jit
def _noop1(a0):
    pass


@triton.jit
def _noop30(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21,
            a22, a23, a24, a25, a26, a27, a28, a29, X: tl.constexpr):
    pass


def per_call_us(fn, calls: int = 3000) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


@contextmanager
def replay_off():
    """The estimators without their replay wrapper: every call takes the ordinary path."""
    wrapped = {op: getattr(kernels, op) for op in kernels.ESTIMATORS}
    try:
        for op, fn in wrapped.items():
            setattr(kernels, op, fn.__wrapped__)
        yield
    finally:
        for op, fn in wrapped.items():
            setattr(kernels, op, fn)


@contextmanager
def direct_launch_off():
    launchers = list(_launch._LAUNCHERS.values())
    for launcher in launchers:
        launcher.enabled = False
    try:
        yield
    finally:
        for launcher in launchers:
            launcher.enabled = True


def probe_shape(argv, description: str) -> tuple[int, int]:
    """``(T, N)`` from ``--T`` and ``--N`` (default 128 x 4096, PPO's rollout)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--N", type=int, default=4096)
    p.add_argument("--T", type=int, default=128)
    opts = p.parse_args(argv)
    return opts.T, opts.N


def rollout(T: int, N: int) -> dict:
    """Random ``[T, N]`` CUDA series for the probes: rewards, values, Q-values, expected next Q-values,
    log-ratios, termination and truncation flags, and a bootstrap value per environment."""
    g = torch.Generator(device="cuda").manual_seed(0)
    x = lambda: torch.randn(T, N, device="cuda", generator=g)  # noqa: E731
    return dict(r=x(), v=x(), q=x(), eq=x(), lr=0.3 * x(), term=torch.rand(T, N, device="cuda") < 0.05,
                trunc=torch.rand(T, N, device="cuda") < 0.02, boot=torch.randn(N, device="cuda", generator=g))


def main(argv=None):
    T, N = probe_shape(argv, __doc__.splitlines()[0])
    case = rollout(T, N)
    r, v, q, eq, lr, term, trunc, boot = (case[k] for k in ("r", "v", "q", "eq", "lr", "term", "trunc", "boot"))
    arguments = {"gae": ((r, v, term, boot), {"truncated": trunc}),
                 "vtrace": ((r, v, lr, term, boot), {"truncated": trunc}),
                 "retrace": ((r, q, eq, lr, term), {"truncated": trunc})}
    calls = {name: (lambda name=name, a=a, kw=kw: getattr(kernels, name)(*a, **kw))
             for name, (a, kw) in arguments.items()}
    ptr_args = [r, 1, 128] * 8 + [1, 2, 3, 4, 5, 6]
    print(f"empty Triton kernel, 1 argument: {per_call_us(lambda: _noop1[(1,)](r)):.1f} us")
    print(f"empty Triton kernel, 30 arguments: {per_call_us(lambda: _noop30[(1,)](*ptr_args, X=1)):.1f} us")
    print(f"torch.empty [{T}, {N}] f32: {per_call_us(lambda: torch.empty((T, N), device='cuda')):.1f} us")
    for name, fn in calls.items():
        fn()
        print(f"{name} {N}x{T} replayed plan (default): {per_call_us(fn):.1f} us")
        with replay_off():
            print(f"{name} {N}x{T} direct launch, no replay: {per_call_us(fn):.1f} us")
            with direct_launch_off():
                print(f"{name} {N}x{T} Triton's kernel[grid] launch: {per_call_us(fn):.1f} us")
    args, kwargs = arguments["gae"]
    plan = next(iter(kernels.gae.plans.values()))
    full = plan.kernel_arguments(args, kwargs, plan.new_outputs(), [])
    stream_handle = _direct_launch.current_stream(0)
    c = plan.compiled
    print(f"  of which argument signature and plan lookup: {per_call_us(lambda: kernels.gae.plans.get(_replay._signature(args, kwargs))):.1f} us")
    print(f"  of which the two output allocations: {per_call_us(plan.new_outputs):.1f} us")
    outs = plan.new_outputs()
    print(f"  of which the argument list: {per_call_us(lambda: plan.kernel_arguments(args, kwargs, outs, [])):.1f} us")
    print(f"  of which the C launcher alone: {per_call_us(lambda: c.run(plan.programs, 1, 1, stream_handle, c.function, c.metadata, None, None, None, *full, *c.constexpr_values)):.1f} us")
    print(f"  of which device scope + stream: {per_call_us(lambda: (_direct_launch.device_scope(0), _direct_launch.current_stream(0))):.1f} us")
    for name, (a, kw) in arguments.items():
        eager = calls[name]()
        captured = kernels.capture(getattr(kernels, name), *a, **kw)
        same = all(torch.equal(x, y) for x, y in zip(captured(), eager))
        print(f"{name} {N}x{T} captured (kernels.capture, one CUDA-graph launch): {per_call_us(captured, 1000):.1f} us "
              f"(matches eager: {same})")


if __name__ == "__main__":
    main()
