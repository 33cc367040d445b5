"""The async-walk twins of GAE, V-trace, Retrace, lambda and discounted returns (``kernels._async_walk``, Gluon:
walks fed through shared memory by asynchronous copies): the inputs their copies can move, their
errors, their builds for sm_90 (no GPU needed: Triton's own compiler and ``ptxas``), and on a GPU
their outputs against the float64 reference, with the Triton walks taking the problems they cannot
copy. The interpreter cannot run Gluon kernels, so without a GPU the reference check is the GPU
suite's."""

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

from conftest import DEVICE, built_for_sm90, call, make_inputs, rel_err, sampled, to_time_dim1, upcast

ON_GPU = runs_gluon(torch.device(DEVICE))


def triton_kernel(op: str):
    return getattr(importlib.import_module(f"kernels.{op}"), f"_{op}_kernel")


ASYNC_OPS = ("gae", "lambda_returns", "discounted_returns", "retrace", "vtrace")  # the estimators with an async-walk twin
RULED_OPS = tuple(op for op in ASYNC_OPS if _launch.kernel_traits(op)["async_walks"])  # twins their rules take


@pytest.fixture
def gpu_rules(monkeypatch):
    """``choose_config`` as on a GPU that runs Gluon kernels (not the interpreter's big tiles)."""
    monkeypatch.setattr(_launch, "INTERPRET", False)
    monkeypatch.setattr(_launch, "EXPLICIT_LAYOUTS", True)
    _launch.choose_config.cache_clear()
    yield _launch
    _launch.choose_config.cache_clear()


def async_tile(stages: int, block_n: int = 64, block_t: int = 64, warps: int = 4, four_envs: bool = False
               ) -> LaunchConfig:
    return LaunchConfig(block_t, block_n, warps, num_stages=stages, latest_first=True, env_runs_of_four=four_envs,
                        async_walk=True)


def ranges(op: str, form=None) -> list:
    return _launch.async_walk_ranges(_launch.kernel_traits(op, form)["async_walks"])


def forms(op: str) -> tuple:
    """The forms of ``op``'s kernel (``FORMS``; ``(None,)`` for a kernel of one form)."""
    return tuple(getattr(importlib.import_module(f"kernels.{op}"), "FORMS", {None: {}}))


@pytest.mark.parametrize("op", ASYNC_OPS)
def test_gae_vtrace_retrace_lambda_and_discounted_returns_have_twins(op):
    assert triton_kernel(op) in _async_walk.TWINS


def test_estimator_config_takes_async_walks_only_where_gluon_runs(gpu_rules, monkeypatch):
    """An async walk is never chosen where Gluon kernels cannot run, nor when the caller declines it."""
    monkeypatch.setattr(_launch, "EXPLICIT_LAYOUTS", False)
    assert not _launch.estimator_config("gae", 4096, 8192, False, 2).async_walk
    monkeypatch.setattr(_launch, "EXPLICIT_LAYOUTS", True)
    assert _launch.estimator_config("gae", 4096, 8192, False, 2).async_walk
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
    return _async_walk.misfit(triton_kernel("gae").arg_names, gae_arguments(*tensors), N)


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
    ("eligibility_traces", 300, 64, torch.bfloat16, 0, "has no async-walk kernel")])
def test_an_async_walk_the_problem_cannot_take_names_why(op, T, N, dtype, time_dim, message):
    case = make_inputs(op, T, N, seed=1, dtype=dtype)
    if time_dim:
        case = to_time_dim1(case, contiguous=True)
    with pytest.raises(ValueError, match=f"LaunchConfig.async_walk: .*{message}"):
        call(kernels, case, time_dim=time_dim, config=LaunchConfig(64, 64, 4, num_stages=3, async_walk=True))


# (block_t, block_n, warps, stages): 16, 32 and 8 lanes along time (two, one and four along environments
# per warp), 32-128 steps, two to six stages.
WALK_SHAPES = [(64, 64, 4, 2), (64, 64, 4, 3), (64, 64, 4, 4), (32, 64, 4, 6), (64, 32, 2, 4), (64, 128, 4, 3),
               (128, 64, 4, 3)]
# Walks of four environments per thread (8-byte vectors: block_t, block_n, warps, stages).
FOUR_ENV_SHAPES = [(128, 64, 8, 2), (64, 128, 8, 2), (64, 64, 8, 3), (32, 64, 8, 4), (64, 32, 4, 3)]
# Each estimator with a twin, in every form its optional inputs give it (make_inputs' options).
WALK_CASES = [("gae", dict()), ("gae", dict(next_values=True)), ("gae", dict(truncated=False)),
              ("lambda_returns", dict()), ("lambda_returns", dict(truncated=False)),
              ("discounted_returns", dict()), ("discounted_returns", dict(truncated=False)),
              ("discounted_returns", dict(truncated=False, next_values=True, bootstrap=False)),
              ("discounted_returns", dict(truncated=False, bootstrap=False)),
              ("retrace", dict()), ("retrace", dict(truncated=False)),
              ("vtrace", dict()), ("vtrace", dict(truncated=False)), ("vtrace", dict(next_values=True)),
              ("vtrace", dict(scalars=dict(pg_rho_bar=0.8)))]  # unequal clips: pg_adv from x_{t+1}, not vs - V


# Retrace's six series take 80 KB a stage in 64 x 128 and 128 x 64 tiles: three stages of them are more
# shared memory than the H200 has (Triton raises OutOfResources), so Retrace with truncations leaves them out;
# so does V-trace's with next_values (the same 80 KB), and the filter below leaves out its other form with
# truncations there too (64 KB a stage: it would fit; V-trace's 128 x 64 and 64 x 128 tiles are checked in two
# stages among the four-per-thread shapes).
TOO_BIG = {(op, shape) for op in ("retrace", "vtrace") for shape in ((64, 128, 4, 3), (128, 64, 4, 3))}


def walk_id(walk: tuple) -> str:
    op, options, shape, four_envs = walk
    name = "-".join(f"{k}={v}" for k, v in {**options, **options.get("scalars", {})}.items()
                    if k != "scalars") or "plain"
    return f"{op}-{name}-" + "%dx%dw%ds%d" % shape + ("-four_envs" if four_envs else "")


WALKS = ([(op, options, shape, False) for op, options in WALK_CASES for shape in WALK_SHAPES
          if options.get("truncated", True) is False or (op, shape) not in TOO_BIG]
         + [(op, options, shape, True) for op, options in WALK_CASES if op == "vtrace" for shape in FOUR_ENV_SHAPES])


@pytest.mark.skipif(not ON_GPU, reason="Gluon kernels run on an NVIDIA GPU only (the interpreter cannot run them)")
@pytest.mark.parametrize(*sampled(("op,options,shape,four_envs", WALKS, walk_id),
                                  ("T,N", [(1, 16), (37, 16), (300, 64), (1000, 80), (777, 1040), (4096, 256)],
                                   lambda s: f"T{s[0]}-N{s[1]}")))
def test_async_walks_match_the_reference(op, options, T, N, shape, four_envs):
    """Every chunk length, width and depth on partial chunks and partial programs, in every form of
    each estimator's optional inputs, bf16 and float16, bool and byte flags; and once with rows wider
    than N."""
    block_t, block_n, warps, stages = shape
    seed = zlib.crc32(repr((op, options, T, N, shape)).encode())
    dtype = (torch.bfloat16, torch.float16)[seed % 2]
    flag_dtype = (torch.bool, torch.uint8)[seed // 2 % 2]
    case = make_inputs(op, T, N, seed=seed, dtype=dtype, flag_dtype=flag_dtype, **options)
    ref = call(R, upcast(case))
    wide = case.map(lambda _, x: torch.cat([x, x[:, :16]], dim=1)[:, :N] if x.dim() == 2 else x)
    config = LaunchConfig(block_t, block_n, warps, num_stages=stages, async_walk=True, env_runs_of_four=four_envs)
    for inputs in (case, wide):
        out = call(kernels, inputs, config=config)
        for o, r in zip(out, ref):
            assert o.dtype == dtype
            assert rel_err(o, r) < 1e-2, inputs is wide


@pytest.mark.skipif(not ON_GPU, reason="Gluon kernels run on an NVIDIA GPU only (the interpreter cannot run them)")
@pytest.mark.parametrize("flag_dtype, wider, offset", [(torch.bool, 0, 0), (torch.float32, 0, 0), (torch.bool, 8, 0),
                                                        (torch.bool, 0, 1)])
@pytest.mark.parametrize("op", RULED_OPS)
def test_the_default_walk_takes_the_twin_or_the_triton_walk_and_both_are_right(op, flag_dtype, wider, offset):
    """At 300 steps of the first range of environments the rule gives the twin; float flags, rows 8
    elements wider than N or data off 16-byte alignment send the call to the Triton walk instead, with
    the same results."""
    T, N = 300, ranges(op)[0].first
    assert _launch.estimator_config(op, T, N, False, 2).async_walk
    case = make_inputs(op, T, N, seed=7, dtype=torch.bfloat16, flag_dtype=flag_dtype)
    if wider or offset:
        def moved(_, x):
            if x.dim() != 2:
                return x
            room = torch.zeros(T * (N + wider) + offset, dtype=x.dtype, device=x.device)
            view = room[offset:].view(T, N + wider)[:, :N]
            view.copy_(x)
            return view
        case = case.map(moved)
    ref = call(R, upcast(case))
    out = call(kernels, case)
    for o, r in zip(out, ref):
        assert rel_err(o, r) < 1e-2


# Each twin in each tile its rule takes in each form of its kernel (block_t, block_n, stages, warps, four per thread).
RULE_TILES = sorted({(op, rule.block_t, rule.block_n, rule.stages, rule.num_warps, rule.four_envs)
                     for op in RULED_OPS for form in forms(op) for rule in ranges(op, form)})


@pytest.fixture(scope="module")
def sm90_builds():
    """Each async-walk twin in each of its rule's tiles, with and without its optional inputs, built for
    sm_90 by ``sm90_build.py`` in a process of its own; keyed by ``RULE_TILES``' entry and ``options``."""
    jobs = [[op, [*async_tile(stages, block_n, block_t, warps, four_envs).__dict__.values()], options]
            for op, block_t, block_n, stages, warps, four_envs in RULE_TILES for options in (False, True)]
    builds = {}
    for op, fields, options, build in built_for_sm90(jobs):
        config = LaunchConfig(*fields)
        builds[(op, config.block_t, config.block_n, config.num_stages, config.num_warps, config.env_runs_of_four,
                options)] = build
    return builds


READS_AGAIN = {"vtrace": 1}  # barriers a chunk beside the walk's own: _async_walk.read_again


@pytest.mark.exhaustive
@pytest.mark.skipif(not HAVE_GLUON, reason="this Triton has no Gluon")
@pytest.mark.parametrize("options", [False, True], ids=["without_optional_inputs", "with_them"])
@pytest.mark.parametrize("tile", RULE_TILES, ids=lambda x: "-".join(map(str, x)))
def test_the_twins_build_for_sm90_with_few_barriers_and_hardly_a_spill(sm90_builds, tile, options):
    """One barrier a chunk, the walk's own (the Triton walk's 64 x 64 bf16 tile takes 15; Triton 3.9's
    PTX has that one, Triton 3.6's one per stage: experiment log, `async_walks/builds.log`), and V-trace's
    second before it reads the chunk again; every series copied ahead as 16-byte vectors (``cp.async``
    of 16 bytes, none smaller), at most one value spilled (Triton 3.6's ``ptxas`` spills 4 bytes of
    discounted returns' twin without its optional inputs in 64 x 64 tiles of two stages, in 80
    registers; that form ran as fast as the Triton walk there: experiment log, `async_returns/options.log`)."""
    op, stages = tile[0], tile[3]
    build = sm90_builds[(*tile, options)]
    assert 1 <= build["barriers"] <= stages + READS_AGAIN.get(op, 0)
    sizes = re.findall(r"cp\.async\.c[ag]\.shared\.global \[[^]]*\], \[[^]]*\], (\w+)", build["ptx"])
    assert sizes and set(sizes) == {"0x10"}
    if build["ptxas"] is not None:
        spilled = [int(b) for b in re.findall(r"(\d+) bytes spill stores", build["ptxas"])]
        assert spilled and max(spilled) <= 4, build["ptxas"]
