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

    ``high=math.inf`` leaves the value unbounded above (clipping thresholds); it must still be
    finite, since an infinite threshold lets an overflowing ratio turn into NaN downstream.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a Python float, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value}")
    return value


def check_bootstrap(bootstrap_value, next_values) -> None:
    """The value after the last step must come from ``bootstrap_value`` or ``next_values``."""
    if bootstrap_value is None and next_values is None:
        raise ValueError("bootstrap_value is required unless next_values is given")


def check_outputs(**switches) -> dict:
    """The switches that say which outputs of a two-output estimator a call computes
    (``advantages=``, ``returns=`` of GAE; ``value_targets=``, ``pg_advantages=`` of V-trace): each a
    bool, at least one true. Returned as given, for the estimator's options."""
    for name, value in switches.items():
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    if not any(switches.values()):
        raise ValueError(" and ".join(f"{name}=False" for name in switches) + " leave nothing to compute: "
                         "at least one output must be kept")
    return dict(switches)


def selected(*outputs):
    """The outputs that were computed (``None`` stands for a skipped one), in order: a tuple of
    several, or the one alone."""
    kept = tuple(o for o in outputs if o is not None)
    if not kept:
        raise ValueError("every output was skipped")
    return kept if len(kept) > 1 else kept[0]


def check_time_dim(time_dim) -> int:
    if isinstance(time_dim, bool) or time_dim not in (0, 1):
        raise ValueError(f"time_dim must be 0 ([T, N]) or 1 ([N, T]), got {time_dim!r}")
    return int(time_dim)


def _check_tensor(name: str, tensor) -> torch.Tensor:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    return tensor


def _check_float(name: str, tensor: torch.Tensor) -> None:
    if tensor.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{name} must be a floating-point tensor (float16, bfloat16, float32 or float64), "
                        f"got {tensor.dtype}")


class Batch:
    """The validated inputs of one estimator call.

    ``floats`` and ``flags`` hold the per-step series (``None`` for an optional one that was not
    given); the first float series fixes the shape, the device and the output dtype. ``per_env``
    holds ``[N]`` tensors such as ``bootstrap_value`` or ``initial``.

    Attributes: ``T``, ``N``, ``device``, ``out_dtype`` (dtype of the first float input),
    ``compute_dtype`` (float64 when any float input is float64, else float32) and ``given`` (the
    tensors by name). Kernels get ``(tensor, stride_t, stride_n)`` from :meth:`series`; the
    reference path gets ``[T, N]`` views from :meth:`time_major`.
    """

    __slots__ = ("time_dim", "one_env", "shape", "T", "N", "device", "out_dtype", "compute_dtype", "given", "_first")

    def __init__(
        self,
        time_dim,
        floats: Mapping[str, Optional[torch.Tensor]],
        flags: Mapping[str, Optional[torch.Tensor]] = {},
        per_env: Mapping[str, Optional[torch.Tensor]] = {},
        optional: tuple[str, ...] = (),
    ):
        self.time_dim = check_time_dim(time_dim)
        self.given = {**floats, **flags, **per_env}
        for name, tensor in self.given.items():
            if tensor is None and name not in optional:
                raise TypeError(f"{name} must be a torch.Tensor, got None")
        self._first = None
        any_float64 = False
        for name, tensor in floats.items():
            if tensor is None:
                continue
            self._check_series(name, tensor)
            _check_float(name, tensor)
            any_float64 |= tensor.dtype == torch.float64
        for name, tensor in flags.items():
            if tensor is not None:
                self._check_series(name, tensor)
                if tensor.is_complex():
                    raise TypeError(f"{name} must hold 0/1 flags (bool, integer or float), got {tensor.dtype}")
        self.compute_dtype = torch.float64 if any_float64 else torch.float32
        for name, tensor in per_env.items():
            if tensor is not None:
                self._check_per_env(name, tensor)

    def _check_series(self, name: str, tensor) -> None:
        _check_tensor(name, tensor)
        first = self._first
        if first is None:
            self._adopt(name, tensor)
            return
        if tensor.shape != self.shape:
            raise ValueError(f"{name} has shape {tuple(tensor.shape)} but {first} has shape {tuple(self.shape)}")
        if tensor.device != self.device:
            raise ValueError(f"{name} is on {tensor.device} but {first} is on {self.device}")

    def _adopt(self, name: str, tensor: torch.Tensor) -> None:
        if tensor.dim() not in (1, 2):
            raise ValueError(
                f"{name} must be 1-D [T] or 2-D (time_dim={self.time_dim}), got shape {tuple(tensor.shape)}"
            )
        _check_float(name, tensor)  # the first series fixes the output dtype
        self._first = name
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

    def _check_per_env(self, name: str, tensor) -> None:
        _check_tensor(name, tensor)
        shape = tuple(tensor.shape)
        if self.one_env:
            if shape not in ((), (1,)):
                raise ValueError(f"{name} must be a scalar tensor (one environment), got shape {shape}")
        elif shape != (self.N,):
            raise ValueError(f"{name} must have shape ({self.N},) (one value per environment), got {shape}")
        if tensor.device != self.device:
            raise ValueError(f"{name} is on {tensor.device} but the inputs are on {self.device}")
        _check_float(name, tensor)

    def strides(self, tensor: torch.Tensor) -> tuple[int, int]:
        """``(stride_t, stride_n)`` of a series tensor in the caller's layout (no view is made)."""
        if self.one_env:
            return tensor.stride(0), 0
        s0, s1 = tensor.stride()
        return (s0, s1) if self.time_dim == 0 else (s1, s0)

    def series(self, name: str, placeholder: torch.Tensor) -> tuple:
        """Kernel arguments ``(tensor, stride_t, stride_n)`` of series ``name`` (a placeholder if absent)."""
        tensor = self.given[name]
        if tensor is None:
            return placeholder, 0, 0
        return (tensor, *self.strides(tensor))

    def per_env(self, name: str, placeholder: torch.Tensor) -> tuple:
        """Kernel arguments ``(tensor, stride)`` of a per-environment tensor (a placeholder if absent)."""
        tensor = self.given[name]
        if tensor is None:
            return placeholder, 0
        return tensor, (tensor.stride(0) if tensor.dim() else 0)

    def time_major(self, name: str) -> Optional[torch.Tensor]:
        """A ``[T, N]`` view of series ``name``, or ``None`` if it was not given."""
        tensor = self.given[name]
        if tensor is None:
            return None
        if self.one_env:
            return tensor.unsqueeze(1)
        return tensor if self.time_dim == 0 else tensor.t()

    def env_vector(self, name: str) -> Optional[torch.Tensor]:
        """An ``[N]`` view of per-environment tensor ``name``, or ``None`` if it was not given."""
        tensor = self.given[name]
        return None if tensor is None else tensor.reshape(self.N)

    def output(self, wanted: bool = True) -> Optional[torch.Tensor]:
        """A new output tensor in the caller's layout and the output dtype; ``None`` where the output
        is not ``wanted`` (skipped: nothing is allocated)."""
        return torch.empty(self.shape, dtype=self.out_dtype, device=self.device) if wanted else None

    def output_series(self, out: Optional[torch.Tensor], placeholder: torch.Tensor) -> tuple:
        """Kernel arguments ``(tensor, stride_t, stride_n)`` of an output (a placeholder, never
        stored to, where it is skipped)."""
        return (placeholder, 0, 0) if out is None else (out, *self.strides(out))

    def from_time_major(self, result: torch.Tensor) -> torch.Tensor:
        """Convert a ``[T, N]`` result (any dtype) into the caller's layout and output dtype."""
        result = result.to(self.out_dtype)
        if self.one_env:
            return result.reshape(self.T)
        return result if self.time_dim == 0 else result.t().contiguous()

    def from_reference(self, result):
        """A reference's result (one ``[T, N]`` tensor or a tuple of them) in the caller's layout and dtype."""
        if isinstance(result, tuple):
            return tuple(self.from_time_major(r) for r in result)
        return self.from_time_major(result)
