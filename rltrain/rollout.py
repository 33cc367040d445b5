"""Preallocated, time-major rollout storage and pinned host-to-device staging.

:class:`RolloutBuffer` holds one on-policy rollout as ``[T, N, ...]`` tensors
on the training device, allocated once.  ``valid[t, n]`` is ``False`` for the
dummy transition that next-step autoreset (EnvPool / Gymnasium >= 1.0)
inserts after every episode end: its action is ignored by the environment,
so it must not contribute to the loss.

:class:`HostToDevice` copies numpy arrays coming out of the environment into
a pinned host tensor and from there to the device with ``non_blocking=True``
(on CPU it only converts dtype, zero-copy when possible); :meth:`HostToDevice.into`
copies into a preallocated device tensor instead of a new one.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable, Dict, Sequence, Tuple

import numpy as np
import torch

__all__ = ["RolloutBuffer", "HostToDevice", "minibatch_indices"]


class HostToDevice:
    """Reusable pinned staging buffer for one array shape: ``dev = h2d(np_array)``.

    The staging buffer is overwritten by the next call; that is safe as long as
    the device has consumed the previous copy, which holds in a rollout loop
    that synchronises on the action copy back to the host every step.
    """

    def __init__(self, shape: Sequence[int], dtype: torch.dtype, device: torch.device):
        self.device = torch.device(device)
        self.dtype = dtype
        self.pinned = None
        if self.device.type == "cuda":
            self.pinned = torch.empty(tuple(shape), dtype=dtype, pin_memory=True)

    def __call__(self, array: np.ndarray) -> torch.Tensor:
        src = torch.from_numpy(np.asarray(array))
        if self.pinned is None:
            return src.to(self.dtype)
        self.pinned.copy_(src)
        return self.pinned.to(self.device, non_blocking=True)

    def into(self, array: np.ndarray, dst: torch.Tensor) -> torch.Tensor:
        """Copy ``array`` into ``dst`` (a device tensor of the staging shape; dtype converted on the
        host), through the pinned buffer without allocating; returns ``dst``."""
        src = torch.from_numpy(np.asarray(array))
        if self.pinned is None:
            return dst.copy_(src)
        self.pinned.copy_(src)
        return dst.copy_(self.pinned, non_blocking=True)


@dataclass
class RolloutBuffer:
    """One rollout, time-major ``[T, N, ...]``, preallocated on ``device``."""

    obs: torch.Tensor         # [T, N, *obs_shape] (obs dtype, e.g. uint8 for Atari)
    actions: torch.Tensor     # [T, N, *action_shape]
    logprobs: torch.Tensor    # [T, N]
    rewards: torch.Tensor     # [T, N] (after any reward normalisation)
    values: torch.Tensor      # [T, N]
    terminated: torch.Tensor  # [T, N] bool: episode ended at t in a terminal state
    truncated: torch.Tensor   # [T, N] bool: cut at t by a time limit (bootstrap)
    valid: torch.Tensor       # [T, N] bool: False for the autoreset dummy step

    @classmethod
    def allocate(
        cls,
        num_steps: int,
        num_envs: int,
        obs_shape: Tuple[int, ...],
        obs_dtype: torch.dtype,
        action_shape: Tuple[int, ...],
        action_dtype: torch.dtype,
        device: torch.device,
    ) -> "RolloutBuffer":
        T, N = num_steps, num_envs
        f32 = dict(dtype=torch.float32, device=device)
        b = dict(dtype=torch.bool, device=device)
        return cls(
            obs=torch.zeros((T, N, *obs_shape), dtype=obs_dtype, device=device),
            actions=torch.zeros((T, N, *action_shape), dtype=action_dtype, device=device),
            logprobs=torch.zeros((T, N), **f32),
            rewards=torch.zeros((T, N), **f32),
            values=torch.zeros((T, N), **f32),
            terminated=torch.zeros((T, N), **b),
            truncated=torch.zeros((T, N), **b),
            valid=torch.ones((T, N), **b),
        )

    @property
    def num_steps(self) -> int:
        return self.obs.shape[0]

    @property
    def num_envs(self) -> int:
        return self.obs.shape[1]

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> "RolloutBuffer":
        """A buffer of ``fn(field)`` for every field: ``buf.map(torch.zeros_like)`` (another storage of the
        same layout), ``buf.map(lambda x: x[:T])`` (views of the first ``T`` rows)."""
        return RolloutBuffer(**{f.name: fn(getattr(self, f.name)) for f in fields(self)})

    def copy_(self, src: "RolloutBuffer") -> "RolloutBuffer":
        """Every field of ``src`` (same shapes) into this buffer's tensors, in place; returns this buffer."""
        for f in fields(self):
            getattr(self, f.name).copy_(getattr(src, f.name))
        return self

    def flat(self, **extra: torch.Tensor) -> Dict[str, torch.Tensor]:
        """All fields (plus ``extra`` ``[T, N, ...]`` tensors such as advantages
        and returns) reshaped to ``[T*N, ...]`` views for minibatching."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(extra)
        return {k: v.reshape(-1, *v.shape[2:]) for k, v in out.items()}


def minibatch_indices(
    batch_size: int, minibatch_size: int, device: torch.device, generator: torch.Generator | None = None
) -> torch.Tensor:
    """A fresh random permutation of ``range(batch_size)`` as a
    ``[batch_size // minibatch_size, minibatch_size]`` index tensor on ``device``
    (``minibatch_size`` must divide ``batch_size``)."""
    if batch_size % minibatch_size:
        raise ValueError(f"minibatch size {minibatch_size} does not divide batch size {batch_size}")
    perm = torch.randperm(batch_size, device=device, generator=generator)
    return perm.view(batch_size // minibatch_size, minibatch_size)
