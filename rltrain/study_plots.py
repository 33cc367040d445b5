"""The speedup study's figures (matplotlib, PNG, no display needed), from its result records
(:func:`rltrain.study.summarize` plus ``point``):

* ``phases.png``: each backend's median iteration as stacked phases, one panel per point;
* ``measured_vs_predicted.png``: the measured end-to-end speedup (median, IQR bars) against Amdahl's
  prediction, with the line y = x;
* ``speedup_vs_share.png``: the measured speedup against the baseline's share ``s`` of its
  iteration, with Amdahl's curves ``1 / ((1 - s) + s / k)`` for each backend's measured ``k`` (its
  median over the points).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Dict, List, Mapping, Sequence

import numpy as np

from rltrain.study import stacked_phases
from rltrain.timers import amdahl_speedup

__all__ = ["plot_all"]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ok(records: Sequence[Mapping]) -> List[Mapping]:
    return [r for r in records if "error" not in r]


def _colors(names: Sequence[str]) -> Dict[str, object]:
    cmap = _pyplot().get_cmap("tab10" if len(names) <= 10 else "tab20")
    return {n: cmap(i % cmap.N) for i, n in enumerate(names)}


def plot_phases(records: Sequence[Mapping], path: Path) -> Path:
    plt = _pyplot()
    points: Dict[str, List[Mapping]] = {}
    for r in _ok(records):
        points.setdefault(r["point"], []).append(r)
    phase_names = list(dict.fromkeys(k for rs in points.values() for r in rs for k in stacked_phases(r["phases_s"])))
    colors = _colors(phase_names + ["other"])
    cols = min(3, max(1, len(points)))
    rows = max(1, math.ceil(len(points) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    for ax in axes.flat[len(points):]:
        ax.axis("off")
    for ax, (point, rs) in zip(axes.flat, points.items()):
        x = np.arange(len(rs))
        bottom = np.zeros(len(rs))
        for phase in phase_names + ["other"]:
            ms = []
            for r in rs:
                phases = stacked_phases(r["phases_s"])
                value = phases.get(phase, 0.0) if phase != "other" else max(r["iteration_s"] - sum(phases.values()), 0.0)
                ms.append(1e3 * value)
            ax.bar(x, ms, bottom=bottom, color=colors[phase], label=phase, width=0.7)
            bottom += np.asarray(ms)
        ax.set_xticks(x, [r["backend"] for r in rs], fontsize=8)
        ax.set_ylabel("ms per iteration (median)")
        ax.set_title(point, fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if labels:
        fig.legend(handles, labels, loc="lower center", ncol=min(6, len(labels)), fontsize=8)
    fig.tight_layout(rect=(0, 0.06 + 0.02 * (len(labels) // 6), 1, 1))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_measured_vs_predicted(records: Sequence[Mapping], path: Path) -> Path:
    plt = _pyplot()
    rs = [r for r in _ok(records) if r["backend"] != r["baseline"]]
    backends = list(dict.fromkeys(r["backend"] for r in rs))
    colors = _colors(backends)
    fig, ax = plt.subplots(figsize=(6, 5.5))
    for b in backends:
        pts = [r for r in rs if r["backend"] == b and math.isfinite(r["predicted_speedup"])]
        if not pts:
            continue
        y = np.array([r["measured_speedup"] for r in pts])
        err = np.array([[r["measured_speedup"] - r["measured_q25"] for r in pts],
                        [r["measured_q75"] - r["measured_speedup"] for r in pts]])
        ax.errorbar([r["predicted_speedup"] for r in pts], y, yerr=np.clip(err, 0, None), fmt="o", ms=5,
                    capsize=3, color=colors[b], label=f"{b} vs {pts[0]['baseline']}")
    values = [v for r in rs for v in (r["predicted_speedup"], r["measured_speedup"]) if math.isfinite(v) and v > 0]
    lo, hi = (min(values + [1.0]) / 1.1, max(values + [1.0]) * 1.1) if values else (0.5, 2.0)
    ax.plot([lo, hi], [lo, hi], color="grey", lw=1, label="y = x")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("Amdahl prediction 1 / ((1 - s) + s / k)")
    ax.set_ylabel("measured end-to-end speedup (median, IQR)")
    ax.set_title("End-to-end speedup: measured against predicted")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_speedup_vs_share(records: Sequence[Mapping], path: Path) -> Path:
    plt = _pyplot()
    rs = [r for r in _ok(records) if r["backend"] != r["baseline"]]
    backends = list(dict.fromkeys(r["backend"] for r in rs))
    colors = _colors(backends)
    fig, ax = plt.subplots(figsize=(6.5, 5))
    s = np.linspace(0.0, 0.99, 200)
    for b in backends:
        pts = [r for r in rs if r["backend"] == b and math.isfinite(r["share"])]
        if not pts:
            continue
        ax.scatter([r["share"] for r in pts], [r["measured_speedup"] for r in pts], color=colors[b], s=25,
                   label=f"{b} (measured)", zorder=3)
        ks = [r["kernel_speedup"] for r in pts if r["kernel_speedup"] > 0]
        if ks:
            k = float(np.median(ks))
            ax.plot(s, [amdahl_speedup(x, k) for x in s], color=colors[b], lw=1, alpha=0.7,
                    label=f"{b}: Amdahl, k = {k:.3g} (median)")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("baseline's credit-assignment share s of its iteration")
    ax.set_ylabel("end-to-end speedup over the baseline")
    ax.set_yscale("log")
    ax.set_xlim(0, 1)
    ax.set_title("Speedup against share (Amdahl's law)")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_all(records: Sequence[Mapping], out_dir: Path) -> List[Path]:
    """The three figures (module docstring) in ``out_dir``; returns their paths."""
    out_dir = Path(out_dir)
    return [plot_phases(records, out_dir / "phases.png"),
            plot_measured_vs_predicted(records, out_dir / "measured_vs_predicted.png"),
            plot_speedup_vs_share(records, out_dir / "speedup_vs_share.png")]
