"""GAE's async-walk twin (``kernels._async_walk``, Gluon: a walk fed through shared memory by
asynchronous copies): the rule that picks it, the inputs its copies can move, its errors, its build
for sm_90 (no GPU needed: Triton's own compiler and ``ptxas``), and on a GPU its outputs against the
float64 reference, with the Triton walk taking the problems it cannot copy. The interpreter cannot
run Gluon kernels, so without a GPU the reference check is the GPU suite's (docs/perf.md, "Walks fed
through shared memory")."""

from __future__ import annotations

import importlib
import re
import zlib

import pytest
import torch

import kernels
from kernels import LaunchConfig, _async_walk, _launch
from kernels import reference as R
from kernels._triton import HAVE_GLUON, runs_gluon

from conftest import DEVICE, built_for_sm90, call, make_inputs, rel_err, to_time_dim1, upcast

ON_GPU = runs_gluon(torch.device(DEVICE))
GAE_KERNEL = importlib.import_module("kernels.gae")._gae_kernel


@pytest.fixture
def gpu_rules(monkeypatch):
    """``choose_config`` as on a GPU that runs Gluon kernels (not the interpreter's big tiles)."""
    monkeypatch.setattr(_launch, "INTERPRET", False)
    monkeypatch.setattr(_launch, "EXPLICIT_LAYOUTS", True)
    _launch.choose_config.cache_clear()
    yield _launch
    _launch.choose_config.cache_clear()


def walk(T: int, N: int, itemsize: int = 2, aligned_rows: bool = True, op: str = "gae") -> LaunchConfig:
    """The block shape ``choose_config`` gives ``op``'s walks (short sequences not held whole)."""
    traits = dict(_launch.kernel_traits(op), explicit_short_tiles=False)
    return _launch.choose_config(T, N, False, itemsize=itemsize, aligned_rows=aligned_rows, **traits)


def async_tile(stages: int) -> LaunchConfig:
    return LaunchConfig(64, 64, 4, num_stages=stages, latest_first=True, async_walk=True)


@pytest.mark.parametrize("T,N,stages", [(4096, 8192, 4), (300, 8448, 4), (2048, 12688, 2), (1024, 16384, 2),
                                        (5000, 20480, 2), (1000, 25344, 2)])
def test_gae_bf16_walks_take_the_async_twin_where_it_measured_faster(gpu_rules, T, N, stages):
    """16-bit GAE ``[T, N]`` walks of more than 256 steps in 16-aligned rows: four stages while the
    64-environment programs take one per multiprocessor of the H200, two from 199 to 396 programs
    (``gae.ASYNC_WALKS``)."""
    assert walk(T, N) == async_tile(stages)
    assert importlib.import_module("kernels.gae").ASYNC_WALKS == ((4, 8192, 8448), (2, 12673, 25344))


@pytest.mark.parametrize("T,N,itemsize,aligned", [
    (4096, 8192, 4, True),    # float32
    (256, 8192, 2, True),     # a short sequence: held whole
    (2048, 8464, 2, True),    # 133 programs: a second wave
    (2048, 12672, 2, True),   # 198 programs
    (1024, 25360, 2, True),   # 397 programs
    (1024, 32768, 2, True),
    (2048, 8200, 2, False),   # rows not 16 elements apart
    (2048, 4096, 2, True)])   # below the walks
def test_other_gae_problems_keep_their_tiles(gpu_rules, T, N, itemsize, aligned):
    assert not walk(T, N, itemsize, aligned).async_walk


@pytest.mark.parametrize("op", ["vtrace", "retrace", "lambda_returns", "discounted_returns", "eligibility_traces",
                                "episodic_prefix_sum", "linear_scan"])
def test_only_gae_has_an_async_walk(gpu_rules, op):
    assert _launch.kernel_traits(op)["async_walks"] == ()
    assert not walk(4096, 8192, op=op).async_walk
    assert getattr(importlib.import_module(f"kernels.{op}"), f"_{op}_kernel") not in _async_walk.TWINS
    assert GAE_KERNEL in _async_walk.TWINS


def test_estimator_config_takes_async_walks_only_where_gluon_runs(gpu_rules, monkeypatch):
    monkeypatch.setattr(_launch, "EXPLICIT_LAYOUTS", False)
    assert not _launch.estimator_config("gae", 4096, 8192, False, 2).async_walk
    monkeypatch.setattr(_launch, "EXPLICIT_LAYOUTS", True)
    assert _launch.estimator_config("gae", 4096, 8192, False, 2) == async_tile(4)
    assert not _launch.estimator_config("gae", 4096, 8192, False, 2, async_walks=False).async_walk


@pytest.mark.parametrize("fields", [dict(), dict(num_stages=3, lookback=True), dict(num_stages=3, thread_runs=True),
                                    dict(num_stages=3, explicit_layout=True)])
def test_an_async_walk_config_the_walk_cannot_take_names_the_field(fields):
    with pytest.raises(ValueError, match="LaunchConfig.async_walk"):
        LaunchConfig(64, 64, 4, async_walk=True, **fields)


def gae_arguments(rewards, values, terminated, truncated=None):
    """The series and per-environment arguments ``kernels.gae`` passes its kernel (``[T, N]``)."""
    placeholder = (rewards, 0, 0)
    series = lambda x: (x, *x.stride()) if x is not None else placeholder  # noqa: E731
    return (*series(rewards), *series(values), *series(terminated), *series(truncated), *placeholder,
            rewards[0], 1, rewards, *rewards.stride(), rewards, *rewards.stride())


def gae_series(T=8, N=64, dtype=torch.bfloat16, flag_dtype=torch.bool, width=None):
    """Rewards, values and flags ``[T, N]``, as views ``[:, :N]`` of rows ``width`` wide when given."""
    make = lambda d: torch.zeros(T, width or N, dtype=d)[:, :N]  # noqa: E731
    return make(dtype), make(dtype), make(flag_dtype), make(flag_dtype)


def misfit(*tensors, N=64):
    return _async_walk.misfit(GAE_KERNEL.arg_names, gae_arguments(*tensors), N)


def test_the_copies_take_contiguous_16_byte_rows_of_16_bit_floats_and_byte_flags():
    assert misfit(*gae_series()) is None
    assert misfit(*gae_series(flag_dtype=torch.uint8)) is None
    assert misfit(*gae_series(width=80)) is None  # rows 80 elements apart
    assert misfit(*gae_series()[:3]) is None  # no truncations: the placeholder is not a series


@pytest.mark.parametrize("series, N, message", [
    (gae_series(N=72), 72, "N = 72 is not a multiple of 16"),
    (gae_series(dtype=torch.float32), 64, "r: torch.float32 is not a 16-bit float"),
    (gae_series(flag_dtype=torch.float32), 64, "term: torch.float32 is not a 1-byte flag"),
    (gae_series(width=72), 64, "r: rows must be contiguous, 16 elements apart"),
    (tuple(x[:, ::2] for x in gae_series(N=128)), 64, "r: rows must be contiguous"),
    ((torch.zeros(8 * 64 + 1, dtype=torch.bfloat16)[1:].view(8, 64),) + gae_series()[1:], 64, "16-byte aligned")])
def test_series_the_copies_cannot_move_are_named(series, N, message):
    assert message in misfit(*series, N=N)


@pytest.mark.skipif(ON_GPU, reason="the GPU takes the twin")
def test_an_async_walk_asked_for_off_the_gpu_is_an_error():
    case = make_inputs("gae", 300, 64, seed=1, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="LaunchConfig.async_walk: it runs on a GPU only"):
        call(kernels, case, config=LaunchConfig(64, 64, 4, num_stages=3, async_walk=True))


@pytest.mark.skipif(not ON_GPU, reason="Gluon kernels run on an NVIDIA GPU only (the interpreter cannot run them)")
@pytest.mark.parametrize("op, T, N, dtype, time_dim, message", [
    ("gae", 300, 72, torch.bfloat16, 0, "N = 72 is not a multiple of 16"),
    ("gae", 300, 64, torch.float32, 0, "is not a 16-bit float"),
    ("gae", 300, 64, torch.bfloat16, 1, "needs time_dim=0"),
    ("vtrace", 300, 64, torch.bfloat16, 0, "has no async-walk kernel")])
def test_an_async_walk_the_problem_cannot_take_names_why(op, T, N, dtype, time_dim, message):
    case = make_inputs(op, T, N, seed=1, dtype=dtype)
    if time_dim:
        case = to_time_dim1(case, contiguous=True)
    with pytest.raises(ValueError, match=f"LaunchConfig.async_walk: .*{message}"):
        call(kernels, case, time_dim=time_dim, config=LaunchConfig(64, 64, 4, num_stages=3, async_walk=True))


# (block_t, block_n, warps, stages): 16, 32 and 8 lanes along time (two, one and four along environments
# per warp), two to six stages.
WALK_SHAPES = [(64, 64, 4, 2), (64, 64, 4, 3), (64, 64, 4, 4), (32, 64, 4, 6), (64, 32, 2, 4), (64, 128, 4, 3)]
WALK_CASES = [dict(), dict(next_values=True), dict(truncated=False)]


@pytest.mark.skipif(not ON_GPU, reason="Gluon kernels run on an NVIDIA GPU only (the interpreter cannot run them)")
@pytest.mark.parametrize("shape", WALK_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}w{s[2]}s{s[3]}")
@pytest.mark.parametrize("T,N", [(1, 16), (37, 16), (300, 64), (1000, 80), (777, 1040), (4096, 256)])
@pytest.mark.parametrize("options", WALK_CASES, ids=["plain", "next_values", "no_truncations"])
def test_async_walks_match_the_reference(options, T, N, shape):
    """Every chunk length, width and depth on partial chunks and partial programs, with and without
    the optional inputs, bf16 and float16, bool and byte flags; and once with rows wider than N."""
    block_t, block_n, warps, stages = shape
    seed = zlib.crc32(repr((options, T, N, shape)).encode())
    dtype = (torch.bfloat16, torch.float16)[seed % 2]
    flag_dtype = (torch.bool, torch.uint8)[seed // 2 % 2]
    case = make_inputs("gae", T, N, seed=seed, dtype=dtype, flag_dtype=flag_dtype, **options)
    ref = call(R, upcast(case))
    wide = case.map(lambda _, x: torch.cat([x, x[:, :16]], dim=1)[:, :N] if x.dim() == 2 else x)
    config = LaunchConfig(block_t, block_n, warps, num_stages=stages, async_walk=True)
    for inputs in (case, wide):
        out = call(kernels, inputs, config=config)
        for o, r in zip(out, ref):
            assert o.dtype == dtype
            assert rel_err(o, r) < 1e-2, inputs is wide


@pytest.mark.skipif(not ON_GPU, reason="Gluon kernels run on an NVIDIA GPU only (the interpreter cannot run them)")
@pytest.mark.parametrize("flag_dtype, width, offset", [(torch.bool, None, 0), (torch.float32, None, 0),
                                                        (torch.bool, 8200, 0), (torch.bool, None, 1)])
def test_the_default_walk_takes_the_twin_or_the_triton_walk_and_both_are_right(flag_dtype, width, offset):
    """At 300 x 8192 bf16 the rule picks the twin; float flags, rows 8200 apart or data off 16-byte
    alignment send the call to the Triton walk instead, with the same results."""
    T, N = 300, 8192
    case = make_inputs("gae", T, N, seed=7, dtype=torch.bfloat16, flag_dtype=flag_dtype)
    if width or offset:
        def moved(_, x):
            if x.dim() != 2:
                return x
            room = torch.zeros(T * (width or N) + offset, dtype=x.dtype, device=x.device)
            view = room[offset:].view(T, width or N)[:, :N]
            view.copy_(x)
            return view
        case = case.map(moved)
    ref = call(R, upcast(case))
    out = call(kernels, case)
    for o, r in zip(out, ref):
        assert rel_err(o, r) < 1e-2


BUILD_STAGES = (2, 4)


@pytest.fixture(scope="module")
def sm90_builds():
    """GAE's async-walk twin in the rule's tiles, with and without its optional inputs, built for sm_90 by
    ``sm90_build.py`` in a process of its own; keyed by ``(stages, options)``."""
    jobs = [["gae", [*async_tile(stages).__dict__.values()], options] for stages in BUILD_STAGES
            for options in (False, True)]
    return {(LaunchConfig(*fields).num_stages, options): build for _, fields, options, build in built_for_sm90(jobs)}


@pytest.mark.skipif(not HAVE_GLUON, reason="this Triton has no Gluon")
@pytest.mark.parametrize("options", [False, True], ids=["without_optional_inputs", "with_them"])
@pytest.mark.parametrize("stages", BUILD_STAGES)
def test_the_twin_builds_for_sm90_with_few_barriers_and_no_spills(sm90_builds, stages, options):
    """One barrier a chunk, the walk's own (the Triton walk's 64 x 64 bf16 tile takes 15; Triton 3.9's
    PTX has that one, Triton 3.6's one per stage: `docs/bench/async_walks/builds.log`), every series
    copied ahead as 16-byte vectors (``cp.async`` of 16 bytes, none smaller), nothing spilled."""
    build = sm90_builds[(stages, options)]
    assert 1 <= build["barriers"] <= stages
    sizes = re.findall(r"cp\.async\.c[ag]\.shared\.global \[[^]]*\], \[[^]]*\], (\w+)", build["ptx"])
    assert sizes and set(sizes) == {"0x10"}
    if build["ptxas"] is not None:
        assert "0 bytes spill stores" in build["ptxas"], build["ptxas"]
