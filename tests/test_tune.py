"""The block-shape sweep's candidate list (scripts/tune_kernels.py), which needs no GPU to check."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import tune_kernels as K  # noqa: E402


@pytest.mark.parametrize("N, T, layout", [(8192, 4096, "tn"), (512, 8192, "nt"), (32768, 8, "tn"), (16, 1048576, "nt"),
                                          (4096, 128, "nt")])
def test_candidates_are_valid_launches_within_the_register_budget(N, T, layout):
    configs = K.candidates(N, T, layout, sms=132, stages=(1, 2, 3))
    assert configs and len(set(configs)) == len(configs)
    for c in configs:
        per_thread = c.block_t * c.block_n / (c.num_warps * K.THREADS_PER_WARP)
        assert 4 <= per_thread <= 64, c
        assert c.block_t <= max(8, 2 * T), c  # never a chunk past the next power of two of T
        assert not (c.lookback and c.block_t >= T), c  # one chunk needs no look-back
        if not c.lookback and c.block_t < T:  # several chunks walked by one program: the chip must fill
            assert -(-N // c.block_n) >= (132 // 2 if c.num_stages > 1 else 2 * 132), c
        else:
            assert c.num_stages == 1, c  # one chunk per program: nothing to pipeline


def test_pipeline_depths_apply_to_walks_only():
    configs = K.candidates(8192, 4096, "nt", stages=(2, 3), lookback=False)
    assert configs and not any(c.lookback for c in configs)
    walks = [c for c in configs if c.block_t < 4096]
    assert {c.num_stages for c in walks} == {2, 3}
    assert all(c.num_stages == 1 for c in configs if c.block_t >= 4096)
    unpipelined = {(c.block_t, c.block_n, c.num_warps) for c in K.candidates(8192, 4096, "nt", stages=(1,))
                   if not c.lookback and c.block_t < 4096}
    assert unpipelined < {(c.block_t, c.block_n, c.num_warps) for c in walks}  # pipelined: fewer programs will do


def test_candidates_follow_the_contiguous_axis():
    tn = K.candidates(8192, 4096, "tn")
    nt = K.candidates(8192, 4096, "nt")
    assert max(c.block_n for c in tn) > max(c.block_n for c in nt)
    assert max(c.block_t for c in nt) > max(c.block_t for c in tn)
    assert any(c.num_warps == 1 and c.lookback for c in tn)  # the winners of the sweeps are in the list
    assert {c for c in tn if c.thread_runs} == {replace(c, thread_runs=True) for c in tn if not c.thread_runs}
    assert not any(c.thread_runs for c in nt)  # thread runs are a [T, N] layout


def test_time_major_candidates_include_whole_sequences_and_long_look_back_tiles():
    """The shapes the sweeps found fastest for float32 ``[T, N]`` sequences of more than 256 steps
    from 512 to 4095 environments are in the tuner's list: 1024 steps held whole, 8 environments on
    8 warps, and 128- and 256-step look-back tiles, all also in thread runs."""
    tn = K.candidates(1000, 1000, "tn")
    for c in (K.LaunchConfig(1024, 8, 8), K.LaunchConfig(128, 16, 4, True), K.LaunchConfig(128, 32, 4, True),
              K.LaunchConfig(256, 32, 8, True)):
        assert c in tn and replace(c, thread_runs=True) in tn, c


@pytest.mark.parametrize("estimator, reverse", [("gae", True), ("linear_scan", True), ("eligibility_traces", False)])
def test_time_major_candidates_hold_their_steps_as_the_kernel_does(estimator, reverse):
    """Reverse kernels' ``[T, N]`` tiles hold their steps latest first (``choose_config``), so the
    tuner's candidates for them do too; ``[N, T]`` candidates and forward kernels' keep time order."""
    tn, nt = K.candidates(4096, 128, "tn"), K.candidates(4096, 128, "nt")
    assert all(c.latest_first == reverse for c in K.in_kernel_order(estimator, "tn", tn))
    assert K.in_kernel_order(estimator, "nt", nt) == nt


@pytest.mark.parametrize("config", [K.LaunchConfig(16, 64, 1, True), K.LaunchConfig(32, 16, 2, False, 3),
                                    K.LaunchConfig(128, 8, 4), K.LaunchConfig(16, 32, 2, True, latest_first=True),
                                    K.LaunchConfig(32, 16, 2, False, 3, latest_first=True),
                                    K.LaunchConfig(64, 64, 4, False, 3, latest_first=True, thread_runs=True),
                                    K.LaunchConfig(16, 64, 1, True, thread_runs=True),
                                    K.LaunchConfig(128, 32, 4, True, latest_first=True, thread_runs=True,
                                                   persistent=2),
                                    K.LaunchConfig(64, 32, 2, False, 3, latest_first=True, thread_runs=True,
                                                   env_runs_of_four=True)], ids=str)
def test_config_labels_read_back_to_the_same_block_shape(config):
    label = K.B.config_label(config)
    assert K.B.parse_config_label(label) == config
    assert K.parse_args(["--configs", f"{label},8x32w1"]).configs.split(",")[0] == label


@pytest.mark.parametrize("label", ["16x64", "16x64w1+3stage", "axbw1", "16x64w1+lookback+"])
def test_a_malformed_config_label_is_an_error_that_quotes_it(label):
    with pytest.raises(ValueError, match="config label"):
        K.B.parse_config_label(label)


@pytest.mark.parametrize("estimator", ["eligibility_traces", "episodic_prefix_sum"])
def test_light_kernels_keep_longer_tiles_to_more_environments(compiled_block_shapes, estimator):
    """Kernels with ``LIGHT_STEPS`` take one-warp 32 x 32 ``[T, N]`` look-back tiles (32 x 64 for
    16-bit floats) where the others take 16 x 64 ones (float32 from 4096 environments in rows that
    are not 16-aligned, where the others take thread-run tiles; 16-bit floats), and ``[N, T]`` walks
    of one environment, 256 steps on two warps for float32 from 2048 environments and 512 on four
    for 16-bit floats below 4096, where the others take 128-step walks of two environments (H200
    sweeps)."""
    from kernels import LaunchConfig

    config = compiled_block_shapes.estimator_config
    assert config(estimator, 4096, 4100, False, 4, aligned_rows=False) == LaunchConfig(32, 32, 1, lookback=True)
    assert config(estimator, 4096, 4100, False, 2, aligned_rows=False) == LaunchConfig(32, 64, 1, lookback=True)
    assert config("gae", 4096, 4100, False, 2, aligned_rows=False) == LaunchConfig(
        16, 64, num_warps=1, lookback=True, latest_first=True)
    assert config("gae", 2048, 2048, True, 4) == LaunchConfig(128, 2, num_warps=2, num_stages=3)
    for N in (2048, 8192):
        assert config(estimator, 2048, N, True, 4) == LaunchConfig(256, 1, num_warps=2, num_stages=3)
    assert config(estimator, 2048, 2048, True, 2) == LaunchConfig(512, 1, num_warps=4, num_stages=3)
    assert config(estimator, 4096, 1024, True, 4) == config("gae", 4096, 1024, True, 4)  # same below 2048


ESTIMATORS = ["gae", "vtrace", "retrace", "lambda_returns", "discounted_returns", "linear_scan", "eligibility_traces",
              "episodic_prefix_sum"]
FORWARD_ONLY = ("eligibility_traces", "episodic_prefix_sum")  # every other kernel walks time in reverse


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_reverse_walks_take_latest_first_tiles_in_time_major_layout(compiled_block_shapes, estimator):
    """Kernels with reverse walks (``LATEST_FIRST``) hold their ``[T, N]`` tiles' steps latest first
    (H200 sweeps); ``[N, T]`` tiles, and forward-only kernels, keep their steps in time order."""
    config = compiled_block_shapes.estimator_config
    reverse = estimator not in FORWARD_ONLY
    for T, N in [(4096, 8192), (4096, 4096), (8192, 512), (128, 4096), (16, 32768), (1 << 20, 16)]:
        for itemsize in (4, 2, 8):
            assert config(estimator, T, N, False, itemsize).latest_first == reverse, (T, N, itemsize)
            assert not config(estimator, T, N, True, itemsize).latest_first
    assert compiled_block_shapes.kernel_traits(estimator)["latest_first"] == reverse


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_many_environments_walk_tiles_in_thread_runs(compiled_block_shapes, estimator):
    """From 8192 environments, ``[T, N]`` sequences longer than one chunk are walked without
    look-back, pipelined, in tiles whose threads hold runs of consecutive steps: in float32, four
    chunks deep in 64 x 64 tiles on four warps (32 x 64 from 16384 environments; the light kernels'
    between 16384 and 30720: ``test_light_kernels_walk_two_warps_from_16384_to_30720_environments``)
    for the kernels with ``DEEP_WALKS``; otherwise three chunks deep, 32 x 32 on two warps for V-trace and, in
    float32, for the kernels that load each step's successor (V-trace's where its wider walks do not
    fill their waves: ``test_vtrace_walks_from_8192_environments_by_waves``); in 16-bit floats, three
    chunks deep in 128 x 32 tiles on two warps for the light kernels, four chunks deep in 128 x 64
    tiles on four warps for the other ``LONG_RUN_TILES`` kernel (``linear_scan``), 64 x 32 four
    environments per thread up to 2^25 elements for the ``FOUR_ENV_WALKS`` kernels
    (``test_bf16_walks_four_environments_per_thread``); 64 x 64 on four warps otherwise (H200
    sweeps). ``[N, T]`` storage, float64 and one-chunk sequences keep their tiles; the
    look-back tiles of fewer environments are in thread runs too, but Retrace's float32 ones of one
    column (``test_vtrace_look_back_tiles_in_thread_runs``, ``test_few_env_look_back_tiles_in_thread_runs``)."""
    from kernels import LaunchConfig

    config, traits = compiled_block_shapes.estimator_config, compiled_block_shapes.kernel_traits(estimator)
    reverse = estimator not in FORWARD_ONLY
    for N, T in [(8192, 4096), (16383, 2048), (16384, 2048), (32768, 512), (12288, 2048)]:
        for itemsize in (4, 2):
            if traits["wide_scan"] and N != 12288 and (itemsize == 4 or N == 8192):
                continue  # V-trace's walks that fill their waves
            small = traits["wide_scan"] or (traits["successor_rows"] and itemsize == 4)
            stages, four = 3, False
            if N == 12288 and estimator in NARROW_WALKS[itemsize]:
                shape = (64, 32, 4 if itemsize == 4 else 2)  # test_walks_filling_little_of_their_waves_narrow
            elif traits["deep_walks"] and itemsize == 4:
                shape, stages = (32 if N >= 16384 else 64, 64, 4), 4
            elif small:
                shape = (32, 32, 2)
            elif traits["light_steps"] and itemsize == 2:
                shape = (128, 32, 2)
            elif traits["long_run_tiles"] and itemsize == 2:
                shape, stages = (128, 64, 4), 4
            elif traits["four_env_walks"] and itemsize == 2:
                shape, four = (64, 32, traits["four_env_walks"]), True
            else:
                shape = (64, 64, 4)
            assert config(estimator, T, N, False, itemsize) == LaunchConfig(
                *shape, num_stages=stages, latest_first=reverse, thread_runs=True, env_runs_of_four=four), \
                (N, T, itemsize)
            assert not config(estimator, T, N, True, itemsize).thread_runs
        assert not config(estimator, T, N, False, 8).thread_runs
    assert config(estimator, 1 << 20, 16, False, 4).thread_runs != traits["one_column_triton_tiles"]
    assert config(estimator, 8192, 256, False, 4).thread_runs
    assert not config(estimator, 256, 8192, False, 8).thread_runs
    assert not config(estimator, 8192, 256, False, 8).thread_runs


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_short_time_major_sequences_in_thread_runs(compiled_block_shapes, estimator):
    """``[T, N]`` sequences of up to 256 steps in 16- and 32-bit floats take thread-run tiles: the
    whole sequence per program on one warp to 32 steps (16 environments wide to 16 steps, 8 to 32;
    twice as wide from 16384 environments) and on four warps from 33 (16 wide from 4096
    environments, 8 below; 16-bit floats of 17-128 steps twice as wide from 8192 environments);
    from 2^21 elements (T rounded up to at least 128) 33-256 steps are walked in 16 x 32 one-warp
    tiles three chunks deep, where rows are 16-aligned (H200 sweeps, experiment log, ``short_tn``).
    Kernels with ``NARROW_SHORT_TILES`` (Retrace, discounted returns) keep float32 tiles of 65-256
    steps 8 wide up to 8191 environments. Tiles of 65-128 steps 8 wide keep Triton's layout (each
    thread would hold 2 steps of 4 environments: measured slower in thread runs, inputs from DRAM).
    Tiles of 33-64 steps: ``test_time_major_tiles_of_33_to_64_steps``. Kernels with
    ``SHORT_LOOK_BACK_TILES`` (Retrace) take float32 sequences of 129-256 steps from 4096 to 8192
    environments in 64 x 32 four-warp look-back tiles. 64-bit floats keep their tiles
    of ~1024 elements."""
    from kernels import LaunchConfig

    config = compiled_block_shapes.estimator_config
    reverse = estimator not in FORWARD_ONLY
    traits = compiled_block_shapes.kernel_traits(estimator)
    narrow = traits["narrow_short_tiles"]  # float32 8 wide to 8191
    assert narrow == (estimator in ("retrace", "discounted_returns"))
    assert traits["short_look_back_tiles"] == (estimator == "retrace")
    look_back = LaunchConfig(64, 32, 4, lookback=True, latest_first=reverse, thread_runs=True)
    walk = LaunchConfig(16, 32, 1, num_stages=3, latest_first=reverse, thread_runs=True)

    def tile(T, N, warps):
        return LaunchConfig(T, N, warps, latest_first=reverse, thread_runs=(T, N) != (128, 8))

    for (T, N, itemsize), expected in {
            (8, 4096, 4): tile(8, 16, 1), (8, 32768, 4): tile(8, 32, 1), (16, 1024, 2): tile(16, 16, 1),
            (16, 16384, 4): tile(16, 32, 1), (32, 4096, 4): tile(32, 8, 1), (32, 8192, 2): tile(32, 16, 1),
            (32, 4096, 2): tile(32, 8, 1), (32, 32768, 4): tile(32, 16, 1), (64, 16384, 4): walk,
            (100, 4096, 4): tile(128, 16, 4), (128, 1024, 4): tile(128, 8, 4), (128, 4096, 4): tile(128, 16, 4),
            (128, 4096, 2): tile(128, 16, 4), (128, 8192, 2): tile(128, 32, 4), (128, 8192, 4): tile(128, 16, 4),
            (128, 16384, 4): walk, (128, 16383, 4): tile(128, 16, 4), (256, 2048, 4): tile(256, 8, 4),
            (256, 4096, 4): tile(256, 16, 4), (256, 8192, 2): walk, (256, 8192, 4): walk,
            (200, 8192, 2): walk, (129, 6000, 4): tile(256, 16, 4)}.items():
        if narrow and itemsize == 4 and T > 32 and N < 8192:
            expected = replace(expected, block_n=8, thread_runs=expected.block_t != 128)
        if traits["short_look_back_tiles"] and itemsize == 4 and T > 128 and 4096 <= N <= 8192:
            expected = look_back
        assert config(estimator, T, N, False, itemsize, aligned_rows=N % 16 == 0) == expected, (T, N, itemsize)
    assert config(estimator, 128, 6000, False, 4) == tile(128, 8 if narrow else 16, 4)
    assert config(estimator, 128, 4096, False, 8) == LaunchConfig(128, 8, 4, latest_first=reverse)
    assert config(estimator, 16, 4096, False, 8) == LaunchConfig(16, 32, 1, latest_first=reverse)


# Width and layout of the four-warp tiles of 33-64 steps, per group of kernels, by (itemsize, N).
RUNS, TRITON = True, False
TILES_OF_64_STEPS = {
    ("gae", "retrace", "lambda_returns", "discounted_returns"): {
        (4, 2048): (8, TRITON), (4, 6000): (8, TRITON), (4, 8192): (16, TRITON), (4, 16383): (16, TRITON),
        (2, 1024): (8, TRITON), (2, 4096): (8, TRITON), (2, 8192): (16, TRITON), (2, 16383): (16, TRITON)},
    ("vtrace",): {
        (4, 2048): (8, TRITON), (4, 6000): (16, TRITON), (4, 8192): (16, TRITON), (4, 16383): (16, TRITON),
        (2, 1024): (8, TRITON), (2, 4096): (16, TRITON), (2, 8192): (32, RUNS), (2, 16383): (32, RUNS)},
    ("eligibility_traces", "episodic_prefix_sum"): {
        (4, 2048): (8, RUNS), (4, 6000): (16, RUNS), (4, 8192): (16, RUNS), (4, 16383): (16, RUNS),
        (2, 1024): (8, TRITON), (2, 4096): (8, TRITON), (2, 8192): (32, RUNS), (2, 16383): (32, RUNS)},
    ("linear_scan",): {
        (4, 2048): (8, RUNS), (4, 6000): (16, RUNS), (4, 8192): (16, RUNS), (4, 16383): (16, RUNS),
        (2, 1024): (8, RUNS), (2, 2048): (32, RUNS), (2, 4096): (32, RUNS), (2, 8192): (32, RUNS)},
}


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_time_major_tiles_of_33_to_64_steps(compiled_block_shapes, estimator):
    """``[T, N]`` sequences of 33-64 steps (16- and 32-bit floats), below the walks, take four-warp
    tiles holding the whole sequence, as the H200 measured them fastest with inputs from DRAM
    (experiment log, ``short_tn/dram_layouts.log``): GAE, Retrace, lambda and discounted returns 8
    environments wide below 8192 environments and 16 from, in Triton's layout; V-trace in its
    widths, in Triton's layout but 32 wide; the light kernels in float32 in thread runs, in bf16 8
    wide in Triton's layout below 8192; ``linear_scan`` in thread runs, bf16 32 wide from 2048."""
    from kernels import LaunchConfig

    groups = [widths for names, widths in TILES_OF_64_STEPS.items() if estimator in names]
    assert len(groups) == 1, estimator
    reverse = estimator not in FORWARD_ONLY
    for (itemsize, N), (block_n, runs) in groups[0].items():
        for T in (33, 48, 64):
            config = compiled_block_shapes.estimator_config(estimator, T, N, False, itemsize,
                                                            aligned_rows=N % 16 == 0)
            expected = LaunchConfig(64, block_n, 4, latest_first=reverse, thread_runs=runs)
            assert config == expected, (T, N, itemsize)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_float32_look_back_tiles_in_thread_runs(compiled_block_shapes, estimator):
    """From 512 to 8191 environments, where the longer tiles below 4096 environments do not apply
    (``test_longer_tiles_below_4096_environments``), float32 ``[T, N]`` sequences longer than one
    chunk take two-warp look-back tiles in thread runs: 64 x 32 for kernels with
    ``LONG_RUN_TILES``, 32 x 32 otherwise; V-trace 128 x 32 on four warps below 2048 environments
    (``test_vtrace_look_back_tiles_in_thread_runs``) and walks from there
    (``test_vtrace_walks_from_2048_environments``); the light kernels, in rows that are not
    16-aligned, keep their one-warp tiles from 4096 environments (H200 before-and-after runs). 64-bit floats keep their tiles (16-bit floats:
    ``test_half_float_look_back_tiles``). ``LONG_RUN_TILES`` kernels walk from 4096 environments, the
    others from 3840 to 4224 (``test_one_wave_walks_around_4096_environments``)."""
    from kernels import LaunchConfig

    config, traits = compiled_block_shapes.estimator_config, compiled_block_shapes.kernel_traits(estimator)
    reverse = estimator not in FORWARD_ONLY
    narrow = traits["successor_rows"] or traits["narrow_short_tiles"]
    for N, T in [(1024, 4096), (2048, 2048), (4608, 4096), (6000, 1000)]:
        c = config(estimator, T, N, False, 4)
        if N < (1024 if narrow else 4096) and not traits["wide_scan"]:
            continue  # longer tiles (test_longer_tiles_below_4096_environments)
        if c.persistent:
            continue  # persistent tiles (test_persistent_look_back_tiles)
        if (traits["long_run_tiles"] and N >= 4096) or (traits["wide_scan"] and N >= 2048):
            assert not c.lookback, (N, T, c)  # walks (test_long_run_kernels_walk_from_4096_environments)
        elif traits["wide_scan"]:
            assert c == LaunchConfig(128, 32, 4, lookback=True, latest_first=True, thread_runs=True), (N, T)
        elif traits["light_steps"] and N >= 4096:
            assert not c.thread_runs, (N, T, c)
        else:
            block_t = 64 if traits["long_run_tiles"] else 32
            assert c == LaunchConfig(block_t, 32, 2, lookback=True, latest_first=reverse, thread_runs=True), (N, T)
        assert not config(estimator, T, N, False, 8).thread_runs


LONGER_TILES = {  # (T, N): block shape by kernel group, as (block_t, block_n, warps, lookback); None: unchanged
    (512, 512): {"narrow": (128, 16, 4, True), "light": (512, 8, 8, False), "other": (512, 8, 8, False)},
    (1000, 1000): {"narrow": (128, 16, 4, True), "light": (128, 32, 4, True), "other": (1024, 8, 8, False)},
    (8192, 1008): {"narrow": (128, 16, 4, True), "light": (256, 32, 4, True), "linear_scan": (256, 32, 4, True),
                   "lambda": (256, 32, 8, True)},
    (2048, 2048): {"narrow": None, "light": (256, 32, 4, True), "linear_scan": (256, 32, 4, True),
                   "lambda": (256, 32, 8, True)},
    (300, 3008): {"narrow": None, "light": (256, 32, 4, True), "linear_scan": (256, 32, 4, True),
                  "lambda": (256, 32, 8, True)},
}  # rows not 16 elements apart of more than 2^20 elements: test_unaligned_look_back_tiles


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_longer_tiles_below_4096_environments(compiled_block_shapes, estimator):
    """Float32 ``[T, N]`` sequences of more than 256 steps from 512 to 4095 environments take tiles
    longer than the two-warp 32-step look-back tiles where those measured slower (H200, inputs from
    DRAM): GAE, Retrace and discounted returns ("narrow") 128 x 16 look-back tiles below 1024
    environments or up to 2^20 elements; the others whole sequences of up to 1024 steps and 2^20
    elements on 8 warps (the light kernels only in 16-aligned rows: N = 1000 is not), else
    ``LONG_RUN_TILES`` look-back tiles 32 wide on four warps, 256 steps in 16-aligned rows and 128 in
    others, or, in 16-aligned rows, 256 x 32 on 8 warps (lambda returns). All in thread runs. V-trace
    takes its own look-back tiles below 2048 environments in 16-aligned rows
    (``test_vtrace_look_back_tiles_in_thread_runs``), keeps its short tiles in rows that are not (but
    those of more than 2^20 elements: ``test_unaligned_look_back_tiles``), and walks from 2048
    environments in 16-aligned rows (``test_vtrace_walks_from_2048_environments``)."""
    from kernels import LaunchConfig

    config, traits = compiled_block_shapes.estimator_config, compiled_block_shapes.kernel_traits(estimator)
    group = ("vtrace" if traits["wide_scan"] else "narrow" if traits["successor_rows"] or traits["narrow_short_tiles"]
             else "light" if traits["light_steps"] else estimator if traits["long_run_tiles"] else "lambda")
    assert group in ("vtrace", "narrow", "light", "linear_scan") or estimator == "lambda_returns"
    for (T, N), shapes in LONGER_TILES.items():
        shape = None if group == "vtrace" else shapes.get(group, shapes.get("other"))
        c = config(estimator, T, N, False, 4, aligned_rows=N % 16 == 0)
        if c.persistent:  # from 2^22 elements in 16-aligned rows (test_persistent_look_back_tiles)
            assert traits["persistent_look_back_tile"] and N % 16 == 0 and N * 2 ** (T - 1).bit_length() >= 2**22
            continue
        if group == "vtrace" and N % 16 == 0:
            assert not c.lookback if N >= 2048 else c == LaunchConfig(128, 32, 4, lookback=True, latest_first=True,
                                                                       thread_runs=True), (T, N, c)
        elif shape is None:
            assert c.block_t <= 32, (T, N, c)
        else:
            block_t, block_n, warps, lookback = shape
            assert c == LaunchConfig(block_t, block_n, warps, lookback=lookback,
                                     latest_first=estimator not in FORWARD_ONLY, thread_runs=True), (T, N)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_unaligned_look_back_tiles(compiled_block_shapes, estimator):
    """Float32 ``[T, N]`` sequences of more than 256 steps and 2^20 elements in rows not 16 elements
    apart take the kernel's ``UNALIGNED_LOOK_BACK_TILE``, ``(block_t, block_n, warps, below)``, as a
    look-back tile in thread runs from 512 environments to ``below`` (``_launch._unaligned_look_back_tile``);
    GAE, which declares none, keeps its 128 x 16 tiles below 1024 environments and two-warp 32 x 32
    ones from there. The same sequences in 16-aligned rows, in bf16, of at most 2^20 elements, below
    512 environments or from ``below`` keep their tiles."""
    from kernels import LaunchConfig

    config, traits = compiled_block_shapes.estimator_config, compiled_block_shapes.kernel_traits(estimator)
    tile = traits["unaligned_look_back_tile"]
    assert (tile is None) == (estimator == "gae")
    below = 4096 if tile is None else tile[3]
    for T, N in [(8192, 1023), (4096, 4095), (5000, 1000), (2000, 1800), (2100, 520)]:
        if N >= below:
            continue
        c = config(estimator, T, N, False, 4, aligned_rows=False)
        block_t, block_n, warps = tile[:3] if tile is not None else (128, 16, 4) if N < 1024 else (32, 32, 2)
        assert c == LaunchConfig(block_t, block_n, warps, lookback=True, latest_first=estimator not in FORWARD_ONLY,
                                 thread_runs=True), (T, N, c)
    without = dict(traits, unaligned_look_back_tile=None, explicit_short_tiles=False)
    for T, N, itemsize, aligned in [(5000, 1008, 4, True), (5000, 1000, 2, False), (1000, 1000, 4, False),
                                    (2000, 4100, 4, False), (5000, 500, 4, False), (3000, below, 4, False),
                                    (3000, below + 8, 4, False)]:
        assert config(estimator, T, N, False, itemsize, aligned_rows=aligned) == compiled_block_shapes.choose_config(
            T, N, False, itemsize=itemsize, aligned_rows=aligned, **without), (T, N, itemsize, aligned)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_persistent_look_back_tiles(compiled_block_shapes, estimator):
    """Float32 ``[T, N]`` sequences of more than 256 steps and 2^22 elements (T rounded up to a power
    of two) in 16-aligned rows from ``from`` to ``below`` environments take the kernel's
    ``PERSISTENT_LOOK_BACK_TILE``, ``(block_t, block_n, warps, programs per multiprocessor, from,
    below)``, as a persistent look-back tile in thread runs (``_launch._persistent_look_back_tile``);
    GAE, V-trace and discounted returns declare one. The same sequences in bf16, in rows not 16
    elements apart, of fewer elements, or outside the range keep their tiles."""
    from kernels import LaunchConfig

    config, traits = compiled_block_shapes.estimator_config, compiled_block_shapes.kernel_traits(estimator)
    tile = traits["persistent_look_back_tile"]
    assert (tile is None) == (estimator not in ("gae", "vtrace", "discounted_returns"))
    without = dict(traits, persistent_look_back_tile=None, explicit_short_tiles=False)
    kept = [(8192, 512, 2, True), (4096, 1000, 4, False), (2048, 1024, 4, True), (4096, 496, 4, True),
            (4096, 4096, 4, True), (4096, 1024, 8, True), (200, 32768, 4, True)]
    if tile is not None:
        block_t, block_n, warps, per_multiprocessor, from_n, below_n = tile
        assert 512 <= from_n < below_n <= compiled_block_shapes.ONE_WAVE_WALKS[0]
        last = below_n - 16
        middle = (from_n + below_n) // 32 * 16
        for T, N in [(2**23 // from_n, from_n), (65536, from_n), (3000, middle), (8192, middle), (1025, last),
                     (2**22 // last + 1, last)]:
            assert config(estimator, T, N, False, 4) == LaunchConfig(
                block_t, block_n, warps, lookback=True, latest_first=True, thread_runs=True,
                persistent=per_multiprocessor), (T, N)
        kept += [(8192, from_n - 16, 4, True), (2048, below_n, 4, True), (2**20 // from_n, from_n, 4, True)]
    for T, N, itemsize, aligned in kept:
        assert config(estimator, T, N, False, itemsize, aligned_rows=aligned) == compiled_block_shapes.choose_config(
            T, N, False, itemsize=itemsize, aligned_rows=aligned, **without), (T, N, itemsize, aligned)
        assert not config(estimator, T, N, False, itemsize, aligned_rows=aligned).persistent


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_vtrace_walks_from_2048_environments(compiled_block_shapes, estimator):
    """V-trace's float32 ``[T, N]`` sequences of more than 256 steps from 2048 to 8191 environments,
    in 16-aligned rows, are walked three chunks deep in thread-run tiles on four warps, 64 x 16 (H200,
    inputs from DRAM: 4096 x 4096 172 -> 127 us), and 32 x 32 from ``WIDE_WALKS_FROM`` environments
    (7680 x 2048: 132.4 -> 98.8 us), except where its persistent look-back tiles take them
    (``test_persistent_look_back_tiles``); fewer environments, rows that are not 16-aligned, 16-bit
    and 64-bit floats and the other kernels keep their tiles."""
    from kernels import LaunchConfig

    launch = compiled_block_shapes
    narrow = LaunchConfig(64, 16, 4, num_stages=3, latest_first=True, thread_runs=True)
    wide = LaunchConfig(32, 32, 4, num_stages=3, latest_first=True, thread_runs=True)
    for T, N in [(1024, 2048), (300, 3008), (1000, 6000), (2048, launch.WIDE_WALKS_FROM - 16),
                 (2048, launch.WIDE_WALKS_FROM), (4096, 8176)]:
        c = launch.estimator_config(estimator, T, N, False, 4, aligned_rows=N % 16 == 0)
        walk = wide if N >= launch.WIDE_WALKS_FROM else narrow
        assert (c == walk) == (estimator == "vtrace"), (T, N, c)
    if estimator == "vtrace":
        for T, N, itemsize in [(4096, 2047, 4), (3000, 3000, 4), (4096, 4096, 2), (4096, 4096, 8), (4096, 8192, 4)]:
            c = launch.estimator_config(estimator, T, N, False, itemsize, aligned_rows=N % 16 == 0)
            assert c not in (narrow, wide), (T, N, itemsize)


def test_vtrace_look_back_tiles_in_thread_runs(compiled_block_shapes):
    """V-trace's ``[T, N]`` sequences of more than 256 steps where it does not walk take four-warp
    look-back tiles in thread runs (``_launch._wide_scan_run_tile``; H200, inputs from DRAM, 1.06-2.63x
    on 22 held-out cells): from 16 to 511 environments 16 wide, 256 steps where they make one column of
    tiles and 128 where they make more (16- and 32-bit floats, any rows); in 16-aligned rows 128 x 32
    from 512 to 2047 environments in float32, and from 513 steps to 8191 environments in 16-bit
    floats; float32 rows not 16 elements apart from 512 to 1023 environments 128 x 16
    (``test_unaligned_look_back_tiles``). 16-bit rows not 16 elements apart from 512 environments,
    fewer than 16 environments, 64-bit floats and ``[N, T]`` storage keep their tiles."""
    from kernels import LaunchConfig

    config = compiled_block_shapes.estimator_config

    def tile(block_t, block_n):
        return LaunchConfig(block_t, block_n, 4, lookback=True, latest_first=True, thread_runs=True)

    for T, N, itemsize, expected in [(1 << 20, 16, 4, tile(256, 16)), (400000, 16, 2, tile(256, 16)),
                                     (8192, 256, 4, tile(128, 16)), (300, 100, 4, tile(128, 16)),
                                     (70000, 17, 4, tile(128, 16)), (5000, 150, 2, tile(128, 16)),
                                     (257, 512, 4, tile(128, 32)), (4096, 1024, 4, tile(128, 32)),
                                     (2048, 2032, 4, tile(128, 32)), (513, 1024, 2, tile(128, 32)),
                                     (4096, 2048, 2, tile(128, 32)), (1000, 8176, 2, tile(128, 32)),
                                     (5000, 700, 4, tile(128, 16)), (3000, 1000, 4, tile(128, 16))]:
        assert config("vtrace", T, N, False, itemsize, aligned_rows=N % 16 == 0) == expected, (T, N, itemsize)
    for T, N, itemsize in [(5000, 700, 2), (3000, 3000, 2), (3000, 3000, 4), (2048, 8200, 4), (1000, 8, 4),
                           (8192, 512, 8), (300, 100, 8)]:
        c = config("vtrace", T, N, False, itemsize, aligned_rows=N % 16 == 0)
        assert c.lookback and not c.thread_runs, (T, N, itemsize, c)
    assert config("vtrace", 512, 1024, False, 2) == LaunchConfig(64, 16, 2, lookback=True, latest_first=True,
                                                                 thread_runs=True)  # bf16 up to 512 steps
    assert config("vtrace", 8192, 512, True, 4).block_n == 1  # [N, T]: rows of one environment


@pytest.mark.parametrize("estimator", [e for e in ESTIMATORS if e != "vtrace"])
def test_few_env_look_back_tiles_in_thread_runs(compiled_block_shapes, estimator):
    """Below 512 environments the kernels other than V-trace take ``[T, N]`` sequences of more than
    256 steps in 16-wide look-back tiles in thread runs (``_launch._few_env_run_tile``; H200, inputs
    from DRAM): one column of 16 environments from 65536 steps 1024 x 16 on eight warps (Retrace's
    float32 keeps 512 x 16 on four in Triton's layout); else four warps, 512 steps for the
    ``LONG_RUN_TILES`` kernels from 4096 steps in 16-aligned rows (else 256), 128 for GAE's and Retrace's float32
    (16-bit floats 256 in 16-aligned rows, 128 in others), 256 for lambda and discounted returns. The
    ``LONG_RUN_TILES`` kernels' 16-bit tiles hold four environments per thread (1.02-1.11x held out).
    64-bit floats, ``[N, T]`` storage and 512 environments keep their tiles (fewer than 16
    environments: ``test_look_back_tiles_in_thread_runs_below_16_environments``)."""
    from kernels import LaunchConfig

    config = compiled_block_shapes.estimator_config
    traits = compiled_block_shapes.kernel_traits(estimator)
    assert traits["one_column_triton_tiles"] == (estimator == "retrace")
    reverse = estimator not in FORWARD_ONLY

    def tile(block_t, warps=4, itemsize=4):
        return LaunchConfig(block_t, 16, warps, lookback=True, latest_first=reverse, thread_runs=True,
                            env_runs_of_four=traits["long_run_tiles"] and itemsize == 2)

    def steps(T, itemsize, aligned):
        if traits["long_run_tiles"]:
            return 512 if aligned and T >= 4096 else 256
        if traits["successor_rows"]:
            return 256 if itemsize == 2 and aligned else 128
        return 256

    for T, N in [(8192, 256), (300, 400), (2048, 64), (3000, 100), (70000, 17), (100000, 24), (4096, 16),
                 (20000, 496), (65535, 16)]:
        for itemsize in (4, 2):
            aligned = N % 16 == 0
            assert config(estimator, T, N, False, itemsize, aligned_rows=aligned) == tile(
                steps(T, itemsize, aligned), itemsize=itemsize), (T, N, itemsize)
    for T in (65536, 1 << 20):
        assert config(estimator, T, 16, False, 2) == tile(1024, 8, itemsize=2)
        expected = LaunchConfig(512, 16, 4, lookback=True, latest_first=reverse) if estimator == "retrace" else tile(1024, 8)
        assert config(estimator, T, 16, False, 4) == expected
    for T, N, itemsize in [(1 << 20, 6, 4), (8192, 256, 8), (4096, 15, 2)]:
        assert not config(estimator, T, N, False, itemsize).thread_runs, (T, N, itemsize)
    assert config(estimator, 8192, 256, True, 4).block_n == 1  # [N, T]: rows of one environment
    for itemsize in (4, 2):
        assert compiled_block_shapes._few_env_run_tile(8192, 512, itemsize, True, traits["successor_rows"],
                                                       traits["long_run_tiles"], False) is None


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_vtrace_walks_from_8192_environments_by_waves(compiled_block_shapes, estimator):
    """From 8192 environments V-trace walks float32 ``[T, N]`` sequences in 16-aligned rows 64 x 64 on
    eight warps where those programs, one per multiprocessor of the H200, fill at least
    ``FULL_WAVES`` of their waves (8192 x 4096: 207.5 -> 188.2 us), and bf16 ones 64 x 32 on four
    warps, four environments per thread, while two per multiprocessor take one wave (8192-8448
    environments); elsewhere 32 x 32 on
    two warps (10240 x 2048 float32: 0.71x with the wider tiles). The other kernels keep their walks."""
    from kernels import LaunchConfig

    launch = compiled_block_shapes
    wide = LaunchConfig(64, 64, 8, num_stages=3, latest_first=True, thread_runs=True)
    half = LaunchConfig(64, 32, 4, num_stages=3, latest_first=True, thread_runs=True, env_runs_of_four=True)
    narrow = LaunchConfig(32, 32, 2, num_stages=3, latest_first=True, thread_runs=True)
    cells = [(4096, 8192, 4, wide), (2048, 8448, 4, wide), (1000, 16384, 4, wide), (512, 32768, 4, wide),
             (2048, 8512, 4, narrow), (2048, 10240, 4, narrow), (2048, 12288, 4, narrow), (4096, 8192, 2, half),
             (3000, 8448, 2, half), (2048, 8464, 2, narrow), (2048, 16384, 2, narrow)]
    for T, N, itemsize, tile in cells:
        c = launch.estimator_config(estimator, T, N, False, itemsize)
        if estimator == "vtrace":
            assert c == tile, (T, N, itemsize, c)
        elif not (estimator == "lambda_returns" and itemsize == 2):  # its own bf16 walks take V-trace's tile
            assert c not in (wide, half), (T, N, itemsize, c)
    assert launch.fills_waves(launch.MULTIPROCESSORS, 1) and not launch.fills_waves(launch.MULTIPROCESSORS + 1, 1)
    assert launch.fills_waves(2 * launch.MULTIPROCESSORS - 13, 1) and not launch.fills_waves(125, 1)


# The kernels whose walks from 8192 environments take 64 x 32 tiles where the 64-wide ones would take a
# second wave at most half full, by float byte size.
NARROW_WALKS = {4: ("gae", "lambda_returns", "discounted_returns", "eligibility_traces", "episodic_prefix_sum"),
                2: ("gae", "retrace")}


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_walks_filling_little_of_their_waves_narrow(compiled_block_shapes, estimator):
    """From 8192 environments, where the walks' 64-environment programs, one per multiprocessor of the
    H200, would take a second wave and leave at least half of it empty (8449-12672 environments),
    float32 GAE, lambda and discounted returns, eligibility traces and episodic sums walk 64 x 32 on
    four warps, bf16 GAE and Retrace on two (1.08-1.34x at 8704-12288 environments; 0.91-1.03x at
    13312, whose second wave is 58% full; experiment log, "Walks that fill their waves"). Their tiles
    elsewhere, the other kernels' and unaligned rows are unchanged."""
    from kernels import LaunchConfig

    launch = compiled_block_shapes
    reverse = estimator not in FORWARD_ONLY
    for itemsize, warps in ((4, 4), (2, 2)):
        narrow = LaunchConfig(64, 32, warps, num_stages=3, latest_first=reverse, thread_runs=True)
        takes = estimator in NARROW_WALKS[itemsize]
        for T, N in [(2048, 10240), (2048, 12288), (4096, 9216), (1000, 8704), (3000, 10000), (300, 8464),
                     (1024, 12672)]:
            assert (launch.estimator_config(estimator, T, N, False, itemsize) == narrow) == takes, (T, N, itemsize)
        for T, N, aligned in [(4096, 8192, True), (2048, 8448, True), (2048, 12688, True), (1500, 13312, True),
                              (2048, 16384, True), (1024, 18432, True), (1024, 20480, True), (768, 26000, True),
                              (256, 10240, True), (2048, 10248, False)]:
            assert launch.estimator_config(estimator, T, N, False, itemsize, aligned_rows=aligned) != narrow, (T, N)
    assert not launch.half_empty_second_wave(132) and launch.half_empty_second_wave(133)
    assert launch.half_empty_second_wave(198) and not launch.half_empty_second_wave(199)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_light_kernels_walk_two_warps_from_16384_to_30720_environments(compiled_block_shapes, estimator):
    """Eligibility traces' and episodic sums' float32 ``[T, N]`` walks strictly between 16384 and 30720
    environments take 32 x 32 tiles on two warps, three chunks deep (1.07-1.17x at 17408-28672
    environments on the H200; experiment log, "The light kernels' walks from 16384 to 30720
    environments"); at 16384 and from 30720, bf16, the other kernels and rows not 16 elements apart keep
    their tiles."""
    from kernels import LaunchConfig

    launch = compiled_block_shapes
    two_warps = LaunchConfig(32, 32, 2, num_stages=3, thread_runs=True)
    takes = launch.kernel_traits(estimator)["light_steps"]
    for T, N in [(2048, 17408), (2048, 20000), (1536, 22528), (1024, 28672), (300, 16400), (4096, 30704)]:
        assert (launch.estimator_config(estimator, T, N, False, 4) == two_warps) == takes, (T, N)
        assert launch.estimator_config(estimator, T, N, False, 2) != two_warps, (T, N)
    for T, N, aligned in [(2048, 16384, True), (1000, 30720, True), (2048, 32768, True), (1024, 40960, True),
                          (2048, 20008, False), (256, 20000, True)]:
        assert launch.estimator_config(estimator, T, N, False, 4, aligned_rows=aligned) != two_warps, (T, N)
    assert launch.LIGHT_TWO_WARP_WALKS == (16384, 30720)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_bf16_walks_four_environments_per_thread(compiled_block_shapes, estimator):
    """16-bit ``[T, N]`` tiles four environments per thread (``LaunchConfig.env_runs_of_four``) where
    they measured faster on the H200 (experiment log, "The bf16 walks four environments per thread"):
    lambda and discounted returns' walks from 8192 environments up to ``FOUR_ENV_WALKS_UP_TO``
    elements, 64 x 32 on four and two warps (1.01-1.33x; 64 x 64 on four warps beyond, where they
    were 0.91-1.01x); V-trace's one-wave walks, 64 x 32 on four warps (1.12x); ``linear_scan``'s look-back
    tiles below 4096 environments, 256 x 32 on four warps (1.05-1.07x); the ``LONG_RUN_TILES``
    kernels' 16-wide look-back tiles from 16 to 511 environments (1.02-1.11x). Float32, whose tiles
    hold four environments per thread anyway, and every other tile keep eight per thread."""
    from kernels import LaunchConfig

    launch = compiled_block_shapes
    up_to = launch.FOUR_ENV_WALKS_UP_TO
    warps = {"lambda_returns": 4, "discounted_returns": 2}.get(estimator)
    walk = LaunchConfig(64, 32, warps or 2, num_stages=3, latest_first=True, thread_runs=True, env_runs_of_four=True)
    for T, N in [(4096, 8192), (2048, 16384), (up_to // 12288, 12288), (1024, 32768), (300, 8192)]:
        c = launch.estimator_config(estimator, T, N, False, 2)
        assert (c == walk) == (warps is not None), (T, N, c)
    for T, N in [(4096, 16384), (2048, 32768), (up_to // 12288 + 1, 12288), (8192, 8192)]:
        assert launch.estimator_config(estimator, T, N, False, 2) != walk, (T, N)
    one_wave = LaunchConfig(64, 32, 4, num_stages=3, latest_first=True, thread_runs=True, env_runs_of_four=True)
    assert (launch.estimator_config(estimator, 4096, 8448, False, 2) == one_wave) == (estimator == "vtrace")
    look_back = LaunchConfig(256, 32, 4, lookback=True, latest_first=True, thread_runs=True, env_runs_of_four=True)
    for T, N in [(2048, 2048), (8192, 512), (1500, 3008)]:
        assert (launch.estimator_config(estimator, T, N, False, 2) == look_back) == (estimator == "linear_scan")
    long_run = launch.kernel_traits(estimator)["long_run_tiles"]
    for T, N in [(1 << 20, 16), (65536, 64), (8192, 400), (2048, 96)]:
        c = launch.estimator_config(estimator, T, N, False, 2)
        assert c.block_n == 16 and c.env_runs_of_four == long_run, (T, N, c)
    four = {estimator: [(T, N, itemsize, time_contiguous) for T in (64, 128, 1000, 4096, 65536)
                        for N in (1, 16, 512, 2048, 4096, 8192, 16384) for itemsize in (2, 4, 8)
                        for time_contiguous in (False, True)
                        if launch.estimator_config(estimator, T, N, time_contiguous, itemsize).env_runs_of_four]}
    assert all(itemsize == 2 and not time_contiguous for T, N, itemsize, time_contiguous in four[estimator]), four


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_one_wave_walks_around_4096_environments(compiled_block_shapes, estimator):
    """From 3840 to 4224 environments (``ONE_WAVE_WALKS``: 120-132 programs 32 wide, one per
    multiprocessor of the H200) GAE, Retrace, lambda and discounted returns walk float32 ``[T, N]``
    sequences of more than 256 steps in 16-aligned rows three chunks deep in 64 x 32 tiles on four
    warps (4096 x 3000 GAE 77.4 -> 69.7 us); where ``_longer_tiles_below_4096_envs`` gives tiles
    (lambda returns below 4096 environments) those stay. One more program (4240 environments),
    bf16, unaligned rows, short sequences and the other kernels keep their tiles."""
    from kernels import LaunchConfig

    launch = compiled_block_shapes
    walk = LaunchConfig(64, 32, 4, num_stages=3, latest_first=True, thread_runs=True)
    takes = estimator in ("gae", "retrace", "lambda_returns", "discounted_returns")
    low, high = launch.ONE_WAVE_WALKS
    for T, N in [(3000, 4096), (1500, high), (600, low)]:
        walks = takes and not (estimator == "lambda_returns" and N < 4096)
        assert (launch.estimator_config(estimator, T, N, False, 4) == walk) == walks, (T, N)
    for T, N, itemsize in [(1500, high + 16, 4), (2048, low - 256, 4), (3000, 4096, 2), (3000, 4100, 4),
                           (200, 4096, 4)]:
        assert launch.estimator_config(estimator, T, N, False, itemsize, aligned_rows=N % 16 == 0) != walk, (T, N)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_float32_walks_from_7680_environments(compiled_block_shapes, estimator):
    """From ``FLOAT32_WALKS_FROM`` (7680) environments GAE, Retrace, lambda and discounted returns walk
    float32 ``[T, N]`` sequences of more than 256 steps in 16-aligned rows as they do from 8192
    (H200, same process: 1.10-1.25x over their look-back tiles at 7680-8000); bf16 and the other
    kernels start at 8192 (V-trace's own walks: ``test_vtrace_walks_from_2048_environments``)."""
    launch = compiled_block_shapes
    traits = launch.kernel_traits(estimator)
    takes = not (traits["wide_scan"] or traits["long_run_tiles"])
    for T, N in [(2000, launch.FLOAT32_WALKS_FROM), (3000, 8000), (300, 8176)]:
        c = launch.estimator_config(estimator, T, N, False, 4)
        assert (c == launch.estimator_config(estimator, T, 8192, False, 4)) == takes, (T, N, c)
        assert not takes or not c.lookback
    for T, N, itemsize in [(2000, launch.FLOAT32_WALKS_FROM - 16, 4), (2000, 8000, 2), (2000, 8008, 4)]:
        c = launch.estimator_config(estimator, T, N, False, itemsize, aligned_rows=N % 16 == 0)
        assert c != launch.estimator_config(estimator, T, 8192, False, itemsize), (T, N, itemsize)


HALF_FLOAT_TILES = {  # (T, N): 16-bit float block shape by kernel group, (block_t, block_n, warps) of a look-back
    # tile; "walk": no look-back; None: the look-back tiles as before, not in thread runs
    (2048, 512): {"long_run": (256, 32, 4), "vtrace": (128, 32, 4), "successor": (128, 32, 4), "other": (128, 32, 4)},
    (1500, 2000): {"long_run": (256, 32, 4), "vtrace": (128, 32, 4), "successor": (128, 32, 4), "other": (128, 32, 4)},
    (512, 2000): {"long_run": (256, 32, 4), "vtrace": (64, 16, 2), "successor": (128, 32, 4), "other": (128, 32, 4)},
    (4096, 2048): {"long_run": (256, 32, 4), "vtrace": (128, 32, 4), "successor": (128, 32, 4), "other": (128, 32, 4)},
    (300, 3072): {"long_run": (256, 32, 4), "vtrace": None, "successor": (128, 32, 4), "other": (128, 32, 4)},
    (1000, 6000): {"long_run": "walk", "vtrace": (128, 32, 4), "successor": None, "other": (128, 32, 4)},
    (3000, 3000): {"long_run": None, "vtrace": None, "successor": None, "other": None},  # rows not 16-aligned
    (2000, 500): {"long_run": (256, 16, 4), "vtrace": (128, 16, 4), "successor": (128, 16, 4),
                  "other": (256, 16, 4)},  # fewer environments, rows not 16-aligned: test_few_env_look_back_tiles_in_thread_runs
}


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_half_float_look_back_tiles(compiled_block_shapes, estimator):
    """16-bit float ``[T, N]`` sequences of more than 256 steps from 512 environments, in 16-aligned
    rows, below the walks, take look-back tiles in thread runs of about float32's bytes (H200, inputs
    from DRAM): 256 x 32 on four warps for ``LONG_RUN_TILES`` kernels below 4096 environments (where
    they start to walk; ``linear_scan``'s four environments per thread, as every ``LONG_RUN_TILES``
    kernel's 16-wide tiles below 512 environments), 128 x 32 on four for GAE and Retrace below 4096
    environments and for V-trace from 513 steps (64 x 16 on two up to 512 below 2048 environments:
    ``test_vtrace_look_back_tiles_in_thread_runs``), 128 x 32 on four for lambda and discounted
    returns. Below 512 environments every kernel's tiles are 16 wide."""
    from kernels import LaunchConfig

    config, traits = compiled_block_shapes.estimator_config, compiled_block_shapes.kernel_traits(estimator)
    group = ("long_run" if traits["long_run_tiles"] else "vtrace" if traits["wide_scan"]
             else "successor" if traits["successor_rows"] else "other")
    assert group != "other" or estimator in ("lambda_returns", "discounted_returns")
    for (T, N), shapes in HALF_FLOAT_TILES.items():
        c = config(estimator, T, N, False, 2, aligned_rows=N % 16 == 0)
        if shapes[group] == "walk":
            assert not c.lookback, (T, N, c)
        elif shapes[group] is None:
            assert c.lookback and not c.thread_runs, (T, N, c)
        else:
            block_t, block_n, warps = shapes[group]
            four = group == "long_run" and (block_n == 16 or estimator == "linear_scan")  # 16 wide: few envs
            assert c == LaunchConfig(block_t, block_n, warps, lookback=True, latest_first=estimator not in FORWARD_ONLY,
                                     thread_runs=True, env_runs_of_four=four), (T, N)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_successor_rows_trait_matches_the_kernel(estimator):
    """A kernel module declares ``SUCCESSOR_ROWS`` exactly when its kernel loads each step's
    successor (``_scan.successor_rows``)."""
    import importlib
    import inspect

    from kernels import _launch

    module = importlib.import_module(f"kernels.{estimator}")
    kernel = next(v for k, v in vars(module).items() if k.startswith("_") and k.endswith("_kernel"))
    loads_successors = "_scan.successor_rows(" in inspect.getsource(kernel.fn)
    assert _launch.kernel_traits(estimator)["successor_rows"] == loads_successors


@pytest.mark.parametrize("estimator,T,N,itemsize,from_runs", [
    ("gae", 4096, 8192, 4, False),  # float32 walks four chunks deep: 151 -> 231 us from the runs
    ("gae", 4096, 8192, 2, True),  # bf16 walks three deep: 118.5 -> 109.9
    ("vtrace", 4096, 8192, 2, True),  # 217.8 -> 206.2
    ("vtrace", 500, 12000, 4, True),  # float32 walks three deep
    ("gae", 8192, 512, 4, True),  # four-warp look-back tiles: 35.7 -> 34.9
    ("gae", 1024, 2048, 4, False),  # two-warp look-back tiles: 0.94x in rows not 16 apart
    ("vtrace", 8192, 512, 2, True),  # bf16 four-warp look-back tiles, measured with the runs
    ("vtrace", 128, 32768, 4, True),  # one-warp 16-step walks: 27.2 -> 26.7
])
def test_successors_come_from_thread_runs_where_they_measured_faster(compiled_block_shapes, estimator, T, N,
                                                                     itemsize, from_runs):
    """``_launch.successors_from_runs`` on the thread-run tiles the rule gives GAE and V-trace (H200,
    experiment log, "Successor values from thread runs, V-trace's wide walks")."""
    launch = compiled_block_shapes
    config = launch.estimator_config(estimator, T, N, False, itemsize)
    assert config.thread_runs and launch.time_threads(config, itemsize) > 1
    lookback = config.lookback and T > config.block_t
    assert launch.successors_from_runs(config, itemsize, lookback) is from_runs


@pytest.mark.parametrize("estimator,T,N,itemsize,from_runs", [
    ("gae", 100, 6004, 4, False),  # whole-sequence 128 x 16 tiles: 17.4 -> 11.2 us with the second tile
    ("gae", 200, 6004, 2, False),  # bf16 256 x 16: 42.2 -> 20.3
    ("gae", 80, 8200, 2, True),  # bf16 128 x 32: 8.8 against 9.8 us with the second tile
    ("gae", 200, 1000, 2, False),  # bf16 256 x 8
    ("gae", 1000, 1001, 4, True),  # four-warp look-back tiles: 1.03x from the runs
    ("vtrace", 100, 5000, 2, True),  # V-trace's whole-sequence tiles: 12.8 against 17.5 us
    ("vtrace", 100, 12008, 4, True),
])
def test_rows_not_16_apart_take_successors_from_runs_where_they_measured_faster(compiled_block_shapes, estimator,
                                                                                T, N, itemsize, from_runs):
    """``_launch.successors_from_runs`` on the thread-run tiles the rule gives GAE and V-trace in rows
    not 16 elements apart (H200, experiment log, "Successor values in rows not 16 elements apart")."""
    launch = compiled_block_shapes
    config = launch.estimator_config(estimator, T, N, False, itemsize, aligned_rows=False)
    assert config.thread_runs and launch.time_threads(config, itemsize) > 1
    lookback = config.lookback and T > config.block_t
    assert lookback == (T > 256)
    wide_scan = launch.kernel_traits(estimator)["wide_scan"]
    assert launch.successors_from_runs(config, itemsize, lookback, False, wide_scan) is from_runs


@pytest.mark.parametrize("estimator,N,aligned", [("gae", 13, False), ("gae", 16, True), ("vtrace", 13, False)])
def test_launch_tells_the_successor_rule_the_rows_alignment_and_the_scan(monkeypatch, estimator, N, aligned):
    """``_launch.launch`` passes ``successors_from_runs`` whether the first input's rows start a
    multiple of 16 elements apart and whether the kernel scans four values (``wide_scan``), for a
    tile in thread runs."""
    import kernels
    from conftest import call, make_inputs
    from kernels import LaunchConfig, _launch

    seen = []
    rule = _launch.successors_from_runs
    monkeypatch.setattr(_launch, "successors_from_runs", lambda *args: seen.append(args[3:]) or rule(*args))
    getattr(kernels, estimator).plans.clear()  # a GPU call replays the plan of an earlier call of this shape
    call(kernels, make_inputs(estimator, 24, N), config=LaunchConfig(32, 16, 4, latest_first=True, thread_runs=True))
    assert seen == [(aligned, estimator == "vtrace")]


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_long_run_kernels_walk_from_4096_environments(compiled_block_shapes, estimator):
    """From 4096 to 8191 environments, the kernels with ``LONG_RUN_TILES`` walk ``[T, N]`` sequences
    longer than one chunk four chunks deep in 128-step thread-run tiles on four warps, 32
    environments wide (16 for the light kernels' float32), in 16-bit and 32-bit floats; V-trace's
    float32 walks (``test_vtrace_walks_from_2048_environments``); the others, and float64, keep their
    look-back tiles (H200 sweeps) but from 3840 to 4224 environments
    (``test_one_wave_walks_around_4096_environments``)."""
    from kernels import LaunchConfig

    config, traits = compiled_block_shapes.estimator_config, compiled_block_shapes.kernel_traits(estimator)
    for N, T in [(4608, 4096), (6000, 1000), (7664, 300)]:
        for itemsize in (4, 2):
            c = config(estimator, T, N, False, itemsize)
            if traits["long_run_tiles"]:
                block_n = 16 if traits["light_steps"] and itemsize == 4 else 32
                assert c == LaunchConfig(128, block_n, 4, num_stages=4, latest_first=c.latest_first,
                                         thread_runs=True), (N, T, itemsize)
            elif traits["wide_scan"] and itemsize == 4:
                assert not c.lookback, (N, T, itemsize, c)
            else:
                assert c.lookback, (N, T, itemsize, c)
        assert config(estimator, T, N, False, 8).lookback


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_rows_that_are_not_16_aligned_take_look_back_tiles(compiled_block_shapes, estimator):
    """Where a ``[T, N]`` tile's rows do not start a multiple of 16 elements apart, Triton cannot
    vectorize the loads and the pipelined walks ran 3-5x slower than look-back tiles (H200, N = 8193
    and 8200): every estimator takes look-back tiles there, in 16-bit and 32-bit floats."""
    config = compiled_block_shapes.estimator_config
    for N, T in [(8200, 2048), (40000, 1000), (4100, 4096)]:
        for itemsize in (4, 2):
            assert config(estimator, T, N, False, itemsize, aligned_rows=False).lookback, (N, T, itemsize)
    assert not config(estimator, 2048, 8192, False, 4).lookback  # the aligned neighbour walks


@pytest.mark.parametrize("time_dim, width, aligned", [(0, 32, True), (0, 40, False), (1, 48, True), (1, 40, False)])
def test_the_launch_tells_the_chooser_whether_rows_are_16_aligned(monkeypatch, time_dim, width, aligned):
    """``launch`` passes ``aligned_rows`` from the first input's row stride (N for contiguous
    ``[T, N]``, T for ``[N, T]``; a slice keeps its parent's stride)."""
    import torch
    from conftest import DEVICE

    import kernels
    from kernels import _launch

    seen, chooser = [], _launch.estimator_config

    def spy(estimator, T, N, time_contiguous, itemsize, aligned_rows=True, form=None):
        seen.append(aligned_rows)
        return chooser(estimator, T, N, time_contiguous, itemsize, aligned_rows=aligned_rows, form=form)

    monkeypatch.setattr(_launch, "estimator_config", spy)
    kernels.linear_scan.plans.clear()  # no replayed plan (GPU): every call launches
    g = torch.Generator().manual_seed(0)
    alpha = torch.randn(width, width, generator=g).to(DEVICE)
    beta = torch.rand(width, width, generator=g).to(DEVICE)
    kernels.linear_scan(alpha, beta, time_dim=time_dim)
    sixteen_envs = (slice(None), slice(0, 16)) if time_dim == 0 else (slice(0, 16), slice(None))
    kernels.linear_scan(alpha[sixteen_envs], beta[sixteen_envs], time_dim=time_dim)
    assert seen == [aligned, aligned]


def test_deep_walks_are_the_measured_kernels():
    """``DEEP_WALKS`` is declared by the kernels whose float32 walks measured faster four chunks
    deep (H200, experiment log, "Deep walks"), and only by them."""
    from kernels import _launch

    deep = {e for e in ESTIMATORS if _launch.kernel_traits(e)["deep_walks"]}
    assert deep == {"gae", "eligibility_traces", "episodic_prefix_sum"}


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_one_env_walks_below_4096_environments(compiled_block_shapes, estimator):
    """Kernels with ``ONE_ENV_WALKS`` walk float32 ``[N, T]`` rows longer than one chunk one
    environment per one-warp program, four chunks deep, from 1024 to 4095 environments (H200:
    ``linear_scan`` 2048 x 8192 73.0 -> 57.6 us); 16-bit floats, other counts and the other kernels
    keep their block shapes."""
    from kernels import LaunchConfig

    config, traits = compiled_block_shapes.estimator_config, compiled_block_shapes.kernel_traits(estimator)
    walk = LaunchConfig(128, 1, num_warps=1, num_stages=4)
    for N, T in [(1024, 4096), (2048, 8192), (3008, 4096), (4095, 512)]:
        assert (config(estimator, T, N, True, 4) == walk) == traits["one_env_walks"], (N, T)
        assert config(estimator, T, N, True, 2) != walk
        assert config(estimator, T, N, False, 4) != walk
    for N, T in [(1023, 4096), (4096, 4096), (2048, 256)]:
        assert config(estimator, T, N, True, 4) != walk, (N, T)
    assert {e for e in ESTIMATORS if compiled_block_shapes.kernel_traits(e)["one_env_walks"]} == {"linear_scan"}


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_sixteen_warp_rows(compiled_block_shapes, estimator):
    """Float32 ``[N, T]`` rows of 2049-4096 steps from 128 to 511 environments take one program per
    environment holding the whole row: on 16 warps for GAE and V-trace (``SIXTEEN_WARP_ROWS``; H200,
    inputs from DRAM: GAE 511 x 4096 29.2 -> 23.0 us), on 8 for the other kernels (16 measured
    slower for most) and for bf16; rows of up to 2048 steps keep 8 warps."""
    from kernels import LaunchConfig

    config = compiled_block_shapes.estimator_config
    sixteen = compiled_block_shapes.kernel_traits(estimator)["sixteen_warp_rows"]
    assert sixteen == (estimator in ("gae", "vtrace"))
    for N, T in [(128, 4096), (511, 3000), (200, 2049)]:
        assert config(estimator, T, N, True, 4) == LaunchConfig(4096, 1, 16 if sixteen else 8), (N, T)
        assert config(estimator, T, N, True, 2) == LaunchConfig(4096, 1, 8), (N, T)
    assert config(estimator, 2048, 128, True, 4) == LaunchConfig(2048, 1, 8)
    assert config(estimator, 4096, 512, True, 4).num_warps != 16


def test_vtrace_rows_take_their_successors_by_shuffles(compiled_block_shapes):
    """V-trace's ``[N, T]`` tiles whose time lies in one warp take ``x_{t+1}`` by shuffles, not by a
    four-value scan, so it takes 128-step rows like the other kernels: of up to 256 steps, four
    environments on four warps below 2^20 elements (fewer below 1024 environments), one on one warp
    from there; longer float32 rows from 2048 environments walk one environment per one-warp
    program, three chunks deep (H200 sweeps). Shorter rows and float64 keep their tiles."""
    from kernels import LaunchConfig

    config = compiled_block_shapes.estimator_config
    for itemsize in (4, 2):
        assert config("vtrace", 128, 2048, True, itemsize) == LaunchConfig(128, 4, num_warps=4)
        assert config("vtrace", 128, 512, True, itemsize) == LaunchConfig(128, 2, num_warps=2)
        for N, T in [(8192, 128), (32768, 128), (4096, 256), (4096, 200)]:
            one_env = LaunchConfig(128, 1, num_warps=1)  # float32: two environments (paired rows)
            assert (config("vtrace", T, N, True, itemsize) == one_env) == (itemsize == 2), (N, T)
        assert config("vtrace", 64, 4096, True, itemsize).block_t == 64
    assert config("vtrace", 128, 4096, True, 8).block_t == 64
    walk = LaunchConfig(128, 1, num_warps=1, num_stages=3)
    for N, T in [(2048, 2048), (4096, 4096), (8192, 4096), (2048, 2050)]:
        assert config("vtrace", T, N, True, 4) == walk, (N, T)
        assert config("vtrace", T, N, True, 2) != walk
    assert config("vtrace", 4096, 1024, True, 4) != walk


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_paired_rows_from_the_measured_sizes(compiled_block_shapes, estimator):
    """Kernels with ``PAIRED_ROWS`` take float32 ``[N, T]`` rows of 65-256 steps two environments
    per one-warp program from 2^19 elements (N times T rounded up to a power of two) for V-trace,
    2^21 for the other kernels that load each step's successor and 2^22 for the rest (H200 sweeps:
    V-trace 8192 x 128 7.3 -> 5.8 us); 16-bit floats, shorter and longer rows, smaller problems and
    the other kernels keep their block shapes."""
    from kernels import LaunchConfig
    from kernels._launch import paired_rows_from

    config, traits = compiled_block_shapes.estimator_config, compiled_block_shapes.kernel_traits(estimator)
    pairs = LaunchConfig(128, 2, num_warps=1)
    start = paired_rows_from(traits["wide_scan"], traits["successor_rows"])
    for T in (65, 128, 200, 256):
        N = start // compiled_block_shapes.triton.next_power_of_2(T)
        assert (config(estimator, T, N, True, 4) == pairs) == traits["paired_rows"], (N, T)
        assert config(estimator, T, N - 1, True, 4) != pairs, (N - 1, T)
        assert config(estimator, T, N, True, 2) != pairs
        assert config(estimator, T, N, False, 4) != pairs
    assert config(estimator, 64, 2**16, True, 4) != pairs
    assert config(estimator, 512, 2**14, True, 4) != pairs
    assert [paired_rows_from(True, True), paired_rows_from(False, True), paired_rows_from(False, False)] == [
        2**19, 2**21, 2**22]
    paired = {e for e in ESTIMATORS if compiled_block_shapes.kernel_traits(e)["paired_rows"]}
    assert paired == {"gae", "vtrace", "retrace", "lambda_returns", "discounted_returns"}


def launched_constexprs(monkeypatch, name: str) -> list:
    """The constexpr ``name`` of each kernel launch from here on, in order; ``linear_scan``'s replayed
    plans cleared so that its calls launch (on a GPU a call may replay a recorded plan)."""
    import kernels
    from kernels import _direct_launch

    seen, launch = [], _direct_launch.DirectLauncher.__call__

    def spy(self, programs, device, args, constexprs, num_warps):
        seen.append(constexprs[name])
        return launch(self, programs, device, args, constexprs, num_warps)

    monkeypatch.setattr(_direct_launch.DirectLauncher, "__call__", spy)
    kernels.linear_scan.plans.clear()
    return seen


@pytest.mark.parametrize("dtype, time_dim, steps", [(torch.float32, 1, 4), (torch.bfloat16, 1, 8),
                                                    (torch.float32, 0, 0)])
def test_tiles_in_quarters_or_pairs_by_steps_per_thread(monkeypatch, dtype, time_dim, steps):
    """``launch`` gives the kernels ``SHUFFLE_TIME`` = the steps each thread holds where a tile's
    time lies in one warp: 4 for float32 128-step ``[N, T]`` tiles, which ``_scan`` then handles in
    quarters (``IN_QUARTERS``), 8 for 16-bit floats (``IN_PAIRS``: 256-step tiles in pairs of
    steps), 0 for ``[T, N]`` tiles."""
    from conftest import DEVICE

    import kernels
    from kernels import LaunchConfig, _scan

    seen = launched_constexprs(monkeypatch, "SHUFFLE_TIME")
    shape = (4, 128) if time_dim == 1 else (128, 4)
    alpha, beta = torch.randn(shape).to(DEVICE, dtype), torch.rand(shape).to(DEVICE, dtype)
    kernels.linear_scan(alpha, beta, time_dim=time_dim, config=LaunchConfig(128, 1, num_warps=1))
    assert seen == [steps]
    assert (seen[0] == _scan.IN_QUARTERS) == (dtype == torch.float32 and time_dim == 1)
    assert (seen[0] == _scan.IN_PAIRS) == (dtype == torch.bfloat16 and time_dim == 1)


def test_time_shuffles_only_where_a_tiles_time_lies_in_one_warp():
    """``[N, T]`` tiles of the shuffle lengths move values between steps by warp shuffles when
    each warp holds whole rows (no more warps than environments); tiles whose time spans warps,
    other lengths, ``[T, N]`` tiles and float64 accumulation do not (H200: across warps the
    shuffles lose)."""
    from kernels import LaunchConfig
    from kernels._launch import shuffles_time

    f32 = torch.float32
    assert shuffles_time(LaunchConfig(128, 1, num_warps=1), True, f32, 4)
    assert shuffles_time(LaunchConfig(128, 4, num_warps=4), True, f32, 4)
    assert shuffles_time(LaunchConfig(256, 2, num_warps=2), True, f32, 2)
    assert not shuffles_time(LaunchConfig(128, 1, num_warps=2), True, f32, 4)
    assert not shuffles_time(LaunchConfig(128, 2, num_warps=4), True, f32, 4)
    assert not shuffles_time(LaunchConfig(64, 1, num_warps=1), True, f32, 4)
    assert not shuffles_time(LaunchConfig(128, 1, num_warps=1), False, f32, 4)
    assert not shuffles_time(LaunchConfig(128, 1, num_warps=1), True, torch.float64, 8)


@pytest.mark.parametrize("T, N, block_n, window", [(512, 16, 16, 32), (600, 12, 16, 32), (496, 16, 16, 8),
                                                   (256, 16, 16, 8), (512, 40, 16, 8), (512, 8, 8, 32),
                                                   (512, 24, 8, 8), (512, 32, 32, 1), (512, 64, 32, 1)])
def test_look_back_walks_take_a_window_by_tile_width_and_columns(monkeypatch, T, N, block_n, window):
    """``launch`` gives look-back kernels ``LOOKBACK`` = the walk's window (``_launch.lookback_window``):
    tiles at most 16 environments wide poll 32 predecessors per step where they are the only column
    of environments and it has at least 32 tiles, else 8; wider tiles walk one tile at a time; a
    launch of one chunk has no look-back (0). The results match the float64 reference."""
    from conftest import DEVICE

    import kernels
    from kernels import LaunchConfig
    from kernels.reference import linear_scan as reference

    seen = launched_constexprs(monkeypatch, "LOOKBACK")
    g = torch.Generator().manual_seed(T * N * block_n)
    alpha, beta = torch.randn(T, N, generator=g), torch.rand(T, N, generator=g)
    config = LaunchConfig(16, block_n, num_warps=1, lookback=True)
    for steps, expected in ((T, window), (16, 0)):
        out = kernels.linear_scan(alpha[:steps].to(DEVICE), beta[:steps].to(DEVICE), config=config)
        ref = reference(alpha[:steps].double(), beta[:steps].double())
        assert seen.pop() == expected
        assert torch.allclose(out.cpu().double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_look_back_tiles_in_thread_runs_below_16_environments(compiled_block_shapes, estimator):
    """From 65536 steps below 16 environments ``[T, N]`` sequences take look-back tiles in thread
    runs (``_launch._below_16_env_run_tile``; H200, inputs from DRAM): one environment 1024 x 1 on
    four warps and eight 1024 x 8 on eight, every kernel; 9-15 environments 16 wide on four warps,
    512 steps for the ``LONG_RUN_TILES`` kernels and 256 for the others but V-trace; V-trace 512 steps
    of 2-4 environments. Fewer steps, 5-7 environments, 64-bit floats and the other cases keep Triton's
    layout."""
    from kernels import LaunchConfig

    config = compiled_block_shapes.estimator_config
    traits = compiled_block_shapes.kernel_traits(estimator)
    wide_scan = traits["wide_scan"]

    def tile(block_t, block_n, warps):
        return LaunchConfig(block_t, block_n, warps, lookback=True, latest_first=estimator not in FORWARD_ONLY,
                            thread_runs=True)

    for itemsize in (4, 2):
        def unaligned(T, N):
            return config(estimator, T, N, False, itemsize, aligned_rows=False)

        for T in (65536, 300000):
            assert unaligned(T, 1) == tile(1024, 1, 4)
            assert unaligned(T, 8) == tile(1024, 8, 8)
            for N in (9, 12, 15):
                got = unaligned(T, N)
                assert got.thread_runs != wide_scan, (T, N)
                if not wide_scan:
                    assert got == tile(512 if traits["long_run_tiles"] else 256, 16, 4), (T, N)
            for N in (2, 3, 4):
                got = unaligned(T, N)
                assert got.thread_runs == wide_scan, (T, N)
                if wide_scan:
                    assert got == tile(512, 4 if N > 2 else 2, 4), (T, N)
            for N in (5, 6, 7):
                assert not unaligned(T, N).thread_runs
        for N in (1, 8, 12):
            assert not unaligned(65535, N).thread_runs
        assert not config(estimator, 65536, 8, False, 8).thread_runs  # 64-bit floats keep their tiles
