"""envs.frame_stack.FrameStack against EnvPool's own stacking: side by side, same seed, same actions.

A pool built with ``stack_num=4`` is the reference; a pool built by ``make_envs(..., stack_on_device=True)``
(EnvPool ``stack_num=1``) feeds :class:`FrameStack`, whose stacks must equal the reference bit for bit
through resets, game overs, time-limit truncations and episodic-life life losses.
"""

import numpy as np
import pytest
import torch

from envs import make_envs
from envs.frame_stack import FrameStack

CUDA = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def _pair(env_id, num_envs, seed, batch_size=None, **kwargs):
    ref, ref_info = make_envs(env_id, num_envs, seed, num_threads=2, **kwargs)
    new, info = make_envs(env_id, num_envs, seed, num_threads=2, batch_size=batch_size, stack_on_device=True, **kwargs)
    assert info.stack_on_device and info.obs_shape == ref_info.obs_shape == (4, 84, 84)
    return ref, new, info


@pytest.mark.parametrize("env_id,steps,max_episode_steps,device", [
    ("Breakout-v5", 1000, 150, "cpu"),  # random play: a life lost every ~45 steps, games over, truncations
    ("Pong-v5", 300, 60, "cpu"),        # no lives: every episode end is a truncation here
    pytest.param("Breakout-v5", 400, 100, "cuda", marks=CUDA),
])
def test_device_stacks_equal_envpool_stacks(env_id, steps, max_episode_steps, device):
    N = 8
    ref, new, info = _pair(env_id, N, 3, max_episode_steps=max_episode_steps)
    stacker = FrameStack(N, info.obs_shape, torch.device(device))
    frame = torch.zeros((N, 1, 84, 84), dtype=torch.uint8, device=device)
    expected, _ = ref.reset()
    obs, reset_info = new.reset()
    assert obs.shape == (N, 1, 84, 84)
    no = np.zeros(N, bool)
    starts = stacker.starts(no, no, reset_info)
    rng = np.random.default_rng(0)
    seen = dict(life_losses=0, game_overs=0, truncations=0)
    for t in range(steps):
        frame.copy_(torch.from_numpy(obs))
        got = stacker.push(frame, torch.from_numpy(starts).to(device))
        assert got.data_ptr() == stacker.stack.data_ptr()
        assert torch.equal(got.cpu(), torch.from_numpy(expected)), f"step {t}, envs {np.flatnonzero(starts)} start"
        action = rng.integers(0, info.num_actions, N).astype(np.int32)
        expected, r_ref, term_ref, trunc_ref, info_ref = ref.step(action)
        obs, r, term, trunc, step_info = new.step(action)
        assert np.array_equal(term, term_ref) and np.array_equal(trunc, trunc_ref) and np.array_equal(r, r_ref)
        starts = stacker.starts(term, trunc, step_info)
        game_over = step_info["terminated"] > 0
        seen["life_losses"] += int((term & ~game_over).sum())
        seen["game_overs"] += int((term & game_over).sum())
        seen["truncations"] += int(trunc.sum())
    assert seen["truncations"] > 0, seen
    if env_id == "Breakout-v5" and device == "cpu":
        assert seen["life_losses"] >= 50 and seen["game_overs"] > 0, seen


def test_async_batches_stack_by_env_id():
    """EnvPool's async batches (``batch_size < num_envs``, envs in completion order): each env's stacks
    equal those of a synchronous ``stack_num=4`` pool that took the same actions."""
    N, B, S = 8, 3, 300
    ref, new, info = _pair("Breakout-v5", N, 5, batch_size=B, max_episode_steps=80)
    actions = np.random.default_rng(1).integers(0, info.num_actions, (S, N)).astype(np.int32)
    expected = [ref.reset()[0]] + [ref.step(actions[t])[0] for t in range(S - 1)]
    stacker = FrameStack(N, info.obs_shape, torch.device("cpu"))
    out = torch.zeros((B, *info.obs_shape), dtype=torch.uint8)
    count = np.zeros(N, dtype=np.int64)
    new.async_reset()
    checked = 0
    while True:
        obs, _, term, trunc, step_info = new.recv()
        ids = step_info["env_id"]
        starts = stacker.starts(term, trunc, step_info, env_ids=ids)
        got = stacker.push(torch.from_numpy(obs), torch.from_numpy(starts), torch.from_numpy(ids.astype(np.int64)), out)
        for j, n in enumerate(ids):
            assert torch.equal(got[j], torch.from_numpy(expected[count[n]][n])), (n, count[n])
        checked += len(ids)
        if count[ids].max() == S - 1:
            break
        new.send(actions[count[ids], ids], ids)
        count[ids] += 1
    assert checked > 2 * S and (count > 80).all()  # every env went past its first truncation


def test_only_stacked_atari_pools_send_single_frames():
    envs, info = make_envs("CartPole-v1", 2, 0, stack_on_device=True)
    assert not info.stack_on_device and info.obs_shape == (4,) and envs.reset()[0].shape == (2, 4)
    envs, info = make_envs("Breakout-v5", 2, 0)  # the default: EnvPool stacks (evaluation, benchmarks)
    assert not info.stack_on_device and envs.reset()[0].shape == (2, 4, 84, 84)
    envs, info = make_envs("Breakout-v5", 2, 0, stack_on_device=True, stack_num=2)
    assert info.stack_on_device and info.obs_shape == (2, 84, 84) and envs.reset()[0].shape == (2, 1, 84, 84)


def test_stack_argument_is_checked():
    with pytest.raises(ValueError, match="stack must be"):
        FrameStack(4, (4, 84, 84), torch.device("cpu"), stack=torch.zeros((4, 3, 84, 84), dtype=torch.uint8))
    with pytest.raises(ValueError, match="needs out"):
        FrameStack(4, (4, 84, 84), torch.device("cpu")).push(torch.zeros((2, 1, 84, 84), dtype=torch.uint8),
                                                             torch.ones(2, dtype=torch.bool), torch.tensor([0, 2]))
