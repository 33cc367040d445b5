"""GAE's explicit-layout twin (``kernels._explicit_layout``, Gluon): the rule that picks it, its
errors, its build for sm_90 (no GPU needed: Triton's own compiler and ``ptxas``), and on a GPU its
outputs against the float64 reference. The interpreter cannot run Gluon kernels, so on a machine
without a GPU the reference check is the GPU suite's (experiment log, "Explicit layouts")."""

from __future__ import annotations

import importlib
import re
import zlib

import pytest
import torch

import kernels
from kernels import LaunchConfig, _explicit_layout, _launch
from kernels import reference as R
from kernels._triton import HAVE_GLUON, runs_gluon

from conftest import DEVICE, built_for_sm90, call, make_inputs, rel_err, upcast

ON_GPU = runs_gluon(torch.device(DEVICE))


def explicit(T: int, N: int, itemsize: int = 4, aligned_rows: bool = True, op: str = "gae") -> LaunchConfig:
    traits = dict(_launch.kernel_traits(op), explicit_short_tiles=True)
    return _launch.choose_config(T, N, False, itemsize=itemsize, aligned_rows=aligned_rows, **traits)


@pytest.mark.parametrize("op,T,N,block_t,block_n", [
    ("gae", 128, 4096, 128, 16), ("gae", 100, 512, 128, 8), ("lambda_returns", 200, 4096, 256, 16),
    ("gae", 33, 3000, 64, 8), ("gae", 64, 1000, 64, 8), ("gae", 32, 8192, 32, 16), ("gae", 16, 32768, 16, 32),
    ("gae", 5, 200, 8, 64), ("gae", 1, 4096, 8, 64), ("discounted_returns", 128, 4096, 128, 16),
    ("retrace", 64, 1024, 64, 8), ("linear_scan", 256, 4096, 256, 16), ("eligibility_traces", 80, 30002, 128, 8),
    ("episodic_prefix_sum", 256, 1000, 256, 8), ("episodic_prefix_sum", 128, 2500, 128, 8),
    ("vtrace", 64, 3000, 64, 8)])
def test_short_time_major_sequences_take_whole_sequence_tiles(op, T, N, block_t, block_n):
    """Two environments per thread up to 32 steps, and for 33-256 steps below 2048 environments, in
    unaligned rows (past 64 steps the light kernels only: 129-256 steps, and 65-128 from 2048
    environments) and (Retrace, discounted returns) for 129-256 steps; four from 2048 (experiment log)."""
    config = explicit(T, N, aligned_rows=N % 16 == 0, op=op)
    assert config == LaunchConfig(block_t, block_n, 4, explicit_layout=True)
    assert T <= config.block_t


@pytest.mark.parametrize("op,T,N,itemsize,block_t,block_n,warps", [
    ("vtrace", 128, 4096, 4, 128, 16, 8), ("vtrace", 100, 1024, 4, 128, 8, 8), ("vtrace", 200, 2048, 4, 256, 16, 8),
    ("vtrace", 256, 128, 2, 256, 8, 8), ("vtrace", 100, 4096, 2, 128, 16, 8), ("retrace", 128, 4096, 4, 128, 16, 8),
    ("retrace", 65, 2000, 4, 128, 8, 8), ("retrace", 256, 2048, 4, 256, 16, 8), ("retrace", 129, 4096, 2, 256, 16, 8),
    ("retrace", 128, 8192, 2, 128, 32, 4), ("discounted_returns", 200, 4096, 4, 256, 16, 8),
    ("discounted_returns", 256, 1024, 2, 256, 8, 8), ("discounted_returns", 128, 4096, 4, 128, 16, 4),
    ("gae", 200, 1024, 4, 256, 8, 8), ("gae", 256, 3072, 4, 256, 16, 8), ("gae", 256, 4096, 4, 256, 16, 8),
    ("gae", 200, 6144, 4, 256, 16, 8), ("gae", 128, 1024, 4, 128, 8, 4), ("gae", 200, 1024, 2, 256, 8, 8),
    ("lambda_returns", 256, 2048, 2, 256, 16, 8), ("lambda_returns", 256, 4096, 4, 256, 16, 4),
    ("lambda_returns", 130, 1536, 4, 256, 8, 8),
    ("lambda_returns", 230, 6000, 4, 256, 16, 4), ("eligibility_traces", 200, 6144, 4, 256, 16, 8),
    ("episodic_prefix_sum", 130, 1024, 4, 256, 8, 8), ("episodic_prefix_sum", 224, 2048, 4, 256, 16, 4),
    ("eligibility_traces", 200, 2048, 2, 256, 16, 4), ("eligibility_traces", 100, 4096, 4, 128, 16, 4),
    ("linear_scan", 200, 1024, 4, 256, 8, 4)])
def test_short_tiles_on_eight_warps(op, T, N, itemsize, block_t, block_n, warps):
    """Eight warps along time, in 16-aligned rows short of the walks, for V-trace at 65-256 steps,
    Retrace at 65-256 (16-bit floats 129-256), discounted returns and GAE at 129-256, lambda returns
    at 129-256 (float32 below 4096 environments), and eligibility traces and episodic sums at
    129-255 float32 steps not a multiple of 16; two environments per thread below 2048 environments
    and four from (experiment log, "Eight-warp short tiles"; "Eight environments per thread, the short
    tiles' edges"). Four warps elsewhere."""
    config = explicit(T, N, itemsize, aligned_rows=True, op=op)
    assert config == LaunchConfig(block_t, block_n, warps, explicit_layout=True)


@pytest.mark.parametrize("op,T,N,itemsize,block_t,block_n,warps", [
    ("gae", 128, 8192, 2, 128, 32, 4), ("gae", 128, 16384, 2, 128, 32, 4), ("gae", 256, 8192, 2, 256, 32, 8),
    ("retrace", 200, 12000, 2, 256, 32, 8), ("discounted_returns", 100, 8192, 2, 128, 32, 4),
    ("linear_scan", 256, 8192, 2, 256, 32, 4), ("episodic_prefix_sum", 128, 16384, 2, 128, 32, 4),
    ("lambda_returns", 64, 16384, 2, 64, 16, 4), ("gae", 128, 4096, 2, 128, 16, 4),
    ("vtrace", 128, 8192, 2, 128, 16, 8), ("eligibility_traces", 256, 8192, 4, 256, 16, 4),
    ("episodic_prefix_sum", 200, 12288, 4, 256, 16, 8), ("eligibility_traces", 128, 16384, 4, 128, 16, 4),
    ("eligibility_traces", 100, 24576, 4, 128, 16, 4), ("lambda_returns", 256, 8192, 4, 256, 16, 4),
    ("linear_scan", 140, 8192, 4, 256, 16, 4), ("discounted_returns", 200, 8192, 4, 256, 16, 8)])
def test_short_tiles_to_the_walks_edge(op, T, N, itemsize, block_t, block_n, warps):
    """16-bit floats and the light kernels hold whole sequences to twice ``SHORT_WALKS_FROM``
    elements (not V-trace's 16-bit floats), and 16-bit floats of 65-256 steps take eight
    environments per thread from 8192 environments (not V-trace); float32 129-256 steps also at
    the bound, 8192 environments (lambda and discounted returns, ``linear_scan``; experiment log,
    "Eight environments per thread, the short tiles' edges")."""
    config = explicit(T, N, itemsize, aligned_rows=True, op=op)
    assert config == LaunchConfig(block_t, block_n, warps, explicit_layout=True)


@pytest.mark.parametrize("op,T,N", [("gae", 180, 5000), ("gae", 136, 1000), ("gae", 256, 30002), ("retrace", 200, 2500),
                                     ("retrace", 250, 12008), ("vtrace", 200, 6004), ("vtrace", 129, 4100)])
def test_unaligned_rows_of_the_heavier_kernels_take_eight_warp_tiles(op, T, N):
    """Float32 rows not 16 elements apart, 129-256 steps: GAE and Retrace on eight warps, two
    environments per thread, V-trace from 4096 environments (experiment log, "Eight environments per
    thread, the short tiles' edges"); V-trace below, bf16 and the other kernels keep their tiles."""
    assert explicit(T, N, 4, aligned_rows=False, op=op) == LaunchConfig(256, 8, 8, explicit_layout=True)
    assert not explicit(T, N, 2, aligned_rows=False, op=op).explicit_layout
    assert not explicit(T, 2500, 4, aligned_rows=False, op="vtrace").explicit_layout
    assert not explicit(T, N, 4, aligned_rows=False, op="lambda_returns").explicit_layout


@pytest.mark.parametrize("T,N", [(65, 2500), (72, 1000), (100, 30002), (128, 6004)])
def test_retrace_takes_eight_warp_tiles_in_unaligned_rows_of_65_to_128_steps(T, N):
    """Retrace's float32 rows not 16 elements apart of 65-128 steps: eight warps, two environments per
    thread (experiment log, "Successor values in rows not 16 elements apart, persistent look-back
    tiles"); V-trace and the others keep their Triton tiles there, and bf16 too."""
    assert explicit(T, N, 4, aligned_rows=False, op="retrace") == LaunchConfig(128, 8, 8, explicit_layout=True)
    assert not explicit(T, N, 2, aligned_rows=False, op="retrace").explicit_layout
    for op in ("vtrace", "lambda_returns", "discounted_returns", "linear_scan"):
        assert not explicit(T, N, 4, aligned_rows=False, op=op).explicit_layout, op


@pytest.mark.parametrize("T,N,whole", [(65, 4096, True), (72, 30002, True), (90, 6004, True), (90, 4095, False),
                                       (91, 12008, False), (100, 16390, False), (128, 6004, False), (72, 2500, False)])
def test_gae_takes_four_warp_tiles_in_unaligned_rows_of_65_to_90_steps(T, N, whole):
    """GAE's float32 rows not 16 elements apart of 65-90 steps from 4096 environments: four warps, two
    environments per thread (experiment log, "Successor values in rows not 16 elements apart, persistent
    look-back tiles"); 91-128 steps and fewer environments keep the Triton tiles, and bf16."""
    config = explicit(T, N, 4, aligned_rows=False, op="gae")
    if whole:
        assert config == LaunchConfig(128, 8, 4, explicit_layout=True)
    else:
        assert not config.explicit_layout
    assert not explicit(T, N, 2, aligned_rows=False, op="gae").explicit_layout


@pytest.mark.parametrize("op,T,N,itemsize,aligned", [
    ("gae", 128, 16384, 4, True), ("gae", 256, 8208, 4, True), ("gae", 64, 16384, 4, True), ("gae", 50, 32768, 2, True), ("gae", 257, 4096, 4, True),
    ("gae", 128, 1000, 4, False), ("linear_scan", 200, 3000, 4, False), ("episodic_prefix_sum", 100, 1500, 4, False),
    ("gae", 8, 16, 4, True), ("gae", 128, 4096, 8, True),
    ("vtrace", 200, 2000, 4, False), ("vtrace", 256, 8192, 2, True), ("retrace", 100, 16384, 4, True),
    ("vtrace", 128, 16384, 2, True), ("gae", 128, 32768, 2, True), ("gae", 256, 16384, 2, True),
    ("eligibility_traces", 128, 32768, 4, True), ("episodic_prefix_sum", 256, 16384, 2, True),
    ("lambda_returns", 200, 8208, 4, True), ("vtrace", 200, 8192, 4, True), ("gae", 128, 16384, 4, True),
    ("gae", 200, 8192, 4, True)])
def test_walks_long_sequences_unaligned_rows_and_float64_keep_the_triton_tiles(op, T, N, itemsize, aligned):
    """Past the walks' threshold, past 256 steps, 65-256 steps in unaligned rows (the light kernels:
    65-128 steps below 2048 environments), 8 steps below 128 environments and float64 keep the
    Triton kernels' tiles."""
    assert not explicit(T, N, itemsize, aligned, op=op).explicit_layout


@pytest.mark.parametrize("op", ["gae", "vtrace", "retrace", "lambda_returns", "discounted_returns",
                                "eligibility_traces", "episodic_prefix_sum", "linear_scan"])
def test_explicit_layouts_only_where_gluon_kernels_run(op):
    assert _launch.kernel_traits(op)["explicit_short_tiles"]
    assert _launch.estimator_config(op, 128, 4096, False, 4).explicit_layout == _launch.EXPLICIT_LAYOUTS
    assert _launch.EXPLICIT_LAYOUTS == runs_gluon(torch.device("cuda"))
    assert not _launch.estimator_config(op, 128, 4096, True, 4).explicit_layout  # [N, T]


def test_explicit_layout_block_shapes_are_checked():
    with pytest.raises(ValueError, match="explicit_layout holds a whole sequence"):
        LaunchConfig(128, 16, 4, lookback=True, explicit_layout=True)
    with pytest.raises(ValueError, match="block_n >= 4"):
        LaunchConfig(128, 2, 4, explicit_layout=True)
    with pytest.raises(ValueError, match="block_t >= 4"):
        LaunchConfig(2, 64, 4, explicit_layout=True)


def test_explicit_layout_launches_name_what_the_problem_lacks():
    case = make_inputs("gae", 40, 16, seed=1)
    if not ON_GPU:
        with pytest.raises(ValueError, match="runs on a GPU only"):
            call(kernels, case, config=LaunchConfig(64, 16, 4, explicit_layout=True))
        return
    with pytest.raises(ValueError, match="T <= block_t"):
        call(kernels, case, config=LaunchConfig(32, 16, 4, explicit_layout=True))



TWIN_CASES = [("gae", {}), ("gae", dict(next_values=True)), ("gae", dict(truncated=False)),
              ("vtrace", {}), ("vtrace", dict(next_values=True, scalars=dict(lam=0.9))), ("retrace", {}),
              ("retrace", dict(truncated=False)), ("lambda_returns", {}), ("lambda_returns", dict(truncated=False)),
              ("discounted_returns", {}), ("discounted_returns", dict(truncated=False)),
              ("discounted_returns", dict(truncated=False, bootstrap=False)), ("eligibility_traces", {}),
              ("eligibility_traces", dict(initial=True)), ("episodic_prefix_sum", dict(initial=True)),
              ("episodic_prefix_sum", dict(scalars=dict(boundary="starts_at"))), ("linear_scan", dict(initial=True)),
              ("linear_scan", dict(scalars=dict(reverse=True)))]


def twin_case_id(case) -> str:
    op, kw = case
    return "-".join([op] + [f"{k}={v}" for k, v in kw.items()])


@pytest.mark.skipif(not ON_GPU, reason="Gluon kernels run on an NVIDIA GPU only (the interpreter cannot run them)")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("T,N", [(1, 7), (13, 333), (32, 4096), (50, 1000), (128, 4096), (200, 16), (256, 8191)])
@pytest.mark.parametrize("twin_case", TWIN_CASES, ids=twin_case_id)
def test_twin_matches_the_reference(twin_case, T, N, dtype):
    """Every twin, in both widths of its block shape on four and eight warps (bf16 also eight
    environments per thread), with and without its optional inputs, partial tiles in time and
    environments, float32 and bf16; and once with every series a strided view."""
    op, kw = twin_case
    case = make_inputs(op, T, N, seed=zlib.crc32(repr((twin_case, T, N, dtype)).encode()), dtype=dtype, **kw)
    ref = call(R, upcast(case))
    strided = case.map(lambda _, x: x.repeat_interleave(2, dim=-1)[..., ::2] if x.dim() == 2 else x)
    widths = ((case, 2, 4), (case, 4, 4), (strided, 2, 4), (case, 2, 8), (case, 4, 8))
    if dtype == torch.bfloat16:  # 16-byte runs of environments (_launch._explicit_short_tile)
        widths += ((case, 8, 4), (case, 8, 8))
    for inputs, envs_per_thread, warps in widths:
        out = call(kernels, inputs, config=_launch.explicit_tile(T, envs_per_thread, warps))
        for o, r in zip(out, ref):
            assert o.dtype == dtype
            assert rel_err(o, r) < (1e-5 if dtype == torch.float32 else 1e-2), (envs_per_thread, warps,
                                                                                  inputs is strided)


TWIN_ESTIMATORS = ("gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "eligibility_traces",
                   "episodic_prefix_sum", "linear_scan")
BUILD_SHAPES = [(8, 4096), (32, 4096), (64, 4096), (128, 4096), (256, 4096), (128, 512)]
BUILD_CASES = [(op, T, N) for op in TWIN_ESTIMATORS for T, N in BUILD_SHAPES if explicit(T, N, op=op).explicit_layout]
SUCCESSOR_BUILDS = [(op, _launch.explicit_tile(128, 4, warps)) for op in ("gae", "vtrace") for warps in (4, 8)]
# Triton tiles in thread runs: a four-warp walk, which takes its successors from the runs
# (_launch.successors_from_runs), and a two-warp look-back tile, which keeps the second tile.
# Float series each row of a tile loads, without optional inputs: rewards, values (and V-trace's log-ratios).
FLOAT_SERIES = {"gae": 2, "vtrace": 3}
RUN_SUCCESSOR_BUILDS = [(op, LaunchConfig(block_t, block_n, warps, lookback=warps == 2, latest_first=True,
                                          thread_runs=True))
                        for op in ("gae", "vtrace") for block_t, block_n, warps in ((128, 16, 4), (64, 32, 2))]
# A Triton walk of Retrace's, whose e^x comes from _scan.fast_exp as V-trace's does.
FAST_EXP_BUILDS = [("retrace", LaunchConfig(32, 32, 2, num_stages=3, latest_first=True, thread_runs=True))]
# Triton walks eight and four environments per thread (LaunchConfig.env_runs_of_four: the same layout
# for float32 tiles).
FOUR_ENV_BUILDS = [(op, LaunchConfig(64, 32, 2, num_stages=3, latest_first=True, thread_runs=True,
                                     env_runs_of_four=four))
                   for op in ("vtrace", "lambda_returns") for four in (False, True)]


@pytest.fixture(scope="module")
def sm90_builds():
    """Every twin at the block shapes the rule gives it (``BUILD_CASES``), with and without its
    optional inputs, and the Triton tiles of ``RUN_SUCCESSOR_BUILDS``, built for sm_90 by
    ``sm90_build.py`` in a process of its own (the interpreter, on here without a GPU, replaces the
    functions the compiler needs). Keyed by ``(op, LaunchConfig, options)``."""
    jobs = [[op, [*explicit(T, N, op=op).__dict__.values()], options]
            for op, T, N in BUILD_CASES for options in (False, True)]
    jobs += [[op, [*config.__dict__.values()], False]
             for op, config in SUCCESSOR_BUILDS + RUN_SUCCESSOR_BUILDS + FAST_EXP_BUILDS + FOUR_ENV_BUILDS]
    return {(op, LaunchConfig(*fields), options): build for op, fields, options, build in built_for_sm90(jobs)}


@pytest.mark.skipif(not HAVE_GLUON, reason="this Triton has no Gluon")
@pytest.mark.parametrize("op,config", SUCCESSOR_BUILDS, ids=[f"{op}-{c.num_warps}warps" for op, c in SUCCESSOR_BUILDS])
def test_values_one_step_later_cost_one_row_per_thread(sm90_builds, op, config):
    """``_explicit_layout.successor_tile``: GAE's and V-trace's ``v_{t+1}`` come from each thread's
    own run of steps but its first, so the float loads are each series' rows, the bootstrap value and
    one row more per thread (a second tile of values would add a load per step)."""
    steps = config.block_t // (_explicit_layout.time_threads(config.block_t, config.num_warps) * config.num_warps)
    series = FLOAT_SERIES[op]
    loads = float_vector_loads(sm90_builds[(op, config, False)]["ptx"])
    assert loads == series * steps + 1 + 1  # + successor, bootstrap


def float_vector_loads(ptx: str) -> int:
    """The float32 loads of four elements in a kernel's PTX (one per thread per row of a tile)."""
    return len(re.findall(r"ld\.global(\.\S+)*\.v4\.b32", ptx))


@pytest.mark.skipif(not HAVE_GLUON, reason="this Triton has no Gluon")
@pytest.mark.parametrize("op,config", RUN_SUCCESSOR_BUILDS,
                         ids=[f"{op}-{c.num_warps}warps" for op, c in RUN_SUCCESSOR_BUILDS])
def test_triton_thread_run_tiles_load_successors_one_row_per_thread(sm90_builds, op, config):
    """``_scan.successor_in_runs``: in a Triton tile in thread runs whose successors come from the
    runs, GAE's and V-trace's float loads (SASS: the PTX still lists the second tile's loads, masked
    off but for the first row, and ``ptxas`` drops them) are each series' rows, the bootstrap value
    and one row more per thread; where the rule keeps the second tile, one row more per step."""
    steps = config.block_t // _launch.time_threads(config, 4)
    series = FLOAT_SERIES[op]
    successors = 1 if _launch.successors_from_runs(config, 4, config.lookback) else steps
    sass = sm90_builds[(op, config, False)]["sass"]
    assert steps > 1 and len(re.findall(r"LDG\.E\.128", sass)) == series * steps + successors + 1


@pytest.mark.skipif(not HAVE_GLUON, reason="this Triton has no Gluon")
@pytest.mark.parametrize("op,config", [build for build in RUN_SUCCESSOR_BUILDS + FAST_EXP_BUILDS if build[0] != "gae"],
                         ids=lambda x: x if isinstance(x, str) else f"{x.block_t}x{x.block_n}")
def test_triton_tiles_take_e_to_the_x_by_one_flushing_ex2(sm90_builds, op, config):
    """``_scan.fast_exp``: V-trace's and Retrace's Triton kernels raise e to the log-ratios by
    ``ex2.approx.ftz`` alone, not ``tl.exp``'s ``ex2.approx`` that ``ptxas`` wraps in a range check
    and two rescalings to keep denormal results."""
    ptx = sm90_builds[(op, config, False)]["ptx"]
    assert re.search(r"ex2\.approx\.ftz\.f32", ptx) and not re.search(r"ex2\.approx\.f32", ptx)


@pytest.mark.skipif(not HAVE_GLUON, reason="this Triton has no Gluon")
@pytest.mark.parametrize("op", ["vtrace", "lambda_returns"])
def test_tiles_four_environments_per_thread_keep_every_load_in_the_pipeline(sm90_builds, op):
    """``_scan.tile_envs`` in runs of four (``LaunchConfig.env_runs_of_four``) leaves a float32 walk's
    loads as they were: every input, the flags too, copied ahead by the pipeline (``cp.async``) as
    many times, none loaded a byte at a time in the loop. (Flags whose environments went through
    ``in_runs_of_four`` twice lost their runs to the compiler: bf16 walks 5-10x slower.)"""
    eight, four = (sm90_builds[(op, config, False)]["ptx"] for o, config in FOUR_ENV_BUILDS if o == op)
    copies = [len(re.findall(r"cp\.async\.c[ag]\.shared\.global", ptx)) for ptx in (eight, four)]
    assert copies[0] == copies[1] > 0
    assert not re.search(r"ld\.global(\.\S+)*\.[ub]8", four)


def test_every_estimator_has_a_twin():
    for op in TWIN_ESTIMATORS:
        module = importlib.import_module(f"kernels.{op}")
        assert getattr(module, f"_{op}_kernel") in _explicit_layout.TWINS, op


@pytest.mark.skipif(not HAVE_GLUON, reason="this Triton has no Gluon")
@pytest.mark.parametrize("options", [False, True], ids=["without_optional_inputs", "with_them"])
@pytest.mark.parametrize("op,T,N", BUILD_CASES)
def test_twin_builds_for_sm90_without_spills_and_with_one_barrier(sm90_builds, op, T, N, options):
    """The layout is the point: the whole scan is thread runs, shuffles and one exchange between
    warps (one barrier; Triton's own layout of GAE's 128 x 16 tile takes 13), the environments load
    as vectors, and nothing spills."""
    config = explicit(T, N, op=op)
    build = sm90_builds[(op, config, options)]
    assert build["barriers"] == 1
    envs_per_thread = config.block_n * _explicit_layout.time_threads(config.block_t, config.num_warps) // 32
    assert re.search(rf"ld\.global(\.\S+)*\.v{envs_per_thread}\.", build["ptx"])
    if build["ptxas"] is not None:
        assert re.search(r"Used \d+ registers", build["ptxas"]), build["ptxas"]
        assert "0 bytes spill stores" in build["ptxas"], build["ptxas"]
