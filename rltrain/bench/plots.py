"""Plots of a kernels benchmark run (``scripts/bench_kernels.py``): the fused kernels' speedup over each
baseline vs T, one line per N, one PNG per estimator (``<results name>_speedup_<estimator>.png``, one
panel per baseline; [N, T] layout dashed, bf16 dotted). Each point is the ratio of device-only times
(CUDA graphs) where both implementations have one, else of do_bench times (:func:`speedup`): at short
shapes do_bench also counts the host's launch."""

from __future__ import annotations

from pathlib import Path

BASELINES = ("sequential", "compile", "loop")


def speedup(row: dict, base: str):
    """The fused row's speedup over baseline ``base``: on device-only times where the run measured
    both (``graph_speedup_vs_<base>``), else on do_bench times; ``None`` without either."""
    return row.get(f"graph_speedup_vs_{base}") or row.get(f"speedup_vs_{base}")


def plot_all(rows: list[dict], out: Path, prefix: str = "", estimators=None) -> list[Path]:
    """Write the plots of ``rows`` (a results file's) into folder ``out`` as
    ``<prefix>_speedup_<estimator>.png``, for ``estimators`` (default: every one in ``rows``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    written = []
    fused = [r for r in rows if r.get("impl") == "triton" and r.get("status") == "ok"]
    for est in dict.fromkeys(r["estimator"] for r in fused):
        if estimators is not None and est not in estimators:
            continue
        ers = [r for r in fused if r["estimator"] == est]
        fig, axes = plt.subplots(1, len(BASELINES), figsize=(5 * len(BASELINES), 4), squeeze=False)
        Ns = sorted({r["N"] for r in ers})
        cmap = plt.get_cmap("viridis")
        for ax, base in zip(axes[0], BASELINES):
            for i, N in enumerate(Ns):
                for layout in ("tn", "nt"):
                    for dtype in ("f32", "bf16"):
                        pts = sorted((r["T"], speedup(r, base)) for r in ers
                                     if r["N"] == N and r["layout"] == layout and r["dtype"] == dtype
                                     and speedup(r, base))
                        if not pts:
                            continue
                        style = "-" if layout == "tn" else "--"
                        style = ":" if dtype == "bf16" else style
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", ms=3,
                                color=cmap(i / max(1, len(Ns) - 1)),
                                label=f"N={N}" + ("" if layout == "tn" else " [N,T]") + ("" if dtype == "f32" else " bf16"))
            ax.axhline(1.0, color="grey", lw=0.8)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("T (time steps)")
            ax.set_ylabel(f"fused speedup over {base}\n(device time where both have one)")
            ax.set_title(f"{est}: vs {base}")
            ax.grid(True, which="both", alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / (f"{prefix}_speedup_{est}.png" if prefix else f"speedup_{est}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
