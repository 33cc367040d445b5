"""Nature-DQN CNN torso (Mnih et al. 2015) for stacked 84x84 Atari frames.

Takes ``uint8`` observations ``[B, 4, 84, 84]`` (so only bytes cross the
host-device link) and scales them to ``[0, 1]`` inside the network.

On a CUDA device the convolutions run channels-last (NHWC), the layout cuDNN's
fastest kernels take: the convolution weights are stored channels-last
whenever the module is moved there (``.to(device)`` / ``.cuda()``, through
:meth:`NatureCNN._apply`) and :meth:`NatureCNN.forward` lays the scaled frames
out the same way, so every caller (rollout, CUDA-graph step, update, IMPALA
actors and learner, evaluation) gets it (its gain: docs/perf.md, trainer
throughput, ``scripts/bench_trainer.py --cases update-breakout``).  On the CPU everything stays contiguous.  The layout changes strides, not
values: the features reach the linear layer in the same ``(C, H, W)`` order
(``Flatten`` reads logical order), so a ``state_dict`` saved in either layout
loads into the other and gives the same outputs.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn as nn

from agents.layers import activation, layer_init

__all__ = ["NatureCNN"]


class NatureCNN(nn.Module):
    """``[B, C, H, W]`` uint8 -> ``[B, 512]``.

    ``channels_last``: the convolutions' layout; ``None``: channels-last on CUDA, contiguous elsewhere
    (module docstring); ``True`` / ``False``: channels-last / contiguous on every device.  It takes
    effect when the module next moves (``.to``); forward follows it at once.  ``act``: the activation
    after each layer (:data:`agents.layers.ACTIVATIONS`; the Nature network's is ReLU)."""

    def __init__(self, obs_shape: Tuple[int, ...], out_dim: int = 512, channels_last: Optional[bool] = None,
                 act: str = "relu"):
        super().__init__()
        self.channels_last = channels_last
        c = obs_shape[0]
        self.conv = nn.Sequential(
            layer_init(nn.Conv2d(c, 32, 8, stride=4)), activation(act),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)), activation(act),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)), activation(act),
            nn.Flatten(),
        )
        with torch.no_grad():
            n = self.conv(torch.zeros(1, *obs_shape)).shape[1]
        self.fc = nn.Sequential(layer_init(nn.Linear(n, out_dim)), activation(act))
        self.out_dim = out_dim

    def channels_last_on(self, device: torch.device) -> bool:
        """Whether the convolutions run channels-last on ``device``."""
        return device.type == "cuda" if self.channels_last is None else self.channels_last

    def _apply(self, fn, recurse: bool = True):
        """``nn.Module._apply`` (``.to``, ``.cuda``, ``.cpu``, ...), then the 4-D weights (and their
        gradients) laid out for the device they are on: the one conversion, made when the module moves."""
        super()._apply(fn, recurse)
        weight = self.conv[0].weight
        fmt = torch.channels_last if self.channels_last_on(weight.device) else torch.contiguous_format
        if not weight.is_contiguous(memory_format=fmt):
            super()._apply(lambda t: t.contiguous(memory_format=fmt) if t.dim() == 4 else t, recurse)
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the layout changes in the uint8 -> float copy itself: no extra pass over the frames
        fmt = torch.channels_last if x.dim() == 4 and self.channels_last_on(x.device) else torch.preserve_format
        return self.fc(self.conv(x.to(torch.float32, memory_format=fmt) / 255.0))
