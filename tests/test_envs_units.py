"""Unit tests of envs/: construction errors, episode statistics, normalisation."""

import numpy as np
import pytest
import torch

from envs import EpisodeStats, ObsNormalizer, RewardNormalizer, RunningMeanStd, UnknownEnvError, env_family, make_envs
from rltrain.config import ConfigError
from conftest import needs_mujoco


def test_unknown_env_lists_close_matches():
    with pytest.raises(UnknownEnvError, match="Cartpole-v1.*Did you mean: CartPole-v1"):
        make_envs("Cartpole-v1", 2, 0)


def test_num_envs_must_be_positive():
    with pytest.raises(ConfigError, match="num_envs must be >= 1"):
        make_envs("CartPole-v1", 0, 0)


def test_families_and_spaces():
    assert env_family("CartPole-v1") == "classic"
    assert env_family("Breakout-v5") == "atari"
    envs, info = make_envs("Breakout-v5", 2, 0)
    assert info.obs_shape == (4, 84, 84) and info.obs_dtype == np.uint8 and info.discrete


@needs_mujoco
def test_mujoco_family_and_box_actions():
    assert env_family("HalfCheetah-v4") == "mujoco"
    envs, info = make_envs("Hopper-v4", 2, 0)
    assert not info.discrete and info.action_shape == (3,) and info.action_low is not None


def test_episode_stats_time_limit_and_autoreset():
    """Time-limit ends count; the autoreset dummy step is not counted in the length."""
    envs, info = make_envs("CartPole-v1", 3, 0, max_episode_steps=5)
    stats = EpisodeStats(3)
    envs.reset()
    rets, lens = [], []
    for _ in range(30):
        obs, r, term, trunc, inf = envs.step(np.zeros(3, dtype=np.int32) + np.arange(3) % 2)
        er, el = stats.step(r, term, trunc, inf)
        rets += er.tolist()
        lens += el.tolist()
    assert len(lens) >= 9 and set(lens) <= {1, 2, 3, 4, 5}
    assert 5 in lens  # some end by time limit
    assert rets == [float(x) for x in lens]  # CartPole: reward 1 per real step


def test_episode_stats_episodic_life():
    """Atari: a life loss is a learning 'terminated' but not an episode end."""
    stats = EpisodeStats(1)
    t, f = np.array([True]), np.array([False])
    info = lambda lives, over, raw: {"lives": np.array([lives]), "terminated": np.array([over]), "reward": np.array([raw])}
    assert stats.step(np.array([1.0]), f, f, info(2, 0, 4.0))[0].size == 0
    assert stats.step(np.array([0.0]), t, f, info(1, 0, 0.0))[0].size == 0  # life lost
    assert stats.step(np.array([0.0]), f, f, info(1, 0, 0.0))[0].size == 0  # dummy
    r, l = stats.step(np.array([1.0]), t, f, info(0, 1, 7.0))  # game over
    assert r.tolist() == [11.0] and l.tolist() == [3]


def test_running_mean_std_matches_numpy():
    x = torch.randn(1000, 3, dtype=torch.float64) * 3 + 1
    rms = RunningMeanStd((3,))
    for chunk in x.split(100):
        rms.update(chunk)
    assert torch.allclose(rms.mean, x.mean(0), atol=1e-3)
    assert torch.allclose(rms.var, x.var(0, unbiased=False), rtol=1e-2)


def test_normalizers():
    norm = ObsNormalizer((2,), "cpu")
    for _ in range(50):
        out = norm(torch.randn(64, 2) * 5 + 3)
    assert out.dtype == torch.float32 and out.abs().max() <= 10
    assert abs(out.mean().item()) < 0.5
    state = norm.state_dict()
    norm2 = ObsNormalizer((2,), "cpu")
    norm2.load_state_dict(state)
    assert torch.equal(norm2.rms.mean, norm.rms.mean)
    rn = RewardNormalizer(4, "cpu", gamma=0.9)
    done = torch.tensor([False, False, True, False])
    r = rn(torch.full((4,), 100.0), done)
    assert r.shape == (4,) and rn.ret[2] == 0 and rn.ret[0] == 100.0
