"""Launch choices as data (kernels/launch): every launch the heuristic or a tuned table can pick gives
the float64 reference's answer, tables are validated, and a device's table overrides the heuristic
only for its own keys. No test pins which launch a rule picks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import DEVICE, EXHAUSTIVE, call, load_script, make_inputs, rel_err, to_time_dim1, upcast

import kernels
from kernels import reference as R
from kernels.estimators import MODULES
from kernels.launch import LaunchConfig, autotune, choose_config, tuned
from kernels.launch.heuristic import DeviceInfo, heuristic_config

FIXTURE_TABLES = Path(__file__).with_name("data") / "tuned"
TOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2}
# Devices the heuristic is asked about: the interpreter's CPU, a small GPU, H100- and H200-sized ones.
DEVICES = (DeviceInfo("cpu", 1), DeviceInfo("small", 16), DeviceInfo("h100-like", 132), DeviceInfo("big", 144))
# N x T: the benchmark's grid and the long sequences of few environments, plus odd sizes.
GRID = [(N, T) for N in (1, 3, 16, 128, 512, 2048, 4096, 8192, 32768) for T in (1, 8, 37, 128, 1000, 4096)]
GRID += [(16, 2**20), (128, 8192), (256, 2048), (8192, 4096), (5, 2**16)]
# One estimator case per family, with terminations and truncations where the estimator takes them.
CASES = [("gae", dict()), ("vtrace", dict(scalars=dict(lam=0.9, pg_rho_bar=1.2))), ("retrace", dict()),
         ("lambda_returns", dict()), ("discounted_returns", dict()), ("eligibility_traces", dict(initial=True)),
         ("episodic_prefix_sum", dict(initial=True)), ("linear_scan", dict(initial=True, scalars=dict(reverse=True)))]


def heuristic_launches() -> list[tuple]:
    """Every distinct (launch, layout, dtype) the heuristic picks over the grid and devices."""
    picked = {}
    for device in DEVICES:
        for N, T in GRID:
            for time_contiguous in (False, True):
                for dtype in (torch.float32, torch.bfloat16):
                    config = heuristic_config(T, N, time_contiguous, dtype.itemsize, device)
                    picked.setdefault((config, time_contiguous, dtype), (N, T))
    return sorted(picked, key=str)


def table_launches(tables: Path) -> list[tuple]:
    """Every (launch, layout, dtype, family, key) of the tables in ``tables``."""
    out = []
    for path in sorted(tables.glob("*.json")):
        for key, config in tuned.check_table(json.loads(path.read_text()), str(path)).items():
            family, layout, dtype = key.split("/")[:3]
            out.append((config, layout == "nt", getattr(torch, dtype), family, f"{path.stem}:{key}"))
    return out


def assert_launch_matches_reference(config: LaunchConfig, time_contiguous: bool, dtype: torch.dtype, index: int,
                                    family: str | None = None):
    """Run one estimator case (of ``family``'s estimators, else any, picked by ``index``) in ``config`` on
    a small shape with partial tiles (three chunks, a partial last block of environments) and compare
    it with the reference."""
    if dtype not in TOL:
        dtype = torch.float32
    cases = [case for case in CASES if family is None or MODULES[case[0]].FAMILY == family]
    op, kw = cases[index % len(cases)]
    T = min(2 * config.block_t + 3, 3 * config.block_t)
    N = config.block_n + 3 if not time_contiguous else min(config.block_n + 3, 7)
    if DEVICE == "cuda":
        T, N = max(T, 300), max(N, 67)
    tm = make_inputs(op, T, N, seed=index, dtype=dtype, **kw)
    case = to_time_dim1(tm, contiguous=True) if time_contiguous else tm
    ref = call(R, upcast(tm))
    out = call(kernels, case, time_dim=1 if time_contiguous else 0, config=config)
    for o, r in zip(out, ref):
        assert rel_err(o, r.t() if time_contiguous and r.dim() == 2 else r) < TOL[dtype], (op, config)


HEURISTIC = heuristic_launches()


@pytest.mark.parametrize("index", range(len(HEURISTIC)),
                         ids=[f"{c.label}-{'nt' if tc else 'tn'}-{str(d)[6:]}" for c, tc, d in HEURISTIC])
def test_every_launch_the_heuristic_picks_matches_the_reference(index):
    config, time_contiguous, dtype = HEURISTIC[index]
    assert_launch_matches_reference(config, time_contiguous, dtype, index)


def thread_run_launches() -> list[tuple]:
    """The sweep's launches in thread runs for each layout (``run > 1``: its ``THREAD_RUN_LAUNCHES``, clipped to the
    benchmark's shapes) and a few edges (one thread holding a tile's whole column, one-environment
    rows), each in both layouts, in float32 and bfloat16 in turn."""
    edges = {LaunchConfig(16, 4, 1, False, 1, 16), LaunchConfig(64, 1, 1, True, 1, 4),
             LaunchConfig(32, 2, 1, False, 3, 8)}
    picked = {(config, time_contiguous) for config in edges for time_contiguous in (False, True)}
    for N, T in ((16, 2**20), (128, 2048), (4096, 128), (8192, 4096), (32768, 8)):
        for itemsize in (4, 2):
            for time_contiguous in (False, True):
                first = autotune.candidates(N, T, time_contiguous, itemsize, DEVICES[2])
                picked.update((config, time_contiguous) for config in first[:len(autotune.THREAD_RUN_LAUNCHES) + 1]
                              if config.run > 1)
    dtypes = (torch.float32, torch.bfloat16)
    return [(config, time_contiguous, dtypes[i % 2])
            for i, (config, time_contiguous) in enumerate(sorted(picked, key=lambda x: (str(x[0]), x[1])))]


THREAD_RUNS = thread_run_launches()


@pytest.mark.parametrize("index", range(len(THREAD_RUNS)),
                         ids=[f"{c.label}-{'nt' if tc else 'tn'}-{str(d)[6:]}" for c, tc, d in THREAD_RUNS])
def test_every_launch_in_thread_runs_matches_the_reference(index):
    """Tiles in thread runs, in either layout (the runs follow the tile's rows, whichever axis is
    contiguous), with look-back, pipelined walks and partial tiles."""
    config, time_contiguous, dtype = THREAD_RUNS[index]
    assert_launch_matches_reference(config, time_contiguous, dtype, index)


FIXTURE = table_launches(FIXTURE_TABLES)
COMMITTED = table_launches(tuned.TABLES)
TABLED = FIXTURE + COMMITTED


def fast_sample() -> set:
    """The indices of ``TABLED`` the fast suite checks: each launch of the tables once (its first key)
    where the heuristic's and the thread runs' tests do not already run it; ``make test-full`` every key."""
    seen, picked = set(HEURISTIC) | set(THREAD_RUNS), set()
    for index, (config, time_contiguous, dtype, *_) in enumerate(TABLED):
        if (config, time_contiguous, dtype) not in seen:
            seen.add((config, time_contiguous, dtype))
            picked.add(index)
    return picked


FAST_SAMPLE = fast_sample()


@pytest.mark.parametrize("index", [pytest.param(i, id=key, marks=() if i in FAST_SAMPLE else EXHAUSTIVE)
                                   for i, (*_, key) in enumerate(TABLED)])
def test_every_launch_a_table_holds_matches_the_reference(index):
    """The fixture table's launches and those of every table committed under kernels/launch/tuned
    (each also validated on loading: schema, keys, configs), each with an estimator of its key's family."""
    config, time_contiguous, dtype, family, _ = TABLED[index]
    assert_launch_matches_reference(config, time_contiguous, dtype, index, family)


def test_committed_tables_are_named_after_their_device():
    for path in tuned.TABLES.glob("*.json"):
        assert path.stem == tuned.device_slug(json.loads(path.read_text())["device"]), path


def test_a_devices_table_overrides_the_heuristic_for_its_keys_only(monkeypatch):
    monkeypatch.setattr(tuned, "TABLES", FIXTURE_TABLES)
    fixture = DeviceInfo("Fixture GPU", 132)
    other = DeviceInfo("Unknown GPU", 132)
    tuned_gae = choose_config("gae", 50, 13, False, torch.float32, fixture)  # bucket T64/N16
    assert tuned_gae == LaunchConfig(16, 8, 1, True, 1)
    assert choose_config("gae", 50, 13, False, torch.float32, other) == heuristic_config(50, 13, False, 4, other)
    for family, time_contiguous, dtype in (("vtrace", False, torch.float32), ("gae", True, torch.float32),
                                           ("gae", False, torch.bfloat16)):
        assert choose_config(family, 50, 13, time_contiguous, dtype, fixture) == heuristic_config(
            50, 13, time_contiguous, dtype.itemsize, fixture)
    assert choose_config("vtrace", 64, 5, True, torch.bfloat16, fixture) == LaunchConfig(32, 2, 1, False, 2)


def test_an_estimator_call_takes_its_devices_table(monkeypatch):
    """``kernels.gae`` without ``config`` launches the table's config for its key: a table whose
    one launch is wrong for the call's shape would show (here the launch is legal: same answer)."""
    from kernels.launch import heuristic

    taken = []
    real = tuned.tuned_config

    def recording(*args):
        taken.append(real(*args))
        return taken[-1]

    monkeypatch.setattr(tuned, "TABLES", FIXTURE_TABLES)
    monkeypatch.setattr(tuned, "tuned_config", recording)
    monkeypatch.setattr(kernels.launch, "device_info", lambda device: heuristic.DeviceInfo("Fixture GPU", 4))
    kernels.gae.plans.clear()
    tm = make_inputs("gae", 50, 13)
    out = call(kernels, tm)
    ref = call(R, upcast(tm))
    assert taken == [LaunchConfig(16, 8, 1, True, 1)]
    for o, r in zip(out, ref):
        assert rel_err(o, r) < TOL[torch.float32]


def test_autotune_times_the_candidates_once_per_key_and_keeps_a_legal_one(monkeypatch):
    """``RLTRAIN_AUTOTUNE=1``: the first call of a key times the chosen launch and the sweep's candidates,
    keeps one of them (a legal launch) and gives the reference's answer; a later call of the key (here
    another shape of the same bucket) times nothing and launches the kept one."""
    monkeypatch.setattr(autotune, "ENABLED", True)
    monkeypatch.setattr(autotune, "_fastest", {})
    timed = []
    real_seconds = autotune._seconds
    monkeypatch.setattr(autotune, "_seconds", lambda run, on_gpu: timed.append(1) or real_seconds(run, on_gpu))
    kernels.gae.plans.clear()
    for T, N in ((40, 5), (37, 6)):  # bucket T64/N8
        tm = make_inputs("gae", T, N, seed=T)
        out = call(kernels, tm)
        for o, r in zip(out, call(R, upcast(tm))):
            assert rel_err(o, r) < TOL[torch.float32]
        if T == 40:
            assert len(timed) > 1
            first = len(timed)
    assert len(timed) == first
    (key, kept), = autotune._fastest.items()
    device = kernels.launch.device_info(torch.device(DEVICE))
    assert kept in [choose_config("gae", 40, 5, False, torch.float32, device),
                    *autotune.candidates(5, 40, False, 4, device)]


@pytest.mark.parametrize("change, message", [
    (lambda t: t.pop("device"), "missing field 'device'"),
    (lambda t: t["entries"].update({"gae/tn/float32/T48/N16": {"config": {"block_t": 16, "block_n": 8}}}),
     "reached by no problem"),
    (lambda t: t["entries"].update({"ppo/tn/float32/T64/N16": {"config": {"block_t": 16, "block_n": 8}}}),
     "reached by no problem"),
    (lambda t: t["entries"].update({"gae/xy/float32/T64/N16": {"config": {"block_t": 16, "block_n": 8}}}),
     "reached by no problem"),
    (lambda t: t["entries"].update({"gae-tn-float32": {"config": {"block_t": 16, "block_n": 8}}}), "is not"),
    (lambda t: t["entries"].update({"gae/tn/float32/T64/N32": {"config": {"block_t": 3, "block_n": 8}}}),
     "LaunchConfig.block_t"),
    (lambda t: t["entries"].update({"gae/tn/float32/T64/N32": {"config": {"block_t": 16, "tile": 8}}}), "tile"),
    (lambda t: t["entries"].update({"gae/tn/float32/T64/N32": [16, 8]}), "must be an object"),
])
def test_a_bad_table_is_refused_with_what_is_wrong(change, message):
    table = json.loads((FIXTURE_TABLES / "fixture-gpu.json").read_text())
    change(table)
    with pytest.raises(ValueError, match=message):
        tuned.check_table(table)


def test_every_key_of_every_problem_is_one_a_table_may_hold():
    """The keys problems map to pass the table check (so a sweep can write each of them)."""
    entries = {}
    for family in tuned.FAMILIES:
        for N, T in GRID:
            for time_contiguous in (False, True):
                entries[tuned.key(family, time_contiguous, "bfloat16", T, N)] = {"config": {"block_t": 1, "block_n": 1}}
    table = {"device": "x", "date": "x", "torch": "x", "triton": "x", "entries": entries}
    assert len(tuned.check_table(table)) == len(entries)


def test_every_estimator_names_a_family():
    assert {module.FAMILY for module in MODULES.values()} == set(tuned.FAMILIES)


@pytest.mark.parametrize("config", [LaunchConfig(16, 64, 1, True), LaunchConfig(32, 16, 2, False, 3),
                                    LaunchConfig(128, 8, 4), LaunchConfig(64, 64, 4, False, 4, 8),
                                    LaunchConfig(512, 16, 4, True, 1, 16)], ids=str)
def test_config_labels_read_back_to_the_same_launch(config):
    from rltrain.bench.kernel_grid import config_label, parse_config_label

    assert parse_config_label(config_label(config)) == config
    with pytest.raises(ValueError, match="config label"):
        parse_config_label(config.label + "+")


def test_the_quick_sweep_writes_a_valid_table(tmp_path):
    """``scripts/tune_kernels.py --quick``: a tiny sweep under the interpreter writes a table the
    loader accepts, each entry the fastest correct candidate with its time and the heuristic's."""
    if DEVICE == "cuda":
        pytest.skip("the quick sweep is the interpreter's")
    tune_kernels = load_script("tune_kernels")

    out = tmp_path / "t.json"
    table = tune_kernels.main(["--quick", "--out", str(out)])
    configs = tuned.check_table(json.loads(out.read_text()))
    assert set(configs) == set(table["entries"]) and len(configs) == 2
    for entry in table["entries"].values():
        assert 0 < entry["us"] <= entry["heuristic_us"]
    assert table["device"] == "cpu" and table["torch"] and table["date"]


@pytest.mark.parametrize("N, T, time_contiguous", [(4096, 128, False), (16, 2**20, False), (16, 2**20, True),
                                                    (8192, 4096, True), (3, 37, False)])
def test_sweep_candidates_are_legal_and_include_the_heuristic(N, T, time_contiguous):
    device = DeviceInfo("h100-like", 132)
    configs = autotune.candidates(N, T, time_contiguous, 4, device)
    assert configs[0] == heuristic_config(T, N, time_contiguous, 4, device)
    assert len(set(configs)) == len(configs) > 1 or T <= 64
