"""PPO on EnvPool with fused GAE and per-phase timers (CleanRL-style, one file).

    python scripts/ppo.py                                   # CartPole-v1, solves on a 2-core CPU
    python scripts/ppo.py --config configs/atari.yaml --env-id Breakout-v5 --num-envs 4096
    python scripts/ppo.py --config configs/mujoco.yaml --env-id HalfCheetah-v4
    python scripts/ppo.py --resume runs/<run>/checkpoints/latest.pt
    torchrun --standalone --nproc-per-node 2 scripts/ppo.py --num-envs 8192   # 2 GPUs, 4096 envs each

Reads top to bottom: args, env, agent, rollout, GAE, update.  Shared
parts live in the packages: networks in ``agents/``, EnvPool construction,
env groups, episode statistics and normalisation in ``envs/``, the rollout
collector (env groups stepped in turn, the policy step replayed from a CUDA
graph), timers, logging, checkpointing and seeding in ``rltrain/``.  See
``docs/training.md``.

Under torchrun (``rltrain/distributed.py``) each rank steps its share of the
``--num-envs`` environments, computes GAE on its own rollout and updates
through DDP: the update's forward goes through ``learner`` (the DDP wrapper;
the agent itself in a single process), acting through ``agent``; the
advantage moments and loss denominators of each minibatch are those of every
rank's rows together.

Next-step autoreset (EnvPool / Gymnasium 1.x): after an episode ends at step
t, the obs returned is the final obs, so ``V(obs_{t+1})`` is the truncation
bootstrap; the step t+1 is a dummy (action ignored, reward 0) and is masked
out of the loss through ``buf.valid``.

``--overlap-rollout`` steps the envs for the next rollout while the update of this one runs
(``rltrain/overlap.py``): the behaviour policy is then one update stale, and PPO's ratio is taken
against the log-probabilities stored in the rollout.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Callable, ClassVar, Literal, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout too

from agents import make_agent  # noqa: E402
from envs import EnvGroups, ObsNormalizer, RewardNormalizer, default_env_groups, spec_info  # noqa: E402
from envs.synthetic import fill_rollout  # noqa: E402
from rltrain.adaptive_lr import adapt_learning_rate, tensor_learning_rate  # noqa: E402
from rltrain.config import ExperimentArgs  # noqa: E402
from rltrain.credit import CreditAssignment, targets_due  # noqa: E402
from rltrain.cuda_graph import GraphedStep, capturable_adam  # noqa: E402
from rltrain.distributed import DistContext  # noqa: E402
from rltrain.evaluation import PeriodicEvaluation  # noqa: E402
from rltrain.interrupt import GracefulInterrupt  # noqa: E402
from rltrain.losses import NonFiniteLossError, masked_mean, minibatch_moments  # noqa: E402
from rltrain.minibatches import LearnerBatch, resolve_minibatches, step_budget  # noqa: E402
from rltrain.overlap import Rollouts  # noqa: E402
from rltrain.rollout import RolloutBuffer, minibatch_indices  # noqa: E402
from rltrain.runtime import compiled, set_torch_threads  # noqa: E402
from rltrain.seeding import seed_everything  # noqa: E402
from rltrain.trainer import (TrainerState, episode_metrics, iteration_readout, parse_trainer_args,  # noqa: E402
                             memory_metrics, report_end, run_main, start_run)
from rltrain.trainer import checkpoint_due, interrupted_line  # noqa: E402
from rltrain.timers import PhaseTable, PhaseTimer, group_totals, overlapped_phases  # noqa: E402
from rltrain.validation import validate  # noqa: E402
from rltrain.wallclock import TrainingClock  # noqa: E402


@dataclass
class Args(ExperimentArgs):
    """PPO on EnvPool.  Flags override ``--config`` presets, which override these defaults."""

    TRAINER: ClassVar[str] = "ppo"  # recorded in its checkpoints: --resume continues PPO's only
    exp_name: str = "ppo"
    """name of this experiment (part of the run folder name)"""
    # --- environment ---
    env_id: str = "CartPole-v1"
    """EnvPool task id (CartPole-v1, Breakout-v5, HalfCheetah-v4, ...)"""
    num_envs: int = 8
    """number of parallel environments; under torchrun the total over all ranks (each rank steps
    num_envs / world size; the world size must divide it)"""
    num_threads: int = 0
    """EnvPool worker threads of each env group (0: one per core; under torchrun: one per core of the rank's
    share of the node); classic-control groups divide them between them"""
    env_groups: int = 0
    """env groups stepped in turn, so env stepping overlaps inference (must divide num_envs;
    0: 2 on CUDA, 1 on CPU)"""
    torch_threads: int = 0
    """torch intra-op threads (0: 1 on CUDA, half the cores on CPU)"""
    norm_obs: bool = False
    """normalise observations with running mean/std (on tensors)"""
    norm_reward: bool = False
    """scale rewards by the running std of the discounted return (on tensors)"""
    # --- algorithm ---
    agent: Literal["auto", "mlp", "nature_cnn", "impala_resnet"] = "auto"
    """network: auto = nature_cnn for images, mlp otherwise"""
    cnn_activation: Literal["relu", "elu"] = "relu"
    """activation of the image torsos (nature_cnn, impala_resnet; the MLP keeps tanh): relu, or elu
    (Clevert et al. 2016), the activation of rl_games' EnvPool Atari networks"""
    total_timesteps: int = 0
    """total environment steps (counting all envs of all ranks); 0: 300,000, or 40 rollouts where those are
    more (--num-envs 4096: 40 x 524,288 steps; CartPole-v1 reaches 500 in about 33)"""
    learning_rate: float = 2.5e-3
    """Adam learning rate (with --kl-adaptive-lr: its starting value)"""
    anneal_lr: bool = True
    """linearly anneal the learning rate to 0"""
    kl_adaptive_lr: Optional[float] = None
    """target KL of a learning rate that follows the policy's change (None: off): after each minibatch
    step the rate is divided by 1.5 where that minibatch's approx KL is above twice the target, multiplied
    by 1.5 where it is below half of it, within [1e-6, 1e-2] (rl_games' adaptive schedule with its
    kl_threshold; rltrain/adaptive_lr.py). On the device, without a sync, inside --graph-update's graph
    too; under torchrun from every rank's KL. It replaces the annealing: give --no-anneal-lr. The
    rate is saved in checkpoints and a resumed run continues from it"""
    kl_adaptive_every: Literal["minibatch", "epoch"] = "minibatch"
    """when --kl-adaptive-lr adapts the rate: after every minibatch step from that minibatch's KL
    (rl_games' "legacy" schedule, its default), or once after every epoch from the mean KL of the
    epoch's minibatches (its "standard" schedule): at most update_epochs factors of 1.5 per update
    instead of one per minibatch step, for updates of many minibatch steps"""
    num_steps: int = 128
    """steps per environment per rollout (T)"""
    gamma: float = 0.99
    """discount factor"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    num_minibatches: int = 4
    """minibatches per epoch (must divide num_envs * num_steps, under torchrun a rank's share; 0: derived
    from --minibatch-size)"""
    minibatch_size: int = 0
    """steps per minibatch (of each rank under torchrun; 0: derived from --num-minibatches; both given must agree)"""
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
    """value loss coefficient: the critic loss weight, loss = policy loss - ent_coef * entropy +
    vf_coef * 0.5 * (V - return)^2 (CleanRL's name; rl_games' critic_coef weighs the same term)"""
    norm_value: bool = False
    """value normalisation: the critic learns the GAE returns normalised by their running mean and std
    (of every return so far, updated once per iteration before the update), its outputs de-normalised
    for the rollout, GAE and the bootstrap; the value loss and its clipping are in normalised units.
    The statistics are buffers of the agent (saved with the model). PopArt's target normalisation (van
    Hasselt et al. 2016) as rl_games' normalize_value; agents/value_norm.py"""
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
    compile: bool = False
    """torch.compile the minibatch loss (forward and, through it, backward)"""
    graph_update: bool = False
    """replay each minibatch step (loss, backward, clipping, Adam) from one CUDA graph: one launch instead of
    hundreds, for small minibatches (CUDA, one rank; elsewhere -- the CPU, torchrun with several ranks -- the
    same step runs eagerly)"""
    overlap_rollout: bool = False
    """step the envs for the next rollout while the update of this one runs, so they never wait for it: the
    behaviour policy is one update stale (rollout k+1 acts with the parameters from before update k; PPO's
    ratio is against the log-probabilities stored with it); the first iterations of a run are synchronous.
    Helps where the update is shorter than the rollout and the device idles during the rollout
    (rltrain/overlap.py; not with --synthetic)"""

    def learner_batch(self) -> LearnerBatch:
        """One rollout, num_steps x num_envs steps; minibatches of shuffled single steps."""
        return LearnerBatch(rows=self.num_steps, columns=self.num_envs)

    def with_step_budget(self) -> "Args":
        """These args with ``total_timesteps`` 0 replaced by the default budget (see the flag)."""
        return dataclasses.replace(self, total_timesteps=step_budget(self.total_timesteps, self.learner_batch(),
                                                                     300_000))


LOSS_ROWS = ("obs", "actions", "logprobs", "advantages", "returns", "values")  # of the flat rollout, and "valid"


def loss_source(b: dict, b_valid: torch.Tensor, value_norm: Optional[nn.Module] = None) -> dict:
    """The flat rollout's tensors the loss reads, ``valid`` as floats: a minibatch's rows are ``[mb]`` of each.
    With a ``value_norm`` (``--norm-value``) the returns and the rollout's values are normalised by its
    current statistics, the units of the critic head the loss trains."""
    source = {**{k: b[k] for k in LOSS_ROWS}, "valid": b_valid}
    if value_norm is not None:
        source["returns"], source["values"] = value_norm.normalize(b["returns"]), value_norm.normalize(b["values"])
    return source


LOSS_STATS = ("losses/loss", "losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/old_approx_kl",
              "losses/approx_kl", "losses/clipfrac")
"""The diagnostics of a minibatch (:func:`minibatch_loss`'s ``stats``, in this order), logged as their means."""
KL_STAT = LOSS_STATS.index("losses/approx_kl")


def minibatch_loss(args: Args, learner: nn.Module, rows: dict, moments: Optional[torch.Tensor] = None):
    """PPO's clipped loss on a minibatch's ``rows`` (:func:`loss_source` indexed by the minibatch); the
    autoreset dummy rows (``valid`` 0) are left out.  ``moments``: ``(mean, std, denominator)`` of the
    minibatch's advantages and valid rows over every rank (distributed run), None: of these rows
    (:func:`rltrain.losses.minibatch_moments`).  The value term compares the critic head's output as it
    is with ``rows``' returns and values: normalised ones under ``--norm-value`` (:func:`loss_source`).
    Returns the loss, its diagnostics and the approximate KL."""
    m, mb_adv = rows["valid"], rows["advantages"]
    adv_mean, adv_std, denom = minibatch_moments(mb_adv, m) if moments is None else moments
    _, newlogprob, entropy, newvalue = learner("get_action_and_value", rows["obs"], rows["actions"],
                                               normalized_value=True)
    logratio = newlogprob - rows["logprobs"]
    ratio = logratio.exp()
    if args.norm_adv:
        mb_adv = (mb_adv - adv_mean) / (adv_std + 1e-8)
    pg_loss = masked_mean(torch.max(-mb_adv * ratio,
                                    -mb_adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)), m, denom)
    v_loss_unclipped = (newvalue - rows["returns"]).square()
    if args.clip_vloss:
        v_clipped = rows["values"] + (newvalue - rows["values"]).clamp(-args.clip_coef, args.clip_coef)
        v_loss_unclipped = torch.max(v_loss_unclipped, (v_clipped - rows["returns"]).square())
    v_loss = 0.5 * masked_mean(v_loss_unclipped, m, denom)
    entropy_loss = masked_mean(entropy, m, denom)
    loss = pg_loss - args.ent_coef * entropy_loss + args.vf_coef * v_loss
    with torch.no_grad():  # diagnostics, read once per iteration
        approx_kl = masked_mean((ratio - 1) - logratio, m, denom)
        clipfrac = masked_mean(((ratio - 1).abs() > args.clip_coef).float(), m, denom)
        stats = torch.stack([loss, pg_loss, v_loss, entropy_loss,
                             masked_mean(-logratio, m, denom), approx_kl, clipfrac])
    return loss, stats, approx_kl


def minibatch_step(args: Args, learner: nn.Module, optimizer: torch.optim.Optimizer, rows: dict,
                   loss_fn: Optional[Callable[[dict], tuple]] = None):
    """One whole minibatch step, as ``--graph-update`` records it: gradients set to None, the loss
    (``loss_fn(rows)``, default :func:`minibatch_loss`), backward, clipping to ``args.max_grad_norm``,
    the optimizer's step, and with ``--kl-adaptive-lr`` (``--kl-adaptive-every minibatch``) the
    learning rate adapted in place to the minibatch's KL.  Returns the loss's diagnostics and approximate KL."""
    optimizer.zero_grad(set_to_none=True)
    loss, stats, approx_kl = (loss_fn or partial(minibatch_loss, args, learner))(rows)
    loss.backward()
    nn.utils.clip_grad_norm_(learner.parameters(), args.max_grad_norm)
    optimizer.step()
    if args.kl_adaptive_lr is not None and args.kl_adaptive_every == "minibatch":
        adapt_learning_rate(optimizer, approx_kl, args.kl_adaptive_lr)
    return stats, approx_kl


def main(args: Args, ctx: Optional[DistContext] = None) -> dict:
    validate(args)  # every flag; the rules are in rltrain/validation.py
    args = args.with_step_budget()  # --total-timesteps 0: the default budget
    ctx = ctx or DistContext.single_process(args.cuda)  # under torchrun: this rank (rltrain.run_main)
    run_args, args = args, ctx.rank_args(args)  # args: this rank's share (num_envs / world size envs)
    batch_size = args.num_envs * args.num_steps  # this rank's
    global_batch = batch_size * ctx.world_size
    _, minibatch_size = resolve_minibatches(args.learner_batch(), args.num_minibatches, args.minibatch_size)
    num_iterations = args.total_timesteps // batch_size
    device = ctx.device
    if args.graph_update and ctx.has_peers:  # DDP's gradient all-reduce cannot be recorded
        args = dataclasses.replace(args, graph_update=False)
        if ctx.is_main:
            print(f"--graph-update: one rank only; the update runs eagerly on these {ctx.world_size} ranks")
    set_torch_threads(args.torch_threads, device, ctx.cores_per_rank())
    seed_everything(ctx.rank_seed(args.seed), args.torch_deterministic)
    timer = PhaseTimer(device)
    credit = CreditAssignment(args.ca_backend, device, timer, "ca", shadow=args.ca_shadow_backend,
                              shadow_every=args.ca_shadow_every)

    # ---------------------------------------------------------------- env (groups stepped in turn)
    if args.synthetic:  # no environments: one random rollout, filled in below
        envs, info = None, spec_info(args.env_id, args.num_envs)
    else:
        envs = EnvGroups(args.env_id, args.num_envs, default_env_groups(args.env_groups, args.num_envs, device),
                         ctx.env_seed(args.seed, args.num_envs), args.num_threads)
        info = envs.info
    N, T = args.num_envs, args.num_steps
    obs_norm = ObsNormalizer(info.obs_shape, device) if args.norm_obs else None
    rew_norm = RewardNormalizer(N, device, gamma=args.gamma) if args.norm_reward else None

    # ---------------------------------------------------------------- agent
    agent = make_agent(args.agent, info.obs_shape, info.discrete, info.num_actions, hidden=args.hidden_sizes,
                       norm_value=args.norm_value, cnn_activation=args.cnn_activation).to(device)
    adaptive_lr = args.kl_adaptive_lr is not None  # the rate a device tensor, adapted in place
    if (args.graph_update or adaptive_lr) and device.type == "cuda":  # recordable: a device-tensor learning rate
        optimizer = capturable_adam(agent.parameters(), args.learning_rate, 1e-5, device)
    else:
        optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5,
                                     fused=device.type == "cuda")  # one launch per step instead of one per tensor
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda it: max(1.0 - it / num_iterations, 0.0) if args.anneal_lr else 1.0)

    # ---------------------------------------------------------------- resume / run folder (rank 0 logs)
    state = TrainerState(run_args, agent, optimizer, scheduler, obs_norm=obs_norm, rew_norm=rew_norm)
    run = start_run(run_args, state, num_iterations, ctx)
    run_dir, logger, recent_returns = run.run_dir, run.logger, run.recent_returns
    start_iteration, global_step = run.iteration, run.global_step
    if adaptive_lr:  # the rate (the checkpoint's where resumed) as a tensor on the device
        tensor_learning_rate(optimizer, device)
    clock = TrainingClock(run.wall_s)  # training seconds, across --resume
    evaluation = PeriodicEvaluation(args.env_id, args.eval_episodes, args.seed + 100_000, device,
                                    args.eval_greedy, args.num_threads) if args.eval_every and ctx.is_main else None
    learner = ctx.wrap_model(agent)  # the update's forward: DDP averages the gradients over ranks
    norm_syncs = [ctx.running_stats_sync(n.rms) for n in (obs_norm, rew_norm) if n is not None]
    env_desc = "synthetic rollout" if args.synthetic else f"{envs.num_groups} group(s)"
    ranks = f" per rank | {ctx.describe()}" if ctx.is_distributed else ""
    logger.write(f"run folder {run_dir} | device {device} | GAE backend {credit.label} | "
                 f"{N} envs ({env_desc}) x {T} steps{ranks}, {num_iterations} iterations" +
                 (f" | resumed at iteration {start_iteration}" if run.resumed else ""))

    def checkpoint(path: Path, iteration: int) -> None:
        ctx.check_replicas(agent)
        state.save(path, iteration=iteration, global_step=global_step, recent_returns=recent_returns,
                   run_dir=run_dir, wall_s=clock.seconds(), ctx=ctx)

    # ---------------------------------------------------------------- storage + rollout collector
    if args.synthetic:  # the storage holds one random rollout, learned from every iteration
        rollouts = None
        buf = RolloutBuffer.allocate(T, N, info.obs_shape, torch.uint8 if info.obs_dtype == np.uint8 else torch.float32,
                                     info.action_shape, torch.long if info.discrete else torch.float32, device)
        bootstrap_obs = fill_rollout(buf, agent, seed=ctx.rank_seed(args.seed))
        with torch.no_grad():
            bootstrap_value = agent.get_value(bootstrap_obs)
    else:  # --overlap-rollout: the next rollout is collected in a thread while the update runs
        rollouts = Rollouts(envs, agent, T, device, overlap=args.overlap_rollout, obs_norm=obs_norm,
                            rew_norm=rew_norm, capture=args.cuda_graphs)
        buf = rollouts.buf  # [T, N] on the device; a resumed run restarts its episodes
        bootstrap_obs, bootstrap_value = rollouts.bootstrap_obs, rollouts.bootstrap_value  # s_T, V(s_T)
    # warm-up left out of the table: the first iteration records and compiles; overlapped, the second collects
    # its own rollout too
    tables = {name: PhaseTable(warmup=2 if args.overlap_rollout else 1) for name in credit.names}
    values_now = torch.zeros_like(buf.values)  # --advantage-recompute: the current critic's V(s_t), V(s_T)
    bootstrap_now = torch.zeros(N, device=device)
    recompute_rows = max(minibatch_size, 1 << 16)  # rows per forward pass: few launches, bounded memory
    credit.pin(buf.rewards, buf.values, buf.terminated, buf.truncated, bootstrap_value, values_now, bootstrap_now)

    def gae(values: torch.Tensor, bootstrap: torch.Tensor):
        """GAE of the rollout in storage with the critic's ``values`` [T, N] and ``bootstrap`` V(s_T) [N],
        timed as phase "ca"."""
        with torch.no_grad():
            return credit.gae(buf.rewards, values, buf.terminated, bootstrap, truncated=buf.truncated,
                              gamma=args.gamma, lam=args.gae_lambda)

    def recompute_advantages():
        """GAE again, with the current critic's values of the whole rollout (--advantage-recompute)."""
        with timer.phase("update/value_recompute"), torch.no_grad():
            flat_obs, flat_values = buf.obs.flatten(0, 1), values_now.view(-1)
            for rows in range(0, batch_size, recompute_rows):
                flat_values[rows:rows + recompute_rows] = agent.get_value(flat_obs[rows:rows + recompute_rows])
            bootstrap_now.copy_(agent.get_value(bootstrap_obs))
        return gae(values_now, bootstrap_now)

    start_time, start_step = time.perf_counter(), global_step
    clock.start()

    def advantage_moments(minibatches: torch.Tensor) -> Optional[torch.Tensor]:
        """``[K, 3]``: each minibatch's (mean, std, denominator) over its rows on every rank, in one
        all-reduce; None without other ranks (the loss computes them from its own rows)."""
        if not ctx.has_peers:
            return None
        return ctx.masked_moments(b["advantages"], b_valid, index=minibatches).loss_terms()

    loss_fn = compiled(partial(minibatch_loss, args, learner), args.compile)
    graph_step = (GraphedStep(partial(minibatch_step, args, learner, optimizer), agent.parameters(), optimizer, device)
                  if args.graph_update else None)
    interrupt = GracefulInterrupt().install()  # Ctrl-C: finish the iteration, keep a checkpoint, stop
    interrupted = False

    try:
        for iteration in range(start_iteration + 1, num_iterations + 1):
            t_iter = time.perf_counter()
            credit.start_iteration(iteration)
            global_step += global_batch

            # ------------------------------------------------------------ rollout
            ep_returns, ep_lengths = [], []
            if rollouts is not None:  # T steps of every env, and V(s_T) into bootstrap_value (overlapped: the
                # rollout collected during the last update, and the next one started)
                ep_returns, ep_lengths = rollouts.collect(timer, start_next=iteration < num_iterations)

            # ------------------------------------------------------------ credit assignment (GAE)
            advantages, returns = gae(buf.values, bootstrap_value)

            # ------------------------------------------------------------ update
            with timer.phase("update/forward"):
                if agent.value_norm is not None:  # --norm-value: the returns' statistics, before learning them
                    targets = ctx.masked_moments(returns, buf.valid)  # of every rank's rows
                    agent.value_norm.merge(targets.mean, targets.std.square(), targets.count)
                b = buf.flat(advantages=advantages, returns=returns)
                b_valid = b["valid"].float()
                source = loss_source(b, b_valid, agent.value_norm)
                mb_stats = []
            for epoch in range(args.update_epochs):
                with timer.phase("update/forward"):
                    minibatches = minibatch_indices(batch_size, minibatch_size, device)
                    moments = advantage_moments(minibatches)
                for i, mb in enumerate(minibatches):
                    if (epoch or i) and targets_due(args.advantage_recompute, epoch, i):
                        advantages, returns = recompute_advantages()
                        b["advantages"], b["returns"] = advantages.reshape(-1), returns.reshape(-1)
                        source = loss_source(b, b_valid, agent.value_norm)
                        moments = advantage_moments(minibatches)
                    if graph_step is not None:  # forward, backward, clipping and Adam: one replay
                        with timer.phase("update/graph_step"):
                            mb_stat, approx_kl = graph_step(source, mb)
                            mb_stats.append(mb_stat.clone())  # the next replay overwrites it
                        continue
                    with timer.phase("update/forward"):
                        rows = {k: x[mb] for k, x in source.items()}
                        loss, mb_stat, approx_kl = loss_fn(rows, None if moments is None else moments[i])
                        mb_stats.append(mb_stat)
                    with ctx.timed_backward(timer):  # "update/backward", under DDP also "update/allreduce"
                        optimizer.zero_grad(set_to_none=True)
                        loss.backward()
                    with timer.phase("update/optim"):
                        nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                        optimizer.step()
                        if adaptive_lr and args.kl_adaptive_every == "minibatch":  # the minibatch's KL, every rank's
                            adapt_learning_rate(optimizer, ctx.all_reduce(approx_kl, "mean"), args.kl_adaptive_lr)
                if adaptive_lr and args.kl_adaptive_every == "epoch":  # the epoch's mean KL, every rank's
                    with timer.phase("update/optim"):
                        epoch_kl = torch.stack([stat[KL_STAT] for stat in mb_stats[-len(minibatches):]]).mean()
                        adapt_learning_rate(optimizer, ctx.all_reduce(epoch_kl, "mean"), args.kl_adaptive_lr)
                if args.target_kl is not None and ctx.all_reduce(approx_kl, "mean").item() > args.target_kl:
                    break
            if not adaptive_lr:  # (the adapted rate is not the scheduler's)
                with timer.phase("update/optim"):
                    scheduler.step()
            overlapped = rollouts.join(timer) if rollouts is not None else {}  # the next rollout's phases

            # ------------------------------------------------------------ once-per-iteration readout
            secs = timer.read()  # the one device sync of the iteration
            wall = time.perf_counter() - t_iter
            stats = torch.stack(mb_stats)
            finite = bool(torch.isfinite(stats).all())
            with torch.no_grad():
                valid = b["valid"]
                y, v = b["returns"][valid], b["values"][valid]
                explained_var = (1 - (y - v).var() / y.var()).item() if y.numel() > 1 else float("nan")
            recent_returns.extend(ep_returns)
            for sync in norm_syncs:  # observation / reward statistics of every rank's rollout
                sync()
            groups = group_totals(secs)
            phases = {f"perf/{k}_s": s for k, s in {**groups, **secs, **overlapped_phases(overlapped)}.items()}
            losses = dict(zip(LOSS_STATS, stats.mean(0).tolist()))
            g = iteration_readout(ctx, phase_secs=phases, means={**losses, "losses/explained_variance": explained_var},
                                  episode_returns=ep_returns, episode_lengths=ep_lengths, recent_returns=recent_returns,
                                  finite=finite, interrupted=interrupt.requested)  # the same on every rank
            if g["nonfinite_rank"] < math.inf:
                where = f" on rank {g['nonfinite_rank']:.0f}" if ctx.is_distributed else ""
                raise NonFiniteLossError(
                    f"non-finite loss (NaN/inf){where} at iteration {iteration} (global step {global_step}); "
                    f"stopping. Last good checkpoint kept: {run_dir / 'checkpoints' / 'latest.pt'}")
            ca, upd = groups.get("ca", 0.0), groups.get("update", 0.0)
            metrics = {
                "charts/learning_rate": float(optimizer.param_groups[0]["lr"]),
                "charts/SPS": (global_step - start_step) / (time.perf_counter() - start_time),
                "charts/wall_s": clock.seconds(),
                **{k: g[k] for k in (*losses, "losses/explained_variance")},
                "perf/iteration_s": wall, "perf/iteration_sps": global_batch / wall,
                "perf/ca_share_update": ca / (ca + upd) if ca + upd > 0 else 0.0,
                "perf/ca_share_iteration": ca / wall,
                **credit.end_iteration(secs, wall),
                **{k: g[k] for k in phases},  # the slowest rank's
                **({f"perf/rank0/{k[len('perf/'):]}": s for k, s in phases.items()} if ctx.is_distributed else {}),
                **episode_metrics(g),
                **memory_metrics(g),  # perf/gpu_mem_peak_gib on CUDA
            }
            if evaluation is not None and iteration % args.eval_every == 0:
                with clock.paused():
                    metrics.update(evaluation(agent, obs_norm))
            logger.log({"charts/iteration": iteration, **metrics}, global_step)
            logger.progress(sps=metrics["perf/iteration_sps"], ret=metrics.get("charts/avg_episodic_return"))
            tables[credit.name].add(secs, wall, overlapped)  # this rank's phases: they add up to its wall clock

            if checkpoint_due(args.checkpoint_every, iteration, bool(g["interrupted"])):  # Ctrl-C: always
                checkpoint(run_dir / "checkpoints" / "latest.pt", iteration)
            if g["interrupted"]:  # a Ctrl-C on any rank: every rank stops after this iteration
                interrupted = True
                logger.write(interrupted_line("iteration", iteration, run_dir / "checkpoints" / "latest.pt"))
                break
    finally:
        if rollouts is not None:
            rollouts.close()  # after an exception: the collection in flight joined
        interrupt.restore()

    if args.save_model and not interrupted:
        checkpoint(run_dir / "checkpoints" / "final.pt", num_iterations)
    avg_return = report_end(ctx, agent, logger, tables, credit.labels, unit="iterations", estimator="GAE",
                            recent_returns=recent_returns, global_step=global_step, start_time=start_time,
                            training_s=clock.seconds())
    logger.close()
    envs.close() if envs is not None else None
    evaluation.close() if evaluation is not None else None
    return {"run_dir": str(run_dir), "global_step": global_step, "avg_return": avg_return,
            "iterations": sum(table.iterations for table in tables.values()), "interrupted": interrupted}


def cli(argv: Optional[list] = None) -> Args:
    """Parse flags; with ``--resume`` the checkpoint's saved args are the defaults."""
    return parse_trainer_args(Args, argv, description=__doc__)


if __name__ == "__main__":
    run_main(main, cli)
