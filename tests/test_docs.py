"""The user documentation: its tables equal the results files they are generated from, every results
file says where and when it was measured, its links resolve, the docs stay within their size limits,
and the project's text speaks of the software only."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from rltrain.bench import tables as results_tables

ROOT = Path(__file__).resolve().parents[1]

GENERATED = [ROOT / "README.md", ROOT / "docs" / "perf.md", ROOT / "docs" / "study.md", ROOT / "docs" / "training.md"]


def test_the_docs_tables_equal_their_results_files():
    """``results_tables.py check``: every generated table in the README, docs/perf.md and docs/study.md is what its
    results file gives today (after a new run: ``python scripts/results_tables.py update ...``)."""
    assert results_tables.main(["check", *map(str, GENERATED)]) == 0
    for doc in GENERATED:
        assert "<!-- results_tables.py" in doc.read_text(), doc


@pytest.mark.parametrize("path", sorted((ROOT / "docs" / "results").glob("*.json")), ids=lambda p: p.name)
def test_results_files_name_their_machine_versions_and_date(path):
    meta = json.loads(path.read_text())["meta"]
    for key in ("device_name", "driver", "cuda", "torch", "triton", "date"):
        assert meta.get(key), (path.name, key)


# An absolute path of the machine a result came from (its output folder, a home or temp directory):
# the file should name the repository-relative path a reader's own run writes to.
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:root|tmp|home|work|Users)/")


@pytest.mark.parametrize("path", sorted((ROOT / "docs" / "results").glob("*.json")), ids=lambda p: p.name)
def test_results_files_name_no_machine_paths(path):
    hits = [line.strip() for line in path.read_text().splitlines() if MACHINE_PATH.search(line)]
    assert not hits, hits[:5]


def _results(tmp_path, rows, **meta):
    path = tmp_path / "grid.json"
    path.write_text(json.dumps(dict(meta=dict(device_name="H200", driver="1", cuda="13.0", torch="2", triton="3",
                                              date="2026-01-02T03:04:05", **meta), rows=rows)))
    return path


def test_kernels_table_reads_each_figure_from_its_row(tmp_path):
    cell = dict(estimator="gae", N=4096, T=128, layout="tn", dtype="f32", status="ok")
    rows = [dict(cell, impl="triton", device_us=12.14, graph_us=5.16, host_us=40.0, captured_us=9.2,
                 graph_frac_of_copy=0.43),
            dict(cell, impl="sequential", device_us=84.8, graph_us=81.0),
            dict(cell, impl="compile", device_us=1234.4),
            dict(cell, impl="loop", status="skipped")]
    text = results_tables.kernels_table(_results(tmp_path, rows, copy_gbs=4000.0))
    assert text.splitlines()[0] == "H200, driver 1, CUDA 13.0, torch 2, Triton 3; 2026-01-02; device-to-device copy 4000 GB/s."
    assert "| GAE | 4096 x 128 | `[T, N]` | f32 | 5.2 | 12.1 | 40.0 | 9.2 | 43% | 84.8 (81.0) | 1234 | skip |" in text
    readme = results_tables.kernels_table(_results(tmp_path, rows), cells="readme")
    assert "| GAE | 4096 x 128 | 5.2 | 40.0 | 9.2 | 84.8 (81.0) | 1234 | skip |" in readme


def test_rl_triton_table_gives_gae_without_returns_where_the_file_timed_it(tmp_path):
    def row(est, truncations, **graph):
        return dict(estimator=est, N=4096, T=128, truncations=truncations, graph=graph, event=graph)

    rows = [row("gae", True, ours=4.0, rl_triton=6.0, ours_no_returns=3.5),
            row("gae", False, ours=3.0, rl_triton=4.0, ours_no_returns=2.5), row("vtrace", True, ours=5.0, rl_triton=5.5)]
    text = results_tables.rl_triton_table(_results(tmp_path, rows, rl_triton="0.1.3", kernels_commit="abc"))
    assert "| GAE | 4096 x 128 | 4.0 / 6.0 | 3.0 / 4.0 | 4.0 / 6.0 | 3.0 / 4.0 | 3.5 / 6.0 | 2.5 / 4.0 |" in text
    assert "| V-trace | 4096 x 128 | 5.0 / 5.5 | - | 5.0 / 5.5 | - | - | - |" in text
    assert "fused kernels of commit abc" in text.splitlines()[0]
    without = results_tables.rl_triton_table(_results(tmp_path, rows[2:], rl_triton="0.1.3"))
    assert "returns=False" not in without and "| V-trace | 4096 x 128 | 5.0 / 5.5 | - | 5.0 / 5.5 | - |" in without


def test_update_rewrites_only_between_the_markers(tmp_path):
    cell = dict(estimator="vtrace", N=8, T=4, layout="nt", dtype="f32", status="ok")
    results = _results(tmp_path, [dict(cell, impl="triton", device_us=3.0, graph_us=1.0)])
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n<!-- results_tables.py kernels {results} -->\nstale\n<!-- end -->\nafter\n")
    assert results_tables.main(["check", str(doc)]) == 1
    assert results_tables.main(["update", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("before\n<!-- results_tables.py") and text.endswith("<!-- end -->\nafter\n")
    assert "stale" not in text and "| V-trace | 8 x 4 | `[N, T]` | f32 | 1.0 | 3.0 |" in text
    assert results_tables.main(["check", str(doc)]) == 0


def test_a_missing_results_file_is_named(tmp_path):
    with pytest.raises(SystemExit, match="no such results file: nowhere.json"):
        results_tables.main(["kernels", "nowhere.json"])


def test_docs_stay_within_their_limits():
    files = [p for p in (ROOT / "docs").rglob("*") if p.is_file()]
    assert len(files) < 60 and sum(p.stat().st_size for p in files) < 3 * 2**20  # two short game videos included
    assert len((ROOT / "README.md").read_text().splitlines()) <= 110
    assert len((ROOT / "docs" / "perf.md").read_text().splitlines()) <= 300


def test_relative_links_in_the_docs_resolve():
    for doc in [ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([^)#:]+)\)", doc.read_text()):
            assert (doc.parent / target).exists(), (doc.name, target)


# Words about how the software was made, not what it does; spelt in pieces so this file has none.
MAKING = re.compile(r"\bsess" + r"ions?\b|the le" + r"ad\b|\ble" + r"nt\b|this tu" + r"rn\b", re.IGNORECASE)


def test_the_project_text_speaks_of_the_software_only():
    """Code, comments, docs, configs and tests say what the software does, never how it was made."""
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    names = [n for n in listed.splitlines() if n.endswith((".py", ".md", ".yaml", ".toml", ".sh"))
             or n in ("Makefile", ".ci/run")]
    hits = [f"{name}:{i}: {line.strip()}" for name in names if (ROOT / name).is_file()
            for i, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1) if MAKING.search(line)]
    assert not hits, "\n".join(hits[:20])
