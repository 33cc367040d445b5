"""PPO on EnvPool with fused GAE and per-phase timers (CleanRL-style, one file).

    python scripts/ppo.py                                   # CartPole-v1, solves on a 2-core CPU
    python scripts/ppo.py --config configs/atari.yaml --env-id Breakout-v5 --num-envs 4096
    python scripts/ppo.py --config configs/mujoco.yaml --env-id HalfCheetah-v4
    python scripts/ppo.py --resume runs/<run>/checkpoints/latest.pt

Reads top to bottom: args, env, agent, rollout loop, GAE, update.  Shared
parts live in the packages: networks in ``agents/``, EnvPool construction,
episode statistics and normalisation in ``envs/``, timers, logging,
checkpointing and seeding in ``rltrain/``.  See ``docs/ppo.md``.

Next-step autoreset (EnvPool / Gymnasium 1.x): after an episode ends at step
t, the obs returned is the final obs, so ``V(obs_{t+1})`` is the truncation
bootstrap; the step t+1 is a dummy (action ignored, reward 0) and is masked
out of the loss through ``buf.valid``.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout too

from agents import make_agent  # noqa: E402
from envs import EpisodeStats, ObsNormalizer, RewardNormalizer, make_envs, spec_info  # noqa: E402
from envs.synthetic import fill_rollout  # noqa: E402
from rltrain.checkpoint import load_checkpoint, save_checkpoint  # noqa: E402
from rltrain.config import ConfigError, ExperimentArgs, parse_args  # noqa: E402
from rltrain.credit import CreditAssignment, CreditMismatchError, targets_due  # noqa: E402
from rltrain.logger import Logger  # noqa: E402
from rltrain.rollout import HostToDevice, RolloutBuffer, minibatch_indices  # noqa: E402
from rltrain.runtime import make_run_dir, select_device, set_torch_threads  # noqa: E402
from rltrain.seeding import get_rng_state, seed_everything, set_rng_state  # noqa: E402
from rltrain.timers import PhaseTable, PhaseTimer, group_totals  # noqa: E402


@dataclass
class Args(ExperimentArgs):
    """PPO on EnvPool.  Flags override ``--config`` presets, which override these defaults."""

    exp_name: str = "ppo"
    """name of this experiment (part of the run folder name)"""
    # --- environment ---
    env_id: str = "CartPole-v1"
    """EnvPool task id (CartPole-v1, Breakout-v5, HalfCheetah-v4, ...)"""
    num_envs: int = 8
    """number of parallel environments"""
    num_threads: int = 0
    """EnvPool worker threads (0: one per core)"""
    torch_threads: int = 0
    """torch intra-op threads (0: 1 on CUDA, half the cores on CPU)"""
    norm_obs: bool = False
    """normalise observations with running mean/std (on tensors)"""
    norm_reward: bool = False
    """scale rewards by the running std of the discounted return (on tensors)"""
    # --- algorithm ---
    agent: Literal["auto", "mlp", "nature_cnn", "impala_resnet"] = "auto"
    """network: auto = nature_cnn for images, mlp otherwise"""
    total_timesteps: int = 300_000
    """total environment steps (counting all envs)"""
    learning_rate: float = 2.5e-3
    """Adam learning rate"""
    anneal_lr: bool = True
    """linearly anneal the learning rate to 0"""
    num_steps: int = 128
    """steps per environment per rollout (T)"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    num_minibatches: int = 4
    """minibatches per epoch (must divide num_envs * num_steps)"""
    update_epochs: int = 4
    """epochs over the rollout per update"""
    norm_adv: bool = True
    """normalise advantages per minibatch"""
    clip_coef: float = 0.2
    """surrogate clipping coefficient"""
    clip_vloss: bool = True
    """clip the value loss as in the PPO paper's implementation"""
    ent_coef: float = 0.0
    """entropy bonus coefficient"""
    vf_coef: float = 0.5
    """value loss coefficient"""
    max_grad_norm: float = 0.5
    """gradient clipping norm"""
    target_kl: Optional[float] = None
    """stop the epochs early above this approx KL (costs one sync per epoch)"""
    ca_backend: str = "auto"
    """GAE implementation. triton: the fused kernel API (on CPU it runs its PyTorch path); captured: the fused
    kernel replayed from a CUDA graph; compile / loop / sequential: the benchmark's baselines; auto: triton,
    or loop on CPU under TRITON_INTERPRET=1. Several, comma-separated (loop,compile,triton), take turns by iteration"""
    ca_shadow_every: int = 50
    """every M iterations also time --ca-shadow-backend on the same batch (not used for the update) and log
    perf/ca_kernel_speedup, perf/ca_share, perf/amdahl_predicted_speedup (0: never)"""
    ca_shadow_backend: str = "loop"
    """the baseline that --ca-shadow-every times"""
    advantage_recompute: Literal["once", "epoch", "minibatch"] = "once"
    """GAE once with the rollout's values, or again with the current critic before every epoch / minibatch"""
    hidden_sizes: Tuple[int, ...] = (64, 64)
    """hidden layer sizes of the MLP agent's actor and critic torsos"""
    synthetic: bool = False
    """no environments: learn every iteration from one random rollout (for timing studies)"""


class NonFiniteLossError(RuntimeError):
    """The loss became NaN/inf; training stops, the last checkpoint is kept."""


def check_args(args: Args) -> None:
    """Reject bad input with a user-facing ConfigError."""
    if args.num_envs < 1:
        raise ConfigError(f"--num-envs must be >= 1, got {args.num_envs}")
    if args.num_steps < 1 or args.num_minibatches < 1 or args.update_epochs < 1:
        raise ConfigError("--num-steps, --num-minibatches and --update-epochs must be >= 1")
    batch = args.num_envs * args.num_steps
    if batch % args.num_minibatches:
        raise ConfigError(f"--num-minibatches {args.num_minibatches} does not divide the batch size "
                          f"num_envs * num_steps = {batch}; the minibatch size must divide the batch")
    if args.total_timesteps < batch:
        raise ConfigError(f"--total-timesteps {args.total_timesteps} is smaller than one batch ({batch})")


def masked_mean(x: torch.Tensor, mask: torch.Tensor, denom: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / denom


def main(args: Args) -> dict:
    check_args(args)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    device = select_device(args.cuda)
    set_torch_threads(args.torch_threads, device)
    seed_everything(args.seed, args.torch_deterministic)
    timer = PhaseTimer(device)
    credit = CreditAssignment(args.ca_backend, device, timer, "ca", shadow=args.ca_shadow_backend,
                              shadow_every=args.ca_shadow_every)

    # ---------------------------------------------------------------- env
    if args.synthetic:  # no environments: one random rollout, filled in below
        envs, info = None, spec_info(args.env_id, args.num_envs)
    else:
        envs, info = make_envs(args.env_id, args.num_envs, args.seed, args.num_threads)
    N, T = args.num_envs, args.num_steps
    obs_dtype = torch.uint8 if info.obs_dtype == np.uint8 else torch.float32
    obs_norm = ObsNormalizer(info.obs_shape, device) if args.norm_obs else None
    rew_norm = RewardNormalizer(N, device, gamma=args.gamma) if args.norm_reward else None
    if not info.discrete:
        act_low = torch.as_tensor(info.action_low, device=device)
        act_high = torch.as_tensor(info.action_high, device=device)

    # ---------------------------------------------------------------- agent
    agent = make_agent(args.agent, info.obs_shape, info.discrete, info.num_actions, hidden=args.hidden_sizes).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda it: max(1.0 - it / num_iterations, 0.0) if args.anneal_lr else 1.0)

    # ---------------------------------------------------------------- resume / run folder
    start_iteration, global_step = 0, 0
    recent_returns: deque = deque(maxlen=100)
    ckpt = load_checkpoint(args.resume, map_location=device) if args.resume else None
    if ckpt is not None:
        agent.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        scheduler.base_lrs = [args.learning_rate for _ in scheduler.base_lrs]  # flags win
        for group in optimizer.param_groups:
            group["initial_lr"] = args.learning_rate
        set_rng_state(ckpt["rng"])
        for norm, key in ((obs_norm, "obs_norm"), (rew_norm, "rew_norm")):
            if norm is not None and ckpt.get(key) is not None:
                norm.load_state_dict(ckpt[key])
        start_iteration, global_step = ckpt["iteration"], ckpt["global_step"]
        recent_returns.extend(ckpt.get("recent_returns", []))
        run_dir = Path(ckpt["run_dir"])
        run_dir.mkdir(parents=True, exist_ok=True)
    else:
        run_dir = make_run_dir(args.runs_dir, args.env_id, args.exp_name, args.seed)
    logger = Logger(run_dir, dataclasses.asdict(args), total_iterations=num_iterations,
                    start_iteration=start_iteration, track=args.track, wandb_project=args.wandb_project_name,
                    wandb_entity=args.wandb_entity, console=args.progress)
    logger.write(f"run folder {run_dir} | device {device} | GAE backend {credit.label} | "
                 f"{N} envs x {T} steps, {num_iterations} iterations" +
                 (f" | resumed at iteration {start_iteration}" if ckpt else ""))

    def checkpoint(path: Path, iteration: int) -> None:
        save_checkpoint({
            "model": agent.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "rng": get_rng_state(),
            "iteration": iteration, "global_step": global_step, "args": dataclasses.asdict(args),
            "obs_norm": obs_norm.state_dict() if obs_norm else None,
            "rew_norm": rew_norm.state_dict() if rew_norm else None,
            "recent_returns": list(recent_returns), "run_dir": str(run_dir),
        }, path)

    # ---------------------------------------------------------------- storage
    buf = RolloutBuffer.allocate(T, N, info.obs_shape, obs_dtype, info.action_shape,
                                 torch.long if info.discrete else torch.float32, device)
    obs_h2d = HostToDevice((N, *info.obs_shape), obs_dtype, device)
    step_h2d = HostToDevice((3, N), torch.float32, device)  # reward, terminated, truncated
    ep_stats = EpisodeStats(N)
    tables = {name: PhaseTable() for name in credit.names}
    values_now = torch.zeros_like(buf.values)  # --advantage-recompute: the current critic's V(s_t), V(s_T)
    bootstrap_now = torch.zeros(N, device=device)
    recompute_rows = max(minibatch_size, 1 << 16)  # rows per forward pass: few launches, bounded memory
    credit.pin(buf.rewards, buf.values, buf.terminated, buf.truncated, values_now, bootstrap_now)

    def to_policy_obs(obs_np: np.ndarray) -> torch.Tensor:
        obs = obs_h2d(obs_np)
        return obs_norm(obs) if obs_norm is not None else obs

    def gae(values: torch.Tensor, bootstrap: torch.Tensor):
        """GAE of the rollout in storage with the critic's ``values`` [T, N] and ``bootstrap`` V(s_T) [N],
        timed as phase "ca"."""
        with torch.no_grad():
            return credit.gae(buf.rewards, values, buf.terminated, bootstrap, truncated=buf.truncated,
                              gamma=args.gamma, lam=args.gae_lambda)

    def recompute_advantages(bootstrap_obs: torch.Tensor):
        """GAE again, with the current critic's values of the whole rollout (--advantage-recompute)."""
        with timer.phase("update/value_recompute"), torch.no_grad():
            flat_obs, flat_values = buf.obs.flatten(0, 1), values_now.view(-1)
            for rows in range(0, batch_size, recompute_rows):
                flat_values[rows:rows + recompute_rows] = agent.get_value(flat_obs[rows:rows + recompute_rows])
            bootstrap_now.copy_(agent.get_value(bootstrap_obs))
        return gae(values_now, bootstrap_now)

    if args.synthetic:  # the storage holds one random rollout, learned from every iteration
        next_obs = fill_rollout(buf, agent, seed=args.seed)
    else:
        with torch.inference_mode():
            next_obs = to_policy_obs(envs.reset()[0])  # a resumed run restarts its episodes
    next_done = torch.zeros(N, dtype=torch.bool, device=device)  # ended at the previous step
    start_time, start_step = time.perf_counter(), global_step

    for iteration in range(start_iteration + 1, num_iterations + 1):
        t_iter = time.perf_counter()
        credit.start_iteration(iteration)
        ep_returns, ep_lengths = [], []
        global_step += batch_size

        # ------------------------------------------------------------ rollout
        with torch.inference_mode():
            for step in range(0 if args.synthetic else T):
                with timer.phase("rollout/inference"):
                    action, logprob, _, value = agent.get_action_and_value(next_obs)
                    buf.obs[step] = next_obs
                    buf.actions[step] = action
                    buf.logprobs[step] = logprob
                    buf.values[step] = value
                    buf.valid[step] = ~next_done  # the autoreset dummy step is not learned from
                with timer.phase("rollout/d2h"):
                    env_action = action if info.discrete else torch.maximum(torch.minimum(action, act_high), act_low)
                    env_action = env_action.cpu().numpy()
                with timer.phase("rollout/env"):
                    obs_np, reward_np, term_np, trunc_np, env_info = envs.step(env_action)
                    ended_ret, ended_len = ep_stats.step(reward_np, term_np, trunc_np, env_info)
                    ep_returns.extend(ended_ret.tolist())
                    ep_lengths.extend(ended_len.tolist())
                with timer.phase("rollout/h2d"):
                    next_obs = to_policy_obs(obs_np)
                    rtt = step_h2d(np.stack([reward_np, term_np, trunc_np]))
                    term, trunc = rtt[1] > 0, rtt[2] > 0
                    next_done = term | trunc
                    buf.rewards[step] = rew_norm(rtt[0], next_done) if rew_norm is not None else rtt[0]
                    buf.terminated[step] = term
                    buf.truncated[step] = trunc
            with timer.phase("rollout/inference"):
                bootstrap_value = agent.get_value(next_obs)  # V(s_T); the final obs if step T-1 ended

        # ------------------------------------------------------------ credit assignment (GAE)
        advantages, returns = gae(buf.values, bootstrap_value)

        # ------------------------------------------------------------ update
        with timer.phase("update/forward"):
            b = buf.flat(advantages=advantages, returns=returns)
            b_valid = b["valid"].float()
            mb_stats = []
        for epoch in range(args.update_epochs):
            with timer.phase("update/forward"):
                minibatches = minibatch_indices(batch_size, minibatch_size, device)
            for i, mb in enumerate(minibatches):
                if (epoch or i) and targets_due(args.advantage_recompute, epoch, i):
                    advantages, returns = recompute_advantages(next_obs)
                    b["advantages"], b["returns"] = advantages.reshape(-1), returns.reshape(-1)
                with timer.phase("update/forward"):
                    m = b_valid[mb]
                    denom = m.sum().clamp_min(1.0)
                    _, newlogprob, entropy, newvalue = agent.get_action_and_value(b["obs"][mb], b["actions"][mb])
                    logratio = newlogprob - b["logprobs"][mb]
                    ratio = logratio.exp()
                    mb_adv = b["advantages"][mb]
                    if args.norm_adv:
                        mean = masked_mean(mb_adv, m, denom)
                        std = masked_mean((mb_adv - mean).square(), m, denom).sqrt()
                        mb_adv = (mb_adv - mean) / (std + 1e-8)
                    pg_loss = masked_mean(torch.max(-mb_adv * ratio,
                                                    -mb_adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)), m, denom)
                    v_loss_unclipped = (newvalue - b["returns"][mb]).square()
                    if args.clip_vloss:
                        v_clipped = b["values"][mb] + (newvalue - b["values"][mb]).clamp(-args.clip_coef, args.clip_coef)
                        v_loss_unclipped = torch.max(v_loss_unclipped, (v_clipped - b["returns"][mb]).square())
                    v_loss = 0.5 * masked_mean(v_loss_unclipped, m, denom)
                    entropy_loss = masked_mean(entropy, m, denom)
                    loss = pg_loss - args.ent_coef * entropy_loss + args.vf_coef * v_loss
                    with torch.no_grad():  # diagnostics, read once per iteration
                        approx_kl = masked_mean((ratio - 1) - logratio, m, denom)
                        clipfrac = masked_mean(((ratio - 1).abs() > args.clip_coef).float(), m, denom)
                        mb_stats.append(torch.stack([loss, pg_loss, v_loss, entropy_loss,
                                                     masked_mean(-logratio, m, denom), approx_kl, clipfrac]))
                with timer.phase("update/backward"):
                    optimizer.zero_grad(set_to_none=True)
                    loss.backward()
                with timer.phase("update/optim"):
                    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                    optimizer.step()
            if args.target_kl is not None and approx_kl.item() > args.target_kl:
                break
        with timer.phase("update/optim"):
            scheduler.step()

        # ------------------------------------------------------------ once-per-iteration readout
        secs = timer.read()  # the one device sync of the iteration
        wall = time.perf_counter() - t_iter
        stats = torch.stack(mb_stats)
        finite = bool(torch.isfinite(stats).all())
        loss_mean, pg, vl, ent, old_kl, kl, cf = stats.mean(0).tolist()
        if not finite:
            raise NonFiniteLossError(
                f"non-finite loss (NaN/inf) at iteration {iteration} (global step {global_step}); "
                f"stopping. Last good checkpoint kept: {run_dir / 'checkpoints' / 'latest.pt'}")
        with torch.no_grad():
            valid = b["valid"]
            y, v = b["returns"][valid], b["values"][valid]
            explained_var = (1 - (y - v).var() / y.var()).item() if y.numel() > 1 else float("nan")
        recent_returns.extend(ep_returns)
        groups = group_totals(secs)
        ca, upd = groups.get("ca", 0.0), groups.get("update", 0.0)
        metrics = {
            "charts/learning_rate": optimizer.param_groups[0]["lr"],
            "charts/SPS": (global_step - start_step) / (time.perf_counter() - start_time),
            "losses/loss": loss_mean, "losses/policy_loss": pg, "losses/value_loss": vl,
            "losses/entropy": ent, "losses/old_approx_kl": old_kl, "losses/approx_kl": kl,
            "losses/clipfrac": cf, "losses/explained_variance": explained_var,
            "perf/iteration_s": wall, "perf/iteration_sps": batch_size / wall,
            "perf/ca_share_update": ca / (ca + upd) if ca + upd > 0 else 0.0,
            "perf/ca_share_iteration": ca / wall,
            **credit.end_iteration(secs, wall),
            **{f"perf/{k}_s": s for k, s in {**groups, **secs}.items()},
        }
        if ep_returns:
            metrics["charts/episodic_return"] = float(np.mean(ep_returns))
            metrics["charts/episodic_length"] = float(np.mean(ep_lengths))
        if recent_returns:
            metrics["charts/avg_episodic_return"] = float(np.mean(recent_returns))
        logger.log({"charts/iteration": iteration, **metrics}, global_step)
        logger.progress(sps=metrics["perf/iteration_sps"], ret=metrics.get("charts/avg_episodic_return"))
        tables[credit.name].add(secs, wall)

        if args.checkpoint_every and iteration % args.checkpoint_every == 0:
            checkpoint(run_dir / "checkpoints" / "latest.pt", iteration)

    if args.save_model:
        checkpoint(run_dir / "checkpoints" / "final.pt", num_iterations)
    avg_return = float(np.mean(recent_returns)) if recent_returns else float("nan")
    for name, table in tables.items():
        logger.write(f"\nphase table ({table.iterations} iterations, GAE backend {credit.labels[name]}):\n"
                     f"{table.format()}")
    logger.write(f"global step {global_step}, average return (last {len(recent_returns)} episodes) "
                 f"{avg_return:.1f}, wall {time.perf_counter() - start_time:.1f}s")
    logger.close()
    envs.close() if hasattr(envs, "close") else None
    return {"run_dir": str(run_dir), "global_step": global_step, "avg_return": avg_return,
            "iterations": sum(table.iterations for table in tables.values())}


def cli(argv: Optional[list] = None) -> Args:
    """Parse flags; with ``--resume`` the checkpoint's saved args are the defaults."""
    argv = list(sys.argv[1:] if argv is None else argv)
    default = None
    for i, a in enumerate(argv):
        path = a.split("=", 1)[1] if a.startswith("--resume=") else (argv[i + 1] if a == "--resume" and i + 1 < len(argv) else None)
        if path:
            try:
                saved = load_checkpoint(path)["args"]
            except FileNotFoundError as e:
                raise ConfigError(str(e)) from None
            known = {f.name for f in dataclasses.fields(Args)}
            default = Args(**{k: v for k, v in saved.items() if k in known})
    return parse_args(Args, argv, default=default, description=__doc__)


if __name__ == "__main__":
    try:
        main(cli())
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except NonFiniteLossError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(3)
    except CreditMismatchError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(5)
