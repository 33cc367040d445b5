"""The block-shape sweep (scripts/tune_kernels.py): its candidate list and the labels it reads, which need no GPU."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

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
