"""Atari frame stacking on the device: EnvPool sends only each step's newest frame.

EnvPool's Atari envs with ``stack_num=k`` return ``[k, H, W]`` observations, ``k - 1`` of whose frames
were already sent the step before.  Built with ``stack_num=1`` (:func:`envs.make.make_envs` with
``stack_on_device=True``) they return the newest frame ``[1, H, W]`` only, and :class:`FrameStack` rebuilds
on the device, bit for bit, what ``stack_num=k`` would have returned (tested against EnvPool in
``tests/test_frame_stack.py``):

* a normal step shifts the stack one frame towards the front and appends the new frame;
* an observation that starts a game -- ``reset()``, the autoreset step after a game over or a time-limit
  truncation, i.e. every observation whose ``info["elapsed_step"]`` is 0 -- fills all ``k`` slots with it;
* with ``episodic_life=True`` a lost life is ``terminated`` for the agent, but the game goes on: the
  autoreset step after it plays the no-ops and FIRE of EnvPool's reset and then only SHIFTS, like a
  normal step.  Should the game end inside those no-ops, EnvPool restarts it and fills the stack; the
  restarted game's lives exceed the lives the life-losing step reported, which is how
  :meth:`FrameStack.starts` tells (the episode-step counter is not reset then).

The host decides which envs start a game (:meth:`FrameStack.starts`, from EnvPool's ``info``); the
device applies it (:meth:`FrameStack.push`), in place and without allocating, so the stack may be the
static input of a captured CUDA graph.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch

__all__ = ["FrameStack"]


class FrameStack:
    """The stacks ``[N, k, H, W]`` of ``N`` envs, kept in ``stack`` (updated in place; allocated if None).

    Per step: ``push(frame, starts, env_ids, out)`` with the newest frames ``[B, 1, H, W]`` of the ``B``
    envs ``env_ids`` (a device ``long`` tensor; None: all ``N`` in order, and the result is ``stack``
    itself) and ``starts`` ``[B]`` (bool, on the device) from :meth:`starts`."""

    def __init__(self, num_envs: int, obs_shape, device: torch.device, dtype: torch.dtype = torch.uint8,
                 stack: Optional[torch.Tensor] = None):
        shape = (num_envs, *obs_shape)
        if stack is not None and (tuple(stack.shape) != shape or stack.dtype != dtype):
            raise ValueError(f"stack must be a {dtype} tensor of shape {shape}, got {stack.dtype} {tuple(stack.shape)}")
        self.stack = stack if stack is not None else torch.zeros(shape, dtype=dtype, device=device)
        self._older = torch.empty((num_envs, obs_shape[0] - 1, *obs_shape[1:]), dtype=dtype, device=device)
        self._lives = np.zeros(num_envs, dtype=np.int64)  # lives each env reported last (host)
        self._ended = np.zeros(num_envs, dtype=bool)      # its last step ended an episode for the agent

    def starts(self, terminated: np.ndarray, truncated: np.ndarray, info: dict,
               env_ids: Optional[np.ndarray] = None) -> np.ndarray:
        """Host bool ``[B]``: which of this step's observations start a game (fill the stack).  Call once per
        step (with ``reset()``'s ``info`` and all-False ``terminated`` / ``truncated`` for the first)."""
        ids = slice(None) if env_ids is None else env_ids
        lives = np.asarray(info["lives"])
        out = (np.asarray(info["elapsed_step"]) == 0) | (self._ended[ids] & (lives > self._lives[ids]))
        self._lives[ids] = lives
        self._ended[ids] = np.asarray(terminated) | np.asarray(truncated)
        return out

    def push(self, frame: torch.Tensor, starts: torch.Tensor, env_ids: Optional[torch.Tensor] = None,
             out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Stack this step's newest frames; returns the ``[B, k, H, W]`` stacks (``out``, or ``stack``)."""
        if env_ids is None:
            work, older = self.stack, self._older
        elif out is None:
            raise ValueError("push with env_ids needs out, a [B, k, H, W] tensor for the stacks")
        else:
            work, older = out, self._older[: out.shape[0]]
            torch.index_select(self.stack, 0, env_ids, out=work)
        older.copy_(work[:, 1:])
        work[:, :-1].copy_(older)
        work[:, -1:].copy_(frame)
        torch.where(starts.view(-1, 1, 1, 1), frame, work, out=work)  # a new game: k copies of its frame
        if env_ids is not None:
            self.stack.index_copy_(0, env_ids, work)
        return work
