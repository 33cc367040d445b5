"""Actor-critic module: torso(s) + policy head + value head.

With ``critic_torso=None`` the torso is shared (Atari CNNs); otherwise actor
and critic have separate torsos (CleanRL's MLP agents).  The interface is
CleanRL's: :meth:`ActorCritic.get_value` and
:meth:`ActorCritic.get_action_and_value`; :meth:`ActorCritic.dist_and_critic`
returns the distribution and the critic output together (IMPALA's learner);
:meth:`ActorCritic.act` is the rollout's step (action, its log-probability,
optionally the value), graph-safe (:func:`agents.heads.sample_action`).

With a ``value_norm`` (:class:`agents.value_norm.ValueNormalizer`, ``--norm-value``) the value
head learns normalised targets and every value the agent returns is de-normalised, ``sigma h + mu``;
``get_action_and_value(..., normalized_value=True)`` returns the head's own output ``h`` instead, what
the value loss compares with normalised targets.  Without one, values are the head's output.

``agent(method, *args)`` (:meth:`ActorCritic.forward`) calls one of the
update's methods by name.  DistributedDataParallel synchronises the gradients
of passes through ``forward`` only, so the update's pass goes through it:
``learner("get_action_and_value", obs, actions)`` where ``learner`` is the
DDP wrapper, or the agent itself in a single-process run (same result as the
method call).  Acting (:meth:`ActorCritic.act`) uses the agent directly.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch
import torch.nn as nn

from agents.heads import sample_action

__all__ = ["ActorCritic"]

FORWARD_METHODS = ("get_action_and_value", "get_value", "dist_and_critic")


class ActorCritic(nn.Module):
    def __init__(self, torso: nn.Module, policy_head: nn.Module, value_head: nn.Module,
                 critic_torso: Optional[nn.Module] = None, value_norm: Optional[nn.Module] = None):
        super().__init__()
        self.torso = torso
        self.critic_torso = critic_torso
        self.policy_head = policy_head
        self.value_head = value_head
        self.value_norm = value_norm  # None registers nothing: the state_dict of an agent without one is unchanged

    def _value(self, x: torch.Tensor, h: Optional[torch.Tensor] = None, normalized: bool = False) -> torch.Tensor:
        """The critic's output on observations ``x``, from the shared torso's features ``h`` where given
        (else computed) or the critic's own torso; de-normalised by ``value_norm`` unless ``normalized``
        (or without one)."""
        if self.critic_torso is not None:
            h = self.critic_torso(x)
        elif h is None:
            h = self.torso(x)
        head = self.value_head(h)
        return head if normalized or self.value_norm is None else self.value_norm.denormalize(head)

    def forward(self, method: str, *args, **kwargs):
        """``self.<method>(*args, **kwargs)`` for ``method`` in :data:`FORWARD_METHODS`: the entry
        point for wrappers that only see ``forward`` (DistributedDataParallel, hooks)."""
        if method not in FORWARD_METHODS:
            raise ValueError(f"ActorCritic.forward: unknown method {method!r}; choose from {FORWARD_METHODS}")
        return getattr(self, method)(*args, **kwargs)

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        """``V(x)``, shape ``[B]``."""
        return self._value(x)

    def get_action_and_value(
        self, x: torch.Tensor, action: Optional[torch.Tensor] = None, normalized_value: bool = False
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample (or score the given) ``action``; returns ``(action, log_prob, entropy, value)``;
        ``normalized_value``: the value head's output as it is, in ``value_norm``'s units (module
        docstring; the same as ``V(x)`` without a ``value_norm``)."""
        h = self.torso(x)
        dist = self.policy_head(h)
        if action is None:
            action = sample_action(dist)
        return action, dist.log_prob(action), dist.entropy(), self._value(x, h, normalized_value)

    def act(self, x: torch.Tensor, with_value: bool = True, noise: Optional[torch.Tensor] = None
            ) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
        """The rollout's step: ``(action, log_prob, value)`` with an action drawn from ``noise``
        (:func:`agents.heads.sample_action`; ``None``: drawn here, as :meth:`get_action_and_value`
        draws for the same generator state); ``value`` is ``None`` unless ``with_value``.  Given the
        noise there is no host synchronisation and no random number, so it can be recorded in a CUDA
        graph."""
        h = self.torso(x)
        dist = self.policy_head(h)
        action = sample_action(dist, noise)
        value = self._value(x, h) if with_value else None
        return action, dist.log_prob(action), value

    def dist_and_critic(self, x: torch.Tensor):
        """``(policy distribution, critic output)`` in one pass: the critic output is ``V(x)``
        ``[B]`` with a value head, ``Q(x, .)`` ``[B, A]`` with a Q head (``make_agent(q_head=True)``)."""
        h = self.torso(x)
        return self.policy_head(h), self._value(x, h)
