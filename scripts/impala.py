"""IMPALA on EnvPool: actor threads with a stale policy, V-trace / Retrace from the fused kernels.

    python scripts/impala.py                                   # CartPole-v1; most runs solve it in 1-2 min on 2 cores
    python scripts/impala.py --correction retrace              # Q critic, Retrace targets, ACER-style PG
    python scripts/impala.py --num-envs 4096 --num-actors 2 --learner-batch-envs 512 --compile   # compiled learner
    python scripts/impala.py --config configs/impala_atari.yaml --env-id Breakout-v5 --num-envs 4096
    python scripts/impala.py --resume runs/<run>/checkpoints/latest.pt
    torchrun --standalone --nproc-per-node 2 scripts/impala.py --num-envs 8192   # 2 GPUs: a learner + actors each

Reads top to bottom like ``scripts/ppo.py``: args, env + actors, agent, learner
loop (get a trajectory batch, credit assignment, update, publish parameters).
The actor side lives in ``rltrain/actor_learner.py`` (threads, bounded queue,
parameter broadcast, shutdown) and ``envs/async_collector.py`` (per-env chains
from EnvPool's out-of-order ``recv``).  See ``docs/training.md``.

Next-step autoreset: after an episode ends at step t the chain's next
observation is the final one, so ``V(s_{t+1}) = values[t+1]`` is the
truncation bootstrap (``truncated=`` goes to the kernels); step t+1 is a dummy
(action ignored, reward 0) masked out of the loss through ``valid``.

Under torchrun (``rltrain/distributed.py``) every rank is one learner with its
own actors on its share of the ``--num-envs`` environments; the learners'
minibatch forward goes through ``learner`` (DDP: gradients averaged over
ranks), the advantage moments and loss denominators are those of every rank's
minibatch, and a Ctrl-C on any rank stops them all after the same update.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import queue
import sys
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import ClassVar, Literal, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout too

from agents import make_agent  # noqa: E402
from envs import env_family, make_envs, spec_info, threads_per_pool  # noqa: E402
from envs.synthetic import SyntheticPool, random_trajectory  # noqa: E402
from rltrain.actor_learner import Actor, ActorError, ActorPool, ParamServer, summarize_actor_secs  # noqa: E402
from rltrain.config import ConfigError, ExperimentArgs  # noqa: E402
from rltrain.credit import CreditAssignment, targets_due  # noqa: E402
from rltrain.distributed import DistContext  # noqa: E402
from rltrain.evaluation import PeriodicEvaluation  # noqa: E402
from rltrain.interrupt import GracefulInterrupt  # noqa: E402
from rltrain.losses import NonFiniteLossError, explained_variance, masked_mean, minibatch_moments  # noqa: E402
from rltrain.minibatches import LearnerBatch, resolve_minibatches, step_budget  # noqa: E402
from rltrain.runtime import compiled, set_torch_threads  # noqa: E402
from rltrain.seeding import seed_everything  # noqa: E402
from rltrain.trainer import (TrainerState, episode_metrics, iteration_readout, parse_trainer_args,  # noqa: E402
                             memory_metrics, report_end, run_main, start_run)
from rltrain.trainer import interrupted_line  # noqa: E402
from rltrain.timers import PhaseTable, PhaseTimer, group_totals  # noqa: E402
from rltrain.validation import validate  # noqa: E402
from rltrain.wallclock import TrainingClock  # noqa: E402


@dataclass
class Args(ExperimentArgs):
    """IMPALA on EnvPool.  Flags override ``--config`` presets, which override these defaults."""

    TRAINER: ClassVar[str] = "impala"  # recorded in its checkpoints: --resume continues IMPALA's only
    exp_name: str = "impala"
    """name of this experiment (part of the run folder name)"""
    # --- environment / actors ---
    env_id: str = "CartPole-v1"
    """EnvPool task id (CartPole-v1, Breakout-v5, ...)"""
    num_envs: int = 16
    """environments in total (split evenly over the actors); under torchrun the total over all ranks (each rank
    steps num_envs / world size with its own --num-actors actors; the world size must divide it)"""
    env_batch_size: int = 0
    """EnvPool async batch: recv returns this many envs (0: all of an actor's envs)"""
    num_actors: int = 1
    """actor threads, each with its own EnvPool and policy copy"""
    learner_batch_envs: int = 0
    """env columns (trajectories) per learner batch (0: all of an actor's envs); narrower batches
    arrive more often and keep the learner busy"""
    num_threads: int = 0
    """EnvPool worker threads per actor (0: one per core; under torchrun: one per core of the rank's share of
    the node); classic-control actors divide them between them"""
    torch_threads: int = 0
    """torch intra-op threads (0: 1 on CUDA, half the cores on CPU)"""
    queue_size: int = 2
    """bounded trajectory queue between actors and learner (bounds the policy lag), in rounds of an
    actor's envs: it holds queue_size * num_envs / num_actors / learner_batch_envs batches"""
    param_refresh_every: int = 1
    """publish the learner's parameters to the actors every K updates"""
    # --- algorithm ---
    agent: Literal["auto", "mlp", "nature_cnn", "impala_resnet"] = "auto"
    """network: auto = nature_cnn for images, mlp otherwise"""
    total_timesteps: int = 0
    """total environment steps learned from (counting all envs of all ranks); 0: 800,000, or 40 learner batches
    where those are more"""
    learning_rate: float = 5e-4
    """Adam learning rate"""
    anneal_lr: bool = True
    """linearly anneal the learning rate to 0"""
    num_steps: int = 16
    """trajectory length T per env"""
    gamma: float = 0.98
    """discount factor (0.98 on CartPole: with 0.99 runs often stalled under the bar; the Atari preset uses 0.99)"""
    correction: Literal["vtrace", "retrace"] = "vtrace"
    """off-policy correction: V-trace (value critic) or Retrace (Q critic, ACER-style policy gradient)"""
    vtrace_lambda: float = 1.0
    """lambda of V-trace / Retrace traces"""
    rho_bar: float = 1.0
    """V-trace clip of the importance weight in the value target"""
    c_bar: float = 1.0
    """clip of the trace coefficients c_t (V-trace and Retrace)"""
    pg_rho_bar: float = 1.0
    """clip of the importance weight in the policy gradient (V-trace pg_adv, ACER truncation)"""
    update_epochs: int = 1
    """passes over each trajectory batch"""
    num_minibatches: int = 1
    """minibatches of env columns per pass (must divide the learner batch width; 0: derived from --minibatch-size)"""
    minibatch_size: int = 0
    """steps per minibatch, whole env columns: a multiple of --num-steps (0: derived from --num-minibatches)"""
    norm_adv: bool = True
    """normalise policy-gradient advantages per minibatch"""
    ent_coef: float = 0.0
    """entropy bonus coefficient (0 on CartPole: with 0.01 the stochastic policy plateaued near 450;
    the Atari preset uses 0.01)"""
    vf_coef: float = 0.5
    """critic loss coefficient"""
    max_grad_norm: float = 0.5
    """gradient clipping norm"""
    ca_backend: str = "auto"
    """V-trace / Retrace implementation. triton: the fused kernel API (on CPU it runs its PyTorch path); captured:
    the fused kernel replayed from a CUDA graph; compile / loop / sequential: the benchmark's baselines; auto: triton,
    or loop on CPU under TRITON_INTERPRET=1. Several, comma-separated (loop,compile,triton), take turns by update"""
    ca_shadow_every: int = 50
    """every M updates also time --ca-shadow-backend on the same batches (not used for the update) and log
    perf/ca_kernel_speedup, perf/ca_share, perf/amdahl_predicted_speedup (0: never)"""
    ca_shadow_backend: str = "loop"
    """the baseline that --ca-shadow-every times"""
    advantage_recompute: Literal["once", "epoch", "minibatch"] = "minibatch"
    """V-trace / Retrace targets with the current critic: once per batch before the update, before every epoch,
    or before every minibatch (with the minibatch's own forward pass)"""
    hidden_sizes: Tuple[int, ...] = (64, 64)
    """hidden layer sizes of the MLP agent's actor and critic torsos"""
    synthetic: bool = False
    """no environments or actors: learn every update from one random trajectory batch (for timing studies)"""
    stop_at_return: Optional[float] = None
    """stop early once the average return of the last 100 episodes reaches this (None: use the whole budget)"""
    actor_timeout_s: float = 300.0
    """stop with an error (exit 4, each actor's stack printed) when the learner gets no batch for this long"""
    compile: bool = False
    """torch.compile the learner's minibatch forward pass and its loss (and, through them, backward); the
    V-trace / Retrace call between them stays outside the compiled code"""

    def learner_batch(self) -> LearnerBatch:
        """num_steps x learner_batch_envs trajectories (0: all num_envs / num_actors of an actor's envs);
        minibatches of whole env columns."""
        return LearnerBatch(rows=self.num_steps, columns=self.learner_batch_envs or self.num_envs // self.num_actors,
                            whole_columns=True)

    def with_step_budget(self) -> "Args":
        """These args with ``total_timesteps`` 0 replaced by the default budget (see the flag)."""
        return dataclasses.replace(self, total_timesteps=step_budget(self.total_timesteps, self.learner_batch(),
                                                                     800_000))


def policy_and_critic(args: Args, model: nn.Module, mb):
    """The current policy and critic on env columns ``mb`` (time-major, T+1 observations: s_T
    bootstraps): ``(logp, entropy, log_rhos, critic, probs)`` with log pi(a_t|s_t), its entropy and
    log pi/mu (0 at invalid steps) [T, M], the critic's V [T+1, M] or Q [T+1, M, A], and pi(.|s_t)
    [T+1, M, A] for a Q critic (else None).  ``model``: the learner (DDP wrapper) for a pass that is
    backpropagated, else the agent."""
    Tm, M = mb.actions.shape[:2]
    dist, critic = model("dist_and_critic", mb.obs.flatten(0, 1))
    actions = torch.cat([mb.actions, mb.actions[-1:]]).flatten(0, 1)
    logp = dist.log_prob(actions).view(Tm + 1, M)[:Tm]
    entropy = dist.entropy().view(Tm + 1, M)[:Tm]
    log_rhos = torch.where(mb.valid, logp.detach() - mb.logprobs, 0.0)
    probs = dist.probs.view(Tm + 1, M, -1) if args.correction == "retrace" else None
    return logp, entropy, log_rhos, critic.view(Tm + 1, M, *critic.shape[1:]), probs


def assign_credit(args: Args, credit: CreditAssignment, timer: PhaseTimer, mb, log_rhos, critic, probs):
    """``(value targets, policy-gradient advantages)`` [T, M] of env columns ``mb`` from the critic's
    output on them (:func:`policy_and_critic`): V-trace's vs and pg_adv, or Retrace's Q targets and ACER's
    truncated importance weight times (Q_ret - V) on the behaviour action.  The estimator call is
    timed by ``credit`` (phase "learner/ca"), the Q critic's expectations on ``timer`` as "learner/forward"."""
    Tm = mb.actions.shape[0]
    critic = critic.detach()
    with torch.no_grad():
        if args.correction == "vtrace":
            vs, pg_adv = credit.vtrace(
                mb.rewards, critic[:Tm], log_rhos, mb.terminated, critic[Tm],
                truncated=mb.truncated, gamma=args.gamma, lam=args.vtrace_lambda,
                rho_bar=args.rho_bar, c_bar=args.c_bar, pg_rho_bar=args.pg_rho_bar)
            return vs.float(), pg_adv.float()
        with timer.phase("learner/forward"):
            q_taken = critic[:Tm].gather(-1, mb.actions.unsqueeze(-1)).squeeze(-1)
            expected_next_q = (probs[1:] * critic[1:]).sum(-1)   # E_pi Q(s_{t+1}, .)
            state_value = (probs[:Tm] * critic[:Tm]).sum(-1)     # V(s_t) = E_pi Q(s_t, .)
        q_ret = credit.retrace(
            mb.rewards, q_taken, expected_next_q, log_rhos, mb.terminated,
            truncated=mb.truncated, gamma=args.gamma, lam=args.vtrace_lambda, c_bar=args.c_bar).float()
        with timer.phase("learner/forward"):
            return q_ret, log_rhos.exp().clamp(max=args.pg_rho_bar) * (q_ret - state_value)


def minibatch_loss(args: Args, mb, logp, entropy, log_rhos, critic, target, adv, moments=None,
                   ret_stats: bool = True):
    """V-trace or Retrace loss on a minibatch of env columns (time-major [T(+1), M]) from its forward
    pass (:func:`policy_and_critic`) and its (value ``target``, advantages ``adv``) [T, M]; ``moments``:
    ``(mean, std, denominator)`` of the advantages and valid steps of every rank's minibatch
    (torchrun), None: of this minibatch.  Returns the loss and, with ``ret_stats``, its diagnostics."""
    Tm = mb.actions.shape[0]
    valid = mb.valid.float()
    if args.correction == "vtrace":
        pred = critic[:Tm]
    else:
        pred = critic[:Tm].gather(-1, mb.actions.unsqueeze(-1)).squeeze(-1)
    adv_mean, adv_std, denom = minibatch_moments(adv, valid) if moments is None else moments
    if args.norm_adv:
        adv = (adv - adv_mean) / (adv_std + 1e-8)
    pg_loss = -masked_mean(adv * logp, valid, denom)
    v_loss = 0.5 * masked_mean((pred - target).square(), valid, denom)
    ent = masked_mean(entropy, valid, denom)
    loss = pg_loss + args.vf_coef * v_loss - args.ent_coef * ent
    stats = None
    if ret_stats:
        with torch.no_grad():
            ratio = log_rhos.exp()
            stats = torch.stack([loss, pg_loss, v_loss, ent, masked_mean(-log_rhos, valid, denom),
                                 masked_mean((ratio - 1) - log_rhos, valid, denom),
                                 masked_mean((ratio > args.rho_bar).float(), valid, denom),
                                 masked_mean(ratio, valid, denom),
                                 explained_variance(target, pred.detach(), valid)])
    return loss, stats


def main(args: Args, ctx: Optional[DistContext] = None) -> dict:
    validate(args)  # every flag; the rules are in rltrain/validation.py
    args = args.with_step_budget()  # --total-timesteps 0: the default budget
    ctx = ctx or DistContext.single_process(args.cuda)  # under torchrun: this rank (rltrain.run_main)
    run_args, args = args, ctx.rank_args(args)  # args: this rank's share (num_envs / world size envs)
    width = args.num_envs // args.num_actors  # envs of one actor
    batch_envs = args.learner_batch().columns  # env columns per learner batch
    T = args.num_steps
    batch_size = T * batch_envs  # this rank's
    global_batch = batch_size * ctx.world_size
    num_updates = args.total_timesteps // batch_size
    num_minibatches, minibatch_size = resolve_minibatches(args.learner_batch(), args.num_minibatches,
                                                          args.minibatch_size)
    minibatch_width = minibatch_size // T
    device = ctx.device
    set_torch_threads(args.torch_threads, device, ctx.cores_per_rank())
    seed_everything(ctx.rank_seed(args.seed), args.torch_deterministic)
    timer = PhaseTimer(device)
    credit = CreditAssignment(args.ca_backend, device, timer, "learner/ca", shadow=args.ca_shadow_backend,
                              shadow_every=args.ca_shadow_every)

    # ---------------------------------------------------------------- env (one async EnvPool per actor)
    env_list = []
    env_seed = ctx.env_seed(args.seed, 10_000 * args.num_actors)  # actor i's envs: env_seed + 10_000 * i + j
    threads = threads_per_pool(args.num_threads, args.num_actors, env_family(args.env_id))  # pools step at once
    for i in range(0 if args.synthetic else args.num_actors):  # --synthetic: no environments, no actors
        envs, info = make_envs(args.env_id, width, env_seed + 10_000 * i, threads, batch_size=args.env_batch_size or width,
                               stack_on_device=True)  # Atari: the newest frame only, the actor stacks
        env_list.append(envs)
    if args.synthetic:
        info = spec_info(args.env_id, width)
    if args.correction == "retrace" and not info.discrete:
        raise ConfigError("--correction retrace needs a discrete action space (Q head); use vtrace")
    obs_dtype = torch.uint8 if info.obs_dtype == np.uint8 else torch.float32
    act_dtype = torch.long if info.discrete else torch.float32

    # ---------------------------------------------------------------- agent (learner) + optimizer
    agent = make_agent(args.agent, info.obs_shape, info.discrete, info.num_actions, hidden=args.hidden_sizes,
                       q_head=args.correction == "retrace").to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5,
                                 fused=device.type == "cuda")  # one launch per step instead of one per tensor
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda it: max(1.0 - it / num_updates, 0.0) if args.anneal_lr else 1.0)

    # ---------------------------------------------------------------- resume / run folder (rank 0 logs)
    state = TrainerState(run_args, agent, optimizer, scheduler)
    run = start_run(run_args, state, num_updates, ctx)
    run_dir, logger, recent_returns = run.run_dir, run.logger, run.recent_returns
    start_update, global_step = run.iteration, run.global_step
    clock = TrainingClock(run.wall_s)  # training seconds, across --resume
    evaluation = PeriodicEvaluation(args.env_id, args.eval_episodes, args.seed + 100_000, device,
                                    args.eval_greedy, args.num_threads) if args.eval_every and ctx.is_main else None
    learner = ctx.wrap_model(agent)  # the minibatch forward: DDP averages the gradients over ranks
    ranks = f" | per rank; {ctx.describe()}" if ctx.is_distributed else ""
    logger.write(f"run folder {run_dir} | device {device} | {args.correction} backend {credit.label} | "
                 f"{args.num_actors} actor(s) x {width} envs (recv batch {args.env_batch_size or width}), "
                 f"learner batch {batch_envs} envs x T={T}{ranks}, {num_updates} updates"
                 + (f" | resumed at update {start_update}" if run.resumed else ""))

    def checkpoint(path: Path, update: int) -> None:
        ctx.check_replicas(agent)
        state.save(path, iteration=update, global_step=global_step, recent_returns=recent_returns,
                   run_dir=run_dir, wall_s=clock.seconds(), ctx=ctx)

    # ---------------------------------------------------------------- actors: own policy copy (its step
    # recorded as a CUDA graph here, before any thread runs), bounded queue
    params = ParamServer(agent, version=start_update)
    # an actor's envs complete their chains together: a round of width / batch_envs batches must not block it
    traj_queue: queue.Queue = queue.Queue(maxsize=args.queue_size * -(-width // batch_envs))
    stop = threading.Event()
    actors = []
    for i, envs in enumerate(env_list):
        policy = copy.deepcopy(agent).requires_grad_(False)
        actors.append(Actor(i, envs, policy, params, traj_queue, stop, num_envs=width, num_steps=T,
                            obs_shape=info.obs_shape, obs_dtype=obs_dtype, action_shape=info.action_shape,
                            action_dtype=act_dtype, device=device, num_actions=info.num_actions,
                            batch_size=args.env_batch_size or width, out_width=batch_envs,
                            discrete=info.discrete, action_low=info.action_low, action_high=info.action_high,
                            capture=args.cuda_graphs, stack_frames=info.stack_on_device))
    interrupt = GracefulInterrupt()  # Ctrl-C is acted on in pool.get(), never inside the queue's locks
    # under torchrun every rank learns its Ctrl-C from the readout instead, so that all stop after one update
    pool_interrupt = None if ctx.is_distributed else interrupt
    if args.synthetic:
        pool = SyntheticPool(random_trajectory(
            agent, num_steps=T, num_envs=batch_envs, obs_shape=info.obs_shape, obs_dtype=obs_dtype,
            action_shape=info.action_shape, action_dtype=act_dtype, device=device, seed=ctx.rank_seed(args.seed)),
            version=start_update, interrupt=pool_interrupt)
    else:
        pool = ActorPool(actors, traj_queue, stop, pool_interrupt, stall_timeout_s=args.actor_timeout_s)
    tables = {name: PhaseTable() for name in credit.names}
    start_time, start_step = time.perf_counter(), global_step
    clock.start()
    update, in_update, interrupted, stop_all = start_update, False, False, False
    done = start_update  # the last update whose optimizer step is complete: what a checkpoint can hold

    assign = partial(assign_credit, args, credit, timer)

    def batch_targets(traj):
        """Targets and advantages of the whole batch with the current policy and critic, before its
        minibatches (--advantage-recompute once / epoch): one forward pass without gradients."""
        with timer.phase("learner/value_recompute"), torch.no_grad():
            _, _, log_rhos, critic, probs = policy_and_critic(args, agent, traj)
        return assign(traj, log_rhos, critic, probs)

    # --compile: the forward pass and the loss each become a compiled graph (and its backward); the V-trace /
    # Retrace kernels between them are called as they are.  Under torchrun the DDP wrapper's own forward stays
    # eager (Dynamo leaves it out) and the agent under it is compiled
    forward_fn = compiled(partial(policy_and_critic, args, learner), args.compile)
    loss_fn = compiled(partial(minibatch_loss, args), args.compile)

    def loss_and_stats(mb, ret_stats: bool, targets=None):
        """The loss (and diagnostics) of a minibatch of env columns; ``targets``: its (value targets,
        advantages) from ``batch_targets``, or None to compute them from this minibatch's forward pass
        (--advantage-recompute minibatch)."""
        with timer.phase("learner/forward"):
            logp, entropy, log_rhos, critic, probs = forward_fn(mb)
        target, adv = assign(mb, log_rhos, critic, probs) if targets is None else targets
        with timer.phase("learner/forward"):
            # under torchrun: over every rank's minibatch, in one all-reduce outside the compiled loss
            moments = minibatch_moments(adv, mb.valid.float(), ctx) if ctx.has_peers else None
            return loss_fn(mb, logp, entropy, log_rhos, critic, target, adv, moments, ret_stats)

    try:
        interrupt.install()
        pool.start()
        for update in range(start_update + 1, num_updates + 1):
            if stop_all:  # a Ctrl-C reached a rank during the last update: every rank stops here
                raise KeyboardInterrupt
            t_iter = time.perf_counter()
            credit.start_iteration(update)
            # -------------------------------------------------------- get a trajectory batch (queue wait)
            t0 = time.perf_counter()
            traj = pool.get()
            learner_wait = time.perf_counter() - t0
            in_update = True
            global_step += global_batch
            with torch.no_grad():
                valid_versions = traj.versions[traj.valid]
                lag = (update - 1) - valid_versions  # learner updates between acting and learning
                lag_stats = torch.stack([lag.float().mean(), lag.max().float()]) if lag.numel() else None

            # -------------------------------------------------------- update(s) on the batch
            mb_stats = []
            whole_batch = args.advantage_recompute != "minibatch"
            for epoch in range(args.update_epochs):
                perm = (torch.randperm(batch_envs, device=device) if num_minibatches > 1
                        else torch.arange(batch_envs, device=device))
                for i, cols in enumerate(perm.view(num_minibatches, minibatch_width)):
                    if whole_batch and targets_due(args.advantage_recompute, epoch, i):
                        targets = batch_targets(traj)
                    mb = traj.columns(cols) if num_minibatches > 1 else traj
                    mb_targets = None
                    if whole_batch:
                        mb_targets = [t[:, cols] for t in targets] if num_minibatches > 1 else targets
                    loss, stats = loss_and_stats(mb, ret_stats=epoch == 0, targets=mb_targets)
                    if stats is not None:
                        mb_stats.append(stats)
                    with ctx.timed_backward(timer, "learner/backward"):  # + "learner/allreduce" under DDP
                        optimizer.zero_grad(set_to_none=True)
                        loss.backward()
                    with timer.phase("learner/optim"):
                        nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                        optimizer.step()
            with timer.phase("learner/optim"):
                scheduler.step()
                if update % args.param_refresh_every == 0:
                    params.publish(agent, update)
            done = update
            in_update = False

            # -------------------------------------------------------- once-per-update readout
            secs = timer.read()
            wall = time.perf_counter() - t_iter
            stats = torch.stack(mb_stats)
            names = ["losses/loss", "losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/old_approx_kl",
                     "losses/approx_kl", "losses/clipfrac", "losses/mean_rho", "losses/explained_variance"]
            losses = dict(zip(names, stats.nanmean(0).tolist()))
            recent_returns.extend(traj.episode_returns)
            a_secs = summarize_actor_secs([traj])
            a_wall, a_wait = a_secs.pop("actor/wall", 0.0), a_secs.pop("actor/queue_wait", 0.0)
            learn_s = wall - learner_wait
            groups = group_totals(secs)
            phases = {f"perf/{k}_s": s for k, s in {**groups, **secs, **a_secs}.items()}
            phases.update({"perf/learner_queue_wait_s": learner_wait, "perf/actor_queue_wait_s": a_wait})
            lag = dict(zip(["policy_lag/mean", "policy_lag/max"], lag_stats.tolist())) if lag_stats is not None else {}
            actor_sps = traj.actor_steps / max(a_wall - a_wait, 1e-9)  # queue waits left out
            g = iteration_readout(
                ctx, phase_secs=phases, means=losses, sums={"charts/actor_SPS": actor_sps},
                maxima={"policy_lag/max_over_ranks": lag["policy_lag/max"]} if lag and ctx.is_distributed else {},
                episode_returns=traj.episode_returns, episode_lengths=traj.episode_lengths,
                recent_returns=recent_returns, finite=bool(np.isfinite([losses[k] for k in names[:3]]).all()),
                interrupted=interrupt.requested,
            )  # every rank's figures: the same on every rank
            if g["nonfinite_rank"] < math.inf:
                where = f" on rank {g['nonfinite_rank']:.0f}" if ctx.is_distributed else ""
                raise NonFiniteLossError(
                    f"non-finite loss (NaN/inf){where} at update {update} (global step {global_step}); "
                    f"stopping. Last good checkpoint kept: {run_dir / 'checkpoints' / 'latest.pt'}")
            stop_all = g["interrupted"] > 0
            ca = secs.get("learner/ca", 0.0)
            upd = sum(v for k, v in secs.items() if k != "learner/ca")
            elapsed = time.perf_counter() - start_time
            metrics = {
                "charts/learning_rate": optimizer.param_groups[0]["lr"],
                "charts/SPS": (global_step - start_step) / elapsed,
                "charts/wall_s": clock.seconds(),
                "charts/actor_SPS": g["charts/actor_SPS"],  # all actors of all ranks
                "charts/learner_SPS": global_batch / max(learn_s, 1e-9),
                **{k: g[k] for k in names},
                "perf/iteration_s": wall, "perf/iteration_sps": global_batch / wall,
                "perf/ca_share_update": ca / (ca + upd) if ca + upd > 0 else 0.0,
                "perf/ca_share_iteration": ca / wall,
                **credit.end_iteration(secs, wall),
                **{k: g[k] for k in phases},  # the slowest rank's
                **({f"perf/rank0/{k[len('perf/'):]}": s for k, s in phases.items()} if ctx.is_distributed else {}),
                **lag,  # this rank's (rank 0's)
                **({"policy_lag/max_over_ranks": g["policy_lag/max_over_ranks"]}
                   if "policy_lag/max_over_ranks" in g else {}),
                **episode_metrics(g),
                **memory_metrics(g),  # perf/gpu_mem_peak_gib on CUDA
            }
            if evaluation is not None and update % args.eval_every == 0:
                with clock.paused():
                    metrics.update(evaluation(agent))
            logger.log({"charts/iteration": update, **metrics}, global_step)
            logger.progress(sps=metrics["charts/SPS"], ret=metrics.get("charts/avg_episodic_return"))
            tables[credit.name].add({**secs, "learner/queue_wait": learner_wait}, wall)  # this rank's phases

            if args.checkpoint_every and update % args.checkpoint_every == 0:
                checkpoint(run_dir / "checkpoints" / "latest.pt", update)
            average = metrics.get("charts/avg_episodic_return", -math.inf)  # every rank's last episodes
            if (args.stop_at_return is not None and g["episodes/recent_count"] == recent_returns.maxlen * ctx.world_size
                    and average >= args.stop_at_return):
                logger.write(f"average return {average:.1f} >= {args.stop_at_return} at global step "
                             f"{global_step}: stopping early")
                break
    except KeyboardInterrupt:
        if ctx.is_distributed and not stop_all:  # a second Ctrl-C on this rank: out at once
            raise
        interrupted = True
        if in_update:  # a second Ctrl-C in the middle of an update: nothing consistent to keep
            logger.write(f"interrupted during update {update}; no checkpoint written")
        else:  # the updates up to `done`, whatever --checkpoint-every says: kept for --resume
            checkpoint(run_dir / "checkpoints" / "latest.pt", done)
            logger.write(interrupted_line("update", done, run_dir / "checkpoints" / "latest.pt"))
    finally:
        pool.close()
        interrupt.restore()
        for envs in env_list:
            envs.close() if hasattr(envs, "close") else None
        evaluation.close() if evaluation is not None else None
        if sys.exc_info()[0] is not None:
            logger.close()

    if args.save_model and not interrupted:
        checkpoint(run_dir / "checkpoints" / "final.pt", num_updates)
    avg_return = report_end(ctx, agent, logger, tables, credit.labels, unit="updates", estimator=args.correction,
                            recent_returns=recent_returns, global_step=global_step, start_time=start_time,
                            training_s=clock.seconds())
    logger.close()
    return {"run_dir": str(run_dir), "global_step": global_step, "avg_return": avg_return,
            "iterations": sum(table.iterations for table in tables.values()), "interrupted": interrupted}


def cli(argv: Optional[list] = None) -> Args:
    """Parse flags; with ``--resume`` the checkpoint's saved args are the defaults."""
    return parse_trainer_args(Args, argv, description=__doc__)


if __name__ == "__main__":
    run_main(main, cli, {ActorError: 4})
