"""GAE's explicit-layout twin (``kernels._explicit_layout``, Gluon): the rule that picks it, its
errors, its build for sm_90 (no GPU needed: Triton's own compiler and ``ptxas``), and on a GPU its
outputs against the float64 reference. The interpreter cannot run Gluon kernels, so on a machine
without a GPU the reference check is the GPU suite's (docs/perf.md, "Explicit layouts")."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
import zlib

import pytest
import torch

import kernels
from kernels import LaunchConfig, _explicit_layout, _launch
from kernels import reference as R
from kernels._triton import HAVE_GLUON, runs_gluon

from conftest import DEVICE, call, make_inputs, rel_err, upcast

gae_module = importlib.import_module("kernels.gae")
ON_GPU = runs_gluon(torch.device(DEVICE))


def explicit(T: int, N: int, itemsize: int = 4, aligned_rows: bool = True) -> LaunchConfig:
    return _launch.choose_config(T, N, False, itemsize=itemsize, aligned_rows=aligned_rows, latest_first=True,
                                 successor_rows=True, explicit_short_tiles=True)


@pytest.mark.parametrize("T,N,block_t,block_n", [(128, 4096, 128, 16), (100, 512, 128, 8), (200, 2048, 256, 16),
                                                 (33, 3000, 64, 8), (64, 1000, 64, 8), (32, 8192, 32, 16),
                                                 (16, 32768, 16, 32), (5, 200, 8, 64), (1, 4096, 8, 64)])
def test_short_time_major_sequences_take_whole_sequence_tiles(T, N, block_t, block_n):
    config = explicit(T, N, aligned_rows=N % 16 == 0)
    assert config == LaunchConfig(block_t, block_n, 4, explicit_layout=True)
    assert T <= config.block_t


@pytest.mark.parametrize("T,N,itemsize,aligned", [(128, 16384, 4, True), (256, 8192, 4, True), (257, 4096, 4, True),
                                                 (128, 1000, 4, False), (8, 16, 4, True), (128, 4096, 8, True)])
def test_walks_long_sequences_unaligned_rows_and_float64_keep_the_triton_tiles(T, N, itemsize, aligned):
    assert not explicit(T, N, itemsize, aligned).explicit_layout


def test_only_kernels_with_a_twin_and_a_gpu_get_explicit_layouts():
    assert _launch.kernel_traits("gae")["explicit_short_tiles"]
    assert _launch.estimator_config("gae", 128, 4096, False, 4).explicit_layout == _launch.EXPLICIT_LAYOUTS
    assert _launch.EXPLICIT_LAYOUTS == runs_gluon(torch.device("cuda"))
    assert not _launch.estimator_config("gae", 128, 4096, True, 4).explicit_layout  # [N, T]
    for op in ("vtrace", "retrace", "lambda_returns", "discounted_returns", "eligibility_traces",
               "episodic_prefix_sum", "linear_scan"):
        assert not _launch.estimator_config(op, 128, 4096, False, 4).explicit_layout


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
    with pytest.raises(ValueError, match="has no explicit-layout kernel"):
        call(kernels, make_inputs("lambda_returns", 40, 16, seed=1), config=LaunchConfig(64, 16, 4, explicit_layout=True))


@pytest.mark.skipif(not ON_GPU, reason="Gluon kernels run on an NVIDIA GPU only (the interpreter cannot run them)")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("variant", ["truncated", "next_values", "terminated_only", "env_stride_2"])
@pytest.mark.parametrize("T,N", [(1, 7), (8, 200), (13, 333), (32, 4096), (50, 1000), (64, 2048), (100, 3000),
                                 (128, 4096), (200, 16), (256, 8191)])
def test_twin_matches_the_reference(T, N, variant, dtype):
    case = make_inputs("gae", T, N, seed=zlib.crc32(repr((T, N, variant, dtype)).encode()), dtype=dtype,
                       truncated=variant != "terminated_only", next_values=variant == "next_values")
    if variant == "env_stride_2":
        case.args = [a.repeat_interleave(2, dim=-1)[..., ::2] if a.dim() == 2 else a for a in case.args]
    ref = call(R, upcast(case))
    t_pow2 = max(8, 1 << (T - 1).bit_length())
    threads = _explicit_layout.time_threads(t_pow2, 4)
    for block_n in (2 * 32 // threads, 4 * 32 // threads):
        out = call(kernels, case, config=LaunchConfig(t_pow2, block_n, 4, explicit_layout=True))
        for o, r in zip(out, ref):
            assert o.dtype == dtype
            assert rel_err(o, r) < (1e-5 if dtype == torch.float32 else 1e-2)


BUILD_SHAPES = [(8, 4096), (16, 4096), (32, 4096), (64, 4096), (128, 4096), (256, 4096), (128, 512)]


@pytest.fixture(scope="module")
def sm90_builds():
    """Every ``BUILD_SHAPES`` twin built for sm_90 by ``gluon_build.py`` in a process of its own (the
    interpreter, on here without a GPU, replaces the functions the compiler needs)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(here), env.get("PYTHONPATH", "")])
    shapes = [[*explicit(T, N).__dict__.values()] for T, N in BUILD_SHAPES]
    done = subprocess.run([sys.executable, os.path.join(here, "gluon_build.py"), json.dumps(shapes)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {tuple(k): v for k, v in json.loads(done.stdout.splitlines()[-1])}


@pytest.mark.skipif(not HAVE_GLUON, reason="this Triton has no Gluon")
@pytest.mark.parametrize("has_next", [False, True])
@pytest.mark.parametrize("T,N", BUILD_SHAPES)
def test_twin_builds_for_sm90_without_spills_and_with_one_barrier(sm90_builds, T, N, has_next):
    """The layout is the point: the whole scan is thread runs, shuffles and one exchange between
    warps (one barrier; Triton's own layout of GAE's 128 x 16 tile takes 13), the environments load
    as vectors, and nothing spills."""
    config = explicit(T, N)
    build = sm90_builds[(config.block_t, config.block_n, has_next)]
    assert build["barriers"] == 1
    envs_per_thread = config.block_n * _explicit_layout.time_threads(config.block_t, 4) // 32
    assert re.search(rf"ld\.global(\.\S+)*\.v{envs_per_thread}\.", build["ptx"])
    if build["ptxas"] is not None:
        assert re.search(r"Used \d+ registers", build["ptxas"]), build["ptxas"]
        assert "0 bytes spill stores" in build["ptxas"], build["ptxas"]
