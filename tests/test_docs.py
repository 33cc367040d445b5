"""The user documentation: its tables equal the results files they are generated from, every results
file says where and when it was measured, its links resolve, the docs stay within their size limits,
and the project's text speaks of the software only."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import results_tables  # noqa: E402

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


def test_the_readme_names_every_make_entry_point():
    """The Makefile's targets a user runs (``.PHONY`` less its plumbing) each appear as ``make <target>``."""
    phony = re.search(r"^\.PHONY: (.+)$", (ROOT / "Makefile").read_text(), re.MULTILINE).group(1).split()
    readme = (ROOT / "README.md").read_text()
    missing = [t for t in phony if t not in ("venv", "clean") and not re.search(rf"make {t}(?![\w-])", readme)]
    assert phony and not missing, missing


def test_the_license_file_is_the_license_pyproject_declares():
    assert re.search(r'^license = \{ text = "MIT" \}$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License\n") and "Copyright (c) " in text and "rltrain contributors" in text
    assert "Permission is hereby granted, free of charge" in text and 'THE SOFTWARE IS PROVIDED "AS IS"' in text


def test_the_credit_assignment_metrics_are_documented():
    """Every metric of a shadowed iteration (``CreditAssignment.end_iteration``) and PPO's ``perf/ca_s`` (the
    phase ``ca`` as a group) are named in docs/training.md's metrics table."""
    import torch

    from rltrain.credit import CreditAssignment
    from rltrain.timers import PhaseTimer, group_totals

    timer = PhaseTimer("cpu")
    credit = CreditAssignment("loop", torch.device("cpu"), timer, "ca", shadow="sequential", shadow_every=1)
    credit.start_iteration(1)
    g = torch.Generator().manual_seed(0)
    credit.gae(torch.randn(8, 2, generator=g), torch.randn(8, 2, generator=g), torch.zeros(8, 2, dtype=torch.bool),
               torch.randn(2, generator=g), gamma=0.99, lam=0.95)
    secs = timer.read()
    logged = {*credit.end_iteration(secs, wall=1.0), *(f"perf/{k}_s" for k in group_totals(secs))}
    assert {"perf/ca_s", "perf/ca_shadow_wall_s", "perf/ca_kernel_speedup"} <= logged
    doc = (ROOT / "docs" / "training.md").read_text()
    undocumented = sorted(m for m in logged if f"`{m}`" not in doc and not m.startswith("check/ca_rel_err_"))
    assert not undocumented, undocumented


def _flag_rows(doc: str):
    """``(flags, default, what)`` of each row of docs/training.md's flags table."""
    table = doc.split("## Flags", 1)[1].split("\n\n| preset |", 1)[0]
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        flags = re.findall(r"`(--[a-z-]+)", cells[0]) if len(cells) == 3 else []
        if flags:
            yield flags, cells[1], cells[2]


def test_a_flag_of_one_trainer_shows_no_default_for_the_other():
    """Defaults read PPO / IMPALA: a one-flag row whose flag only one trainer has gives ``-`` for the other and
    says whose it is (``--graph-update`` is PPO's only, though a preset turns it on)."""
    fields = {name: {f.name for f in dataclasses.fields(load_script(name).Args)} for name in ("ppo", "impala")}
    checked = 0
    for flags, default, what in _flag_rows((ROOT / "docs" / "training.md").read_text()):
        name = flags[0][2:].replace("-", "_")
        owners = [t for t in ("ppo", "impala") if name in fields[t]]
        if len(flags) != 1 or len(owners) != 1:
            continue
        ppo_default, _, impala_default = default.partition(" / ")
        other = impala_default if owners == ["ppo"] else ppo_default
        assert other == "-" and what.startswith(owners[0].upper()), (flags, default, what)
        checked += 1
    assert checked >= 6


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
