"""The PPO update alone, no envs (``bench_trainer.py --cases update-breakout``, ``update-atari-preset``): ms per
update of ``epochs`` x ``minibatches`` steps of random frames through the Nature CNN, in each of
``UPDATE_VARIANTS`` (cuDNN deterministic or timed, channels-last, TF32, bf16 autocast, ``torch.compile``,
a CUDA graph of the minibatch step). The loss and the minibatch step are ``scripts/ppo.py``'s."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Dict

from rltrain.trainer_process import load_trainer

ROOT = Path(__file__).resolve().parents[2]
UPDATE_CASES = {"update-breakout": dict(obs_shape=(4, 84, 84), num_actions=4, minibatch=16384, minibatches=4,
                                        epochs=4),
                # configs/atari.yaml's update: 1024 envs x 32 steps, 4 epochs of 2048-step minibatches
                "update-atari-preset": dict(obs_shape=(4, 84, 84), num_actions=6, minibatch=2048, minibatches=16,
                                            epochs=4)}


@dataclass(frozen=True)
class UpdateVariant:
    """How ``update_microbench`` runs the update: cuDNN deterministic or timed (``cudnn.benchmark``),
    channels-last convolutions (the Nature CNN's own layout switch, ``NatureCNN.channels_last``; the
    trainers' CUDA layout; off: contiguous), ``torch.compile`` of the loss, TF32 matrix products, bf16 autocast,
    the whole minibatch step captured in a CUDA graph (CUDA only: what launching costs at small minibatches)."""

    deterministic: bool = True
    channels_last: bool = False
    compiled: bool = False
    tf32: bool = False
    bf16: bool = False
    graphed: bool = False  # the minibatch step replayed from one CUDA graph (rltrain.cuda_graph.GraphedStep)


UPDATE_VARIANTS = (  # rows: what ran; "(--flag)": the rows the trainers run on CUDA
    ("cuDNN deterministic", UpdateVariant()),
    ("cuDNN deterministic + channels_last (--torch-deterministic)", UpdateVariant(channels_last=True)),
    ("cuDNN timed", UpdateVariant(deterministic=False)),
    ("cuDNN timed + channels_last", UpdateVariant(deterministic=False, channels_last=True)),
    ("cuDNN timed + TF32 matmul", UpdateVariant(deterministic=False, tf32=True)),
    ("cuDNN timed + channels_last + TF32 (--no-torch-deterministic)",
     UpdateVariant(deterministic=False, channels_last=True, tf32=True)),
    ("cuDNN timed + bf16 autocast", UpdateVariant(deterministic=False, bf16=True)),
    ("cuDNN timed + channels_last + bf16 autocast", UpdateVariant(deterministic=False, channels_last=True, bf16=True)),
    ("cuDNN timed + compile", UpdateVariant(deterministic=False, compiled=True)),
    ("cuDNN timed + channels_last + TF32 + CUDA graph (--graph-update)",
     UpdateVariant(deterministic=False, channels_last=True, tf32=True, graphed=True)),
)


def update_microbench(obs_shape, num_actions: int, minibatch: int, minibatches: int, epochs: int,
                      repeats: int = 3, warmup: int = 2) -> Dict[str, Dict]:
    """ms per PPO update (``epochs`` x ``minibatches`` steps of ``minibatch`` random frames through the
    Nature CNN: scripts/ppo.py's loss with configs/atari.yaml's coefficients, backward, clipping, Adam)
    for each of UPDATE_VARIANTS."""
    import torch
    from agents import make_agent
    from rltrain.cuda_graph import GraphedStep, capturable_adam
    ppo = load_trainer("ppo")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    preset = ppo.cli(["--config", str(ROOT / "configs" / "atari.yaml")])  # clip, entropy, value coefficients
    saved = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
             torch.backends.cuda.matmul.allow_tf32)
    out: Dict[str, Dict] = {}
    n = minibatch * minibatches
    gen = torch.Generator().manual_seed(0)
    source = {"obs": torch.randint(0, 256, (n, *obs_shape), dtype=torch.uint8, generator=gen),
              "actions": torch.randint(0, num_actions, (n,), generator=gen),
              "logprobs": -3 * torch.rand(n, generator=gen), "advantages": torch.randn(n, generator=gen),
              "returns": torch.randn(n, generator=gen), "values": torch.randn(n, generator=gen),
              "valid": torch.ones(n)}
    assert set(source) == {*ppo.LOSS_ROWS, "valid"}
    source = {k: x.to(device) for k, x in source.items()}
    for label, v in UPDATE_VARIANTS:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = v.deterministic, not v.deterministic
        torch.backends.cuda.matmul.allow_tf32 = v.tf32
        torch.manual_seed(0)
        agent = make_agent("nature_cnn", obs_shape, True, num_actions)
        agent.torso.channels_last = v.channels_last  # the agent's own layout switch (agents/nature_cnn.py)
        agent = agent.to(device)
        if v.graphed and device.type != "cuda":
            out[label] = {"error": "skipped: CUDA graphs need CUDA"}
            continue
        optimizer = (capturable_adam(agent.parameters(), 2.5e-4, 1e-5, device) if v.graphed else
                     torch.optim.Adam(agent.parameters(), lr=2.5e-4, eps=1e-5, fused=device.type == "cuda"))
        loss_fn = partial(ppo.minibatch_loss, preset, agent)
        step_loss = torch.compile(loss_fn, dynamic=False) if v.compiled else loss_fn

        def autocast_loss(rows, step_loss=step_loss, bf16=v.bf16):
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                return step_loss(rows)
        step = partial(ppo.minibatch_step, preset, agent, optimizer, loss_fn=autocast_loss)
        graphed = GraphedStep(step, agent.parameters(), optimizer, device) if v.graphed else None

        def update():
            for _ in range(epochs):
                for mb in torch.randperm(n, device=device).view(minibatches, minibatch):
                    if graphed is not None:
                        graphed(source, mb)
                    else:
                        step({k: x[mb] for k, x in source.items()})
        try:
            for _ in range(warmup):
                update()
            times = []
            for _ in range(repeats):
                if device.type == "cuda":
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                update()
                if device.type == "cuda":
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            out[label] = {"update_ms": 1e3 * sorted(times)[len(times) // 2], "minibatch": minibatch,
                          "steps": epochs * minibatches}
        except Exception as e:  # noqa: BLE001 -- one failed variant must not lose the others
            out[label] = {"error": f"{type(e).__name__}: {e}"[:500]}
    (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
     torch.backends.cuda.matmul.allow_tf32) = saved
    return out
