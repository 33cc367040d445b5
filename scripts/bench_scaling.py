"""Multi-GPU scaling of the trainers under torchrun, and a fault check, in one command: JSON, PNG, table.

    python scripts/bench_scaling.py --fault-check               # K = 1 and each power of two up to the GPUs
    python scripts/bench_scaling.py --ranks 1,8 --timed ppo-breakout=2   # these K; 2 timed Breakout rounds
    python scripts/bench_scaling.py --quick                     # tiny CartPole on the CPU (Gloo), K = 1, 2
    python scripts/bench_scaling.py --markdown docs/results/multi_gpu_scaling.json   # its table

Every case gives each rank the same work (the sizes below are per rank), so K ranks step K times the
environments: ``--num-envs`` is the global count.  For each case and each K in turn, in this process,
the trainer benchmark's :func:`~rltrain.bench.trainer_runs.run_trainer` runs the trainer under ``torchrun
--standalone --nproc-per-node K`` (K = 1 too: the baseline pays for the same launch), and its metrics
after the warm-up rounds give (:func:`~rltrain.bench.trainer_runs.summarize`):

* ``sps``: total env steps per second of all ranks; ``efficiency`` = sps(K) / (K * sps(1));
* ``phases_ms``: each phase's ms per iteration (IMPALA: per learner update), the slowest rank's;
* ``allreduce_share``: the gradient all-reduce time the backward did not hide (``update/allreduce``,
  IMPALA ``learner/allreduce``) / the iteration (none with one rank: no DDP);
* ``gpu_mem_peak_gib``: the peak ``torch.cuda.max_memory_allocated`` of the rank that used most (CUDA).

Cases (per rank): ``ppo-breakout`` Breakout-v5 4096 x 16 (the Atari preset, 4 epochs x 4 minibatches),
``ppo-cartpole`` CartPole-v1 4096 x 128, ``impala-cartpole`` CartPole-v1 4096 x 32 (2 actors, learner
batches of 512 envs): bench_trainer's cases of those names.

``--fault-check`` (first: it is short, and a call cut short keeps it): PPO CartPole on K ranks
(``--fault-ranks``, default the largest K) checkpointing every iteration; once the first checkpoint
exists the last rank is killed with SIGKILL.  Recorded: seconds until the launcher and until every worker
had exited, the exit code, whether torchrun's failure summary names the killed rank, the collective
timeout (``--dist-timeout-s``); then ``--resume latest.pt`` on K ranks for 3 iterations, and whether its
first logged step is the checkpoint's plus one iteration.

The code: ``rltrain/bench/scaling.py`` (the runs), ``rltrain/bench/scaling_tables.py`` (the table).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Sequence

import tyro

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a plain checkout too

from rltrain.bench.scaling import DEFAULT_CASES, run  # noqa: E402
from rltrain.bench.scaling_tables import markdown  # noqa: E402


@dataclass
class Args:
    cases: str = DEFAULT_CASES
    """comma-separated cases: ppo-breakout, ppo-cartpole, impala-cartpole (sizes per rank)"""
    ranks: str = ""
    """comma-separated rank counts K (default: 1 and every power of two up to the GPUs; no GPU: 1,2)"""
    timed: str = ""
    """timed rounds after the warm-up, NAME=N for each case named (e.g. ppo-breakout=2); others keep their own"""
    fault_check: bool = False
    """kill the last rank of a PPO CartPole run after its first checkpoint, then resume it (see above)"""
    fault_ranks: int = 0
    """ranks of the fault check (0: the largest of --ranks)"""
    dist_timeout_s: float = 60.0
    """the trainers' --dist-timeout-s in the fault check (the collective timeout)"""
    out: Optional[str] = None
    """JSON file (default docs/results/multi_gpu_scaling.json; --quick: a temporary file); the PNG beside it"""
    quick: bool = False
    """tiny CartPole cases on the CPU with Gloo, K = 1, 2, and the fault check (a test, not a measurement)"""
    run_timeout: int = 300
    """seconds before a trainer run is given up (recorded as an error)"""
    markdown: Optional[str] = None
    """print the Markdown table of this results file and exit (nothing is run)"""


def main(argv: Optional[Sequence[str]] = None) -> Dict:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = tyro.cli(Args, args=argv, description=__doc__)
    if args.markdown:
        text = markdown(json.loads(Path(args.markdown).read_text()))
        print(text)
        return {"markdown": text}
    return run(args, argv)


if __name__ == "__main__":
    main()
