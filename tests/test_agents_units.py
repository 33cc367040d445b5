"""Unit tests of agents/: output shapes and log-prob/entropy conventions."""

import pytest
import torch

from agents import make_agent


@pytest.mark.parametrize("arch,obs_shape,obs_dtype", [
    ("mlp", (4,), torch.float32),
    ("auto", (4, 84, 84), torch.uint8),
    ("impala_resnet", (4, 84, 84), torch.uint8),
])
def test_discrete_agents(arch, obs_shape, obs_dtype):
    agent = make_agent(arch, obs_shape, discrete=True, num_actions=6)
    x = torch.randint(0, 255, (3, *obs_shape)).to(obs_dtype)
    a, logp, ent, v = agent.get_action_and_value(x)
    assert a.shape == (3,) and logp.shape == (3,) and ent.shape == (3,) and v.shape == (3,)
    _, logp2, _, _ = agent.get_action_and_value(x, a)
    assert torch.allclose(logp, logp2)
    assert agent.get_value(x).shape == (3,)


def test_gaussian_agent():
    agent = make_agent("auto", (17,), discrete=False, num_actions=6)
    a, logp, ent, v = agent.get_action_and_value(torch.randn(5, 17))
    assert a.shape == (5, 6) and logp.shape == (5,) and ent.shape == (5,) and v.shape == (5,)


def test_bad_arch():
    with pytest.raises(ValueError):
        make_agent("transformer", (4,), True, 2)
    with pytest.raises(ValueError):
        make_agent("nature_cnn", (4,), True, 2)
