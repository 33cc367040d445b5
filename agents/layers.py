"""Layer initialisation shared by the networks (orthogonal init, as CleanRL)."""

from __future__ import annotations

import math

import torch.nn as nn

__all__ = ["layer_init"]


def layer_init(layer: nn.Module, std: float = math.sqrt(2), bias: float = 0.0) -> nn.Module:
    """Orthogonal weights with gain ``std``, constant bias; returns ``layer``."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer
