"""MLP torso for vector observations (CleanRL: 2 x 64 tanh, orthogonal init)."""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn as nn

from agents.layers import layer_init

__all__ = ["MLP"]


class MLP(nn.Module):
    """``[B, *obs_shape] -> [B, hidden[-1]]``; the input is flattened and cast to float."""

    def __init__(self, in_dim: int, hidden: Sequence[int] = (64, 64), activation: type = nn.Tanh):
        super().__init__()
        layers, d = [], in_dim
        for h in hidden:
            layers += [layer_init(nn.Linear(d, h)), activation()]
            d = h
        self.net = nn.Sequential(*layers)
        self.out_dim = d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1).float())
