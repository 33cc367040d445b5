"""scripts/ppo.py and scripts/impala.py under torchrun on 2 CPU ranks (Gloo): identical parameters,
output from rank 0 only, resume of every rank, a bad split and a killed rank; and the pieces of
rltrain the trainers use for it (rank shares, the per-iteration readout, the replica check).

One update of a fixed batch split over 2 ranks against one process on the whole batch, with PPO's own
loss, is tests/test_distributed.py's (tests/dist_worker.py)."""

from __future__ import annotations

import json
import subprocess
import time
from collections import deque
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist

from agents import make_agent
from conftest import load_script, torchrun, torchrun_command, torchrun_env, torchrun_failures
from rltrain.config import ConfigError
from rltrain.distributed import DistContext
from rltrain.losses import minibatch_moments
from rltrain.torchrun_jobs import kill_rank
from rltrain.trainer import episode_metrics, iteration_readout

ROOT = Path(__file__).resolve().parents[1]
PPO, IMPALA = str(ROOT / "scripts" / "ppo.py"), str(ROOT / "scripts" / "impala.py")
# 4 envs over 2 ranks, 16 steps: 64 global steps per iteration; every iteration checkpointed, which
# checks that the ranks' parameters are identical after every update
PPO_TINY = ["--no-cuda", "--num-envs", "4", "--num-steps", "16", "--num-minibatches", "2", "--update-epochs", "2",
            "--num-threads", "1", "--no-progress", "--no-anneal-lr", "--checkpoint-every", "1", "--save-model",
            "--dist-timeout-s", "60"]
GLOBAL_BATCH = 64

ppo = load_script("ppo")
impala = load_script("impala")


def rows(run_dir: Path) -> list:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def run_folders(runs: Path) -> list:
    return sorted(p for p in runs.iterdir() if p.is_dir())


def rank_logs(log_dir: Path, rank: int) -> str:
    """What rank ``rank`` wrote to stdout and stderr (torchrun ``--log-dir --tee 3``)."""
    return "".join(p.read_text() for p in log_dir.glob(f"*/attempt_0/{rank}/std*.log"))


@pytest.fixture(scope="module")
def ppo_pair(tmp_path_factory):
    """A 4-iteration PPO run on 2 ranks, each rank's output in its own log files."""
    base = tmp_path_factory.mktemp("ppo_pair")
    done, _ = torchrun(PPO, *PPO_TINY, "--runs-dir", str(base / "runs"), "--total-timesteps", str(4 * GLOBAL_BATCH),
                       launcher=("--log-dir", str(base / "logs"), "--tee", "3"))
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return base


# ------------------------------------------------------------------------------ two ranks (Gloo)


def test_ppo_two_ranks_identical_parameters_and_rank0_output(ppo_pair):
    (run_dir,) = run_folders(ppo_pair / "runs")  # one run folder, rank 0's
    logged = rows(run_dir)
    assert [r["global_step"] for r in logged] == [GLOBAL_BATCH * i for i in range(1, 5)]  # global steps, once
    assert all(r["perf/update/allreduce_s"] > 0 and "perf/rank0/update/allreduce_s" in r for r in logged)
    assert "parameters identical on all 2 ranks" in rank_logs(ppo_pair / "logs", 0)
    assert "run folder" in rank_logs(ppo_pair / "logs", 0)
    assert rank_logs(ppo_pair / "logs", 1).strip() == ""  # rank 1 prints nothing
    final = torch.load(run_dir / "checkpoints" / "final.pt", weights_only=False)
    assert final["world_size"] == 2 and final["args"]["num_envs"] == 4  # the flags as given: global
    rng0, rng1 = (s["rng"]["torch"] for s in final["rank_states"])
    assert not torch.equal(rng0, rng1)  # each rank its own generator


@pytest.mark.slow
def test_ppo_two_rank_resume_continues_every_rank(ppo_pair, tmp_path):
    runs = tmp_path / "runs"
    first, _ = torchrun(PPO, *PPO_TINY, "--runs-dir", str(runs), "--total-timesteps", str(2 * GLOBAL_BATCH))
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    (run_dir,) = run_folders(runs)
    ckpt = run_dir / "checkpoints" / "final.pt"
    # --graph-update cannot record DDP's all-reduce: on several ranks the update runs eagerly, said once
    second, _ = torchrun(PPO, "--resume", str(ckpt), "--total-timesteps", str(4 * GLOBAL_BATCH), "--graph-update")
    assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    assert second.stdout.count("--graph-update: one rank only; the update runs eagerly on these 2 ranks") == 1
    logged = rows(run_dir)  # the same folder, continued
    assert [r["charts/iteration"] for r in logged] == [1, 2, 3, 4]
    assert [r["global_step"] for r in logged] == [GLOBAL_BATCH * i for i in range(1, 5)]
    # every rank continued its own generators from the checkpoint: their states after iteration 4 are
    # those of the run that did 4 iterations in one go (rank r's draws do not depend on the episodes)
    resumed = torch.load(ckpt, weights_only=False)["rank_states"]
    straight = torch.load(run_folders(ppo_pair / "runs")[0] / "checkpoints" / "final.pt",
                          weights_only=False)["rank_states"]
    for r in range(2):
        assert torch.equal(resumed[r]["rng"]["torch"], straight[r]["rng"]["torch"]), f"rank {r}"
        assert resumed[r]["rng"]["numpy"][1].tolist() == straight[r]["rng"]["numpy"][1].tolist()


@pytest.mark.slow
def test_impala_two_ranks(tmp_path):
    done, _ = torchrun(IMPALA, "--no-cuda", "--num-envs", "8", "--num-steps", "8", "--num-minibatches", "2",
                       "--update-epochs", "2", "--num-threads", "1", "--no-progress", "--checkpoint-every", "1",
                       "--total-timesteps", "512", "--runs-dir", str(tmp_path), "--dist-timeout-s", "60")
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "parameters identical on all 2 ranks" in done.stdout
    (run_dir,) = run_folders(tmp_path)
    logged = rows(run_dir)
    assert [r["global_step"] for r in logged] == [64 * i for i in range(1, 9)]
    assert all(r["policy_lag/max_over_ranks"] >= r["policy_lag/max"] >= 0 for r in logged)
    assert all(r["perf/learner/allreduce_s"] > 0 for r in logged)


@pytest.mark.parametrize("flags,message", [
    (["--num-envs", "5"], "--num-envs 5 is the global count over 2 ranks"),
])
def test_flags_two_ranks_cannot_run_exit_2_naming_the_flag(flags, message, tmp_path):
    done, wall = torchrun(PPO, *PPO_TINY, *flags, "--runs-dir", str(tmp_path))
    assert done.returncode != 0 and wall < 60
    failed = torchrun_failures(done.stdout + done.stderr)
    # each rank rejects the flag at once (exit 2); a rank torchrun stops first, once the other has
    # failed, shows SIGTERM's -15 instead
    named = [r for r, block in failed.items()
             if "exitcode  : 2" in block and message in block]
    assert named and all(r in named or "exitcode  : -15" in block for r, block in failed.items())
    assert not list(tmp_path.iterdir())  # nothing was created


@pytest.mark.slow
def test_a_killed_rank_stops_the_job(tmp_path):
    """kill -9 of rank 1 mid-run: the job exits non-zero and names rank 1, well within the timeout."""
    runs = tmp_path / "runs"
    cmd = torchrun_command(PPO, *PPO_TINY, "--runs-dir", str(runs), "--total-timesteps", str(10_000 * GLOBAL_BATCH))
    with open(tmp_path / "out.log", "w") as out:
        job = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=torchrun_env(), cwd=ROOT)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not list(runs.glob("*/metrics.jsonl")):
                assert job.poll() is None, (tmp_path / "out.log").read_text()[-3000:]
                time.sleep(0.1)
            assert list(runs.glob("*/metrics.jsonl")), "training did not start"
            stopped = kill_rank(job, rank=1, timeout=60)
        finally:
            if job.poll() is None:
                job.kill()
    output = (tmp_path / "out.log").read_text()
    assert stopped.returncode != 0 and stopped.all_exited_s < 30, output[-3000:]
    assert "SIGKILL" in torchrun_failures(output)[1]


# ------------------------------------------------------------------------------ in one process


def test_rank_args_share_the_global_flags():
    args = ppo.Args(num_envs=8, num_steps=16, total_timesteps=1000, num_threads=0)
    assert DistContext().rank_args(args) is args  # one rank: the flags themselves
    local = DistContext(rank=1, world_size=4, local_world_size=4).rank_args(args)
    assert (local.num_envs, local.total_timesteps) == (2, 250) and local.num_threads >= 1
    assert (args.num_envs, args.total_timesteps) == (8, 1000)  # the run's own flags are untouched
    with pytest.raises(ConfigError, match="--num-envs 6 is the global count over 4 ranks"):
        DistContext(world_size=4).rank_args(ppo.Args(num_envs=6))
    # fits the whole run, not a rank's share: named, with the share
    with pytest.raises(ConfigError, match=r"--num-envs 2 must be a multiple of --num-actors 4 \(on each of the 4 "):
        DistContext(world_size=4).rank_args(impala.Args(num_envs=8, num_actors=4))


def test_readout_of_one_process_is_its_own_figures():
    returns, lengths = [3.0, 1.5, 2.25], [10, 20, 31]
    recent = deque([0.1, 0.7, 2.0, 5.5], maxlen=100)
    g = iteration_readout(DistContext(), phase_secs={"perf/update_s": 0.25}, means={"losses/loss": -1.5},
                          episode_returns=returns, episode_lengths=lengths, recent_returns=recent, finite=True)
    assert g["perf/update_s"] == 0.25 and g["losses/loss"] == -1.5 and g["nonfinite_rank"] == float("inf")
    assert episode_metrics(g) == {"charts/episodic_return": float(np.mean(returns)),
                                  "charts/episodic_length": float(np.mean(lengths)),
                                  "charts/avg_episodic_return": float(np.mean(recent))}
    g = iteration_readout(DistContext(), phase_secs={}, means={}, episode_returns=[], episode_lengths=[],
                          recent_returns=[], finite=False)
    assert g["nonfinite_rank"] == 0 and episode_metrics(g) == {}


def test_readout_over_ranks(monkeypatch):
    """Two ranks' figures (the all-gather replaced by its result): phases max, losses mean, episodes
    summed, the lowest rank with a non-finite loss, any rank's Ctrl-C."""
    ctx = DistContext(rank=0, world_size=2, backend="gloo")
    other = {"perf/update_s": 0.5, "losses/loss": 3.0, "episodes/return_sum": 10.0, "episodes/length_sum": 40.0,
             "episodes/count": 2.0, "episodes/recent_return_sum": 30.0, "episodes/recent_count": 4.0,
             "nonfinite_rank": 1.0, "interrupted": 1.0}

    def all_gather_object(out, obj):
        out[0], out[1] = obj, other
    monkeypatch.setattr(dist, "all_gather_object", all_gather_object)
    g = iteration_readout(ctx, phase_secs={"perf/update_s": 0.25}, means={"losses/loss": 1.0},
                          episode_returns=[2.0], episode_lengths=[8], recent_returns=[2.0, 6.0], finite=True)
    assert (g["perf/update_s"], g["losses/loss"], g["nonfinite_rank"], g["interrupted"]) == (0.5, 2.0, 1.0, 1.0)
    assert episode_metrics(g) == {"charts/episodic_return": 4.0, "charts/episodic_length": 16.0,
                                  "charts/avg_episodic_return": 38.0 / 6}


def test_replica_check_names_the_rank_that_diverged(monkeypatch):
    agent = make_agent("mlp", (4,), True, 2)
    ctx = DistContext(rank=0, world_size=3, backend="gloo")
    bump = {"rank": None}

    def all_gather(out, flat):
        for r, o in enumerate(out):
            o.copy_(flat + (1e-7 if r == bump["rank"] else 0.0))
    monkeypatch.setattr(dist, "all_gather", all_gather)
    ctx.check_replicas(agent)  # all equal
    bump["rank"] = 2
    with pytest.raises(RuntimeError, match=r"rank\(s\) \[2\] differ from rank 0's"):
        ctx.check_replicas(agent)
    DistContext().check_replicas(agent)  # a single process: nothing to compare


def test_minibatch_moments_one_process_and_over_ranks(monkeypatch):
    g = torch.Generator().manual_seed(0)
    x, mask = torch.randn(12, generator=g) * 2 + 1, (torch.rand(12, generator=g) > 0.3).float()
    mean, std, denom = minibatch_moments(x, mask)
    sel = x[mask > 0]
    torch.testing.assert_close(mean, sel.mean())
    torch.testing.assert_close(std, sel.std(unbiased=False))
    assert denom == mask.sum()
    # two ranks holding x and 2x: the all-reduce adds the other rank's sums
    ctx = DistContext(rank=0, world_size=2, backend="gloo")

    def all_reduce(t, op=None):
        t.copy_(t + torch.stack([(2 * x * mask).sum(), (4 * x * x * mask).sum(), mask.sum()]).double())
    monkeypatch.setattr(dist, "all_reduce", all_reduce)
    mean2, std2, denom2 = minibatch_moments(x, mask, ctx)
    both = torch.cat([sel, 2 * sel]).double()
    torch.testing.assert_close(mean2, both.mean().float())
    torch.testing.assert_close(std2, both.std(unbiased=False).float())
    assert denom2 == mask.sum()  # the global count (2 x) over the world size (2)


# ------------------------------------------------------------------------------ CUDA (NCCL)


@pytest.mark.cuda
@pytest.mark.parametrize("nproc", [1, 2])
def test_ppo_on_gpus_with_nccl(nproc, tmp_path):
    if torch.cuda.device_count() < nproc:
        pytest.skip(f"needs {nproc} CUDA device(s)")
    done, _ = torchrun(PPO, "--num-envs", "64", "--num-steps", "16", "--total-timesteps", str(4 * 64 * 16),
                       "--no-progress", "--runs-dir", str(tmp_path), "--checkpoint-every", "2", nproc=nproc, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    (run_dir,) = run_folders(tmp_path)
    logged = rows(run_dir)
    assert [r["global_step"] for r in logged] == [64 * 16 * i for i in range(1, 5)]
    assert all(("perf/update/allreduce_s" in r) == (nproc > 1) for r in logged)  # one rank: no DDP
