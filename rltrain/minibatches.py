"""How a trainer's learner batch splits into minibatches: ``--num-minibatches`` or ``--minibatch-size``.

A learner batch is ``rows x columns`` environment steps (``num_steps`` x envs).  PPO shuffles single
steps into minibatches; IMPALA keeps whole env columns (a minibatch is a set of trajectories), so
its minibatch size is a multiple of ``num_steps``.  Either flag may be 0, meaning "derived from the
other"; when both are given they must describe the same split.  A preset that gives
``minibatch_size`` (and ``num_minibatches: 0``) keeps its minibatch size when ``--num-envs`` changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from rltrain.config import ConfigError

__all__ = ["LearnerBatch", "resolve_minibatches", "step_budget"]


@dataclass(frozen=True)
class LearnerBatch:
    """One learner batch: ``rows`` steps (time) x ``columns`` envs; ``whole_columns``: minibatches
    take whole env columns (IMPALA's trajectories) instead of single steps (PPO)."""

    rows: int
    columns: int
    whole_columns: bool = False

    @property
    def size(self) -> int:
        """Environment steps in the batch."""
        return self.rows * self.columns

    @property
    def unit(self) -> int:
        """Steps in the smallest piece a minibatch is made of: one step, or one env column."""
        return self.rows if self.whole_columns else 1


def resolve_minibatches(batch: LearnerBatch, num_minibatches: int, minibatch_size: int) -> tuple[int, int]:
    """``(num_minibatches, minibatch_size)`` with ``num_minibatches * minibatch_size == batch.size``.

    ``minibatch_size`` counts environment steps.  0 in either argument derives it from the other
    (both 0 is an error); both given must agree.  Raises :class:`ConfigError` naming the flags."""
    if num_minibatches < 0 or minibatch_size < 0:
        raise ConfigError(f"--num-minibatches and --minibatch-size must be >= 0 (0: derived from the other), "
                          f"got {num_minibatches} and {minibatch_size}")
    pieces = batch.size // batch.unit  # steps (PPO) or env columns (IMPALA) in the batch
    what = ("env columns (learner_batch_envs, or num_envs / num_actors)" if batch.whole_columns
            else "steps (num_envs * num_steps)")
    if minibatch_size == 0:
        if num_minibatches == 0:
            raise ConfigError("--num-minibatches and --minibatch-size are both 0; give one of them")
        if pieces % num_minibatches:
            raise ConfigError(f"--num-minibatches {num_minibatches} does not divide the batch of {pieces} {what}")
        return num_minibatches, batch.size // num_minibatches
    if num_minibatches and num_minibatches * minibatch_size != batch.size:  # both given: they must agree first
        steps = num_minibatches * minibatch_size
        raise ConfigError(f"--num-minibatches {num_minibatches} and --minibatch-size {minibatch_size} disagree: "
                          f"{num_minibatches} minibatches of {minibatch_size} steps are {steps} steps, a batch is "
                          f"{batch.size} ({batch.rows} steps x {batch.columns} envs); give one of them and set the "
                          f"other to 0")
    if minibatch_size % batch.unit:
        raise ConfigError(f"--minibatch-size {minibatch_size} is not a whole number of env columns: it must be a "
                          f"multiple of --num-steps {batch.rows} (minibatches take whole trajectories)")
    if batch.size % minibatch_size:
        raise ConfigError(f"--minibatch-size {minibatch_size} does not divide the batch of {batch.size} steps "
                          f"({batch.rows} steps x {batch.columns} envs)")
    return batch.size // minibatch_size, minibatch_size


def step_budget(total_timesteps: int, batch: LearnerBatch, default_steps: int, rollouts: int = 40) -> int:
    """``total_timesteps``, or for 0 (the trainers' default) ``default_steps`` raised to ``rollouts`` learner
    batches where those are more: a default that fits any ``--num-envs`` (PPO on CartPole-v1 with 4096 envs
    reaches an average return of 500 in about 33 rollouts)."""
    return total_timesteps or max(default_steps, rollouts * batch.size)
