"""Baseline: the fused kernels with one time step per chunk (``LaunchConfig(block_t=1, ...)``).

Each lane owns one environment and walks T sequentially, carrying ``y`` in a register: the design
of PufferLib's CUDA GAE kernel (one thread per row, a loop over the horizon), with exactly the
fused kernels' pair building, masking and layouts. No associative scan, no chunk carry: T
dependent steps per lane.

Block shape (:func:`sequential_config`): one lane per environment (``block_n = 32 * num_warps``),
1 to 4 warps per program, chosen so that there are at least as many programs as SMs when N allows
(N = 4096 on 132 multiprocessors: 128 one-warp programs rather than 32 four-warp ones), and 4 warps (128 lanes)
once N fills the chip.

Only where the Triton kernels run: CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``.
"""

from __future__ import annotations

import functools
from typing import Optional

import torch

import kernels
from kernels.launch import LaunchConfig
from kernels._triton import runs_triton, triton
from kernels.launch.heuristic import device_info

__all__ = list(kernels.ESTIMATORS)

def _num_sms(device: torch.device) -> int:
    return device_info(device).multiprocessors


def sequential_config(N: int, num_sms: int) -> LaunchConfig:
    """``block_t=1``; ``block_n`` in {32, 64, 128} lanes (1, 2, 4 warps), one lane per environment."""
    per_program = triton.next_power_of_2(max(1, -(-N // max(1, num_sms))))
    block_n = min(128, max(32, per_program))
    return LaunchConfig(block_t=1, block_n=block_n, num_warps=block_n // 32)


def _wrap(public):
    @functools.wraps(public)
    def run(*args, config: Optional[LaunchConfig] = None, **kwargs):
        first = args[0] if args else next(iter(kwargs.values()), None)
        if isinstance(first, torch.Tensor):
            if not runs_triton(first.device):
                raise RuntimeError(
                    f"the 'sequential' backend runs the Triton kernels: it needs CUDA tensors (or "
                    f"TRITON_INTERPRET=1 set before importing kernels), got tensors on {first.device}"
                )
            time_dim = kwargs.get("time_dim", 0)
            if config is None:
                N = 1 if first.dim() != 2 or time_dim not in (0, 1) else first.shape[1 - time_dim]
                config = sequential_config(N, _num_sms(first.device))
        if config is not None and (config.block_t != 1 or getattr(config, "lookback", False)):
            raise ValueError(f"the 'sequential' backend needs block_t=1 without look-back, got {config}")
        return public(*args, config=config, **kwargs)

    return run


globals().update({op: _wrap(getattr(kernels, op)) for op in kernels.ESTIMATORS})
