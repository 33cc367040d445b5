"""The user documentation: its tables equal the results files they are generated from, every results
file says where and when it was measured, its links resolve, the docs stay within their size limits,
and the project's text speaks of the software only."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import load_script
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


# --------------------------------------------------------------------------- #
# every measured figure of the docs comes from a results file
# --------------------------------------------------------------------------- #
# A figure: a number, or a range or list of numbers (``3.8-7.5``, ``324/418``, ``372 -> 206``), with a unit.
_NUMBER = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_JOIN = r"\s?(?:-|/|->|to|against)\s?"
_UNITS = {"us": 1.0, "µs": 1.0, "ms": 1.0, "s": 1.0, "seconds": 1.0, "minutes": 1.0, "min": 1.0, "%": 1.0,
          "x": 1.0, "k": 1e3, "M": 1e6, "k/s": 1e3, "steps/s": 1.0, "GB/s": 1.0, "TB/s": 1.0}
FIGURE = re.compile(rf"(?<![\w.^-])((?:{_NUMBER})(?:{_JOIN}(?:{_NUMBER}))*)\s?"
                    r"(us|µs|ms|seconds|s|minutes|min|%|x(?!\s?\d)|k/s|k|M|steps/s|GB/s|TB/s)(?![\w/])")
# ``N of M`` things (seeds, cells, comparisons): a count a results file must hold as ``N/M``
COUNT = re.compile(r"(?<![\w.])(\d+) of (?:the file's |its |the )?(\d+)\b")
# Figures that are definitions or arithmetic, not measurements: (file, phrase, why). The phrase is left
# out of the file's text before its figures are read.
NOT_MEASURED = [
    ("perf.md", "0.3 x normal, about 5%", "the kernel benchmark's inputs (rltrain.bench.cells.SPECS)"),
    ("perf.md", "2% truncated", "the kernel benchmark's inputs"),
    ("perf.md", "(25 ms warm-up, 100 ms of calls", "the kernel benchmark's do_bench settings"),
    ("perf.md", "under 200 us, device times where it is under 1000 us", "bench_kernels.py's --host-max-us, --graph-max-us"),
    ("perf.md", "(target: 80% of raw)", "a target"),
    ("perf.md", "(target: 90%)", "a target"),
    ("perf.md", "under 30% of its time", "a target"),
    ("training.md", "At 6.5M steps in 300 s the trainer would need 21.7k steps/s, 87% of that host's raw EnvPool",
     "arithmetic: 6.5M steps / 300 s, and that over the raw EnvPool figure beside it"),
    ("training.md", "a 6x smaller", "arithmetic: the preset's learning rate over the trial's, both given"),
    ("training.md", "(5x fewer gradient steps per env step)", "arithmetic of the minibatch sizes and epochs given"),
    ("training.md", "`--dist-timeout-s` (300 s)", "a default"),
    ("training.md", "CleanRL's published PPO score after 10M steps", "CleanRL's horizon, a setting"),
    ("training.md", "CleanRL's 10M-step scores", "CleanRL's horizon, a setting"),
    ("training.md", "within about 10% of the true median in the paper",
     "the Atari-5 paper's own accuracy (Aitchison, Sweetser and Hutter, cited in the sentence)"),
    ("atari.yaml", "~20k gradient steps in 10M env steps (CleanRL, 4 / 256: one per 64, 156k;",
     "arithmetic of the batch sizes, at the horizon given"),
    ("atari.yaml", "CleanRL's 10M", "CleanRL's horizon, a setting"),
    ("atari.yaml", "with 10M", "a setting"),
    ("atari.yaml", "8x CleanRL's 256", "arithmetic: 2048 / 256"),
    ("atari.yaml", "~1.24 us a sample", "arithmetic: the update's time over its 4 x 65,536 samples"),
    ("atari.yaml", "~5 us per env step to the 35-40 us", "arithmetic of the figures beside it"),
    ("impala_atari.yaml", "25M for 20 minutes", "arithmetic: 20k steps/s for 20 minutes"),
    ("atari_cleanrl.yaml", "10M steps are", "CleanRL's horizon, a setting"),
]
FIGURE_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "configs").glob("*.yaml"))]
RESULTS = sorted((ROOT / "docs" / "results").glob("*.json"))
CITATION = re.compile(r"([\w.-]+\.json)\b")
HEADING = re.compile(r"^#{1,6} ")
ITEM = re.compile(r"^\s*(?:[-*]|\d+\.) ")


def paragraphs(path: Path) -> list[tuple[int, str, set]]:
    """``(first line number, text, cited results files)`` of each paragraph of a doc whose figures must be
    traced: outside generated tables and code blocks (a list item is a paragraph of its own; of a config,
    each block of comment lines), the allow-listed phrases left out. A paragraph cites the results files
    it names (``name.json``); one that names none, those its section names (a generated table's marker
    names its file; a config is one section)."""
    known = {p.name for p in RESULTS}
    out, section_cites, current, inside = [], [], None, False

    def close():
        nonlocal current
        if current is not None:
            out.append((*current, len(section_cites) - 1))
        current = None

    section_cites.append(set())
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        section_cites[-1] |= {name for name in CITATION.findall(line) if name in known}
        if stripped.startswith("```") or stripped.startswith("<!-- results_tables.py") or stripped == "<!-- end -->":
            close()
            inside = not inside if stripped.startswith("```") else stripped != "<!-- end -->"
            continue
        if inside:
            continue
        if path.suffix == ".yaml":
            line = line[line.index("#"):] if "#" in line else ""
            stripped = line.lstrip("#").strip() if line.strip() != "#" else ""
        if path.suffix == ".md" and HEADING.match(line):
            close()
            section_cites.append(set())
            continue
        if not stripped:
            close()
            continue
        if path.suffix == ".md" and ITEM.match(line):
            close()
        for name, phrase, _ in NOT_MEASURED:
            if name == path.name:
                line = line.replace(phrase, " ")
        current = (number, line) if current is None else (current[0], current[1] + "\n" + line)
    close()
    result = []
    for number, text, section in out:
        cited = {name for name in CITATION.findall(text) if name in known} or section_cites[section]
        result.append((number, text, cited))
    return result


def figures(text: str) -> list[tuple[str, str, list[float], float, str]]:
    """Each figure of ``text``: ``(as written, unit, values, rounding, the text after it)``: its values in
    the unit's base (``k``, ``M`` multiplied out) and half a unit of its last printed digit."""
    found = []
    for match in FIGURE.finditer(text):
        written, unit = match.group(1), match.group(2)
        numbers = re.findall(_NUMBER, written)
        decimals = max((len(n.split(".")[1]) if "." in n else 0) for n in numbers)
        scale = _UNITS[unit]
        found.append((match.group(0), unit, [float(n.replace(",", "")) * scale for n in numbers],
                      0.5 * 10 ** -decimals * scale * (1 + 1e-9), text[match.end():match.end() + 60]))
    return found


# Which figures a value of a results file can back, by its key (or its dict's key): (unit, factor), the
# figure being the value times the factor. Times convert between us, ms, s and minutes; a fraction
# (``vs_raw``, a share) is a ``%`` figure; a speedup an ``x`` figure; steps and steps/s back ``k`` and
# ``M`` figures too. The times of one cell per implementation (the rl-triton comparison) back their
# ratios as ``x`` figures and, less one, as ``%`` (faster or slower by).
_TIME = {"us": (("us", 1.0), ("µs", 1.0), ("ms", 1e-3)),
         "ms": (("ms", 1.0), ("us", 1e3), ("µs", 1e3), ("s", 1e-3), ("seconds", 1e-3)),
         "s": (("s", 1.0), ("seconds", 1.0), ("ms", 1e3), ("minutes", 1 / 60), ("min", 1 / 60)),
         "minutes": (("minutes", 1.0), ("min", 1.0), ("s", 60.0), ("seconds", 60.0))}
KINDS = {**_TIME, "fraction": (("%", 100.0),), "ratio": (("x", 1.0),),
         "sps": (("steps/s", 1.0), ("k/s", 1.0), ("k", 1.0), ("M", 1.0)), "steps": (("k", 1.0), ("M", 1.0)),
         "bandwidth": (("GB/s", 1.0), ("TB/s", 1e-3))}
FRACTIONS = ("vs_raw", "rollout_vs_raw", "learner_wait", "frac_of_copy", "share", "efficiency")
PER_IMPLEMENTATION = ("do_bench", "graph", "event", "host")  # the rl-triton comparison's {ours, rl_triton}
TIME_SERIES = ("curve",)  # a run's every logged point: a figure cites its summaries (crossings, final)


def value_kind(key: str, parent: str):
    """What a results file's value under ``key`` (in a dict under ``parent``) measures, or None."""
    if "sps" in key or key == "steps_per_s" or parent == "tried":
        return "sps"
    for name in (key, parent):
        if name in PER_IMPLEMENTATION:
            return "us"
        for suffix in ("_us", "_ms", "_s", "minutes"):
            if name.endswith(suffix):
                return suffix.strip("_")
    if any(key.startswith(f) or key.endswith(f) for f in FRACTIONS):
        return "fraction"
    if "speedup" in key or "speedup" in parent or key.startswith("torchrun_vs_plain") or \
            parent.startswith("torchrun_vs_plain"):
        return "ratio"
    if key in ("global_step", "steps", "median_steps", "total_timesteps", "batch_steps"):
        return "steps"
    if key in ("gbps", "copy_gbs"):
        return "bandwidth"
    return None


ESTIMATOR_NAMES = {"gae": r"\bGAE\b", "vtrace": r"\bV-trace\b", "retrace": r"\bRetrace\b",
                   "lambda_returns": r"lambda.returns|TD\(lambda\)", "discounted_returns": r"discounted returns",
                   "eligibility_traces": r"eligibility traces", "episodic_prefix_sum": r"episodic (?:prefix )?sum",
                   "linear_scan": r"linear_scan"}
SHAPE = re.compile(r"^\s*(?:\([^)]*\)\s*)?at (\d+) x (\d+)(?:-(\d+))?")


def _leaves(value, key: str, parent: str, row: tuple, out: dict, strings: set) -> None:
    """Collect ``value``'s figures into ``out`` (unit: ``[(figure, estimator, N, T)]``, the row it belongs
    to where a dict above it names an estimator and a shape) and its strings into ``strings``."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, (int, float)):
        for unit, factor in KINDS.get(value_kind(key, parent), ()):
            out.setdefault(unit, []).append((value * factor, *row))
    elif isinstance(value, str):
        strings.add(value.strip())
    elif isinstance(value, dict):
        if "estimator" in value:
            row = (value["estimator"], value.get("N"), value.get("T"))
        if key in PER_IMPLEMENTATION:  # one time per implementation: their ratios, and less one in %
            times = [v for v in value.values() if isinstance(v, (int, float)) and v]
            ratios = [a / b for a in times for b in times if a is not b]
            out.setdefault("x", []).extend((r, *row) for r in ratios)
            out.setdefault("%", []).extend((100 * abs(r - 1), *row) for r in ratios)
        for k, v in value.items():
            if k not in TIME_SERIES:
                _leaves(v, str(k), key, row, out, strings)
    elif isinstance(value, list):
        for v in value:
            _leaves(v, key, parent, row, out, strings)


def held_figures(paths) -> tuple[dict, set]:
    """What results files hold: per unit the values a figure in that unit may round to (by each value's
    key: :func:`value_kind`), sorted, each with its row's estimator and shape (None outside rows); and the
    strings (for ``N/M`` counts)."""
    out, strings = {}, set()
    for path in paths:
        _leaves(json.loads(path.read_text()), "", "", (None, None, None), out, strings)
    return {unit: sorted(values, key=lambda v: v[0]) for unit, values in out.items()}, strings


def untraced(text: str, held: dict, strings: set) -> list[str]:
    """The figures of ``text`` that no held value gives at their printed rounding, and the ``N of M`` counts
    no results file holds as ``N/M``. Where ``text`` names estimators, values of rows of other estimators
    do not count; a figure followed by ``at N x T`` (``T1-T2``) takes values of rows of that shape only."""
    import bisect

    named = {est for est, pattern in ESTIMATOR_NAMES.items() if re.search(pattern, text)}
    missing = []
    for written, unit, values, tolerance, after in figures(text):
        shape = SHAPE.match(after)
        N, T_lo, T_hi = (int(shape.group(1)), int(shape.group(2)), int(shape.group(3) or shape.group(2))) \
            if shape else (None, None, None)

        def fits(entry) -> bool:
            _, est, n, t = entry
            if est is None:
                return True
            return (not named or est in named) and (N is None or (n == N and T_lo <= t <= T_hi))

        column = held.get(unit, [])
        keys = [v[0] for v in column]
        for value in values:
            lo, hi = bisect.bisect_left(keys, value - tolerance), bisect.bisect_right(keys, value + tolerance)
            if not any(fits(column[i]) for i in range(lo, hi)):
                missing.append(written)
                break
    missing += [m.group(0) for m in COUNT.finditer(text) if f"{m.group(1)}/{m.group(2)}" not in strings]
    return missing


def test_every_measured_figure_is_generated_or_held_by_a_results_file():
    """A figure with a unit (us, ms, s, minutes, %, x, k, M, steps/s, GB/s) or an ``N of M`` count in the
    README, docs/*.md or a config's comments lies in a generated table (checked above) or is held by a
    results file its paragraph (else its section) cites, at the figure's printed rounding (a fraction as %,
    seconds as ms or minutes, ...: :func:`value_kind`); counts as ``N/M``. Definitions and arithmetic are
    listed in ``NOT_MEASURED``. CHANGELOG.md is history and is not read."""
    held = {path.name: held_figures([path]) for path in RESULTS}
    problems = []
    for path in FIGURE_DOCS:
        for number, text, cited in paragraphs(path):
            if not cited:
                problems += [f"{path.relative_to(ROOT)}:{number}: {figure!r} (its paragraph and section cite "
                             f"no results file)" for figure in untraced(text, {}, set())]
                continue
            merged = {}
            for name in cited:
                for unit, values in held[name][0].items():
                    merged.setdefault(unit, []).extend(values)
            strings = set().union(*(held[name][1] for name in cited))
            missing = untraced(text, {u: sorted(v, key=lambda e: e[0]) for u, v in merged.items()}, strings)
            problems += [f"{path.relative_to(ROOT)}:{number}: {figure!r} (not in {', '.join(sorted(cited))})"
                         for figure in missing]
    assert not problems, "figures no results file holds:\n" + "\n".join(problems)


def test_the_figure_check_reads_ranges_lists_units_rounding_and_rows():
    row = {"estimator": "gae", "N": 32768, "T": 16, "graph": {"ours": 4.0, "rl_triton": 6.2}}
    other = {"estimator": "episodic_prefix_sum", "N": 32768, "T": 16, "graph": {"ours": 1.0, "rl_triton": 7.46}}
    held, strings = held_figures([_results_file({"update_ms": 325.5, "wall_s": 263.95, "vs_raw": 0.816, "sps": 20412.3,
                                                 "reached": "1/3", "curve": {"wall_s": [324.0]}}, row, other)])
    assert untraced("update 325.5 ms, 4.4 minutes, 81.6% of raw, 1.55x faster, 20.4k steps/s", held, strings) == []
    assert untraced("324/418 ms", held, strings) == ["324/418 ms"]  # a list: each value must be held
    assert untraced("it took 326-330 ms", held, strings) == ["326-330 ms"]
    assert untraced("1 of 3 seeds; 8 of 10 seeds", held, strings) == ["8 of 10"]
    assert untraced("4096 x 128 and 2.5e-4 x sqrt(8)", held, strings) == []  # shapes and products: no figure
    assert untraced("busy 22 %", held, strings) == ["22 %"]
    assert untraced("1.5-7.5x at 32768 x 8-16", held, strings) == []  # either estimator's ratio
    assert untraced("GAE: 1.5-7.5x at 32768 x 8-16", held, strings) == ["1.5-7.5x"]  # GAE's rows only
    assert untraced("GAE: 1.55x at 4096 x 128", held, strings) == ["1.55x"]  # rows of that shape only
    assert untraced("324 s", held, strings) == ["324 s"]  # a run's curve points back no figure


def test_a_figure_counts_against_the_results_files_its_paragraph_or_section_cites(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("## A\n\nFrom [data](results/trainer_atari_preset.json): 81.6%.\n\nNo file: 81.6%.\n\n"
                   "## B\n\n<!-- results_tables.py trainer docs/results/trainer_atari_preset.json -->\n| 1 ms |\n"
                   "<!-- end -->\n\n- item: 81.6%\n\n```\n5 ms\n```\n")
    got = [(n, cited) for n, text, cited in paragraphs(doc)]
    assert got == [(3, {"trainer_atari_preset.json"}), (5, {"trainer_atari_preset.json"}),
                   (13, {"trainer_atari_preset.json"})]
    (only, text, cited), = [p for p in paragraphs(doc) if p[0] == 5]
    assert "No file" in text
    bare = tmp_path / "bare.md"
    bare.write_text("## A\n\nNo file: 81.6%.\n")
    assert [cited for _, _, cited in paragraphs(bare)] == [set()]


def _results_file(*rows: dict) -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp()) / "r.json"
    path.write_text(json.dumps({"meta": {}, "rows": list(rows)}))
    return path
