"""Layer initialisation (orthogonal init, as CleanRL) and the activations the image torsos offer."""

from __future__ import annotations

import math

import torch.nn as nn

__all__ = ["layer_init", "ACTIVATIONS", "activation"]

ACTIVATIONS = {"relu": nn.ReLU, "elu": nn.ELU}
"""The image torsos' activations by name: ReLU (the Nature CNN's and IMPALA ResNet's own) or ELU
(Clevert et al. 2016; the activation of rl_games' EnvPool Atari networks)."""


def activation(name: str) -> nn.Module:
    """A new activation module of :data:`ACTIVATIONS`."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose from {tuple(ACTIVATIONS)}")
    return ACTIVATIONS[name]()


def layer_init(layer: nn.Module, std: float = math.sqrt(2), bias: float = 0.0) -> nn.Module:
    """Orthogonal weights with gain ``std``, constant bias; returns ``layer``."""
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer
