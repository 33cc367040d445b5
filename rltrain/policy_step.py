"""The rollout's batched policy step on fixed buffers, replayed from a CUDA graph.

:class:`PolicyStep` owns static inputs ``obs`` ``[B, *obs_shape]`` and ``noise`` ``[B, A]``; each call
draws fresh noise (one eager launch, :func:`agents.heads.draw_noise`, from the default generator or
``generator``) and runs ``agent.act(obs, noise=noise)`` -- torso, head, the action drawn from the noise
(:func:`agents.heads.sample_action`), its log-probability and optionally the value -- and the action the
envs get (clipped to the bounds for continuous actions, ``int32`` for discrete ones).  On CUDA all but
the noise is one graph replay (:class:`rltrain.cuda_graph.CapturedCall`); on the CPU it runs eagerly.
With the same generator state the actions are the agent's own
(``agent.get_action_and_value``).  The noise stays outside the recording: random numbers drawn inside
a graph take their offsets from a device tensor of the generator that every replay rewrites first, so
replays of two graphs on two streams (actor threads) could read each other's offsets.  The outputs are overwritten
by the next call.  ``record(obs, action, logprob, value)`` runs inside the step after the forward pass,
so writes into rollout storage cost no launch of their own.

:meth:`PolicyStep.actions_to_host` copies the env actions into a pinned host buffer and waits for that
copy: the one synchronisation of a rollout step.  The host buffer is reused by the next call, which is
safe because EnvPool has taken the actions in by then (the envs that got them have been received).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn

from agents.heads import draw_noise
from rltrain.cuda_graph import CapturedCall

__all__ = ["PolicyStep"]

Record = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, Optional[torch.Tensor]], None]


class PolicyStep:
    """``step()`` acts on ``step.obs``; then ``step.action``, ``step.logprob``, ``step.value`` (``None``
    without ``with_value``) and ``step.env_action`` hold the results.  See the module docstring."""

    def __init__(self, agent: nn.Module, batch: int, obs_shape: Sequence[int], obs_dtype: torch.dtype,
                 device: torch.device | str, *, discrete: bool, num_actions: int,
                 action_low: Optional[np.ndarray] = None, action_high: Optional[np.ndarray] = None,
                 with_value: bool = True, record: Optional[Record] = None, capture: bool = True,
                 generator: Optional[torch.Generator] = None):
        self.agent, self.discrete, self.with_value, self.record = agent, discrete, with_value, record
        self.device, self.generator = torch.device(device), generator
        self.obs = torch.zeros((batch, *obs_shape), dtype=obs_dtype, device=self.device)
        self.noise = torch.full((batch, num_actions), 0.5, dtype=torch.float32, device=self.device)
        self._low = self._high = None
        if not discrete:
            self._low = torch.as_tensor(action_low, dtype=torch.float32, device=self.device)
            self._high = torch.as_tensor(action_high, dtype=torch.float32, device=self.device)
        self.action = self.logprob = self.value = self.env_action = None
        self._host: Optional[torch.Tensor] = None  # pinned copy of env_action (CUDA)
        self._copied = torch.cuda.Event() if self.device.type == "cuda" else None
        self._call = CapturedCall(self._forward, self.device, enabled=capture)
        if self._call.captured:
            self.action, self.logprob, self.value, self.env_action = self._call.result

    @property
    def captured(self) -> bool:
        """Whether calls replay a CUDA graph."""
        return self._call.captured

    def _forward(self):
        with torch.no_grad():
            action, logprob, value = self.agent.act(self.obs, self.with_value, noise=self.noise)
            if self.discrete:
                env_action = action.to(torch.int32)
            else:
                env_action = torch.maximum(torch.minimum(action, self._high), self._low)
            if self.record is not None:
                self.record(self.obs, action, logprob, value)
        return action, logprob, value, env_action

    def __call__(self) -> None:
        draw_noise(self.noise, self.discrete, self.generator)
        self.action, self.logprob, self.value, self.env_action = self._call()

    def actions_to_host(self) -> np.ndarray:
        """The env actions of the last call as a numpy array (valid until the next call)."""
        if self._copied is None:
            return self.env_action.numpy()
        if self._host is None or self._host.shape != self.env_action.shape:
            self._host = torch.empty(self.env_action.shape, dtype=self.env_action.dtype, pin_memory=True)
        self._host.copy_(self.env_action, non_blocking=True)
        self._copied.record()
        self._copied.synchronize()
        return self._host.numpy()
