"""Compute every estimator on a small random rollout and check it against the float64 reference.

    python scripts/demo.py [--T 64] [--N 8] [--device cpu|cuda]

On CPU this runs the PyTorch path, or the Triton kernels in Triton's interpreter when
``TRITON_INTERPRET=1`` is set; on CUDA it runs the fused Triton kernels.
"""

from __future__ import annotations

import argparse

import torch

import kernels
from kernels import reference


def random_rollout(T: int, N: int, device: str, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)

    def normal(*shape):
        return torch.randn(*shape, generator=g).to(device)

    terminated = torch.rand(T, N, generator=g) < 0.05
    truncated = (torch.rand(T, N, generator=g) < 0.03) & ~terminated
    return dict(
        rewards=normal(T, N),
        values=normal(T, N),
        next_values=normal(T, N),
        bootstrap=normal(N),
        log_rhos=0.3 * normal(T, N),
        q=normal(T, N),
        expected_next_q=normal(T, N),
        beta=torch.rand(T, N, generator=g).to(device),
        terminated=terminated.to(device),
        truncated=truncated.to(device),
    )


def calls(x: dict[str, torch.Tensor]):
    """(name, args, kwargs) of one call of every estimator on the rollout ``x``."""
    r, v, nv, b, term, trunc = (
        x["rewards"],
        x["values"],
        x["next_values"],
        x["bootstrap"],
        x["terminated"],
        x["truncated"],
    )
    return [
        ("gae", (r, v, term, b), dict(truncated=trunc)),
        ("vtrace", (r, v, x["log_rhos"], term, b), dict(truncated=trunc)),
        ("retrace", (r, x["q"], x["expected_next_q"], x["log_rhos"], term), dict(truncated=trunc)),
        ("lambda_returns", (r, nv, term), dict(truncated=trunc)),
        ("discounted_returns", (r, term), dict(truncated=trunc, next_values=nv, bootstrap_value=b)),
        ("eligibility_traces", (r, term | trunc), {}),
        ("episodic_prefix_sum", (r, term | trunc), {}),
        ("linear_scan", (r, x["beta"]), dict(reverse=True)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--T", type=int, default=64)
    parser.add_argument("--N", type=int, default=8)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    rollout = random_rollout(args.T, args.N, args.device)
    print(f"{'estimator':<22}{'output':<10}{'rel. error vs float64 reference':>34}")
    worst = 0.0
    for name, positional, keywords in calls(rollout):
        outputs = getattr(kernels, name)(*positional, **keywords)
        expected = getattr(reference, name)(*positional, **keywords)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        expected = expected if isinstance(expected, tuple) else (expected,)
        for i, (out, ref) in enumerate(zip(outputs, expected)):
            err = ((out.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
            worst = max(worst, err)
            print(f"{name:<22}{i:<10}{err:>34.2e}")
    verdict = "OK" if worst < 1e-5 else "MISMATCH"
    print(f"worst relative error {worst:.2e}: {verdict}")
    raise SystemExit(0 if verdict == "OK" else 1)


if __name__ == "__main__":
    main()
