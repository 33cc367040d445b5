"""Argument checking and the time-major view of an estimator's inputs.

Every public estimator passes its tensors through :class:`Batch`, the one place where shapes,
devices, dtypes and layouts are checked. Errors name the offending argument and are raised as
``TypeError`` (wrong kind of object or dtype) or ``ValueError`` (wrong shape, device or value).

Layouts: a 2-D tensor is ``[T, N]`` when ``time_dim=0`` and ``[N, T]`` when ``time_dim=1``; a 1-D
tensor is ``[T]``, one environment. Internally everything is seen as a ``[T, N]`` view with
arbitrary strides (no copies); outputs are allocated contiguous in the caller's layout.
"""

from __future__ import annotations

import math
from typing import Mapping, Optional

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_scalar(name: str, value, *, low: float = 0.0, high: float = 1.0) -> float:
    """Return ``value`` as a float after checking that it is a finite real number in [low, high].

    ``high=math.inf`` allows +inf (e.g. "no clipping" thresholds); NaN is always rejected.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a Python float, got {type(value).__name__}")
    value = float(value)
    finite_required = math.isfinite(high)
    if math.isnan(value) or (finite_required and not math.isfinite(value)):
        raise ValueError(f"{name} must be finite, got {value}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
    return value


def check_time_dim(time_dim) -> int:
    if isinstance(time_dim, bool) or time_dim not in (0, 1):
        raise ValueError(f"time_dim must be 0 ([T, N]) or 1 ([N, T]), got {time_dim!r}")
    return int(time_dim)


def _check_tensor(name: str, tensor) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    return tensor


class Batch:
    """The validated inputs of one estimator call.

    ``floats`` and ``flags`` hold the per-step series (``None`` for an optional one that was not
    given); the first float series fixes the shape, the device and the output dtype. ``per_env``
    holds ``[N]`` tensors such as ``bootstrap_value`` or ``initial``.

    Attributes: ``T``, ``N``, ``device``, ``out_dtype`` (dtype of the first float input),
    ``compute_dtype`` (float64 when any float input is float64, else float32), and ``tm``: a dict
    of ``[T, N]`` views (and ``[N]`` views for the per-env tensors), ``None`` where not given.
    """

    __slots__ = ("time_dim", "one_env", "shape", "T", "N", "device", "out_dtype", "compute_dtype", "tm")

    def __init__(
        self,
        time_dim,
        floats: Mapping[str, Optional[torch.Tensor]],
        flags: Mapping[str, Optional[torch.Tensor]] = {},
        per_env: Mapping[str, Optional[torch.Tensor]] = {},
    ):
        self.time_dim = check_time_dim(time_dim)
        self.tm: dict[str, Optional[torch.Tensor]] = {}
        first_name = None
        any_float64 = False
        for kind, series in (("float", floats), ("flag", flags)):
            for name, tensor in series.items():
                if tensor is None:
                    self.tm[name] = None
                    continue
                _check_tensor(name, tensor)
                if first_name is None:
                    self._adopt(name, tensor)
                    first_name = name
                else:
                    self._check_like(name, tensor, first_name)
                if kind == "float":
                    if tensor.dtype not in FLOAT_DTYPES:
                        raise TypeError(
                            f"{name} must be a floating-point tensor (float16, bfloat16, float32 or "
                            f"float64), got {tensor.dtype}"
                        )
                    any_float64 |= tensor.dtype == torch.float64
                elif tensor.is_complex():
                    raise TypeError(f"{name} must hold 0/1 flags (bool, integer or float), got {tensor.dtype}")
                self.tm[name] = self._time_major(tensor)
        self.compute_dtype = torch.float64 if any_float64 else torch.float32
        for name, tensor in per_env.items():
            self.tm[name] = None if tensor is None else self._per_env(name, tensor)

    def _adopt(self, name: str, tensor: torch.Tensor) -> None:
        if tensor.dim() not in (1, 2):
            raise ValueError(f"{name} must be 1-D [T] or 2-D (time_dim={self.time_dim}), got shape {tuple(tensor.shape)}")
        if tensor.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{name} must be a floating-point tensor, got {tensor.dtype}")
        self.shape = tensor.shape
        self.one_env = tensor.dim() == 1
        self.device = tensor.device
        self.out_dtype = tensor.dtype
        if self.one_env:
            self.T, self.N = tensor.shape[0], 1
        elif self.time_dim == 0:
            self.T, self.N = tensor.shape
        else:
            self.N, self.T = tensor.shape

    def _check_like(self, name: str, tensor: torch.Tensor, first: str) -> None:
        if tensor.shape != self.shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)} but {first} has shape {tuple(self.shape)}")
        if tensor.device != self.device:
            raise ValueError(f"{name} is on {tensor.device} but {first} is on {self.device}")

    def _time_major(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.one_env:
            return tensor.unsqueeze(1)
        return tensor if self.time_dim == 0 else tensor.t()

    def _per_env(self, name: str, tensor) -> torch.Tensor:
        _check_tensor(name, tensor)
        expected = () if self.one_env else (self.N,)
        if tuple(tensor.shape) != expected and not (self.one_env and tuple(tensor.shape) == (1,)):
            raise ValueError(f"{name} must have shape {expected} (one value per environment), got {tuple(tensor.shape)}")
        if tensor.device != self.device:
            raise ValueError(f"{name} is on {tensor.device} but the inputs are on {self.device}")
        if tensor.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{name} must be a floating-point tensor, got {tensor.dtype}")
        return tensor.reshape(1) if self.one_env else tensor

    def output(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A new output tensor in the caller's layout, and its ``[T, N]`` view."""
        out = torch.empty(self.shape, dtype=self.out_dtype, device=self.device)
        return out, self._time_major(out)

    def from_time_major(self, result: torch.Tensor) -> torch.Tensor:
        """Convert a ``[T, N]`` result (any dtype) into the caller's layout and output dtype."""
        result = result.to(self.out_dtype)
        if self.one_env:
            return result.reshape(self.T)
        return result if self.time_dim == 0 else result.t().contiguous()
