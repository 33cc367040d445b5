"""Shared pieces of the float64 references: 2-D views, flags, per-environment vectors."""

from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

_F64 = torch.float64


def _as_2d(x: Tensor) -> Tuple[Tensor, bool]:
    """Return ``x`` as ``[T, N]`` float64 and whether it was 1-D."""
    x = torch.as_tensor(x)
    if x.dim() == 1:
        return x.to(_F64).unsqueeze(1), True
    return x.to(_F64), False


def _flag(x: Optional[Tensor], like: Tensor) -> Tensor:
    """Flags of any dtype -> float64 0/1 of ``like``'s shape (``None`` -> zeros)."""
    if x is None:
        return torch.zeros_like(like)
    x = torch.as_tensor(x, device=like.device)
    if x.dim() == 1:
        x = x.unsqueeze(1)
    return (x != 0).to(_F64).expand_as(like)


def _vec(x: Optional[Tensor], like: Tensor) -> Tensor:
    """An ``[N]`` vector (``None`` -> zeros) as float64 on ``like``'s device."""
    n = like.shape[1]
    if x is None:
        return torch.zeros(n, dtype=_F64, device=like.device)
    x = torch.as_tensor(x, device=like.device).to(_F64)
    return x.reshape(-1).expand(n) if x.numel() == 1 else x.reshape(n)


def _out(x: Tensor, one_d: bool) -> Tensor:
    return x.squeeze(1) if one_d else x


def _next_value_fn(values: Tensor, next_values: Optional[Tensor], bootstrap: Tensor):
    """``V'_t``: next_values[t] if given, else V_{t+1} (t < T-1) / bootstrap (t = T-1)."""
    T = values.shape[0]
    if next_values is not None:
        nv = next_values
        return lambda t: nv[t]
    return lambda t: values[t + 1] if t < T - 1 else bootstrap


# --------------------------------------------------------------------------- #
