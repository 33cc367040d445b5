"""IMPALA ResNet torso (Espeholt et al. 2018, "deep" network, Fig. 3).

Three stages of conv -> 3x3 max-pool (stride 2) -> 2 residual blocks, with
16/32/32 channels, then a 256-unit ReLU layer.  ``uint8`` input scaled to
``[0, 1]`` inside.  ``act`` replaces every ReLU (:data:`agents.layers.ACTIVATIONS`).
"""

from __future__ import annotations

from typing import Sequence, Tuple

import torch
import torch.nn as nn

from agents.layers import activation, layer_init

__all__ = ["ImpalaResNet"]


class _Residual(nn.Module):
    def __init__(self, c: int, act: str = "relu"):
        super().__init__()
        self.act0, self.act1 = activation(act), activation(act)
        self.conv0 = nn.Conv2d(c, c, 3, padding=1)
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(self.act1(self.conv0(self.act0(x))))


class _Stage(nn.Module):
    def __init__(self, c_in: int, c_out: int, act: str = "relu"):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.pool = nn.MaxPool2d(3, stride=2, padding=1)
        self.res0, self.res1 = _Residual(c_out, act), _Residual(c_out, act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.res1(self.res0(self.pool(self.conv(x))))


class ImpalaResNet(nn.Module):
    """``[B, C, H, W]`` uint8 -> ``[B, out_dim]``."""

    def __init__(self, obs_shape: Tuple[int, ...], channels: Sequence[int] = (16, 32, 32), out_dim: int = 256,
                 act: str = "relu"):
        super().__init__()
        stages, c = [], obs_shape[0]
        for c_out in channels:
            stages.append(_Stage(c, c_out, act))
            c = c_out
        self.stages = nn.Sequential(*stages, activation(act), nn.Flatten())
        with torch.no_grad():
            n = self.stages(torch.zeros(1, *obs_shape)).shape[1]
        self.fc = nn.Sequential(layer_init(nn.Linear(n, out_dim)), activation(act))
        self.out_dim = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.stages(x.float() / 255.0))
