"""Unit tests of agents/: output shapes, log-prob/entropy conventions, the Nature CNN's memory layout."""

import copy

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


# ---------------------------------------------------------------------------- Nature CNN memory layout
FRAMES = (4, 84, 84)


def nature_cnn(seed: int, channels_last, device: str = "cpu"):
    torch.manual_seed(seed)
    agent = make_agent("nature_cnn", FRAMES, discrete=True, num_actions=6)
    agent.torso.channels_last = channels_last
    return agent.to(device)


def conv_weights(agent):
    return [m.weight for m in agent.torso.conv if isinstance(m, torch.nn.Conv2d)]


def is_channels_last(agent) -> bool:
    weights = conv_weights(agent)
    if all(w.is_contiguous(memory_format=torch.channels_last) and not w.is_contiguous() for w in weights):
        return True
    assert all(w.is_contiguous() for w in weights), [w.stride() for w in weights]
    return False


def scored(agent, frames, actions):
    """``(log_prob, entropy, value)`` of the given actions."""
    device = next(agent.parameters()).device
    return agent.get_action_and_value(frames.to(device), actions.to(device))[1:]


def random_frames(n: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randint(0, 256, (n, *FRAMES), dtype=torch.uint8, generator=gen),
            torch.randint(0, 6, (n,), generator=gen))


def test_nature_cnn_is_contiguous_on_the_cpu_and_channels_last_on_request():
    assert not is_channels_last(nature_cnn(0, None))
    agent = nature_cnn(0, True)
    assert is_channels_last(agent)
    agent.torso.channels_last = None
    assert not is_channels_last(agent.cpu())  # the layout follows the device when the module moves


def test_nature_cnn_channels_last_gives_the_same_outputs_and_gradients():
    flat, nhwc = nature_cnn(0, False), nature_cnn(0, True)
    frames, actions = random_frames(5)
    outs = [scored(agent, frames, actions) for agent in (flat, nhwc)]
    for a, b in zip(*outs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    for (logp, ent, value) in outs:
        (logp.sum() + ent.sum() + value.square().sum()).backward()
    for p, q in zip(flat.parameters(), nhwc.parameters()):
        assert q.grad.stride() == q.stride()  # what fused Adam's flat walk over weight and gradient needs
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("saved_channels_last", [True, False])
def test_nature_cnn_checkpoint_loads_into_the_other_layout(tmp_path, saved_channels_last):
    saved = nature_cnn(1, saved_channels_last)
    torch.save(saved.state_dict(), tmp_path / "model.pt")
    loaded = nature_cnn(2, not saved_channels_last)
    loaded.load_state_dict(torch.load(tmp_path / "model.pt"))
    assert is_channels_last(loaded) is not saved_channels_last  # the values came in, the layout stayed
    frames, actions = random_frames(4, seed=3)
    for a, b in zip(scored(saved, frames, actions), scored(loaded, frames, actions)):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: the default channels-last layout")
@pytest.mark.parametrize("deterministic", [True, False])
def test_nature_cnn_on_cuda_runs_channels_last_as_on_the_cpu(fp32_cuda, deterministic):
    """Both cuDNN modes (--torch-deterministic and not) have channels-last kernels giving the CPU's values."""
    saved = torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = deterministic, not deterministic
    try:
        cpu, gpu = nature_cnn(0, None), nature_cnn(0, None, "cuda")
        assert is_channels_last(gpu) and not is_channels_last(copy.deepcopy(gpu).cpu())
        frames, actions = random_frames(64)
        outs = [scored(agent, frames, actions) for agent in (cpu, gpu)]
        for a, b in zip(*outs):
            torch.testing.assert_close(a, b.cpu(), rtol=1e-4, atol=1e-4)
        for (logp, ent, value) in outs:
            (logp.sum() + ent.sum() + value.square().sum()).backward()
        for p, q in zip(cpu.parameters(), gpu.parameters()):
            assert q.grad.stride() == q.stride()
            torch.testing.assert_close(p.grad, q.grad.cpu(), rtol=1e-3, atol=1e-4)
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: CUDA graphs")
def test_a_cuda_graph_of_the_channels_last_nature_cnn_sees_in_place_updates(fp32_cuda):
    """The rollout's recording: a contiguous uint8 input buffer written in place, channels-last weights
    updated in place by fused Adam; a replay gives what an eager call gives."""
    from rltrain.cuda_graph import CapturedCall

    gpu = nature_cnn(0, None, "cuda")
    static = torch.zeros((64, *FRAMES), dtype=torch.uint8, device="cuda")
    with torch.no_grad():
        call = CapturedCall(lambda: gpu.get_value(static), "cuda")
    assert call.captured
    frames, _ = random_frames(64)
    optimizer = torch.optim.Adam(gpu.parameters(), lr=1e-2, fused=True)
    gpu.get_value(frames.cuda()).square().sum().backward()
    optimizer.step()
    other, _ = random_frames(64, seed=1)
    static.copy_(other)
    with torch.no_grad():
        torch.testing.assert_close(call(), gpu.get_value(other.cuda()), rtol=1e-5, atol=1e-5)
