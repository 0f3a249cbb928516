"""The report's standard figures, composed from :mod:`crdscale.report.plots`.

Each function takes computed data and returns a matplotlib ``Figure`` (the
notebooks show them; ``crdscale report`` also saves them as PNG and SVG next
to ``findings.md``). :func:`standard_figures` builds them all for one run.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from crdscale.analysis.targets import TOTAL
from crdscale.report import plots, series

MEMORY_LINES = ("rss", "heap_inuse", "heap_alloc", "stack_inuse", "gc_goal", "idle_retained")


def run_label(run) -> str:
    """What a figure's title names so that it can be pasted alone: ``kube-apiserver v1.37.1, 160 CRDs``
    (the version from the run's manifest, the most CRDs a heap profile saw)."""
    version = run.manifest.versions.kube_apiserver
    profiles = run.heap_profiles()
    crds = int(profiles["crds"].max()) if len(profiles) else None
    parts = [f"kube-apiserver {version}" if version else "kube-apiserver"]
    if crds is not None:
        parts.append(f"{crds} CRDs")
    return ", ".join(parts)


def _titled(title: str, label: str) -> str:
    return f"{title} ({label})" if label else title


def new_figure(width: float = 11, height: float = 4.5, **subplots):
    """A figure with a constrained layout (matplotlib imported lazily)."""
    import matplotlib.pyplot as plt  # lazy: pyplot (~0.3 s) only when drawing

    return plt.subplots(figsize=(width, height), layout="constrained", **subplots)


def memory_over_time_figure(
    memory: pd.DataFrame,
    phases: pd.DataFrame,
    steps: pd.DataFrame,
    *,
    title: str = "kube-apiserver memory while CRDs are installed",
    label: str = "",
):
    """Memory series over time, phases shaded, CRD count as a step line on the right axis; ``label``
    (:func:`run_label`) goes into the title."""
    fig, ax = new_figure(11, 5)
    plots.plot_memory_timeline(ax, memory, MEMORY_LINES, phases=phases, steps=steps, title=_titled(title, label))
    return fig


def memory_vs_crds_figure(marks: pd.DataFrame, *, phase: str = "served", label: str = ""):
    """Memory series at each profile (end of each step) against the number of CRDs."""
    fig, ax = new_figure(8, 4.5)
    plots.plot_against_crds(
        ax,
        marks,
        MEMORY_LINES,
        phase=phase,
        title=_titled("Memory against CRDs installed (filled: after serving, hollow: just installed)", label),
    )
    return fig


def heap_by_cause_figure(points: pd.DataFrame, fits: pd.DataFrame, *, phase: str = "served", label: str = ""):
    """Left: stacked heap by cause against CRDs. Right: bytes per CRD by cause with 95% CIs."""
    order = list(
        fits[(fits["phase"] == phase) & (fits["metric"] == "bytes") & (fits["cause"] != TOTAL)].sort_values(
            "per_crd", ascending=False
        )["cause"]
    )
    colors = plots.cause_palette(fits, phase)
    fig, (left, right) = new_figure(13, 5, ncols=2, width_ratios=[1.25, 1])
    plots.plot_cause_stack(
        left,
        points,
        phase=phase,
        order=[c for c in order if c != "other"] + ["other"],
        colors=colors,
        title="Heap in use by cause: what grows with CRDs",
    )
    plots.plot_per_crd_bars(right, fits, phase=phase, colors=colors, title="Heap per CRD by cause (KiB, 95% CI)")
    if label:
        fig.suptitle(label)
    return fig


def headline_figure(
    memory: pd.DataFrame,
    phases: pd.DataFrame,
    steps: pd.DataFrame,
    fits: pd.DataFrame,
    *,
    phase: str = "served",
    label: str = "",
):
    """The report's first figure: how memory grew over the run (left) and what a CRD costs, by cause (right)."""
    fig, (left, right) = new_figure(14, 5.2, ncols=2, width_ratios=[1.5, 1])
    plots.plot_memory_timeline(
        left,
        memory,
        ("rss", "heap_inuse", "heap_alloc", "stack_inuse"),
        phases=phases,
        steps=steps,
        title="How kube-apiserver memory grew as CRDs were installed",
    )
    plots.plot_per_crd_bars(right, fits, phase=phase, title="What one CRD costs: heap by cause (95% CI)")
    if label:  # pasted alone, the figure still says what was measured
        fig.suptitle(label, fontweight="bold")
    return fig


@dataclass
class FigureSpec:
    """A saved figure: file stem and caption."""

    name: str
    caption: str
    figure: object


def standard_figures(data, analysis) -> list[FigureSpec]:
    """The figures of ``findings.md`` for one run.

    ``data``: the run (:class:`crdscale.rundir.Run`); ``analysis``:
    :class:`crdscale.analysis.run.RunAnalysis`. Figures whose input is
    missing (no metrics series) are left out.
    """
    start = data.start
    memory = series.memory_frame(data.series, start)
    phases = series.phase_intervals(data.events, start)
    steps = series.crd_count_steps(data.events, start)
    label = run_label(data)
    out = []
    if len(memory):
        out.append(
            FigureSpec(
                "headline",
                "How memory grew and what one CRD costs",
                headline_figure(memory, phases, steps, analysis.fits, label=label),
            )
        )
        out.append(
            FigureSpec(
                "memory-over-time",
                "kube-apiserver memory over time (phases shaded, CRDs on the right axis)",
                memory_over_time_figure(memory, phases, steps, label=label),
            )
        )
        marks = series.at_marks(memory, data.profile_marks())
        if len(marks):
            out.append(
                FigureSpec("memory-vs-crds", "Memory against CRDs installed", memory_vs_crds_figure(marks, label=label))
            )
    out.append(
        FigureSpec(
            "heap-by-cause",
            "Heap in use by cause and bytes per CRD by cause (95% CI)",
            heap_by_cause_figure(analysis.points, analysis.fits, label=label),
        )
    )
    return out
