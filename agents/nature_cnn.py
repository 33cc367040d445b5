"""Nature-DQN CNN torso (Mnih et al. 2015) for stacked 84x84 Atari frames.

Takes ``uint8`` observations ``[B, 4, 84, 84]`` (so only bytes cross the
host-device link) and scales them to ``[0, 1]`` inside the network.
"""

from __future__ import annotations

from typing import Tuple

import torch
import torch.nn as nn

from agents.layers import layer_init

__all__ = ["NatureCNN"]


class NatureCNN(nn.Module):
    """``[B, C, H, W]`` uint8 -> ``[B, 512]``."""

    def __init__(self, obs_shape: Tuple[int, ...], out_dim: int = 512):
        super().__init__()
        c = obs_shape[0]
        self.conv = nn.Sequential(
            layer_init(nn.Conv2d(c, 32, 8, stride=4)), nn.ReLU(),
            layer_init(nn.Conv2d(32, 64, 4, stride=2)), nn.ReLU(),
            layer_init(nn.Conv2d(64, 64, 3, stride=1)), nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            n = self.conv(torch.zeros(1, *obs_shape)).shape[1]
        self.fc = nn.Sequential(layer_init(nn.Linear(n, out_dim)), nn.ReLU())
        self.out_dim = out_dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x.float() / 255.0))
