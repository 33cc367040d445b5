"""The explicit-layout twins (``kernels._explicit_layout``, Gluon): where they are taken, their errors,
their builds for sm_90 (no GPU needed: Triton's own compiler and ``ptxas``), and on a GPU their
outputs against the float64 reference. The interpreter cannot run Gluon kernels, so on a machine
without a GPU the reference check is the GPU suite's."""

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

from conftest import DEVICE, built_for_sm90, call, make_inputs, rel_err, sampled, upcast

ON_GPU = runs_gluon(torch.device(DEVICE))


def explicit(T: int, N: int, itemsize: int = 4, aligned_rows: bool = True, op: str = "gae") -> LaunchConfig:
    traits = dict(_launch.kernel_traits(op), explicit_short_tiles=True)
    return _launch.choose_config(T, N, False, itemsize=itemsize, aligned_rows=aligned_rows, **traits)


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
@pytest.mark.parametrize(*sampled(("twin_case", TWIN_CASES, twin_case_id),
                                  ("T,N", [(1, 7), (13, 333), (32, 4096), (50, 1000), (128, 4096), (200, 16), (256, 8191)],
                                   lambda s: f"T{s[0]}-N{s[1]}"),
                                  ("dtype", [torch.float32, torch.bfloat16])))
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


@pytest.mark.exhaustive
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


@pytest.mark.exhaustive
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


@pytest.mark.exhaustive
@pytest.mark.skipif(not HAVE_GLUON, reason="this Triton has no Gluon")
@pytest.mark.parametrize("op,config", [build for build in RUN_SUCCESSOR_BUILDS + FAST_EXP_BUILDS if build[0] != "gae"],
                         ids=lambda x: x if isinstance(x, str) else f"{x.block_t}x{x.block_n}")
def test_triton_tiles_take_e_to_the_x_by_one_flushing_ex2(sm90_builds, op, config):
    """``_scan.fast_exp``: V-trace's and Retrace's Triton kernels raise e to the log-ratios by
    ``ex2.approx.ftz`` alone, not ``tl.exp``'s ``ex2.approx`` that ``ptxas`` wraps in a range check
    and two rescalings to keep denormal results."""
    ptx = sm90_builds[(op, config, False)]["ptx"]
    assert re.search(r"ex2\.approx\.ftz\.f32", ptx) and not re.search(r"ex2\.approx\.f32", ptx)


@pytest.mark.exhaustive
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


@pytest.mark.exhaustive
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
