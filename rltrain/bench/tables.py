"""Markdown tables of the results files under ``docs/results/`` (the tables in README.md and docs/perf.md).

The command line of ``scripts/results_tables.py`` (:func:`main`): a table command (``kernels``,
``rl-triton``, ``trainer``, ``study``, ``scaling``, ``time-to-score``, ``atari-suite``) prints the table of a
results file; ``update`` and ``check`` rewrite or check the generated tables of Markdown files. A table in a Markdown
file is generated where a line ``<!-- results_tables.py ARGS -->`` (ARGS: a table command, paths
relative to the repository root) is followed by the table and a line
``<!-- end -->``; ``update`` replaces what lies between them with the command's output.

``kernels`` reads a file of ``scripts/bench_kernels.py``: per cell the fused kernels' device time
(replayed from a CUDA graph, inputs from DRAM), their ``do_bench`` median (L2 flushed), the full
call (back-to-back Python calls), the call captured by ``kernels.capture``, the device time's share
of a device-to-device copy's bandwidth, and each baseline's ``do_bench`` median with its device
time in brackets where the run measured one. ``rl-triton`` reads a file of
``scripts/compare_rl_triton.py``: device times of both libraries with and without truncations, and
the times of rl-triton's own method (CUDA events around one call, the launch included). Times in
microseconds. ``scaling`` reads a file of ``scripts/bench_scaling.py``: per case and rank count K the
total steps/s, the efficiency sps(K) / (K sps(1)), the phases and the gradient all-reduce (ms per
iteration, the slowest rank's), the all-reduce's share and the peak GPU memory, then the fault check.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

from rltrain.bench.formats import machine, us

ROOT = Path(__file__).resolve().parents[2]
NAMES = {"gae": "GAE", "vtrace": "V-trace", "retrace": "Retrace", "lambda_returns": "lambda returns",
         "discounted_returns": "discounted returns", "eligibility_traces": "eligibility traces",
         "episodic_prefix_sum": "episodic prefix sum", "linear_scan": "`linear_scan`"}
LAYOUTS = {"tn": "`[T, N]`", "nt": "`[N, T]`"}
# (estimator, N, T, layout) of the README's rows
CORE_ESTIMATORS = ("gae", "vtrace", "retrace")
README_KERNEL_CELLS = [("gae", 4096, 128, "tn"), ("gae", 4096, 128, "nt"), ("vtrace", 4096, 128, "tn"),
                       ("gae", 4096, 16, "tn"), ("gae", 512, 8192, "tn"), ("gae", 8192, 4096, "tn"),
                       ("gae", 16, 1048576, "tn")]
README_RL_TRITON_CELLS = [("gae", 4096, 128), ("vtrace", 4096, 128), ("gae", 32768, 16), ("gae", 8192, 4096),
                          ("gae", 128, 4096)]
MARKER = re.compile(r"^<!-- results_tables\.py (.+?) -->$")
END = "<!-- end -->"


def baseline(row) -> str:
    """A baseline's ``do_bench`` median, with its device time in brackets where measured."""
    if row is None:
        return "-"
    if row.get("status") != "ok":
        return "skip" if row.get("status") == "skipped" else row.get("status", "?")
    graph = row.get("graph_us")
    return us(row["device_us"]) + (f" ({us(graph)})" if graph else "")


def kernels_table(path: Path, cells: str = "all") -> str:
    data = json.loads(path.read_text())
    by_cell: dict = {}
    for r in data["rows"]:
        by_cell.setdefault((r["estimator"], r["N"], r["T"], r["layout"], r["dtype"]), {})[r["impl"]] = r
    keys = list(by_cell)
    if cells == "readme":
        keys = [k for c in README_KERNEL_CELLS for k in keys if k[:4] == c and k[4] == "f32"]
    elif cells == "core":  # the estimators the trainers call; the results file holds the others
        keys = [k for k in keys if k[0] in CORE_ESTIMATORS]
    if cells == "before":
        return "\n".join([machine(data["meta"]), "", *vs_before_matrix(by_cell)])
    lines = [machine(data["meta"]), ""]
    if cells == "readme":
        lines += ["| estimator | N x T | fused device | fused full call | fused captured call | sequential | "
                  "`torch.compile` | loop |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    else:
        lines += ["| estimator | N x T | layout | dtype | device | do_bench | full call | captured call | % of copy "
                  "| sequential | `torch.compile` | loop |",
                  "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key in keys:
        est, N, T, layout, dtype = key
        impls = by_cell[key]
        fused = impls.get("triton", {})
        frac = fused.get("graph_frac_of_copy")
        base = [baseline(impls.get(b)) for b in ("sequential", "compile", "loop")]
        if cells == "readme":
            shape = f"{N} x {T}" + (" `[N, T]`" if layout == "nt" else "")
            figures = [us(fused.get("graph_us")), us(fused.get("host_us")), us(fused.get("captured_us"))]
            lines.append(f"| {NAMES[est]} | {shape} | " + " | ".join(figures + base) + " |")
        else:
            figures = [us(fused.get("graph_us")), us(fused.get("device_us")), us(fused.get("host_us")),
                       us(fused.get("captured_us")), "-" if frac is None else f"{frac:.0%}"]
            lines.append(f"| {NAMES[est]} | {N} x {T} | {LAYOUTS[layout]} | {dtype} | " + " | ".join(figures + base) + " |")
    return "\n".join(lines)


def vs_before_matrix(by_cell: dict) -> list[str]:
    """Speedup over the ``before`` checkout's kernels (``bench_kernels.py --before-root``): its ``do_bench``
    median of the call / the fused one's, one row per shape, one column per estimator, dtype and layout;
    under it their geometric mean and the cells below 0.95x."""
    columns = [(e, d, lay) for e in CORE_ESTIMATORS for d in ("f32", "bf16") for lay in ("tn", "nt")]
    shapes = list(dict.fromkeys((k[1], k[2]) for k in by_cell))
    ratios = {key: impls["triton"]["speedup_vs_before"] for key, impls in by_cell.items()
              if "speedup_vs_before" in impls.get("triton", {})}  # bench_kernels.add_ratios's
    lines = ["| N x T | " + " | ".join(f"{NAMES[e]} {d} {LAYOUTS[lay]}" for e, d, lay in columns) + " |",
             "| --- |" + " ---: |" * len(columns)]
    for N, T in shapes:
        cells = [ratios.get((e, N, T, lay, d)) for e, d, lay in columns]
        lines.append(f"| {N} x {T} | " + " | ".join("-" if r is None else f"{r:.2f}" for r in cells) + " |")
    if ratios:
        mean = math.exp(sum(map(math.log, ratios.values())) / len(ratios))
        low = sum(r < 0.95 for r in ratios.values())
        lines += ["", f"Geometric mean {mean:.3f}x over {len(ratios)} cells; {low} below 0.95x; "
                      f"slowest {min(ratios.values()):.2f}x, fastest {max(ratios.values()):.2f}x."]
    return lines


def rl_triton_table(path: Path, cells: str = "all") -> str:
    """Device times (CUDA graph) of both libraries per cell, with and without truncations, ``fused /
    rl-triton``; every cell also rl-triton's own method (CUDA events around one call). Where the file
    timed GAE with ``returns=False`` (``ours_no_returns``), two more columns give that call against
    rl-triton (the same outputs on both sides)."""
    data = json.loads(path.read_text())
    meta = data["meta"]
    by_cell: dict = {}
    for r in data["rows"]:
        by_cell.setdefault((r["estimator"], r["N"], r["T"]), {})[r["truncations"]] = r
    keys = [c for c in README_RL_TRITON_CELLS if c in by_cell] if cells == "readme" else list(by_cell)
    if cells == "core":
        keys = [k for k in keys if k[0] in CORE_ESTIMATORS]
    skipped = any("ours_no_returns" in r.get("graph", {}) for r in data["rows"])

    def pair(row, method, ours="ours"):
        if row is None or method not in row or ours not in row[method]:
            return "-"
        return f"{us(row[method].get(ours))} / {us(row[method].get('rl_triton'))}"

    lines = [machine(meta) + f" rl-triton {meta.get('rl_triton', '?')}, fused kernels of commit "
             f"{meta.get('kernels_commit') or '?'}; `[N, T]`, {meta.get('dtype', 'f32')}.", ""]
    no_returns = " | GAE `returns=False`, with truncations | without" if skipped else ""
    if cells == "readme":
        lines += ["| estimator | N x T | with truncations: fused / rl-triton | without: fused / rl-triton"
                  + no_returns + " |", "| --- | --- | ---: | ---: |" + " ---: | ---: |" * skipped]
    else:
        lines += ["| estimator | N x T | device, with truncations | device, without | events, with truncations "
                  "| events, without" + no_returns + " |",
                  "| --- | --- | ---: | ---: | ---: | ---: |" + " ---: | ---: |" * skipped]
    for key in keys:
        est, N, T = key
        trunc, plain = by_cell[key].get(True), by_cell[key].get(False)
        figures = [pair(trunc, "graph"), pair(plain, "graph")]
        if cells != "readme":
            figures += [pair(trunc, "event"), pair(plain, "event")]
        if skipped:
            figures += [pair(trunc, "graph", "ours_no_returns"), pair(plain, "graph", "ours_no_returns")]
        lines.append(f"| {NAMES[est]} | {N} x {T} | " + " | ".join(figures) + " |")
    return "\n".join(lines + ["", rl_triton_summary(data["rows"])])


def rl_triton_summary(rows: list) -> str:
    """Every comparison of a file (each cell with and without truncations), by the device time: how many
    the fused kernels win, per estimator, and the range and geometric mean of rl-triton's time over theirs."""
    ratios: dict = {}
    for r in rows:
        graph = r.get("graph", {})
        if graph.get("ours") and graph.get("rl_triton"):
            ratios.setdefault(r["estimator"], []).append(graph["rl_triton"] / graph["ours"])
    every = [x for values in ratios.values() for x in values]
    if not every:
        return "No comparison has a device time for both libraries."
    per_estimator = "; ".join(f"{NAMES[est]} {sum(x > 1 for x in values)} of {len(values)}, "
                              f"{min(values):.2f}-{max(values):.2f}x" for est, values in ratios.items())
    mean = math.exp(sum(map(math.log, every)) / len(every))
    return (f"Device time: the fused kernels faster in {sum(x > 1 for x in every)} of the {len(every)} comparisons "
            f"(each cell with and without truncations); rl-triton's time over theirs, geometric mean {mean:.2f}x; "
            f"per estimator: {per_estimator}.")


def trainer_table(path: Path, cells: str = "all") -> str:
    """The trainer benchmark's tables (``scripts/bench_trainer.py``): steps/s against raw EnvPool per
    run, and each case's phase table, before and after side by side."""
    from rltrain.bench import trainer_tables
    text = trainer_tables.markdown(json.loads(path.read_text()), variants=cells != "readme")
    return text.split("\n\n**")[0] if cells == "readme" else text  # readme: before / after steps/s alone


def scaling_table(path: Path, cells: str = "all") -> str:
    """The multi-GPU scaling table (``scripts/bench_scaling.py``): one row per case and rank count, the fault
    check under it (``--cells`` makes no difference)."""
    from rltrain.bench import scaling_tables
    return scaling_tables.markdown(json.loads(path.read_text()))


def study_table(path: Path, cells: str = "all") -> str:
    """The speedup study's tables (``scripts/speedup_study.py``): measured (predicted) end-to-end speedup
    of every backend at every point; with ``--cells all`` also each backend's times, share, k and check."""
    from rltrain.study import compact_table, markdown_table
    data = json.loads(path.read_text())
    meta = data["meta"]
    lines = [machine(meta), "", compact_table(data["records"])]
    if cells == "all":
        lines += ["", markdown_table(data["records"])]
    return "\n".join(lines)


def time_to_score_table(path: Path, cells: str = "all") -> str:
    """The time-to-score tables (``scripts/time_to_score.py``): per game and configuration the final
    return and the minutes to each threshold (``--cells`` makes no difference)."""
    from rltrain.time_to_score import markdown
    data = json.loads(path.read_text())
    meta = data["meta"]
    host = machine(meta)
    return "\n".join([host, "", markdown(data)])


def atari_suite_table(path: Path, cells: str = "all") -> str:
    """The Atari suite's table (``scripts/atari_suite.py``, :func:`rltrain.atari_suite.markdown`): per game
    the return at 2, 5 and 10 training minutes, the human-normalised score, the minutes to CleanRL's
    10M-step PPO score, and the Atari-5 estimate (``--cells`` makes no difference)."""
    from rltrain.atari_suite import markdown
    data = json.loads(path.read_text())
    return "\n".join([machine(data["meta"]), "", markdown(data)])


TABLES = {"kernels": kernels_table, "rl-triton": rl_triton_table, "trainer": trainer_table, "study": study_table,
          "scaling": scaling_table, "time-to-score": time_to_score_table, "atari-suite": atari_suite_table}


def table_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="results_tables.py", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name in TABLES:
        t = sub.add_parser(name, help=f"the {name} table of a results file")
        t.add_argument("path", help="results file (.json), relative to the repository root or absolute")
        t.add_argument("--cells", choices=["all", "core", "readme", "before"], default="all",
                       help="every cell; core: GAE, V-trace and Retrace; readme: the README's few; "
                            "before: kernels' speedup over a --before-root checkout")
    for name, what in (("update", "rewrite the generated tables in place"), ("check", "exit 1 where a table differs")):
        t = sub.add_parser(name, help=what)
        t.add_argument("docs", nargs="+", help="Markdown files with generated tables")
    return p


def render(args: list[str]) -> str:
    """The output of one table command (``["kernels", PATH, ...]``)."""
    opts = table_parser().parse_args(args)
    if opts.command not in TABLES:
        raise SystemExit(f"results_tables.py: not a table command: {' '.join(args)}")
    path = Path(opts.path) if Path(opts.path).is_absolute() else ROOT / opts.path
    if not path.is_file():
        raise SystemExit(f"results_tables.py {opts.command}: no such results file: {opts.path}")
    return TABLES[opts.command](path, opts.cells)


def regenerated(text: str) -> str:
    """``text`` (a Markdown file) with every generated table rendered again from its results file."""
    out, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        out.append(lines[i])
        marker = MARKER.match(lines[i].strip())
        i += 1
        if marker is None:
            continue
        end = next((j for j in range(i, len(lines)) if lines[j].strip() == END), None)
        if end is None:
            raise SystemExit(f"results_tables.py: '{lines[i - 1].strip()}' has no '{END}' line after it")
        out += render(marker.group(1).split()).split("\n")
        i = end
    return "\n".join(out)


def main(argv=None) -> int:
    opts = table_parser().parse_args(argv)
    if opts.command in TABLES:
        print(render(list(argv if argv is not None else sys.argv[1:])))
        return 0
    stale = []
    for doc in opts.docs:
        path = Path(doc)
        text = path.read_text()
        new = regenerated(text)
        if new != text:
            stale.append(doc)
            if opts.command == "update":
                path.write_text(new)
    if opts.command == "check" and stale:
        print(f"generated tables out of date in: {', '.join(stale)} (python scripts/results_tables.py update ...)")
        return 1
    if opts.command == "update":
        print(f"updated: {', '.join(stale) or 'nothing'}")
    return 0
