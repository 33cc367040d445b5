"""A stand-in trainer for the distributed tests: PPO's update of an ActorCritic MLP on a fixed
batch, with the loss of ``scripts/ppo.py`` (``minibatch_loss``), through :mod:`rltrain.distributed`
the way the trainers use it.

    python tests/dist_worker.py --out DIR                                  # one process, whole batch
    python -m torch.distributed.run --standalone --nproc-per-node 2 tests/dist_worker.py --out DIR

Every rank builds the same global batch (obs, actions, old log-probs, advantages, returns and a
valid mask whose count differs between the halves) and takes rows ``rank * L : (rank + 1) * L``.
Each step is one epoch of two minibatches (rows ``k, k + 2, ...`` of each rank's share, so their
union over ranks is the minibatch of one process on the whole batch) with global advantage
normalisation and global loss denominators; a running mean/std of the observations is updated
with the rank's rows and merged over ranks.  Each step also draws one number from the rank's
torch generator (the draw does not touch the update) so that a resumed run can show it continues
each rank's own stream.

Writes ``DIR/rank{r}.pt``: the flat parameters after every optimizer step, the draws, the running
statistics after every step, the phase seconds, the seeds.  ``--fail MODE`` (kill, raise, nan,
hang) makes ``--fail-rank`` fail at ``--fail-step``; ``--stop-at S --ckpt PATH`` writes a
checkpoint after step S and stops; ``--resume PATH`` continues from one.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import signal
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents import make_agent  # noqa: E402
from envs.normalize import RunningMeanStd  # noqa: E402
from rltrain.config import ConfigError  # noqa: E402
from rltrain.distributed import distributed_context, end_worker, record  # noqa: E402
from rltrain.seeding import get_rng_state, seed_everything, set_rng_state  # noqa: E402
from rltrain.timers import PhaseTimer  # noqa: E402

BATCH, OBS_DIM, NUM_ACTIONS, NUM_MINIBATCHES = 64, 4, 2, 2


def global_batch() -> dict:
    """The same batch on every rank (its own generator); the first half has fewer valid rows."""
    g = torch.Generator().manual_seed(1234)
    half = BATCH // 2
    valid = torch.cat([torch.rand(half, generator=g) > 0.6, torch.rand(half, generator=g) > 0.1])
    return {
        "obs": torch.randn(BATCH, OBS_DIM, generator=g) * 2 + 1,
        "actions": torch.randint(0, NUM_ACTIONS, (BATCH,), generator=g),
        "logprobs": -torch.rand(BATCH, generator=g) - 0.3,
        "advantages": torch.randn(BATCH, generator=g) * 3 + 0.5,
        "returns": torch.randn(BATCH, generator=g),
        "values": torch.randn(BATCH, generator=g) * 0.5,
        "valid": valid,
    }


def load_trainer(name: str):
    """``scripts/<name>.py`` as a module: the update's loss is the trainer's own."""
    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_script", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


ppo = load_trainer("ppo")
PPO_ARGS = ppo.Args(clip_coef=0.2, vf_coef=0.5, ent_coef=0.01)  # the loss's coefficients; norm_adv, clip_vloss on


def run(a: argparse.Namespace) -> None:
    with distributed_context(cuda=a.cuda, timeout_s=a.timeout_s) as ctx:
        W, r = ctx.world_size, ctx.rank
        local = ctx.local_num_envs(BATCH, flag="batch")
        seed_everything(ctx.rank_seed(a.seed))
        b = {k: v[r * local:(r + 1) * local].to(ctx.device) for k, v in global_batch().items()}
        if a.fail == "nan" and r == a.fail_rank:
            b["obs"][0] = float("nan")  # the loss becomes NaN at --fail-step only (see below)
        agent = make_agent("mlp", (OBS_DIM,), True, NUM_ACTIONS).to(ctx.device)
        learner = ctx.wrap_model(agent)
        optimizer = torch.optim.Adam(agent.parameters(), lr=3e-3, eps=1e-5)
        rms = RunningMeanStd((OBS_DIM,), ctx.device)
        start = 0
        if a.resume:
            shared, mine = ctx.load_checkpoint(a.resume)
            agent.load_state_dict(shared["model"])
            optimizer.load_state_dict(shared["optimizer"])
            set_rng_state(mine["rng"])
            rms.load_state_dict(mine["rms"])
            start = shared["step"]
        obs_sync = ctx.running_stats_sync(rms)
        timer = PhaseTimer(ctx.device)
        # rows k, k + K, k + 2K, ... of this rank's share: minibatch k of all ranks = minibatch k of one process
        minibatches = torch.arange(local, device=ctx.device).view(-1, NUM_MINIBATCHES).T.contiguous()
        valid = b["valid"].float()
        moments = ctx.masked_moments(b["advantages"], valid, index=minibatches).loss_terms()  # [K, 3]
        out = {"params": [], "draws": [], "rms": [], "world_size": W,
               "rank_seed": ctx.rank_seed(a.seed), "env_seed": ctx.env_seed(a.seed, local)}

        for step in range(start + 1, a.steps + 1):
            out["draws"].append(torch.rand(()).item())
            rms.update(b["obs"][b["valid"]].nan_to_num(0.0))
            obs_sync()
            out["rms"].append((rms.mean.cpu().clone(), rms.var.cpu().clone(), rms.count.item()))
            for k, mb in enumerate(minibatches):
                if step == a.fail_step and k == 0 and r == a.fail_rank:
                    if a.fail == "kill":
                        os.kill(os.getpid(), signal.SIGKILL)
                    elif a.fail == "raise":
                        raise RuntimeError(f"injected failure on rank {r} at step {step}")
                    elif a.fail == "hang":
                        time.sleep(3600)
                with timer.phase("update/forward"):
                    obs = b["obs"] if a.fail == "nan" and step == a.fail_step else b["obs"].nan_to_num(0.0)
                    rows = {key: x[mb] for key, x in ppo.loss_source({**b, "obs": obs}, valid).items()}
                    loss, _, _ = ppo.minibatch_loss(PPO_ARGS, learner, rows, moments[k])
                finite = ctx.gather_scalars({"finite": float(torch.isfinite(loss))})["finite"]
                if not all(finite):
                    bad = [i for i, f in enumerate(finite) if not f]
                    raise FloatingPointError(f"non-finite loss at step {step} on rank(s) {bad}")
                optimizer.zero_grad(set_to_none=True)
                with ctx.timed_backward(timer):
                    loss.backward()
                torch.nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                optimizer.step()
                out["params"].append(torch.nn.utils.parameters_to_vector(agent.parameters()).detach().cpu())
            if step == a.stop_at:
                ctx.save_checkpoint(a.ckpt, {"model": agent.state_dict(), "optimizer": optimizer.state_dict(),
                                             "step": step} if ctx.is_main else None,
                                    {"rng": get_rng_state(), "rms": rms.state_dict()})
                break
        out["phases"] = timer.read()
        out["reduced"] = ctx.reduce_scalars({"rows": float(local), "rank": float(r), f"only_on_rank{r}": 1.0},
                                            ops={"rows": "sum", "rank": "max"})
        Path(a.out).mkdir(parents=True, exist_ok=True)
        torch.save(out, Path(a.out) / f"rank{r}.pt")
        print(f"rank {r} of {W} done", flush=True)
    end_worker(ctx)  # as the trainers' run_main does


@record
def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--cuda", action="store_true")
    p.add_argument("--timeout-s", type=float, default=60.0)
    p.add_argument("--fail", choices=["kill", "raise", "nan", "hang"])
    p.add_argument("--fail-rank", type=int, default=1)
    p.add_argument("--fail-step", type=int, default=2)
    p.add_argument("--stop-at", type=int, default=0)
    p.add_argument("--ckpt")
    p.add_argument("--resume")
    try:
        run(p.parse_args(argv))
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
