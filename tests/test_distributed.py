"""rltrain.distributed: single-process context, launch errors, global statistics, and 2-rank Gloo
runs of tests/dist_worker.py under torchrun (equivalence with one process, faults, resume)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from agents import make_agent
from conftest import torchrun, torchrun_failures
from rltrain.config import ConfigError
from rltrain.distributed import DistContext, MaskedMoments, init_distributed
from rltrain.timers import PhaseTimer

ROOT = Path(__file__).resolve().parents[1]
WORKER = str(ROOT / "tests" / "dist_worker.py")
LAUNCH = {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2",
          "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


def launch(*args: str, nproc: int = 2, timeout: float = 120) -> tuple[subprocess.CompletedProcess, float]:
    """``torchrun --standalone --nproc-per-node nproc tests/dist_worker.py args`` (nproc 0: plain python)."""
    return torchrun(WORKER, *args, nproc=nproc, timeout=timeout)


def outputs(folder: Path, world_size: int) -> list:
    return [torch.load(folder / f"rank{r}.pt") for r in range(world_size)]


# ------------------------------------------------------------------------------ one process


def test_plain_launch_is_single_process_without_a_group():
    ctx = init_distributed(cuda=False, environ={"MASTER_ADDR": "somewhere"})
    assert (ctx.rank, ctx.world_size, ctx.is_main, ctx.is_distributed) == (0, 1, True, False)
    assert ctx.device == torch.device("cpu") and not dist.is_initialized()
    agent = make_agent("mlp", (4,), True, 2)
    assert ctx.wrap_model(agent) is agent
    assert ctx.local_num_envs(8) == 8 and ctx.rank_seed(7) == 7 and ctx.env_seed(7, 8) == 7
    assert ctx.broadcast_object({"a": 1}) == {"a": 1}
    ctx.close()


@pytest.mark.parametrize("env, kwargs, words", [
    ({"RANK": "0", "WORLD_SIZE": "2"}, {}, ["missing", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"]),
    ({**LAUNCH, "RANK": "x"}, {}, ["RANK", "'x'", "not an integer"]),
    ({**LAUNCH, "RANK": "2"}, {}, ["RANK=2", "WORLD_SIZE=2"]),
    (LAUNCH, {"backend": "nccl", "cuda": False}, ["--dist-backend nccl", "--no-cuda"]),
    (LAUNCH, {"backend": "mpi"}, ["--dist-backend", "'mpi'"]),
    (LAUNCH, {"timeout_s": 0}, ["--dist-timeout-s"]),
    ({}, {"timeout_s": -1}, ["--dist-timeout-s"]),
])
def test_bad_launches_name_what_is_wrong(env, kwargs, words):
    with pytest.raises(ConfigError) as e:
        init_distributed(**{"cuda": True, **kwargs}, environ=env)
    for w in words:
        assert w in str(e.value)
    assert not dist.is_initialized()


def test_nccl_without_a_gpu_is_a_config_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="torch sees no CUDA device"):
        init_distributed(cuda=True, backend="nccl", environ=LAUNCH)


def test_more_ranks_on_a_node_than_gpus_is_a_config_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ConfigError, match=r"2 ranks on this node .* 1 CUDA device"):
        init_distributed(cuda=True, environ=LAUNCH)


def test_share_of_envs_and_seeds_per_rank():
    ranks = [DistContext(rank=r, world_size=4) for r in range(4)]
    assert [c.local_num_envs(8) for c in ranks] == [2] * 4
    with pytest.raises(ConfigError, match="--num-envs 10 .* 4 ranks"):
        ranks[1].local_num_envs(10)
    with pytest.raises(ConfigError, match="--num-envs 2"):
        ranks[0].local_num_envs(2)
    # EnvPool seeds env i with seed + i: the ranks' envs are exactly one process's 8 envs, none twice
    env_seeds = sorted(c.env_seed(5, 2) + i for c in ranks for i in range(2))
    assert env_seeds == [5 + j for j in range(8)]
    torch_seeds = [c.rank_seed(5) for c in ranks]
    assert torch_seeds[0] == 5 and len(set(torch_seeds)) == 4


def test_masked_moments_single_process():
    ctx = DistContext()
    g = torch.Generator().manual_seed(0)
    x, mask = torch.randn(6, 5, generator=g) * 3 + 1, torch.rand(6, 5, generator=g) > 0.4
    m = ctx.masked_moments(x, mask)
    sel = x[mask].double()
    assert m.count.item() == mask.sum().item()
    torch.testing.assert_close(m.mean, sel.mean())
    torch.testing.assert_close(m.std, sel.std(unbiased=False))
    torch.testing.assert_close(m.denominator, m.count)
    index = torch.arange(30).view(3, 10)  # three minibatches of the flattened tensor
    per = ctx.masked_moments(x, mask, index=index)
    for k in range(3):
        sel = x.reshape(-1)[index[k]][mask.reshape(-1)[index[k]]].double()
        torch.testing.assert_close(per.mean[k], sel.mean())
        torch.testing.assert_close(per.std[k], sel.std(unbiased=False))
    empty = ctx.masked_moments(x, torch.zeros_like(mask))
    assert (empty.mean.item(), empty.std.item(), empty.denominator.item()) == (0.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="same shape"):
        ctx.masked_moments(x, mask[:3])


def test_global_denominators_make_split_gradients_equal_the_whole_batch():
    """DDP averages the ranks' gradients; with MaskedMoments.denominator the mean of the two halves'
    gradients is the gradient of the masked mean over the whole batch, though the halves hold
    different numbers of valid samples."""
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(40, 3, generator=g), torch.randn(40, generator=g)
    mask = torch.cat([torch.rand(20, generator=g) > 0.8, torch.rand(20, generator=g) > 0.1])
    w = torch.randn(3, requires_grad=True)

    def grad(rows, denom):
        w.grad = None
        (((x[rows] @ w - y[rows]).square() * mask[rows]).sum() / denom).backward()
        return w.grad.clone()

    halves = [slice(0, 20), slice(20, 40)]
    sums = sum(torch.stack([(y[h] * mask[h]).double().sum(), (y[h].square() * mask[h]).double().sum(),
                            mask[h].double().sum()]) for h in halves)  # what the all-reduce adds up
    moments = MaskedMoments.from_sums(sums, world_size=2)
    split = sum(grad(h, moments.denominator) for h in halves) / 2
    whole = grad(slice(0, 40), mask.sum())
    torch.testing.assert_close(split, whole)
    naive = sum(grad(h, mask[h].sum()) for h in halves) / 2  # local means: a different gradient
    assert not torch.allclose(naive, whole, atol=1e-3)


def test_reduce_and_gather_scalars_single_process():
    ctx = DistContext()
    values = {"ret_sum": 3.0, "episodes": 2.0, "phase_s": 0.25}
    assert ctx.gather_scalars(values) == {k: [v] for k, v in values.items()}
    assert ctx.reduce_scalars(values, ops={"ret_sum": "sum", "phase_s": "max"}) == values
    with pytest.raises(ValueError, match="'median'"):
        ctx.reduce_scalars(values, ops={"phase_s": "median"})
    t = torch.tensor([1.0, 2.0])
    out = ctx.all_reduce(t, "mean")
    assert torch.equal(out, t) and out is not t


def test_timed_backward_single_process_is_one_phase():
    ctx, timer = DistContext(), PhaseTimer("cpu")
    w = torch.randn(3, requires_grad=True)
    with ctx.timed_backward(timer, phase="learner/backward"):
        (w * 2).sum().backward()
    assert set(timer.read()) == {"learner/backward"}


def test_phase_timer_interval_between_marks_cpu():
    timer = PhaseTimer("cpu")
    a = timer.mark()
    time.sleep(0.01)
    b = timer.mark()
    timer.add_interval("update/allreduce", a, b)
    timer.add_interval("update/allreduce", b, b)
    secs = timer.read()
    assert set(secs) == {"update/allreduce"} and 0.009 < secs["update/allreduce"] < 1.0
    assert timer.read() == {}


def test_checkpoint_rank_states_single_process(tmp_path):
    ctx = DistContext()
    path = ctx.save_checkpoint(tmp_path / "c.pt", {"model": {"w": torch.ones(2)}, "step": 3},
                               {"rng": torch.arange(3), "norm": {"mean": torch.zeros(2)}})
    shared, mine = ctx.load_checkpoint(path)
    assert shared["step"] == 3 and torch.equal(mine["rng"], torch.arange(3))
    legacy = tmp_path / "legacy.pt"  # a single-process checkpoint with its state at the top level
    torch.save({"model": {}, "rng": torch.arange(2)}, legacy)
    shared, mine = ctx.load_checkpoint(legacy)
    assert torch.equal(mine["rng"], torch.arange(2))
    with pytest.raises(ConfigError, match=r"state of 1 rank\(s\); resume it with 1 .* not 2"):
        DistContext(rank=1, world_size=2).load_checkpoint(path)
    with pytest.raises(ConfigError, match="not found"):
        ctx.load_checkpoint(tmp_path / "missing.pt")
    with pytest.raises(ValueError, match="reserved"):
        ctx.save_checkpoint(tmp_path / "d.pt", {"world_size": 1}, {})


def test_actor_critic_forward_dispatches_by_name():
    agent = make_agent("mlp", (4,), True, 3)
    x, a = torch.randn(5, 4), torch.randint(0, 3, (5,))
    torch.testing.assert_close(agent("get_value", x), agent.get_value(x))
    for got, want in zip(agent("get_action_and_value", x, a), agent.get_action_and_value(x, action=a)):
        torch.testing.assert_close(got, want)
    dist_, critic = agent("dist_and_critic", x)
    torch.testing.assert_close(dist_.log_prob(a), agent.get_action_and_value(x, a)[1])
    with pytest.raises(ValueError, match="'policy'"):
        agent("policy", x)


# ------------------------------------------------------------------------------ two ranks (Gloo)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The worker as one process on the whole batch and as 2 ranks under torchrun, 4 steps each."""
    base = tmp_path_factory.mktemp("dist")
    single, _ = launch("--out", str(base / "single"), "--steps", "4", nproc=0)
    assert single.returncode == 0, single.stderr[-3000:]
    pair, _ = launch("--out", str(base / "pair"), "--steps", "4")
    assert pair.returncode == 0, pair.stderr[-3000:]
    return outputs(base / "single", 1)[0], outputs(base / "pair", 2)


def test_two_ranks_match_one_process_on_the_whole_batch(reference):
    single, (r0, r1) = reference
    assert len(r0["params"]) == len(single["params"]) == 8  # 4 steps x 2 minibatches
    for p0, p1, p in zip(r0["params"], r1["params"], single["params"]):
        assert torch.equal(p0, p1)  # DDP: identical parameters on both ranks after every step
        torch.testing.assert_close(p0, p, atol=1e-5, rtol=1e-5)
    for s0, s1, s in zip(r0["rms"], r1["rms"], single["rms"]):  # merged observation statistics
        for mine in (s0, s1):
            torch.testing.assert_close(mine[0], s[0])
            torch.testing.assert_close(mine[1], s[1])
            assert mine[2] == pytest.approx(s[2])
    assert r0["draws"] != r1["draws"] and r0["draws"] == single["draws"]  # own streams; rank 0 = plain run
    assert (r0["env_seed"], r1["env_seed"]) == (1, 33)
    assert set(r0["phases"]) == {"update/forward", "update/backward", "update/allreduce"}
    assert set(single["phases"]) == {"update/forward", "update/backward"}
    assert r0["reduced"] == r1["reduced"] == {"rows": 64.0, "rank": 1.0, "only_on_rank0": 1.0, "only_on_rank1": 1.0}


@pytest.mark.slow
def test_two_rank_checkpoint_resumes_each_rank(reference, tmp_path):
    _, ref = reference
    ckpt = tmp_path / "ckpt.pt"
    first, _ = launch("--out", str(tmp_path / "a"), "--steps", "4", "--stop-at", "2", "--ckpt", str(ckpt))
    assert first.returncode == 0, first.stderr[-3000:]
    saved = torch.load(ckpt, weights_only=False)
    assert saved["world_size"] == 2 and len(saved["rank_states"]) == 2
    second, _ = launch("--out", str(tmp_path / "b"), "--steps", "4", "--resume", str(ckpt))
    assert second.returncode == 0, second.stderr[-3000:]
    for r, out in enumerate(outputs(tmp_path / "b", 2)):
        assert out["draws"] == ref[r]["draws"][2:]  # rank r continues its own generator
        for got, want in zip(out["params"], ref[r]["params"][4:]):
            torch.testing.assert_close(got, want, atol=1e-6, rtol=0)
        for got, want in zip(out["rms"], ref[r]["rms"][2:]):
            torch.testing.assert_close(got[0], want[0])
            torch.testing.assert_close(got[1], want[1])
    with pytest.raises(ConfigError, match=r"2 rank\(s\)"):
        DistContext().load_checkpoint(ckpt)


@pytest.mark.parametrize("mode", ["raise", "kill", *(pytest.param(m, marks=pytest.mark.slow) for m in ("nan", "hang"))])
def test_a_failing_rank_stops_the_job_naming_it(mode, tmp_path):
    timeout_s = 4 if mode == "hang" else 20
    done, wall = launch("--out", str(tmp_path), "--steps", "4", "--fail", mode, "--fail-rank", "1",
                        "--timeout-s", str(timeout_s))
    assert done.returncode != 0
    assert wall < timeout_s + 40, f"took {wall:.0f}s"
    failed = torchrun_failures(done.stdout + done.stderr)
    if mode == "kill":
        assert "SIGKILL" in failed[1]
    elif mode == "raise":
        assert "RuntimeError: injected failure on rank 1 at step 2" in failed[1]
    elif mode == "nan":  # every rank sees it through the step's reduction and names rank 1
        assert any("non-finite loss at step 2 on rank(s) [1]" in b for b in failed.values())
    else:  # rank 1 hangs: rank 0's collective times out and says so; torchrun then stops rank 1
        assert "a collective failed and no other rank had reported an error" in failed[0]
    assert not list(tmp_path.glob("rank*.pt"))


# ------------------------------------------------------------------------------ CUDA (NCCL)


@pytest.mark.cuda
@needs_cuda
def test_nccl_one_rank_matches_the_plain_run(tmp_path):
    plain, _ = launch("--out", str(tmp_path / "plain"), "--cuda", nproc=0)
    assert plain.returncode == 0, plain.stderr[-3000:]
    one, _ = launch("--out", str(tmp_path / "one"), "--cuda", nproc=1)
    assert one.returncode == 0, one.stderr[-3000:]
    (p,), (o,) = outputs(tmp_path / "plain", 1), outputs(tmp_path / "one", 1)
    for a, b in zip(p["params"], o["params"]):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert "update/allreduce" not in o["phases"]  # one rank: no DDP, nothing to all-reduce


@pytest.mark.cuda
@needs_cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_nccl_two_ranks_match_one_process(tmp_path):
    plain, _ = launch("--out", str(tmp_path / "plain"), "--cuda", nproc=0)
    pair, _ = launch("--out", str(tmp_path / "pair"), "--cuda", nproc=2)
    assert plain.returncode == 0 and pair.returncode == 0, pair.stderr[-3000:]
    (p,), (r0, r1) = outputs(tmp_path / "plain", 1), outputs(tmp_path / "pair", 2)
    for a, b0, b1 in zip(p["params"], r0["params"], r1["params"]):
        assert torch.equal(b0, b1)
        torch.testing.assert_close(a, b0, atol=1e-5, rtol=1e-5)


@pytest.mark.cuda
@needs_cuda
def test_more_ranks_than_gpus_stops_with_a_config_error(tmp_path):
    done, wall = launch("--out", str(tmp_path), "--cuda", nproc=torch.cuda.device_count() + 1)
    assert done.returncode != 0 and wall < 60
    assert "CUDA device(s): start at most" in done.stdout + done.stderr


@pytest.mark.cuda
@needs_cuda
def test_nccl_rank_failure_exits_without_hanging(tmp_path):
    done, wall = launch("--out", str(tmp_path), "--cuda", "--fail", "raise", "--fail-rank", "0",
                        "--timeout-s", "20", nproc=1)
    assert done.returncode != 0 and wall < 60
    assert "injected failure on rank 0" in torchrun_failures(done.stdout + done.stderr)[0]
