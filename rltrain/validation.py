"""One validator for the flags of every trainer: rules declared once per field name.

:func:`validate` checks a trainer's ``Args`` (after ``--config`` and the flags are merged) and raises
:class:`rltrain.config.ConfigError` with the flag as the user types it::

    --learning-rate must be > 0, got -1.0

Two kinds of rules:

* **field rules** (:data:`FIELD_RULES`): one :class:`Rule` per field name, shared by every trainer
  that has a field of that name (``learning_rate`` is declared once for PPO and IMPALA).  A rule
  also rejects a value of the wrong type (a YAML preset's ``1e7`` is a string) and NaN/inf.
* **relations** (:data:`RELATIONS`): checks across fields (divisibility, one batch at least, a network
  that fits the environment's observations), run after every field rule has passed, each only where the
  ``Args`` has all the fields it reads.
  The learner batch comes from the ``Args``' own ``learner_batch()`` method
  (:class:`rltrain.minibatches.LearnerBatch`), so the geometry of each trainer is stated once, in it.

A new flag gets its rule with :func:`register` (``register("ca_shadow_every", at_least(0))``)
beside the others below, or a relation with :func:`relation`.  ``tests/test_validation.py`` asserts
that every numeric flag of both trainers has a rule.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from rltrain.config import ConfigError
from rltrain.minibatches import resolve_minibatches

__all__ = ["Rule", "FIELD_RULES", "RELATIONS", "register", "relation", "validate", "flag",
           "at_least", "greater_than", "between", "optional", "finite"]


def flag(field: str) -> str:
    """The command-line spelling of a field: ``learning_rate`` -> ``--learning-rate``."""
    return "--" + field.replace("_", "-")


@dataclass(frozen=True)
class Rule:
    """``holds(value)`` is the contract; ``requirement`` completes "--flag must be ..."."""

    requirement: str
    holds: Callable[[Any], bool]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return (_is_int(v) or isinstance(v, float)) and math.isfinite(v)


def _num(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def at_least(lo: int) -> Rule:
    """An integer ``>= lo`` (counts, sizes, periods)."""
    return Rule(f"an integer >= {lo}", lambda v: _is_int(v) and v >= lo)


def greater_than(lo: float) -> Rule:
    """A finite number ``> lo`` (rates, coefficients, clipping thresholds)."""
    return Rule(f"> {_num(lo)}", lambda v: _is_real(v) and v > lo)


def between(lo: float, hi: float, integer: bool = False) -> Rule:
    """A finite number in the closed interval ``[lo, hi]`` (discounts, lambdas, seeds)."""
    kind = "an integer " if integer else ""
    return Rule(f"{kind}in [{_num(lo)}, {_num(hi)}]",
                lambda v: (_is_int(v) if integer else _is_real(v)) and lo <= v <= hi)


def finite() -> Rule:
    """Any finite number."""
    return Rule("a finite number", _is_real)


def non_negative() -> Rule:
    """A finite number ``>= 0`` (loss coefficients)."""
    return Rule(">= 0", lambda v: _is_real(v) and v >= 0)


def sizes() -> Rule:
    """A non-empty sequence of integers ``>= 1`` (layer widths)."""
    return Rule("one or more integers >= 1", lambda v: len(v) > 0 and all(_is_int(x) and x >= 1 for x in v))


def safe_name() -> Rule:
    """One path component of letters, digits, ``.``, ``_``, ``+``, ``=``, ``-``, starting with a letter or
    digit: no path separator, no ``..``, no hidden or empty name (``--exp-name`` names a run folder)."""
    return Rule("a name of letters, digits, '.', '_', '+', '=', '-' starting with a letter or digit (no '/')",
                lambda v: isinstance(v, str) and v[:1].isalnum() and all(c.isalnum() or c in "._+=-" for c in v))


def optional(rule: Rule) -> Rule:
    """``rule``, or unset (``None``)."""
    return Rule(f"{rule.requirement} (or unset)", lambda v: v is None or rule.holds(v))


FIELD_RULES: Dict[str, Rule] = {}
RELATIONS: List[Tuple[Tuple[str, ...], Callable[[Any], Optional[str]]]] = []


def register(field: str, rule: Rule) -> None:
    """Declare the rule of ``field``; a field has one rule (a second declaration is an error)."""
    if field in FIELD_RULES:
        raise ValueError(f"a rule for {field!r} is already registered: {FIELD_RULES[field].requirement}")
    FIELD_RULES[field] = rule


def relation(*fields: str):
    """Decorator: register ``check(args) -> message or None``, run where ``args`` has all ``fields``."""
    def deco(check: Callable[[Any], Optional[str]]):
        RELATIONS.append((fields, check))
        return check
    return deco


def validate(args: Any) -> None:
    """Raise :class:`ConfigError` for the first flag of ``args`` (a dataclass) that breaks a rule."""
    for f in dataclasses.fields(args):
        rule = FIELD_RULES.get(f.name)
        value = getattr(args, f.name)
        if rule is not None and not rule.holds(value):
            raise ConfigError(f"{flag(f.name)} must be {rule.requirement}, got {value!r}")
    for fields, check in RELATIONS:
        if all(hasattr(args, name) for name in fields):
            message = check(args)
            if message:
                raise ConfigError(message)


# ----------------------------------------------------------------------------- every trainer
for _field, _rule in {
    "exp_name": safe_name(),  # part of the run folder's name
    "seed": between(0, 2**30, integer=True),  # EnvPool seeds are int32; IMPALA adds an offset per actor
    "checkpoint_every": at_least(0),
    "eval_every": at_least(0),
    "eval_episodes": at_least(1),
    "episodes": at_least(1),  # scripts/evaluate.py
    "fps": at_least(1),  # scripts/evaluate.py
    "num_envs": at_least(1),
    "num_threads": at_least(0),
    "torch_threads": at_least(0),
    "total_timesteps": at_least(0),  # 0: the trainer's default budget (rltrain.minibatches.step_budget)
    "num_steps": at_least(1),
    "num_minibatches": at_least(0),
    "minibatch_size": at_least(0),
    "update_epochs": at_least(1),
    "learning_rate": greater_than(0),
    "gamma": between(0, 1),
    "ent_coef": non_negative(),
    "vf_coef": non_negative(),
    "max_grad_norm": greater_than(0),
    "ca_shadow_every": at_least(0),
    "hidden_sizes": sizes(),
    "dist_timeout_s": greater_than(0),
    # ----------------------------------------------------------------------------- PPO
    "gae_lambda": between(0, 1),
    "clip_coef": greater_than(0),
    "target_kl": optional(greater_than(0)),
    "kl_adaptive_lr": optional(greater_than(0)),
    # ----------------------------------------------------------------------------- IMPALA
    "env_groups": at_least(0),
    "num_actors": at_least(1),
    "learner_batch_envs": at_least(0),
    "env_batch_size": at_least(0),
    "queue_size": at_least(1),
    "param_refresh_every": at_least(1),
    "vtrace_lambda": between(0, 1),
    "rho_bar": greater_than(0),
    "c_bar": greater_than(0),
    "pg_rho_bar": greater_than(0),
    "stop_at_return": optional(finite()),
    "actor_timeout_s": greater_than(0),
}.items():
    register(_field, _rule)


@relation("graph_update", "compile")
def _one_way_to_cut_launches(args) -> Optional[str]:
    if args.graph_update and args.compile:
        return ("--graph-update and --compile each cut the update's launches: choose one (a preset's graph_update: "
                "true is turned off by --no-graph-update)")
    return None


@relation("kl_adaptive_lr", "anneal_lr")
def _one_learning_rate_schedule(args) -> Optional[str]:
    if args.kl_adaptive_lr is not None and args.anneal_lr:
        return ("--kl-adaptive-lr sets the learning rate from the policy's KL during the update and --anneal-lr "
                "would overwrite it every iteration: give --no-anneal-lr with it")
    return None


@relation("kl_adaptive_every", "kl_adaptive_lr")
def _kl_schedule_needs_a_target(args) -> Optional[str]:
    if args.kl_adaptive_every != "minibatch" and args.kl_adaptive_lr is None:
        return (f"--kl-adaptive-every {args.kl_adaptive_every} sets when --kl-adaptive-lr adapts the rate; without "
                "--kl-adaptive-lr nothing adapts it (give a target KL)")
    return None


@relation("overlap_rollout", "synthetic")
def _overlap_needs_envs(args) -> Optional[str]:
    if args.overlap_rollout and args.synthetic:
        return "--overlap-rollout steps the envs during the update; --synthetic has no envs (choose one)"
    return None


@relation("num_envs", "num_actors")
def _envs_split_over_actors(args) -> Optional[str]:
    if args.num_envs % args.num_actors:
        return f"--num-envs {args.num_envs} must be a multiple of --num-actors {args.num_actors}"
    return None


@relation("num_envs", "env_groups")
def _env_groups_split_the_envs(args) -> Optional[str]:
    if args.env_groups and args.num_envs % args.env_groups:
        return f"--env-groups {args.env_groups} must divide --num-envs {args.num_envs}"
    return None


@relation("num_envs", "num_actors", "learner_batch_envs")
def _learner_batch_within_an_actor(args) -> Optional[str]:
    width = args.num_envs // args.num_actors
    if args.learner_batch_envs > width:
        return (f"--learner-batch-envs must be in [0, num_envs / num_actors = {width}] (0: {width}), "
                f"got {args.learner_batch_envs}")
    if args.learner_batch_envs and width % args.learner_batch_envs:  # batches would straddle rounds of the envs
        return (f"--learner-batch-envs {args.learner_batch_envs} must divide an actor's envs (num_envs / num_actors "
                f"= {width}), so that every round of them makes whole learner batches")
    return None


IMAGE_NETWORKS = ("nature_cnn", "impala_resnet")


@relation("agent", "env_id")
def _network_fits_the_observations(args) -> Optional[str]:
    if args.agent in IMAGE_NETWORKS:
        from envs import spec_info  # the env's spaces from EnvPool's spec, no env made

        shape = spec_info(args.env_id, 1).obs_shape
        if len(shape) != 3:
            return (f"--agent {args.agent} needs image observations [C, H, W]; {args.env_id}'s have shape "
                    f"{tuple(shape)}: use --agent mlp (or auto)")
    return None


@relation("num_envs", "num_actors", "env_batch_size")
def _recv_batch_within_an_actor(args) -> Optional[str]:
    width = args.num_envs // args.num_actors
    if args.env_batch_size > width:
        return (f"--env-batch-size must be in [0, num_envs / num_actors = {width}], got {args.env_batch_size}")
    return None


@relation("learner_batch", "num_minibatches", "minibatch_size", "total_timesteps")
def _batch_splits_and_fits(args) -> Optional[str]:
    batch = args.learner_batch()
    resolve_minibatches(batch, args.num_minibatches, args.minibatch_size)  # raises its own ConfigError
    if 0 < args.total_timesteps < batch.size:
        return (f"--total-timesteps {args.total_timesteps} is smaller than one batch "
                f"({batch.rows} steps x {batch.columns} envs = {batch.size})")
    return None
