"""Actor-critic networks.

* :mod:`agents.mlp`           -- MLP torso (vector observations).
* :mod:`agents.nature_cnn`    -- Nature-DQN CNN torso (Atari).
* :mod:`agents.impala_resnet` -- IMPALA ResNet torso (Atari).
* :mod:`agents.heads`         -- categorical / Gaussian policy heads, value head.
* :mod:`agents.value_norm`    -- running statistics of the value targets (``--norm-value``).
* :mod:`agents.actor_critic`  -- torso(s) + heads with CleanRL's interface.

:func:`make_agent` picks a network for an observation/action space.
"""

from __future__ import annotations

import math
from typing import Sequence, Tuple

import torch.nn as nn

from agents.actor_critic import ActorCritic
from agents.heads import CategoricalHead, GaussianHead, QHead, ValueHead, draw_noise, sample_action
from agents.impala_resnet import ImpalaResNet
from agents.mlp import MLP
from agents.nature_cnn import NatureCNN
from agents.value_norm import ValueNormalizer

__all__ = ["ActorCritic", "CategoricalHead", "GaussianHead", "ImpalaResNet", "MLP", "NatureCNN",
           "QHead", "ValueHead", "ValueNormalizer", "make_agent", "sample_action", "draw_noise", "ARCHS"]

ARCHS = ("auto", "mlp", "nature_cnn", "impala_resnet")


def make_agent(
    arch: str,
    obs_shape: Tuple[int, ...],
    discrete: bool,
    num_actions: int,
    hidden: Sequence[int] = (64, 64),
    q_head: bool = False,
    norm_value: bool = False,
    cnn_activation: str = "relu",
) -> ActorCritic:
    """Build an :class:`ActorCritic`.

    ``arch="auto"``: image observations (3-D) -> ``nature_cnn`` with a shared
    torso, else ``mlp`` with separate actor and critic torsos.  ``discrete``
    selects a categorical head over ``num_actions`` actions, else a Gaussian
    over ``num_actions`` dimensions.  ``q_head=True`` (discrete only) replaces the
    value head by a :class:`QHead` ``Q(s, .)`` (Retrace / ACER critics).  ``norm_value=True`` gives
    the agent a :class:`ValueNormalizer` (its value head learns normalised targets; a value head
    only).  ``cnn_activation``: the image torsos' activation (:data:`agents.layers.ACTIVATIONS`; the
    MLP keeps tanh)."""
    if arch not in ARCHS:
        raise ValueError(f"unknown agent arch {arch!r}; choose from {ARCHS}")
    if arch == "auto":
        arch = "nature_cnn" if len(obs_shape) == 3 else "mlp"
    head_cls = CategoricalHead if discrete else GaussianHead
    if q_head and not discrete:
        raise ValueError("a Q head needs a discrete action space")
    if q_head and norm_value:
        raise ValueError("value normalisation is for a value head, not a Q head")
    value_norm = ValueNormalizer() if norm_value else None

    def critic_head(in_dim: int) -> nn.Module:
        return QHead(in_dim, num_actions) if q_head else ValueHead(in_dim)
    if arch == "mlp":
        in_dim = int(math.prod(obs_shape))
        actor, critic = MLP(in_dim, hidden), MLP(in_dim, hidden)
        return ActorCritic(actor, head_cls(actor.out_dim, num_actions), critic_head(critic.out_dim), critic,
                           value_norm=value_norm)
    if len(obs_shape) != 3:
        raise ValueError(f"{arch} needs image observations [C, H, W], got shape {obs_shape}")
    torso = (NatureCNN(obs_shape, act=cnn_activation) if arch == "nature_cnn"
             else ImpalaResNet(obs_shape, act=cnn_activation))
    return ActorCritic(torso, head_cls(torso.out_dim, num_actions), critic_head(torso.out_dim), value_norm=value_norm)
