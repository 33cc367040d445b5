"""End-to-end speedup study: how much faster training gets when credit assignment uses the fused
kernels, measured on real training runs and set against Amdahl's law.

    python scripts/speedup_study.py --quick                  # a tiny version of everything, CPU, < 1 min
    python scripts/speedup_study.py --preset gpu             # one GPU, ~6-7 min: the points of docs/study.md
    python scripts/speedup_study.py --estimators gae --num-steps 32 128 512 2048 --batch-budget 524288 \\
        --recompute once epoch --backends loop compile triton captured
    python scripts/speedup_study.py --preset gpu --list      # the points and their trainer commands; runs nothing

A point is one training configuration: an estimator (``gae``: ``scripts/ppo.py``; ``vtrace`` and
``retrace``: ``scripts/impala.py``), a workload (environment and network), N environments x T steps,
epochs x minibatches, ``--advantage-recompute`` and real or ``--synthetic`` rollouts.  The study runs
the product of the axis flags, or a named ``--preset``.  Each point is ONE trainer run, in this
process, whose backends take turns by iteration (``--ca-backend loop,compile,triton,captured``), so
each of them learns from the same run on the same machine state; ``--separate-processes`` runs one
process per backend instead (a cold comparison).  The first backend is the baseline.  Warm-up rounds
(compilation, CUDA-graph capture) are left out and reported; the arithmetic (share s, kernel speedup
k, Amdahl's prediction, the measured speedup's median and IQR over rounds) is in ``rltrain/study.py``.

Outputs, under ``--out-dir``: ``results.jsonl`` (one line per point and backend, written as the
study goes), ``results.csv``, ``results.md``, ``results.json`` (``meta`` and every record: the form of
``docs/results/speedup_study.json``), ``phases.png``, ``measured_vs_predicted.png``,
``speedup_vs_share.png``, ``meta.json`` (device and versions), ``logs/<point>/<backend>/`` (each
backend's steady rounds for TensorBoard, and wandb with ``--wandb``: group ``study``, the backend as
tag), ``runs/<point>/`` (the trainer runs and their output); the table is printed last.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import itertools
import json
import math
import os
import shlex
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Literal, Optional, Sequence, Tuple


ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(ROOT))  # run from a plain checkout too

from rltrain.config import ConfigError, exit_on_config_error, parse_args  # noqa: E402
from rltrain.credit import CreditAssignment, RECOMPUTE_MODES  # noqa: E402
from rltrain.logger import Logger, wandb_mode  # noqa: E402
from rltrain.machine import machine_info  # noqa: E402
from rltrain.runtime import select_device  # noqa: E402
from rltrain.study import (CA_KEYS, compact_table, flat_record, markdown_table, rotation_rounds,  # noqa: E402
                           separate_rounds, summarize)
from rltrain.timers import PhaseTimer  # noqa: E402
from rltrain.trainer_process import load_trainer  # noqa: E402

# workload -> (EnvPool id, --agent, --hidden-sizes (MLP only))
WORKLOADS: Dict[str, Tuple[str, str, Tuple[int, ...]]] = {
    "cartpole-mlp64x2": ("CartPole-v1", "mlp", (64, 64)),
    "cartpole-mlp256x3": ("CartPole-v1", "mlp", (256, 256, 256)),
    "breakout-nature": ("Breakout-v5", "nature_cnn", ()),
    "breakout-resnet": ("Breakout-v5", "impala_resnet", ()),
    "hopper-mlp64x2": ("Hopper-v4", "mlp", (64, 64)),
}
ESTIMATORS = {"gae": "ppo", "vtrace": "impala", "retrace": "impala"}
SUMMARY_KEYS = ("share", "share_update", "kernel_speedup", "predicted_speedup", "measured_speedup",
                "measured_q25", "measured_q75", "other_ratio", "iteration_s", "ca_s")


@dataclass(frozen=True)
class Point:
    """One training configuration of the study (module docstring)."""

    estimator: str
    workload: str
    num_envs: int
    num_steps: int
    epochs: int = 4
    minibatches: int = 4
    recompute: str = "once"
    synthetic: bool = False
    rounds: Optional[int] = None  # the study's --rounds unless set
    est_s: Optional[float] = None  # estimated seconds on the GPU machine, every backend and the warm-up included
    why: str = ""

    @property
    def trainer(self) -> str:
        return ESTIMATORS[self.estimator]

    @property
    def name(self) -> str:
        return (f"{self.estimator}-{self.workload}-{self.num_envs}x{self.num_steps}-e{self.epochs}m{self.minibatches}-"
                f"{self.recompute}" + ("-synthetic" if self.synthetic else ""))


@dataclass(frozen=True)
class Preset:
    points: Tuple[Point, ...]
    backends: Tuple[str, ...]
    rounds: int
    warmup_rounds: int = 1
    time_limit_s: float = 0.0


def _product(estimators=("gae",), workloads=("cartpole-mlp64x2",), shapes=((4096, 128),), schedules=((4, 4),),
             recompute=("once",), synthetic=(False,)) -> Tuple[Point, ...]:
    return tuple(Point(e, w, n, t, ep, mb, r, s) for e, w, (n, t), (ep, mb), r, s
                 in itertools.product(estimators, workloads, shapes, schedules, recompute, synthetic))


MLP = "cartpole-mlp64x2"
PRESETS: Dict[str, Preset] = {
    # CPU, under a minute: every trainer path once (real and synthetic, each recompute mode)
    "quick": Preset(points=(
        Point("gae", MLP, 4, 32, 2, 2, "once"),
        Point("gae", MLP, 4, 32, 2, 2, "minibatch", synthetic=True),
        Point("vtrace", MLP, 4, 16, 1, 2, "minibatch"),
        Point("retrace", MLP, 4, 16, 2, 2, "epoch", synthetic=True),
    ), backends=("loop", "triton", "captured"), rounds=2),
    # one H100/H200 with 16 cores in <= 8 minutes; most telling first (the time limit drops the tail);
    # est_s: setup + first compile of a new shape (~20 s; ~40 s for the first in the process) +
    # (warm-up + rounds) x 4 backends x the iteration's estimated time
    "gpu": Preset(points=(
        Point("gae", MLP, 4096, 128, 4, 4, "once", est_s=65,
              why="the issue's configuration: 0.4% share with the loop, the kernel cannot matter"),
        Point("gae", MLP, 1, 2048, 10, 32, "epoch", est_s=33,
              why="MuJoCo-style PPO shapes (1 env x 2048 steps, 10 epochs x 32 minibatches of 64), advantages recomputed every epoch ('What matters in on-policy RL'): ~15% share"),
        Point("gae", MLP, 1, 2048, 10, 8, "minibatch", rounds=3, est_s=24,
              why="the same, recomputed before every minibatch (10 epochs x 8: 80 GAE calls per iteration): the share's far end"),
        Point("gae", MLP, 1, 2048, 10, 32, "once", est_s=52,
              why="the same shapes, advantages once (the usual PPO): ~2% share"),
        Point("vtrace", MLP, 256, 256, 2, 8, "minibatch", synthetic=True, est_s=8,
              why="IMPALA's learner alone (16 V-trace calls per update)"),
        Point("retrace", MLP, 256, 256, 2, 8, "minibatch", synthetic=True, est_s=26,
              why="Retrace in IMPALA's learner alone"),
        Point("gae", MLP, 256, 2048, 4, 4, "once", synthetic=True, est_s=23,
              why="a synthetic update as rl-triton measured it (524k steps, no environments)"),
        Point("gae", MLP, 256, 2048, 4, 4, "once", est_s=22,
              why="the same shape with CartPole's rollout: the environments dilute the share"),
        Point("gae", "cartpole-mlp256x3", 4096, 128, 4, 4, "once", est_s=21,
              why="a bigger network at the issue's shape"),
        Point("gae", "breakout-nature", 128, 128, 4, 4, "once", rounds=3, est_s=45,
              why="Atari with 128 envs: environment-bound"),
    ), backends=("loop", "compile", "triton", "captured"), rounds=5, time_limit_s=420.0),
    # a longer sweep for a GPU with time to spare: T at a fixed N*T, N at T = 128, the recompute modes
    "sweep": Preset(points=(
        _product(shapes=((16384, 32), (4096, 128), (1024, 512), (256, 2048)), recompute=RECOMPUTE_MODES)
        + _product(shapes=((256, 128), (1024, 128), (16384, 128)))
        + _product(estimators=("vtrace", "retrace"), shapes=((256, 256),), schedules=((2, 8),),
                   recompute=RECOMPUTE_MODES, synthetic=(False, True))
    ), backends=("loop", "compile", "sequential", "triton", "captured"), rounds=5),
}


@dataclass
class Args:
    """The speedup study: axis flags take lists (the study runs their product) unless --preset is given."""

    preset: Optional[Literal["quick", "gpu", "sweep"]] = None
    """a named set of points (quick: CPU, < 1 min; gpu: one GPU, <= 8 min; sweep: longer)"""
    quick: bool = False
    """the same as --preset quick"""
    estimators: Tuple[str, ...] = ("gae",)
    """gae (PPO), vtrace, retrace (IMPALA)"""
    workloads: Tuple[str, ...] = (MLP,)
    """environment and network: cartpole-mlp64x2, cartpole-mlp256x3, breakout-nature, breakout-resnet, hopper-mlp64x2"""
    num_envs: Tuple[int, ...] = (4096,)
    """N, environments"""
    num_steps: Tuple[int, ...] = (128,)
    """T, steps per environment per rollout"""
    batch_budget: int = 0
    """N * T: with a budget, N = budget // T for each T instead of --num-envs (0: use --num-envs)"""
    schedules: Tuple[str, ...] = ("4x4",)
    """update epochs x minibatches, e.g. 4x4 10x32"""
    recompute: Tuple[str, ...] = ("once",)
    """--advantage-recompute of the trainers: once, epoch, minibatch"""
    data: Tuple[str, ...] = ("real",)
    """real (environments) or synthetic (one random rollout, no environments)"""
    backends: Optional[Tuple[str, ...]] = None
    """credit-assignment backends, the first the baseline (default: the preset's, else loop compile triton captured)"""
    rounds: Optional[int] = None
    """measured rounds per point, one iteration of every backend each (default: the preset's, else 5)"""
    warmup_rounds: Optional[int] = None
    """rounds left out at the start of each run (default: the preset's, else 1)"""
    separate_processes: bool = False
    """one trainer process per backend instead of one run taking turns"""
    time_limit_s: Optional[float] = None
    """skip the points whose estimate no longer fits this many seconds (default: the preset's; 0: none)"""
    out_dir: Optional[str] = None
    """output folder (default: runs/study/<preset>-<time>)"""
    seed: int = 1
    """the trainers' --seed"""
    cuda: bool = True
    """use CUDA when available"""
    trainer_flags: str = ""
    """more flags for every trainer run, e.g. "--num-threads 16" """
    wandb: bool = False
    """log every point and backend to wandb (offline without network): group study, backend as tag"""
    wandb_project: str = "rltrain-study"
    """the wandb project"""
    list: bool = False
    """print the points and their trainer commands, run nothing"""


def points_from_axes(args: Args) -> List[Point]:
    """The product of the axis flags; a :class:`ConfigError` naming the flag for a bad value."""
    for e in args.estimators:
        if e not in ESTIMATORS:
            raise ConfigError(f"--estimators: unknown {e!r}; choose from {', '.join(ESTIMATORS)}")
    for w in args.workloads:
        if w not in WORKLOADS:
            raise ConfigError(f"--workloads: unknown {w!r}; choose from {', '.join(WORKLOADS)}")
    for r in args.recompute:
        if r not in RECOMPUTE_MODES:
            raise ConfigError(f"--recompute: unknown {r!r}; choose from {', '.join(RECOMPUTE_MODES)}")
    for d in args.data:
        if d not in ("real", "synthetic"):
            raise ConfigError(f"--data: unknown {d!r}; choose from real, synthetic")
    schedules = []
    for s in args.schedules:
        try:
            epochs, minibatches = (int(x) for x in s.lower().split("x"))
        except ValueError:
            raise ConfigError(f"--schedules: {s!r} is not EPOCHSxMINIBATCHES, e.g. 4x4") from None
        schedules.append((epochs, minibatches))
    if args.batch_budget:
        if any(args.batch_budget % t for t in args.num_steps):
            raise ConfigError(f"--batch-budget {args.batch_budget} is not a multiple of every --num-steps {args.num_steps}")
        shapes = [(args.batch_budget // t, t) for t in args.num_steps]
    else:
        shapes = list(itertools.product(args.num_envs, args.num_steps))
    return list(_product(args.estimators, args.workloads, shapes, schedules, args.recompute,
                         tuple(d == "synthetic" for d in args.data)))


def trainer_flags(point: Point, backends: Sequence[str], iterations: int, runs_dir: Path, args: Args) -> List[str]:
    """The trainer's command-line flags for ``iterations`` iterations of ``point`` with ``backends``
    taking turns."""
    env_id, agent, hidden = WORKLOADS[point.workload]
    flags = ["--env-id", env_id, "--agent", agent, "--num-envs", str(point.num_envs),
             "--num-steps", str(point.num_steps), "--update-epochs", str(point.epochs),
             "--num-minibatches", str(point.minibatches), "--advantage-recompute", point.recompute,
             "--ca-backend", ",".join(backends), "--ca-shadow-every", "0",
             "--total-timesteps", str(iterations * point.num_envs * point.num_steps),
             "--runs-dir", str(runs_dir), "--exp-name", "study", "--seed", str(args.seed), "--no-progress"]
    if hidden:
        flags += ["--hidden-sizes", *map(str, hidden)]
    if point.trainer == "impala":
        flags += ["--correction", point.estimator]
    if point.synthetic:
        flags.append("--synthetic")
    if not args.cuda:
        flags.append("--no-cuda")
    return flags + shlex.split(args.trainer_flags)


def command_line(trainer: str, flags: Sequence[str]) -> str:
    return shlex.join(["python", f"scripts/{trainer}.py", *flags])


def run_trainer(trainer: str, flags: List[str], log_path: Path, separate: bool) -> Path:
    """Run the trainer with ``flags`` (in this process, or in a process of its own), its output
    appended to ``log_path``; returns its run folder."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a") as log:
        log.write(f"$ {command_line(trainer, flags)}\n")
        log.flush()
        if separate:
            done = subprocess.run([sys.executable, str(SCRIPTS / f"{trainer}.py"), *flags], cwd=ROOT,
                                  stdout=log, stderr=subprocess.STDOUT)
            if done.returncode:
                raise RuntimeError(f"scripts/{trainer}.py exited with status {done.returncode} (see {log_path})")
            runs_dir = Path(flags[flags.index("--runs-dir") + 1])
            return max((p for p in runs_dir.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
        module = load_trainer(trainer)  # its cli and main
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            try:
                out = module.main(module.cli(flags))
            except SystemExit as e:  # tyro's answer to a bad flag
                raise RuntimeError(f"scripts/{trainer}.py rejected its flags (exit {e.code}; see {log_path})") from None
        return Path(out["run_dir"])


def read_metrics(run_dir: Path) -> List[dict]:
    return [json.loads(line) for line in open(run_dir / "metrics.jsonl")]


def run_point(point: Point, backends: Sequence[str], names: Sequence[str], rounds: int, warmup: int,
              out_dir: Path, args: Args) -> Tuple[List[dict], List[List[dict]]]:
    """Run ``point``; returns one record per backend and each backend's steady rows."""
    point_dir = out_dir / "runs" / point.name
    log_path = point_dir / "trainer.log"
    if args.separate_processes:
        runs, commands, run_dirs = [], [], []
        for backend in backends:
            flags = trainer_flags(point, [backend], warmup + rounds, point_dir / backend, args)
            run_dirs.append(str(run_trainer(point.trainer, flags, log_path, separate=True)))
            runs.append(read_metrics(Path(run_dirs[-1])))
            commands.append(command_line(point.trainer, flags))
        steady, _ = separate_rounds(runs, warmup)
        warm = [[r["perf/iteration_s"] for r in run[:warmup]] for run in runs]
        checks = [run[0].get(f"check/ca_rel_err_{n}", math.nan) for run, n in zip(runs, names)]
    else:
        flags = trainer_flags(point, backends, (warmup + rounds) * len(backends), point_dir, args)
        run_dir = run_trainer(point.trainer, flags, log_path, separate=False)
        rows = read_metrics(run_dir)
        steady, warm_rows = rotation_rounds(rows, len(backends), warmup)
        warm = [[r["perf/iteration_s"] for r in warm_rows[b::len(backends)]] for b in range(len(backends))]
        checks = [rows[0].get(f"check/ca_rel_err_{n}", math.nan) for n in names]
        commands = [command_line(point.trainer, flags)] * len(backends)
        run_dirs = [str(run_dir)] * len(backends)
    fields = {k: v for k, v in dataclasses.asdict(point).items() if k not in ("rounds",)}
    records = []
    for result, check, warm_s, command, run_dir in zip(summarize(steady, names, CA_KEYS[point.trainer]), checks,
                                                        warm, commands, run_dirs):
        records.append({"point": point.name, "trainer": point.trainer, **fields,
                        "mode": "separate processes" if args.separate_processes else "interleaved",
                        **result, "rel_err": check, "warmup_iteration_s": warm_s, "run_dir": run_dir,
                        "command": command})
    return records, steady


def log_point(point: Point, records: List[dict], steady: List[List[dict]], out_dir: Path, args: Args) -> None:
    """Each backend's steady rounds (``perf/*``) and the point's summary (``study/*``) to TensorBoard,
    and to wandb with ``--wandb`` (group ``study``, the backend as tag)."""
    for record, rows in zip(records, steady):
        backend = record["backend"]
        logger = Logger(out_dir / "logs" / point.name / backend, {**dataclasses.asdict(point), "backend": backend},
                        total_iterations=len(rows), track=args.wandb, wandb_project=args.wandb_project,
                        wandb_group="study", wandb_tags=[backend, point.estimator, point.trainer],
                        run_name=f"{point.name}-{backend}", console=False)
        for r, row in enumerate(rows):
            logger.log({k: v for k, v in row.items() if k.startswith("perf/") and isinstance(v, (int, float))}, r)
        logger.log({f"study/{k}": record[k] for k in SUMMARY_KEYS}, len(rows))
        logger.close()


def write_tables(records: List[dict], out_dir: Path, meta: dict, title: str) -> None:
    header = (f"# Speedup study: {title}\n\n{meta['device_name']}, driver {meta['driver']}, CUDA {meta['cuda']}, "
              f"{meta['cpu_cores']} CPU cores, torch {meta['torch']}, Triton {meta['triton']}, EnvPool "
              f"{meta['envpool']}, Python {meta['python']}; {meta['date']}. Measured speedups are medians "
              f"of per-round ratios over the baseline, [IQR]; `share s` is the baseline's credit-assignment share "
              f"of its own iteration / update; `other ratio` how much faster everything but credit assignment ran "
              f"(rltrain/study.py).\n\n")
    (out_dir / "results.md").write_text(header + compact_table(records) + "\n\n" + markdown_table(records) + "\n")
    # meta and records in one file, as docs/results/speedup_study.json (results_tables.py study FILE)
    (out_dir / "results.json").write_text(json.dumps({"meta": meta, "records": records}, indent=1) + "\n")
    rows = [flat_record(r) for r in records]
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with open(out_dir / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def main(args: Args) -> dict:
    t_start = time.perf_counter()
    preset_name = "quick" if args.quick else args.preset
    preset = PRESETS[preset_name] if preset_name else None
    points = list(preset.points) if preset else points_from_axes(args)
    backends = tuple(args.backends or (preset.backends if preset else ("loop", "compile", "triton", "captured")))
    rounds = args.rounds if args.rounds is not None else (preset.rounds if preset else 5)
    warmup = args.warmup_rounds if args.warmup_rounds is not None else (preset.warmup_rounds if preset else 1)
    time_limit = args.time_limit_s if args.time_limit_s is not None else (preset.time_limit_s if preset else 0.0)
    if rounds < 1 or warmup < 0:
        raise ConfigError(f"--rounds must be >= 1 and --warmup-rounds >= 0, got {rounds} and {warmup}")
    device = select_device(args.cuda)
    names = CreditAssignment(",".join(backends), device, PhaseTimer(device), "ca").names  # checks --backends
    if args.list:
        for p in points:
            flags = trainer_flags(p, backends, (warmup + (p.rounds or rounds)) * len(backends), Path("RUNS"), args)
            print(f"{p.name}  (~{p.est_s or '?'} s)  {p.why}\n    {command_line(p.trainer, flags)}")
        return {"points": [p.name for p in points]}

    out_dir = Path(args.out_dir or ROOT / "runs" / "study" / f"{preset_name or 'axes'}-{time.strftime('%Y%m%d-%H%M%S')}")
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {**machine_info(device), "triton_interpret": os.environ.get("TRITON_INTERPRET", "0"),
            "backends": names, "rounds": rounds, "warmup_rounds": warmup,
            "mode": "separate processes" if args.separate_processes else "interleaved", "preset": preset_name,
            "points": [dataclasses.asdict(p) for p in points]}
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=1))
    if args.wandb:
        os.environ.setdefault("WANDB_MODE", wandb_mode())  # probe the network once, not per run

    from tqdm.auto import tqdm

    records: List[dict] = []
    failed = 0
    bar = tqdm(total=len(points), unit="point", dynamic_ncols=True)
    spent = estimated = 0.0  # seconds of the points run so far, and their estimates
    for i, p in enumerate(points):
        elapsed = time.perf_counter() - t_start
        estimate = p.est_s if p.est_s is not None else (spent / i if i else 0.0)
        estimate *= max(1.0, spent / estimated) if estimated else 1.0  # the points so far ran this much over
        if time_limit and elapsed + estimate > time_limit:
            point_records = [{"point": p.name, "error": f"skipped: ~{estimate:.0f} s more would pass the "
                                                         f"{time_limit:.0f} s limit at {elapsed:.0f} s"}]
        else:
            bar.set_description(p.name)
            t0 = time.perf_counter()
            try:
                point_records, steady = run_point(p, backends, names, p.rounds or rounds, warmup, out_dir, args)
                log_point(p, point_records, steady, out_dir, args)
            except Exception as e:  # noqa: BLE001 -- one failed point must not lose the others
                failed += 1
                point_records = [{"point": p.name, "error": f"{type(e).__name__}: {e}".splitlines()[0][:300]}]
                with open(out_dir / "runs" / p.name / "trainer.log", "a") as log:
                    log.write(traceback.format_exc())
            wall = time.perf_counter() - t0
            for r in point_records:
                r["point_wall_s"], r["point_est_s"] = wall, p.est_s
            spent += wall
            estimated += p.est_s if p.est_s is not None else wall
        records.extend(point_records)
        with open(out_dir / "results.jsonl", "a") as f:
            f.writelines(json.dumps(r) + "\n" for r in point_records)
        write_tables(records, out_dir, meta, preset_name or "axes")
        left = sum(q.est_s if q.est_s is not None else spent / (i + 1) for q in points[i + 1:])
        bar.set_postfix(left=f"~{left * (spent / estimated if estimated else 1.0):.0f}s", refresh=False)
        bar.update(1)
    bar.close()

    from rltrain.study_plots import plot_all

    plots = plot_all(records, out_dir)
    print(f"\nspeedup study ({meta['mode']}, baseline {names[0]}, {rounds} rounds after {warmup} warm-up, "
          f"{meta['device_name']}): {out_dir}  [{time.perf_counter() - t_start:.0f} s]")
    print(compact_table(records))
    return {"out_dir": str(out_dir), "records": records, "failed": failed, "plots": [str(p) for p in plots]}


def cli(argv: Optional[list] = None) -> Args:
    return parse_args(Args, argv, description=__doc__)


if __name__ == "__main__":
    result = exit_on_config_error(lambda: main(cli()))
    sys.exit(1 if result.get("failed") else 0)
