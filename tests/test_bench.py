"""``scripts/bench_kernels.py`` in its CPU mode on a tiny grid (files written, numbers sane) and the kernel
benchmarks' shared code (``rltrain.bench``)."""

from __future__ import annotations

import csv
import json
import math
import sys
import types
from pathlib import Path

import pytest

from conftest import load_script
from rltrain.bench import cells, plots, timing
from rltrain.bench import kernel_grid as grid

script = load_script("bench_kernels")  # its command line


def _check_run(result, out: Path, estimators, shapes, impls):
    for path in (out, out.with_suffix(".csv")):
        assert path.is_file() and path.stat().st_size > 0, path
    on_disk = json.loads(out.read_text())
    assert on_disk["rows"] == json.loads(json.dumps(result["rows"], default=str))
    meta = on_disk["meta"]
    assert meta["torch"] and meta["device"] == "cpu" and meta["device_name"].startswith("cpu")
    assert {"driver", "cuda", "triton", "date"} <= set(meta)
    with open(out.with_suffix(".csv")) as f:
        assert len(list(csv.DictReader(f))) == len(result["rows"])
    rows = result["rows"]
    by_cell = {}
    for r in rows:
        by_cell.setdefault((r["estimator"], r["N"], r["T"], r["layout"], r["dtype"]), {})[r["impl"]] = r
    want = {(e, N, T) for e in estimators for N, T in shapes}
    assert {(k[0], k[1], k[2]) for k in by_cell} == want
    for key, by_impl in by_cell.items():
        assert set(by_impl) == set(impls), key  # every impl: a result, or an explicit skip/error
        for impl, r in by_impl.items():
            assert r["status"] in ("ok", "skipped", "error", "WRONG")
            if r["status"] == "ok":
                assert r["rel_err"] < 1e-5, r
                assert r["device_us"] > 0 and r["gbps"] > 0 and r["bytes"] > 0
                assert math.isfinite(r["device_us"])
                if "graph_us" in r:
                    assert r["graph_us"] is None  # no CUDA graph on the CPU: no device-only time is reported
            elif r["status"] == "skipped":
                assert r.get("note")
            else:
                pytest.fail(f"{key} {impl}: {r}")
        assert by_impl["triton"]["status"] == "ok"
        assert by_impl["loop"]["status"] == "ok"


@pytest.mark.slow
def test_bench_cpu_mode(tmp_path):
    estimators = ["gae", "vtrace", "episodic_prefix_sum"]
    shapes = [(16, 8), (3, 5)]
    impls = ["triton", "sequential", "loop"]
    result = script.main(["--cpu", "--out", str(tmp_path / "grid.json"), "--estimators", ",".join(estimators),
                     "--shapes", "16x8,3x5", "--impls", ",".join(impls), "--quiet"])
    _check_run(result, tmp_path / "grid.json", estimators, shapes, impls)
    layouts = {(r["estimator"], r["layout"]) for r in result["rows"]}
    assert ("gae", "nt") in layouts and ("vtrace", "nt") in layouts and ("retrace", "nt") not in layouts
    assert {p.name for p in tmp_path.glob("*.png")} == {f"grid_speedup_{e}.png" for e in estimators}
    for r in result["rows"]:
        if r["impl"] == "triton" and r["status"] == "ok":
            assert r.get("speedup_vs_loop", 0) > 0
    assert result["meta"]["copy_gbs"] > 0


def test_captured_calls_are_timed_where_host_time_is(tmp_path):
    """Where a cell's host time is measured, the fused kernels' row also has the per-call time of
    ``kernels.capture``'s calls (``captured_us``), and the CSV holds it."""
    result = script.main(["--cpu", "--out", str(tmp_path / "k.json"), "--estimators", "gae", "--shapes", "3x5", "--layout", "tn",
                     "--impls", "triton,loop", "--host-max-us", "1e9", "--host-calls", "3", "--no-copy",
                     "--no-plots", "--quiet"])
    rows = {r["impl"]: r for r in result["rows"]}
    assert rows["triton"]["host_us"] > 0 and rows["triton"]["captured_us"] > 0
    assert "host_us" in rows["loop"] and "captured_us" not in rows["loop"]
    with open(tmp_path / "k.csv") as f:
        fused = next(r for r in csv.DictReader(f) if r["impl"] == "triton")
    assert float(fused["captured_us"]) == pytest.approx(rows["triton"]["captured_us"])


def test_bench_cpu_mode_with_compile(tmp_path):
    # same shape, layout and inputs as test_baselines' first compile case, so the graph is reused
    result = script.main(["--cpu", "--out", str(tmp_path / "k.json"), "--estimators", "gae", "--shapes", "16x8",
                     "--layout", "tn", "--no-copy", "--quiet"])
    _check_run(result, tmp_path / "k.json", ["gae"], [(16, 8)], list(grid.IMPLS))
    comp = next(r for r in result["rows"] if r["impl"] == "compile")
    assert comp["status"] == "ok" and "note" not in comp


def test_graph_times_have_their_own_threshold(tmp_path):
    """A device-only (CUDA-graph) time is tried wherever do_bench is under ``--graph-max-us``, also
    where the host time is not measured: the baselines' do_bench counts host time well past
    ``--host-max-us`` at short shapes."""
    result = script.main(["--cpu", "--out", str(tmp_path / "k.json"), "--estimators", "gae", "--shapes", "16x8", "--layout", "tn",
                     "--impls", "triton,loop", "--host-max-us", "0", "--graph-max-us", "1e9", "--no-copy",
                     "--no-plots", "--quiet"])
    rows = [r for r in result["rows"] if r["status"] == "ok"]
    assert len(rows) == 2
    assert all("host_us" not in r and "graph_us" in r for r in rows)
    none = script.main(["--cpu", "--out", str(tmp_path / "k.json"), "--estimators", "gae", "--shapes", "16x8", "--layout", "tn",
                   "--impls", "triton", "--graph-max-us", "0", "--no-copy", "--no-plots", "--quiet"])
    assert all("graph_us" not in r for r in none["rows"])


def test_plan_and_bytes():
    opts = script.parse_args(["--quick", "--cpu"])
    opts.cpu = False  # the GPU plan
    opts.quick = True
    planned = grid.plan(opts)
    shapes = {(c[1], c[2]) for c in planned}
    assert shapes == set(grid.QUICK_SHAPES)
    assert {c[0] for c in planned} == set(cells.ESTIMATORS)
    assert planned[0][1:3] == grid.QUICK_SHAPES[0]  # shape-major in --quick
    full = script.parse_args(["--cpu"])
    full.cpu = False
    full_plan = grid.plan(full)
    assert len({(c[1], c[2]) for c in full_plan}) == len(grid.GRID_N) * len(grid.GRID_T) + len(grid.LONG_T)
    # GAE f32 [T, N]: r, v (4 B), terminated, truncated (1 B), bootstrap [N], adv, ret (4 B)
    assert cells.cell_bytes("gae", 10, 100, cells.DTYPES["f32"]) == 1000 * (4 + 4 + 1 + 1 + 4 + 4) + 40


def test_time_budget_stops_new_cells(tmp_path):
    result = script.main(["--cpu", "--out", str(tmp_path / "k.json"), "--estimators", "linear_scan,eligibility_traces",
                     "--shapes", "4x4", "--impls", "loop", "--time-budget", "0", "--no-copy", "--quiet"])
    assert result["rows"] == [] and len(result["meta"]["not_run"]) == 2
    assert (tmp_path / "k.json").is_file()


def test_out_must_name_a_json_file(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        script.main(["--cpu", "--out", str(tmp_path), "--estimators", "gae", "--shapes", "4x4", "--quiet"])
    assert exit_info.value.code == 2
    assert "--out must name a .json file" in capsys.readouterr().err


def _row(impl, device_us, graph_us=None, **cell):
    return dict(dict(estimator="gae", N=4096, T=128, layout="tn", dtype="f32"), impl=impl, status="ok",
                device_us=device_us, graph_us=graph_us, **cell)


def test_ratios_use_device_only_times_where_both_impls_have_them():
    rows = [_row("triton", 30.0, 5.0), _row("sequential", 40.0, 20.0), _row("compile", 120.0, None),
            _row("triton", 100.0, None, T=4096), _row("sequential", 400.0, None, T=4096)]
    grid.add_ratios(rows)
    fused = rows[0]
    assert fused["speedup_vs_sequential"] == pytest.approx(40 / 30)
    assert fused["graph_speedup_vs_sequential"] == pytest.approx(20 / 5)
    assert fused["speedup_vs_compile"] == pytest.approx(4.0) and "graph_speedup_vs_compile" not in fused
    assert rows[3]["speedup_vs_sequential"] == pytest.approx(4.0)  # ratios stay within their own cell
    assert "graph_speedup_vs_sequential" not in rows[3]


def test_bandwidth_from_do_bench_and_graph_times():
    """``frac_of_copy`` from do_bench (which counts host time where the call outlasts the device),
    ``graph_frac_of_copy`` from the device-only graph time, both over the same bytes."""
    timed, no_graph = _row("triton", 40.0, 5.0, bytes=4_000_000), _row("triton", 40.0, None, bytes=4_000_000)
    for row in (timed, no_graph):
        grid.add_bandwidth(row, 4000.0)
    assert timed["gbps"] == pytest.approx(100.0) and timed["frac_of_copy"] == pytest.approx(0.025)
    assert timed["graph_frac_of_copy"] == pytest.approx(0.2)
    assert no_graph["frac_of_copy"] == pytest.approx(0.025) and "graph_frac_of_copy" not in no_graph
    without_copy = _row("triton", 40.0, 5.0, bytes=4_000_000)
    grid.add_bandwidth(without_copy, None)
    assert without_copy["gbps"] == pytest.approx(100.0) and "frac_of_copy" not in without_copy


def test_plots_take_device_only_speedups_where_both_impls_have_them():
    rows = [_row("triton", 30.0, 5.0), _row("sequential", 40.0, 20.0), _row("compile", 120.0, None)]
    grid.add_ratios(rows)
    assert plots.speedup(rows[0], "sequential") == pytest.approx(4.0)  # 20 / 5, not 40 / 30
    assert plots.speedup(rows[0], "compile") == pytest.approx(4.0)  # do_bench: compile has no graph time
    assert plots.speedup(rows[0], "loop") is None


def test_render_recomputes_the_ratios_of_a_finished_run(tmp_path):
    rows = [_row("triton", 30.0, 5.0, bytes=4_000_000), _row("sequential", 40.0, 20.0, bytes=4_000_000)]
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(dict(meta=dict(device_name="H200", copy_gbs=4000.0), rows=rows)))
    script.main(["--render", str(path)])
    fused = json.loads(path.read_text())["rows"][0]
    assert fused["speedup_vs_sequential"] == pytest.approx(40 / 30)
    assert fused["graph_frac_of_copy"] == pytest.approx(0.2)
    with open(tmp_path / "grid.csv") as f:
        assert float(next(csv.DictReader(f))["graph_speedup_vs_sequential"]) == pytest.approx(4.0)


def test_checked_times_times_right_calls_and_records_wrong_and_failing_ones():
    """``checked_times`` (the sweeps' cell) times every call that matches the float64 reference, in
    each round, and records a wrong or failing call instead of timing it."""
    import kernels

    def boom(args, kw):
        raise ValueError("no such block shape")

    calls = {"right": lambda a, k: kernels.linear_scan(*a, **k),
             "wrong": lambda a, k: kernels.linear_scan(*a, **k) * 1.01,
             "failing": boom}
    times = cells.checked_times(calls, "linear_scan", 6, 20, "tn", "f32", 2, 1, 5, device="cpu")
    assert len(times["right"]) == 2 and all(isinstance(t, float) and t > 0 for t in times["right"])
    assert times["wrong"] == ["WRONG 1.0e-02"] * 2
    assert times["failing"] == ["FAIL ValueError: no such block shape"] * 2


def test_small_cells_rotate_through_three_times_the_l2():
    """On a GPU a cell's input sets together fill three times the L2 (so neither do_bench nor the
    CUDA-graph replays, which flush nothing, find the inputs there), up to ``MAX_INPUT_SETS``; a
    cell as large as that takes one set, and the CPU always one."""
    mb = 2**20
    assert timing.input_set_count(int(9.45 * mb), "cuda") == math.ceil(3 * timing.L2_BYTES / (9.45 * mb))  # GAE 4096 x 128
    assert timing.input_set_count(mb, "cuda") == math.ceil(3 * timing.L2_BYTES / mb) <= timing.MAX_INPUT_SETS
    assert timing.input_set_count(1024, "cuda") == timing.MAX_INPUT_SETS
    assert timing.input_set_count(3 * timing.L2_BYTES, "cuda") == 1
    assert timing.input_set_count(mb, "cpu") == 1
    assert timing.input_set_count(mb, "cuda", l2_fills=4, most=200) == 200  # the sweeps' four fills, capped
    assert timing.input_set_count(9 * mb, "cuda", l2_fills=4, most=200) == math.ceil(4 * timing.L2_BYTES / (9 * mb))
    for nbytes in (mb, 7 * mb, 33 * mb):
        sets = timing.input_set_count(nbytes, "cuda")
        assert sets * nbytes >= 3 * timing.L2_BYTES > (sets - 1) * nbytes


def test_checked_times_rotates_input_sets():
    """With ``input_sets``, ``checked_times`` checks the call on the first input set, then times it
    taking the sets in turn (distinct inputs, each once per cycle)."""
    import kernels

    seen = []

    def record(args, kw):
        seen.append(args[0].data_ptr())
        return kernels.linear_scan(*args, **kw)

    def timer(fn):
        seen.clear()
        for _ in range(6):
            fn()
        return 1.0

    times = cells.checked_times({"right": record}, "linear_scan", 6, 20, "tn", "f32", 1, 1, 5, device="cpu",
                            timer=timer, input_sets=3)
    assert times == {"right": [1.0]}
    assert len(set(seen)) == 3 and seen[:3] == seen[3:]
    single = cells.checked_times({"right": record}, "linear_scan", 6, 20, "tn", "f32", 1, 1, 5, device="cpu",
                             timer=timer)
    assert single == {"right": [1.0]} and len(set(seen)) == 1


def test_before_root_runs_another_checkouts_kernels_in_this_process(tmp_path, monkeypatch):
    """``--before-root`` imports another checkout's ``kernels`` (here a stand-in whose ``gae`` is the
    float64 reference and whose ``_triton`` module shares a name with this checkout's) as impl
    ``before``, timed beside this checkout's kernels with ``speedup_vs_before``; this checkout's
    modules stay the ones ``import kernels`` finds."""
    import kernels
    from kernels import _triton
    from kernels.reference import gae as reference_gae

    def stand_in_gae(*args, time_dim=0, **kwargs):
        assert time_dim == 0
        return tuple(o.float() for o in reference_gae(*args, **kwargs))

    before = tmp_path / "before" / "kernels"
    before.mkdir(parents=True)
    (before / "_triton.py").write_text("MARK = 'before'\n")
    (before / "__init__.py").write_text(
        "from kernels import _triton\n"
        "from kernels_reference_for_test import gae\n"
        "ESTIMATORS = ('gae',)\n")
    # registered up front: while the stand-in loads, ``kernels.*`` names resolve to its own package
    monkeypatch.setitem(sys.modules, "kernels_reference_for_test", types.SimpleNamespace(gae=stand_in_gae))
    sys.modules.pop(grid.BEFORE_MODULE, None)
    try:
        result = script.main(["--cpu", "--out", str(tmp_path / "k.json"), "--estimators", "gae", "--shapes", "16x8",
                         "--layout", "tn", "--impls", "triton", "--before-root", str(tmp_path / "before"),
                         "--no-copy", "--quiet"])
        assert sys.modules[grid.BEFORE_MODULE]._triton.MARK == "before"
    finally:
        sys.modules.pop(grid.BEFORE_MODULE, None)
        sys.modules.pop(grid.BEFORE_MODULE + "._triton", None)
    assert sys.modules["kernels"] is kernels and sys.modules["kernels._triton"] is _triton
    rows = {r["impl"]: r for r in result["rows"]}
    assert set(rows) == {"triton", "before"} and rows["before"]["status"] == "ok", rows
    assert rows["triton"]["speedup_vs_before"] > 0
