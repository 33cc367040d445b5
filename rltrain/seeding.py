"""Seeding and RNG-state capture/restore (python, numpy, torch, CUDA).

:func:`seed_everything` makes a CPU run reproducible for a given seed;
:func:`get_rng_state` / :func:`set_rng_state` let a checkpoint resume with
the exact generator states it was saved with.
"""

from __future__ import annotations

import random
from typing import Any, Dict

import numpy as np
import torch

__all__ = ["seed_everything", "get_rng_state", "set_rng_state"]


def seed_everything(seed: int, deterministic: bool = True) -> None:
    """Seed ``random``, ``numpy`` and ``torch`` (all devices) and choose the CUDA numerics.

    ``deterministic`` (CleanRL's ``torch_deterministic``): deterministic cuDNN kernels and full-fp32
    CUDA matrix products.  Otherwise the fastest: cuDNN times its convolution algorithms at first use
    and keeps the fastest (``cudnn.benchmark``), and CUDA matrix products (the linear layers) run in
    TF32 (``torch.backends.cuda.matmul.allow_tf32``: fp32 inputs rounded to a 10-bit mantissa,
    fp32 accumulation).  Convolutions use TF32 in both modes (PyTorch's default,
    ``cudnn.allow_tf32``).  What each choice costs the Atari PPO update:
    docs/perf.md, trainer throughput (``scripts/bench_trainer.py --cases update-breakout``)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = not deterministic
    torch.backends.cuda.matmul.allow_tf32 = not deterministic


def get_rng_state() -> Dict[str, Any]:
    """Snapshot of every global RNG this project uses (picklable)."""
    state: Dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Dict[str, Any]) -> None:
    """Restore a snapshot from :func:`get_rng_state` (CUDA part only if present here)."""
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and torch.cuda.is_available():
        cuda = state["cuda"][: torch.cuda.device_count()]
        torch.cuda.set_rng_state_all([s.cpu() for s in cuda])
