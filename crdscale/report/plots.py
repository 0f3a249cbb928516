"""Plot helpers for the notebooks and reports: each takes a matplotlib ``ax`` and
data already computed (:mod:`crdscale.report.series`, :mod:`crdscale.report.flame`,
:mod:`crdscale.analysis.percrd`), draws, and returns the ``ax``.

Memory is drawn in MiB (bytes per CRD in KiB), time in seconds since the run
started, CPU in cores. Titles say what to look at.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from crdscale.analysis.targets import TOTAL
from crdscale.report.flame import short_name
from crdscale.report.series import MEMORY_LABELS, MIB

KIB = 2**10

# Phase shading behind time series: colour, label.
PHASE_STYLE: dict[str, tuple[str, str]] = {
    "install": ("#f4a261", "installing CRDs"),
    "serve": ("#2a9d8f", "serving (LIST + watch)"),
    "settle": ("#cccccc", "settling"),
    "hold": ("#a8dadc", "holding (served, no changes)"),
}
CRD_COLOR = "#6a4c93"

# One fixed colour per line so figures agree with each other.
SERIES_COLORS: dict[str, str] = {
    "rss": "#d62728",
    "heap_inuse": "#1f77b4",
    "heap_alloc": "#7fb3e0",
    "stack_inuse": "#2ca02c",
    "gc_goal": "#9467bd",
    "idle_retained": "#ff7f0e",
    "heap_plus_stack": "#17becf",
    "rss_minus_heap_stack": "#8c564b",
}


def _style(column: str) -> dict:
    style = {"color": SERIES_COLORS.get(column), "label": MEMORY_LABELS.get(column, column), "lw": 1.6}
    if column == "gc_goal":
        style.update(ls="--", lw=1.2)
    if column == "heap_alloc":
        style.update(lw=1.0)
    return style


def shade_phases(ax, phases: pd.DataFrame, *, legend: bool = True):
    """Shade install/serve/settle intervals (``start_s``, ``end_s``, ``phase``) behind the data."""
    seen = set()
    for row in phases.itertuples(index=False):
        color, label = PHASE_STYLE.get(row.phase, ("#eeeeee", row.phase))
        ax.axvspan(
            row.start_s,
            row.end_s,
            color=color,
            alpha=0.25 if row.phase != "settle" else 0.18,
            lw=0,
            label=None if row.phase in seen or not legend else label,
            zorder=0,
        )
        seen.add(row.phase)
    return ax


def plot_crd_steps(ax, steps: pd.DataFrame):
    """The CRD count over time as a step line on a second y axis sharing ``ax``'s time axis.
    Returns that second axis."""
    twin = ax.twinx()
    twin.step(
        steps["elapsed_s"],
        steps["crds"],
        where="post",
        color=CRD_COLOR,
        lw=2.2,
        alpha=0.85,
        label="CRDs installed (right axis)",
    )
    twin.set_ylabel("CRDs installed", color=CRD_COLOR)
    twin.tick_params(axis="y", colors=CRD_COLOR)
    top = max(1, int(steps["crds"].max())) if len(steps) else 1
    twin.set_ylim(0, top * 1.08)
    return twin


def plot_memory_timeline(
    ax,
    memory: pd.DataFrame,
    columns: Sequence[str] = ("rss", "heap_inuse", "heap_alloc", "stack_inuse", "gc_goal", "idle_retained"),
    *,
    phases: pd.DataFrame | None = None,
    steps: pd.DataFrame | None = None,
    title: str = "kube-apiserver memory over time",
):
    """Memory series (bytes) against ``elapsed_s``, in MiB; optional phase shading and CRD step line.
    Puts one legend for everything below the axes."""
    if phases is not None:
        shade_phases(ax, phases)
    for col in columns:
        if col in memory:
            ax.plot(memory["elapsed_s"], memory[col] / MIB, **_style(col))
    _time_axes(ax, ylabel="MiB", title=title)
    handles, labels = ax.get_legend_handles_labels()
    if steps is not None and len(steps):
        twin = plot_crd_steps(ax, steps)
        h2, l2 = twin.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(0, -0.14), ncol=3, fontsize=8, frameon=False)
    return ax


def plot_against_crds(
    ax,
    points: pd.DataFrame,
    columns: Sequence[str] = ("rss", "heap_inuse", "heap_alloc", "stack_inuse", "gc_goal", "idle_retained"),
    *,
    phase: str = "served",
    title: str = "Memory at the end of each step against CRDs installed",
):
    """Memory columns (bytes) of :func:`crdscale.report.series.at_marks` rows against ``crds``, in MiB.
    Rows of other phases than ``phase`` are drawn as hollow markers (the baseline at 0 counts for all)."""
    mine = points[(points["phase"] == phase) | (points["crds"] == 0)]
    others = points[(points["phase"] != phase) & (points["crds"] != 0)]
    for col in columns:
        if col not in points:
            continue
        style = _style(col)
        ax.plot(mine["crds"], mine[col] / MIB, marker="o", ms=5, **style)
        if len(others):
            ax.plot(others["crds"], others[col] / MIB, ls="none", marker="o", ms=5, mfc="none", color=style["color"])
    return _crd_axes(ax, title=title)


def _crd_axes(ax, *, title: str):
    """Axes of memory (MiB, from 0) against CRDs installed, with grid and legend."""
    ax.set_xlabel("CRDs installed")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return ax


def plot_gap(
    ax, memory: pd.DataFrame, *, phases: pd.DataFrame | None = None, title: str = "RSS beyond heap in use + stacks"
):
    """RSS, heap in use + stacks, and the gap between them filled; the runtime's retained
    idle heap (idle - released) as a dashed line, for comparison with the gap."""
    if phases is not None:
        shade_phases(ax, phases, legend=False)
    t = memory["elapsed_s"]
    if {"rss", "heap_plus_stack"} <= set(memory):
        ax.plot(t, memory["rss"] / MIB, **_style("rss"))
        ax.plot(t, memory["heap_plus_stack"] / MIB, **_style("heap_plus_stack"))
        ax.fill_between(
            t,
            memory["heap_plus_stack"] / MIB,
            memory["rss"] / MIB,
            color=SERIES_COLORS["rss_minus_heap_stack"],
            alpha=0.25,
            label=MEMORY_LABELS["rss_minus_heap_stack"],
        )
    if "idle_retained" in memory:
        ax.plot(
            t, memory["idle_retained"] / MIB, ls="--", **{k: v for k, v in _style("idle_retained").items() if k != "ls"}
        )
    _time_axes(ax, ylabel="MiB", title=title)
    ax.legend(fontsize=8, loc="upper left")
    return ax


def plot_activity(
    ax,
    activity: pd.DataFrame,
    column: str,
    *,
    ylabel: str,
    title: str,
    phases: pd.DataFrame | None = None,
    color: str = "#444444",
    scale: float = 1.0,
):
    """One column of :func:`crdscale.report.series.activity_frame` against time (values times ``scale``)."""
    if phases is not None:
        shade_phases(ax, phases, legend=False)
    if column in activity:
        ax.plot(activity["elapsed_s"], activity[column] * scale, color=color, lw=1.4)
    _time_axes(ax, ylabel=ylabel, title=title, fontsize=10)
    return ax


def _time_axes(ax, *, ylabel: str, title: str, fontsize: float | None = None) -> None:
    """Axes of a time plot: seconds since collection started, values from zero, light grid."""
    ax.set_xlabel("time since metrics collection started (s)")
    ax.set_xlim(left=0)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.set_title(title, **({} if fontsize is None else {"fontsize": fontsize}))
    ax.grid(alpha=0.3)


def cause_colors(causes: Sequence[str]) -> dict[str, str]:
    """A stable colour per cause (``other`` grey), in the given order."""
    import matplotlib  # lazy: only when drawing

    palette = list(matplotlib.colormaps["tab20"].colors)
    out, i = {}, 0
    for cause in causes:
        if cause == "other":
            out[cause] = "#bbbbbb"
        else:
            out[cause] = matplotlib.colors.to_hex(palette[(2 * i) % 20 + (2 * i) // 20 % 2])
            i += 1
    return out


def cause_palette(fits: pd.DataFrame, phase: str = "served", metric: str = "bytes") -> dict[str, str]:
    """Colours by cause for one run: causes ordered by per-CRD cost in ``phase`` (biggest first),
    so every figure of the run gives a cause the same colour."""
    sel = fits[(fits["phase"] == phase) & (fits["metric"] == metric) & (fits["cause"] != TOTAL)]
    order = list(sel.sort_values("per_crd", ascending=False, kind="stable")["cause"])
    rest = [c for c in dict.fromkeys(fits["cause"]) if c not in order and c != TOTAL]
    return cause_colors(order + rest)


def plot_cause_stack(
    ax,
    points: pd.DataFrame,
    *,
    phase: str = "served",
    metric: str = "bytes",
    order: Sequence[str] | None = None,
    colors: Mapping[str, str] | None = None,
    title: str = "Heap in use by cause against CRDs installed",
):
    """Stacked area of heap in use by cause (``crdscale.analysis.percrd`` points) against CRDs, in MiB.
    ``order``: causes bottom to top (default: largest at the last count first); zero causes left out."""
    data = points[(points["metric"] == metric) & (points["cause"] != TOTAL)]
    data = data[(data["phase"] == phase) | (data["crds"] == 0)]
    table = data.pivot_table(index="crds", columns="cause", values="value", aggfunc="last").sort_index().fillna(0)
    if order is None:
        order = list(table.iloc[-1].sort_values(ascending=False).index) if len(table) else []
        order = [c for c in order if c != "other"] + (["other"] if "other" in order else [])
    order = [c for c in order if c in table and table[c].abs().sum() > 0]
    colors = dict(colors or cause_colors(order))
    scale = MIB if metric == "bytes" else 1
    ax.stackplot(
        table.index, *[table[c] / scale for c in order], labels=order, colors=[colors.get(c) for c in order], alpha=0.9
    )
    ax.set_xlabel("CRDs installed")
    ax.set_ylabel("heap in use (MiB)" if metric == "bytes" else "objects in use")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return ax


def plot_per_crd_bars(
    ax,
    fits: pd.DataFrame,
    *,
    phase: str = "served",
    metric: str = "bytes",
    colors: Mapping[str, str] | None = None,
    min_share: float = 0.0,
    title: str = "Heap per CRD by cause (95% CI)",
):
    """Horizontal bars of ``per_crd`` by cause with ``per_crd_low``/``per_crd_high`` error bars,
    KiB per CRD (objects per CRD for ``metric="objects"``); biggest on top, total left out."""
    data = fits[(fits["phase"] == phase) & (fits["metric"] == metric) & (fits["cause"] != TOTAL)]
    data = data[data["per_crd"].abs() > 0]
    if min_share > 0:
        data = data[(data["share"].abs() >= min_share) | (data["cause"] == "other")]
    data = data.sort_values("per_crd")
    scale = KIB if metric == "bytes" else 1
    colors = dict(colors or cause_colors(list(data["cause"][::-1])))
    y = np.arange(len(data))
    value = data["per_crd"].to_numpy() / scale
    low = data["per_crd_low"].to_numpy() / scale
    high = data["per_crd_high"].to_numpy() / scale
    err = np.vstack([np.nan_to_num(value - low), np.nan_to_num(high - value)])
    ax.barh(
        y,
        value,
        xerr=err,
        color=[colors.get(c, "#888888") for c in data["cause"]],
        capsize=3,
        error_kw={"lw": 1, "ecolor": "#333333"},
    )
    ax.set_yticks(y, data["cause"])
    ax.axvline(0, color="#333333", lw=0.8)
    ax.set_xlabel("KiB per CRD" if metric == "bytes" else "objects per CRD")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return ax


def plot_top_growth(ax, growth: pd.DataFrame, *, n: int = 15, title: str = "Functions whose heap grew the most"):
    """Horizontal bars of ``flat`` (bytes, a ``pprof.diff`` table) for the ``n`` biggest growers, in MiB."""
    data = growth.sort_values("flat", ascending=False).head(n).iloc[::-1]
    ax.barh(np.arange(len(data)), data["flat"] / MIB, color="#1f77b4")

    ax.set_yticks(np.arange(len(data)), [short_name(n)[:60] for n in data["name"]], fontsize=7)
    ax.set_xlabel("heap in use grown between first and last profile (MiB)")
    ax.set_title(title)
    ax.grid(axis="x", alpha=0.3)
    return ax


def plot_icicle(
    ax,
    rects: pd.DataFrame,
    *,
    colors: Mapping[str, str] | None = None,
    unit_scale: float = MIB,
    unit: str = "MiB",
    min_label_width: float = 0.04,
    title: str = "Heap in use of the last profile",
):
    """Draw an icicle (root on top, callees below) from :func:`crdscale.report.flame.icicle_layout`;
    colour by cause; frames wide enough get a label."""
    from matplotlib.patches import Patch, Rectangle  # lazy: only when drawing

    causes = list(dict.fromkeys(rects["cause"])) if len(rects) else []
    colors = dict(colors or cause_colors(causes))
    max_depth = int(rects["depth"].max()) + 1 if len(rects) else 1
    for r in rects.itertuples(index=False):
        ax.add_patch(
            Rectangle(
                (r.x0, -r.depth - 1), r.width, 0.95, facecolor=colors.get(r.cause, "#dddddd"), edgecolor="white", lw=0.3
            )
        )
        if r.width >= min_label_width:
            chars = int(r.width * 180)
            text = r.short_name if len(r.short_name) <= chars else r.short_name[: max(chars - 1, 1)] + "…"
            ax.text(r.x0 + 0.003, -r.depth - 0.52, text, fontsize=6, va="center", ha="left", clip_on=True)
    ax.set_xlim(0, 1)
    ax.set_ylim(-max_depth - 0.2, 0.1)
    ax.set_yticks([])
    total = rects.attrs.get("total")
    ax.set_xlabel("share of heap in use" + (f" (total {total / unit_scale:,.0f} {unit})" if total else ""))
    ax.set_title(title)
    handles = [Patch(color=colors[c], label=c) for c in causes if c in colors]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return ax


# --------------------------------------------------------------------------
# Comparing runs (crdscale.report.compare)
# --------------------------------------------------------------------------

RUN_STYLES = ("-", "--", ":", "-.")


def plot_runs_against_crds(
    ax,
    points: pd.DataFrame,
    metrics: Sequence[str] = ("rss_bytes", "heap_inuse_bytes"),
    *,
    phase: str = "served",
    title: str = "Memory against CRDs, run by run",
):
    """Series points of several runs (``run, crds, phase, metric, value``; bytes) overlaid in MiB:
    one colour per metric, one line style per run (the baseline at 0 CRDs counts for every phase)."""
    colors = {"rss_bytes": SERIES_COLORS["rss"], "heap_inuse_bytes": SERIES_COLORS["heap_inuse"]}
    names = {"rss_bytes": "RSS", "heap_inuse_bytes": "heap in use"}
    for i, run in enumerate(dict.fromkeys(points["run"]) if len(points) else []):
        mine = points[(points["run"] == run) & ((points["phase"] == phase) | (points["crds"] == 0))]
        for metric in metrics:
            sel = mine[mine["metric"] == metric].sort_values("crds")
            if len(sel):
                ax.plot(
                    sel["crds"],
                    sel["value"] / MIB,
                    marker="o",
                    ms=4,
                    color=colors.get(metric),
                    ls=RUN_STYLES[i % len(RUN_STYLES)],
                    label=f"{names.get(metric, metric)}, {run}",
                )
    return _crd_axes(ax, title=title)


def plot_difference_bars(
    ax,
    joint: pd.DataFrame,
    *,
    metric: str = "bytes",
    n: int = 10,
    title: str = "Heap per CRD: difference from the reference run, by cause",
):
    """Horizontal bars of :func:`crdscale.analysis.compare.per_crd_differences` (KiB per CRD) with
    their 95% intervals, the ``n`` largest |differences| of each run; total included."""
    sel = joint[joint["metric"] == metric]
    sel = sel.assign(_abs=sel["difference"].abs()).sort_values("_abs", ascending=False, kind="stable")
    sel = sel.groupby("run", sort=False).head(n).iloc[::-1]
    labels = [f"{c} ({r})" if sel["run"].nunique() > 1 else c for c, r in zip(sel["cause"], sel["run"])]
    y = np.arange(len(sel))
    err = (
        np.vstack(
            [
                (sel["difference"] - sel["difference_low"]).to_numpy(),
                (sel["difference_high"] - sel["difference"]).to_numpy(),
            ]
        )
        / KIB
    )
    colors = cause_colors(list(sel["cause"]))
    ax.barh(y, sel["difference"] / KIB, xerr=np.nan_to_num(err), color=[colors.get(c) for c in sel["cause"]], capsize=3)
    ax.set_yticks(y, labels, fontsize=8)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel(f"KiB per CRD, run minus {sel['reference'].iloc[0] if len(sel) else 'reference'}")
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="x")
    return ax


def plot_pair_differences(ax, pairs: pd.DataFrame, *, title: str = "Each pair's difference, changed minus base"):
    """One point per pair of :func:`crdscale.report.ab.pair_differences` (KiB; marked by the side that ran
    first) and their mean as a line: how far apart the pairs are is what the pooled interval is made of."""
    unit = pairs.attrs.get("unit", "bytes per CRD").replace("bytes", "KiB")
    for first, marker in (("base", "o"), ("changed", "s")):
        sel = pairs[pairs["first"] == first]
        ax.scatter(sel["pair"], sel["difference"] / KIB, marker=marker, color="#d62728", label=f"{first} ran first")
    if len(pairs):
        ax.axhline(pairs["difference"].mean() / KIB, color="#d62728", lw=1, ls="--", label="mean of the pairs")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xticks(list(pairs["pair"]))
    ax.set_xlabel("pair")
    ax.set_ylabel(unit)
    ax.set_title(title)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return ax
