"""Mutation check of the trainers: do the fast tests catch a wrong trainer?

    python scripts/mutation_check.py                     # every mutant: some minutes on 2 cores
    python scripts/mutation_check.py --list              # the mutants and the tests that should kill each
    python scripts/mutation_check.py ppo-clip-min vtrace-rho-c-swapped   # some of them

Each mutant of :data:`MUTANTS` is one small, realistic bug: a file, an exact piece of its source (found
there exactly once), its replacement, and the tests expected to fail on it.  The script copies the
checkout's files (tracked, and untracked unless ignored) into a temporary folder, runs the selected
mutants' tests there unmutated (they must pass), then for each mutant writes its replacement, runs its
tests (``pytest -x -m "not exhaustive and not slow"``) and restores the file.  A mutant whose tests all
pass survives: either the tests miss a bug of that kind, or the change does not alter what the trainer
computes.  Not part of the test suite (``make test``); ``tests/test_mutation_check.py`` keeps the list from
rotting (each source text still found exactly once, each named test still there).

Exit status: 0 when every mutant was killed; 1 when one survived or the unmutated tests failed; 2 for bad
input (an unknown mutant name, a source text not found exactly once).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["Mutant", "MUTANTS", "MutantError", "mutate", "main"]


@dataclass(frozen=True)
class Mutant:
    """``path`` (relative to the checkout) with its one occurrence of ``find`` replaced by ``replace``;
    ``tests``: pytest arguments (files or test ids) of which at least one should fail."""

    name: str
    path: str
    find: str
    replace: str
    tests: Tuple[str, ...]


class MutantError(ValueError):
    """A mutant does not apply: its source text is not in its file exactly once."""


LOSSES = "tests/test_losses_reference.py"
PPO_LOSS = f"{LOSSES}::test_ppo_loss_is_the_clipped_objective"
IMPALA_LOSS = f"{LOSSES}::test_impala_learner_step_is_the_papers"
WIRING = "tests/test_credit_wiring.py"
PPO_WIRING = f"{WIRING}::test_ppo_advantages_are_gae_of_the_scripted_rollout"
IMPALA_WIRING = f"{WIRING}::test_impala_targets_are_the_papers_on_the_scripted_rollout"
RECIPE_KL = "tests/test_ppo_recipe.py::test_kl_adapted_lr_follows_the_rule_and_its_bounds"
RECIPE_KL_EPOCH = "tests/test_ppo_recipe.py::test_per_epoch_adaptation_takes_the_epochs_mean_kl"
RECIPE_VALUE_LOSS = "tests/test_ppo_recipe.py::test_the_value_loss_compares_the_head_with_normalised_targets"
OVERLAP_STALE = "tests/test_overlap.py::test_rollout_k_plus_1_acts_with_the_parameters_from_before_update_k"
RESUME = "tests/test_resume_state.py"
PHASES = "tests/test_phase_table.py"

MUTANTS: Tuple[Mutant, ...] = (
    # ---- PPO's loss (scripts/ppo.py minibatch_loss)
    Mutant("ppo-clip-min", "scripts/ppo.py", "pg_loss = masked_mean(torch.max(-mb_adv * ratio,",
           "pg_loss = masked_mean(torch.min(-mb_adv * ratio,", (PPO_LOSS,)),
    Mutant("ppo-ignores-norm-adv", "scripts/ppo.py", "    if args.norm_adv:\n        mb_adv = (mb_adv",
           "    if False:\n        mb_adv = (mb_adv", (PPO_LOSS,)),
    Mutant("ppo-value-clip-min", "scripts/ppo.py", "v_loss_unclipped = torch.max(v_loss_unclipped,",
           "v_loss_unclipped = torch.min(v_loss_unclipped,", (PPO_LOSS,)),
    Mutant("ppo-value-clip-around-new-value", "scripts/ppo.py", 'v_clipped = rows["values"] + (newvalue',
           "v_clipped = newvalue + (newvalue", (PPO_LOSS,)),
    Mutant("ppo-entropy-sign", "scripts/ppo.py", "loss = pg_loss - args.ent_coef * entropy_loss",
           "loss = pg_loss + args.ent_coef * entropy_loss", (PPO_LOSS,)),
    Mutant("ppo-log-ratio-sign", "scripts/ppo.py", 'logratio = newlogprob - rows["logprobs"]',
           'logratio = rows["logprobs"] - newlogprob', (PPO_LOSS,)),
    Mutant("ppo-valid-mask-dropped", "scripts/ppo.py", 'm, mb_adv = rows["valid"], rows["advantages"]',
           'm, mb_adv = torch.ones_like(rows["valid"]), rows["advantages"]', (PPO_LOSS,)),
    # ---- PPO's credit assignment (scripts/ppo.py gae) and its collector
    Mutant("ppo-gae-without-truncated", "scripts/ppo.py", "bootstrap, truncated=buf.truncated,", "bootstrap,",
           (PPO_WIRING,)),
    Mutant("ppo-gae-default-gamma", "scripts/ppo.py", "gamma=args.gamma, lam=args.gae_lambda)",
           "lam=args.gae_lambda)", (PPO_WIRING,)),
    Mutant("ppo-gae-default-lambda", "scripts/ppo.py", "gamma=args.gamma, lam=args.gae_lambda)",
           "gamma=args.gamma)", (PPO_WIRING,)),
    Mutant("collector-drops-truncations", "rltrain/collector.py", "torch.gt(out[:, 2], 0, out=buf.truncated)",
           "buf.truncated.zero_()", (PPO_WIRING,)),
    Mutant("collector-valid-not-carried", "rltrain/collector.py", "buf.valid[0] = ~self.prev_done",
           "buf.valid[0] = True", (PPO_WIRING,)),
    # ---- IMPALA's learner step (scripts/impala.py policy_and_critic, assign_credit, minibatch_loss)
    Mutant("impala-log-ratio-sign", "scripts/impala.py", "logp.detach() - mb.logprobs",
           "mb.logprobs - logp.detach()", (IMPALA_LOSS,)),
    Mutant("vtrace-rho-c-swapped", "scripts/impala.py", "rho_bar=args.rho_bar, c_bar=args.c_bar,",
           "rho_bar=args.c_bar, c_bar=args.rho_bar,", (IMPALA_LOSS,)),
    Mutant("vtrace-pg-clipped-by-rho-bar", "scripts/impala.py", "c_bar=args.c_bar, pg_rho_bar=args.pg_rho_bar)",
           "c_bar=args.c_bar, pg_rho_bar=args.rho_bar)", (IMPALA_LOSS,)),
    Mutant("vtrace-default-gamma", "scripts/impala.py",
           "truncated=mb.truncated, gamma=args.gamma, lam=args.vtrace_lambda,\n",
           "truncated=mb.truncated, lam=args.vtrace_lambda,\n", (IMPALA_LOSS,)),
    Mutant("vtrace-default-lambda", "scripts/impala.py", "lam=args.vtrace_lambda,\n                rho_bar=",
           "rho_bar=", (IMPALA_LOSS,)),
    Mutant("vtrace-without-truncated", "scripts/impala.py", "critic[Tm],\n                truncated=mb.truncated, ",
           "critic[Tm],\n                ", (IMPALA_WIRING,)),
    Mutant("retrace-without-truncated", "scripts/impala.py",
           "mb.terminated,\n            truncated=mb.truncated, gamma=args.gamma, lam=args.vtrace_lambda, c_bar",
           "mb.terminated,\n            gamma=args.gamma, lam=args.vtrace_lambda, c_bar", (IMPALA_WIRING,)),
    Mutant("acer-without-truncation", "scripts/impala.py", "log_rhos.exp().clamp(max=args.pg_rho_bar) * (q_ret",
           "log_rhos.exp() * (q_ret", (IMPALA_LOSS,)),
    Mutant("acer-baseline-q-taken", "scripts/impala.py", "* (q_ret - state_value)", "* (q_ret - q_taken)",
           (IMPALA_LOSS,)),
    Mutant("impala-ignores-norm-adv", "scripts/impala.py", "    if args.norm_adv:\n        adv = (adv",
           "    if False:\n        adv = (adv", (IMPALA_LOSS,)),
    Mutant("impala-entropy-sign", "scripts/impala.py", "- args.ent_coef * ent\n", "+ args.ent_coef * ent\n",
           (IMPALA_LOSS,)),
    Mutant("impala-valid-mask-dropped", "scripts/impala.py", "    valid = mb.valid.float()",
           "    valid = torch.ones_like(mb.rewards)", (IMPALA_LOSS,)),
    Mutant("assembler-valid-not-recorded", "envs/async_collector.py", "self.valid[rows, ids] = ~self.last_done[ids]",
           "self.valid[rows, ids] = True", (IMPALA_WIRING,)),
    # ---- checkpoint and resume (rltrain/trainer.py)
    Mutant("checkpoint-optimizer-without-state", "rltrain/trainer.py", '"optimizer": self.optimizer.state_dict(),',
           '"optimizer": {**self.optimizer.state_dict(), "state": {}},', (RESUME,)),
    Mutant("resume-scheduler-not-restored", "rltrain/trainer.py",
           '        self.scheduler.load_state_dict(ckpt["scheduler"])\n', "", (RESUME,)),
    Mutant("resume-rng-not-restored", "rltrain/trainer.py", '        set_rng_state(rank_state["rng"])\n', "",
           (RESUME,)),
    Mutant("resume-normalisers-not-restored", "rltrain/trainer.py", "obj.load_state_dict(rank_state[name])",
           "pass", (RESUME,)),
    Mutant("resume-episode-window-lost", "rltrain/trainer.py",
           '        recent.extend(mine.get("recent_returns", []))\n', "", (RESUME,)),
    # ---- PPO's recipe flags and its overlapped rollout
    Mutant("kl-lr-rule-inverted", "rltrain/adaptive_lr.py", "torch.where(kl > 2.0 * target, lower,",
           "torch.where(kl > 2.0 * target, higher,", (RECIPE_KL,)),
    Mutant("kl-epoch-rate-from-the-last-minibatch", "scripts/ppo.py", "for stat in mb_stats[-len(minibatches):]",
           "for stat in mb_stats[-1:]", (RECIPE_KL_EPOCH,)),
    Mutant("norm-value-targets-raw", "scripts/ppo.py",
           'source["returns"], source["values"] = value_norm.normalize(b["returns"]), value_norm.normalize(b["values"])',
           'source["returns"], source["values"] = b["returns"], b["values"]', (RECIPE_VALUE_LOSS,)),
    Mutant("overlap-acts-with-the-updated-parameters", "rltrain/overlap.py",
           "                    copy_module_state(self.acting, self.agent)  # the parameters before",
           "                    pass  # the parameters before", (OVERLAP_STALE,)),
    # ---- phase timers (rltrain/timers.py)
    Mutant("phase-table-total-without-ca", "rltrain/timers.py", "total = sum(self.totals.values()) or 1.0",
           'total = sum(v for k, v in self.totals.items() if k != "ca") or 1.0', (PHASES,)),
    Mutant("phase-table-keeps-the-last-iteration", "rltrain/timers.py", "self.totals[k] += v", "self.totals[k] = v",
           (PHASES,)),
)


def mutate(text: str, mutant: Mutant) -> str:
    """``text`` with the mutant's one occurrence of its source text replaced; :class:`MutantError` when the
    source text occurs there other than once."""
    count = text.count(mutant.find)
    if count != 1:
        raise MutantError(f"mutant {mutant.name}: its source text occurs {count} times in {mutant.path} "
                          f"(must be once): {mutant.find!r}")
    return text.replace(mutant.find, mutant.replace)


def copy_checkout(src: Path, dest: Path) -> None:
    """The checkout's files as they are in the working tree (tracked, and untracked unless ignored)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=src,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (src / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src / name, dest / name)


def _env(copy: Path) -> Dict[str, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(copy), os.environ.get("PYTHONPATH", "")]),
               PYTHONDONTWRITEBYTECODE="1")  # no bytecode cache: a mutant of the same size reads as new source
    env.pop("PYTEST_ADDOPTS", None)
    return env


def check_imports_from(copy: Path) -> None:
    """The copy's packages are the ones its tests import (not an installed checkout's)."""
    out = subprocess.run([sys.executable, "-c", "import rltrain, envs; print(rltrain.__file__); print(envs.__file__)"],
                         cwd=copy, env=_env(copy), capture_output=True, text=True, check=True).stdout.split()
    if not all(Path(p).resolve().is_relative_to(copy.resolve()) for p in out):
        raise RuntimeError(f"the copy's tests would import packages from outside it: {out}")


def run_tests(copy: Path, tests: Sequence[str], timeout: float) -> Tuple[bool, str]:
    """``(passed, the first failure or the summary line)`` of the fast tests ``tests`` in ``copy``."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-rfE", "-p", "no:cacheprovider", "-m",
           "not exhaustive and not slow", *tests]
    try:
        done = subprocess.run(cmd, cwd=copy, env=_env(copy), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout:g} s"
    lines = done.stdout.strip().splitlines()
    failed = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    return done.returncode == 0, (failed[0] if failed else lines[-1] if lines else done.stderr.strip()[-300:])


def _select(names: Sequence[str]) -> List[Mutant]:
    by_name = {m.name: m for m in MUTANTS}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise MutantError(f"unknown mutant(s) {', '.join(unknown)}; --list shows them")
    return [by_name[n] for n in names] if names else list(MUTANTS)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mutants", nargs="*", help="mutant names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants and their tests, run nothing")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds for one mutant's tests")
    args = parser.parse_args(argv)
    try:
        mutants = _select(args.mutants)
        for m in mutants:
            mutate((ROOT / m.path).read_text(), m)
    except (MutantError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.list:
        for m in mutants:
            print(f"{m.name:<38} {m.path:<24} {' '.join(m.tests)}")
        return 0

    with tempfile.TemporaryDirectory(prefix="mutation_check.") as tmp:
        copy = Path(tmp)
        copy_checkout(ROOT, copy)
        check_imports_from(copy)
        baseline = sorted({t for m in mutants for t in m.tests})
        print(f"unmutated: {len(baseline)} test selection(s) ...", flush=True)
        ok, summary = run_tests(copy, baseline, args.timeout * 2)
        if not ok:
            print(f"the unmutated copy fails its tests: {summary}")
            return 1
        survivors, width = [], max(len(m.name) for m in mutants)
        for m in mutants:
            path = copy / m.path
            original = path.read_text()
            path.write_text(mutate(original, m))
            t0 = time.perf_counter()
            try:
                passed, summary = run_tests(copy, m.tests, args.timeout)
            finally:
                path.write_text(original)
            verdict = "SURVIVED" if passed else "killed"
            if passed:
                survivors.append(m.name)
            print(f"{verdict:<9} {m.name:<{width}} {time.perf_counter() - t0:5.0f} s  {_short(summary)}", flush=True)
    print(f"{len(mutants) - len(survivors)} of {len(mutants)} mutants killed"
          + (f"; survived: {', '.join(survivors)}" if survivors else ""))
    return 1 if survivors else 0


def _short(summary: str, width: int = 110) -> str:
    summary = re.sub(r"\s+", " ", summary)
    return summary if len(summary) <= width else summary[:width - 3] + "..."


if __name__ == "__main__":
    sys.exit(main())
