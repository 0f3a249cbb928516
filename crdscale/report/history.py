"""The history page: releases side by side (``crdscale report HISTORY_DIR``, :mod:`crdscale.scenario.history`).

:func:`load_history` reads a history directory's completed runs and computes everything the page shows
(:class:`History`: the releases' quantities by cause with 95 % intervals, kube-controller-manager's and
etcd's heap and RSS per CRD, the consecutive differences, the changepoints with the frames that moved and their
upstream links, the seeds' per-CRD numbers beside the measured ones); the notebook ``notebooks/history.py``
starts from it too, and :func:`history_json` is ``crdscale history --show DIR -o json``. :func:`render_history`
writes the page through the one report pipeline (:func:`crdscale.report.render.write_report`): ``findings.md``
with the per-release table, the changepoints and the seeds, the curves as PNG and SVG, and the notebook as HTML.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from crdscale.analysis import history as h
from crdscale.analysis.compare import compare_runs
from crdscale.errors import UsageError
from crdscale.fsutil import check_output_dir
from crdscale.report.figures import FigureSpec, new_figure
from crdscale.report.render import CELL_TIMEOUT_S, ReportContent, default_notebooks_dir, write_report
from crdscale.rundir import read_runs
from crdscale.scenario.history import HISTORY_NOTEBOOK, completed_by_version, open_history, version_of
from crdscale.units import fmt_bytes, is_missing

log = logging.getLogger(__name__)

# Causes drawn per quantity (the largest at any release), besides the total.
TOP_CAUSES = 6


@dataclass
class History:
    """A history directory's numbers.

    Attributes:
        path: the history directory.
        manifest: its ``experiment.json``.
        versions: the releases with at least one completed run, oldest first.
        runs: release -> its completed run directories.
        releases: :func:`crdscale.analysis.history.release_table` (every quantity by cause, per release).
        changes: consecutive releases' differences (:data:`~crdscale.analysis.history.CHANGE_COLUMNS`).
        changepoints: the changes that are changepoints, largest first, with ``upstream`` links.
        missing: cells not completed (name -> status).
        seeds: the seeds' per-CRD numbers beside the measured ones (:func:`~crdscale.analysis.history.seed_comparison`).
    """

    path: Path
    manifest: dict
    versions: list[str]
    runs: dict[str, list[Path]]
    releases: pd.DataFrame
    changes: pd.DataFrame
    changepoints: pd.DataFrame
    missing: dict[str, str] = field(default_factory=dict)
    seeds: pd.DataFrame = field(default_factory=pd.DataFrame)

    def command(self) -> str:
        """The command that made (or would remake) this history."""
        t = self.manifest.get("history") or {}
        parts = ["crdscale history"]
        if t.get("workload") and t["workload"] != "default":
            parts.append(str(t["workload"]))
        parts.append(f"--versions {t.get('spec', ','.join(self.versions))}")
        parts.append(f"--repeats {t.get('repeats', 1)}")
        if t.get("go"):
            parts.append(f"--go {t['go']}")
        parts += [f"--set {k}={v}" for k, v in (self.manifest.get("overrides") or {}).items() if k != "target.go"]
        return " ".join(parts)


def load_history(path: str | Path, *, min_relative: float | None = None, frames: int = 3) -> History:
    """Read a history directory (its completed cells) and compute its tables. UsageError with fewer than two
    completed runs."""
    experiment = open_history(path)
    by_version = completed_by_version(experiment)
    if not by_version:
        raise UsageError(f"{path}: no completed run yet (continue it with: crdscale history --resume {path})")
    labels, dirs, versions = [], [], {}
    for state in experiment.cells:
        if state.status == "completed" and state.run_dir:
            labels.append(state.cell.name)
            dirs.append(experiment.path / state.run_dir)
            versions[state.cell.name] = version_of(state.cell)
    if len(dirs) < 2:
        raise UsageError(
            f"{path}: one completed run; a history's page needs two (another release, or --repeats 2): "
            f"crdscale history --resume {path}"
        )
    runs = read_runs(dirs)
    comparison = compare_runs(runs, labels)
    releases = h.release_table(comparison, versions)
    by_run = dict(zip(labels, runs))
    grouped = {v: [by_run[label] for label in labels if versions[label] == v] for v in by_version}
    changes = h.consecutive_differences(grouped, frames=frames) if len(grouped) > 1 else _empty_changes()
    changes = pd.concat([changes, h.process_differences(releases)], ignore_index=True)
    threshold = (experiment.manifest.get("history") or {}).get("min_relative", h.DEFAULT_MIN_RELATIVE)
    picked = h.changepoints(changes, min_relative=threshold if min_relative is None else min_relative)
    missing = {c.cell.name: c.status for c in experiment.cells if c.status != "completed"}
    return History(
        experiment.path, experiment.manifest, list(by_version), by_version, releases, changes,
        h.upstream_links(picked), missing, h.seed_comparison(releases),
    )  # fmt: skip


def _empty_changes() -> pd.DataFrame:
    return pd.DataFrame(columns=h.CHANGE_COLUMNS)


# --------------------------------------------------------------------------
# Plots (each takes an ax and returns it)
# --------------------------------------------------------------------------


def top_causes(
    releases: pd.DataFrame, quantity: str, n: int = TOP_CAUSES, *, component: str = h.APISERVER
) -> list[str]:
    """The ``n`` causes of ``component``'s ``quantity`` largest at any release, largest first (``total`` left out)."""
    data = releases[
        (releases["quantity"] == quantity) & (releases["cause"] != "total") & (releases["component"] == component)
    ]
    if data.empty:
        return []
    return data.groupby("cause")["value"].max().sort_values(ascending=False).head(n).index.tolist()


def plot_release_curves(
    ax, releases: pd.DataFrame, quantity: str, *, causes: Sequence[str] | None = None, component: str = h.APISERVER
):
    """``quantity`` across releases: one line per cause (the total in black) with its 95 % interval as a band;
    KiB for bytes, milliseconds for CPU seconds."""
    data = releases[(releases["quantity"] == quantity) & (releases["component"] == component)]
    versions = h.release_order(data["version"]) if len(data) else []
    names = ["total", *(causes if causes is not None else top_causes(releases, quantity, component=component))]
    lines = [(cause, data[data["cause"] == cause]) for cause in names]
    _draw_lines(ax, versions, quantity, lines)
    ax.set_title(f"{component}: {quantity} by release (95 % intervals)")
    return ax


def plot_component_curves(ax, releases: pd.DataFrame, quantity: str = h.HEAP_PER_CRD):
    """kube-controller-manager's and etcd's ``quantity`` (heap or RSS per CRD, their totals) across releases,
    one line per component with its 95 % interval as a band; KiB."""
    data = releases[(releases["quantity"] == quantity) & (releases["component"] != h.APISERVER)]
    versions = h.release_order(data["version"]) if len(data) else []
    lines = [(c, data[(data["component"] == c) & (data["cause"] == "total")]) for c in h.COMPONENTS if c != h.APISERVER]
    _draw_lines(ax, versions, quantity, lines, bold=None)
    ax.set_title(f"kube-controller-manager and etcd: {quantity} by release (95 % intervals)")
    return ax


def _draw_lines(ax, versions: list[str], quantity: str, lines, *, bold: str | None = "total") -> None:
    """One line per ``(label, rows)`` (rows of :func:`~crdscale.analysis.history.release_table`) over
    ``versions``, its interval a band; KiB for bytes, MiB for peak and settled RSS, ms for CPU seconds."""
    x = {v: i for i, v in enumerate(versions)}
    unit = h.UNITS.get(quantity, "")
    scale, label = (1024.0, "KiB") if unit == "bytes" else (1e-3, "ms") if unit == "CPU seconds" else (1.0, unit)
    if quantity in (h.RSS_PEAK, h.RSS_SETTLED):
        scale, label = 2.0**20, "MiB"
    for name, rows in lines:
        if rows.empty:
            continue
        xs = [x[v] for v in rows["version"]]
        style = {"color": "black", "linewidth": 2} if name == bold else {}
        line = ax.plot(xs, rows["value"] / scale, marker="o", label=name, **style)[0]
        low, high = rows["low"] / scale, rows["high"] / scale
        if low.notna().any():
            ax.fill_between(xs, low, high, color=line.get_color(), alpha=0.15, linewidth=0)
    ax.set_xticks(range(len(versions)), versions, rotation=45, ha="right")
    ax.set_ylabel(f"{quantity} ({label})")
    ax.grid(alpha=0.3)
    if ax.lines:
        ax.legend(fontsize="small", ncols=2)


# --------------------------------------------------------------------------
# Tables for reading
# --------------------------------------------------------------------------


def fmt_value(value, low, high, unit: str) -> str:
    """``value [low, high]`` in the quantity's unit (CPU seconds as ms, bytes as KiB/MiB/GiB), "—" when missing."""
    if is_missing(value):
        return "—"
    if unit == "CPU seconds":
        text = f"{value * 1e3:.1f} ms"
        bounds = "" if is_missing(low) else f" [{low * 1e3:.1f}, {high * 1e3:.1f}]"
        return text + bounds
    text = fmt_bytes(value)
    return text + ("" if is_missing(low) else f" [{fmt_bytes(low)}, {fmt_bytes(high)}]")


def release_rows(history: History, cause: str = "total") -> pd.DataFrame:
    """One row per release, one column per component and quantity, ``value [low, high]`` as text."""
    wide = h.wide_table(history.releases, cause)
    out = pd.DataFrame(index=wide.index)
    for component, quantities in h.COMPONENTS.items():
        for quantity in quantities:
            name = quantity if component == h.APISERVER else f"{component}: {quantity}"
            parts = [wide[(component, quantity, part)] for part in ("value", "low", "high")]
            out[name] = [fmt_value(v, lo, hi, h.UNITS[quantity]) for v, lo, hi in zip(*parts)]
    out["runs"] = [len(history.runs.get(v, [])) for v in out.index]
    return out


def changepoint_rows(history: History) -> pd.DataFrame:
    """The changepoints for reading: pair, component, quantity, cause, difference with its interval, relative,
    frames, links."""
    rows, named = [], set()
    for r in history.changepoints.to_dict("records"):
        unit = h.UNITS.get(r["quantity"], "bytes")
        component = r.get("component") or h.APISERVER
        pair = (r["older"], r["newer"], component)
        frames = "" if pair in named else (r.get("frames") or "")  # the pair's frames (all causes'), once
        if frames:
            named.add(pair)
        rows.append(
            {
                "releases": f"{r['older']} → {r['newer']}",
                "component": component,
                "quantity": r["quantity"],
                "cause": r["cause"],
                "difference": fmt_value(r["difference"], r["low"], r["high"], unit),
                "relative": "—" if is_missing(r["relative"]) else f"{100 * r['relative']:+.0f} %",
                "frames that moved most": frames,
                "upstream": r.get("upstream") or "",
            }
        )
    return pd.DataFrame(rows)


def seed_rows(history: History) -> pd.DataFrame:
    """The seeds' per-CRD numbers beside the history's, for reading: seed, its release, quantity, its number
    and words, the measured value at the release beside it and at the newest release."""
    rows = []
    for r in history.seeds.to_dict("records"):
        unit = r["unit"]
        rows.append(
            {
                "seed": f"[{r['source']}]({r['url']})",
                "seed's release": r["seed_version"],
                "quantity": r["quantity"] + ("" if r["cause"] == "total" else f" ({r['cause']})"),
                "seed says": f"{fmt_value(r['seed_value'], None, None, unit)}: {r['said']}",
                "measured beside it": f"{r['release']}: {fmt_value(r['value'], r['low'], r['high'], unit)}"
                if r["release"]
                else "—",
                "newest release": f"{r['newest']}: {fmt_value(r['newest_value'], r['newest_low'], r['newest_high'], unit)}"
                if r["newest"]
                else "—",
            }
        )
    return pd.DataFrame(rows)


def _markdown(frame: pd.DataFrame, index: bool = True) -> str:
    if frame.empty:
        return "(none)"
    frame = frame.reset_index() if index else frame
    head = "| " + " | ".join(str(c) for c in frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = ["| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body])


def headline(history: History) -> str:
    """One sentence: the releases, heap per CRD at the first and last, and the largest changepoint."""
    r = history.releases
    heap = r[(r["component"] == h.APISERVER) & (r["quantity"] == h.HEAP_PER_CRD) & (r["cause"] == "total")]
    first, last = history.versions[0], history.versions[-1]
    text = f"{len(history.versions)} release(s) from {first} to {last}"
    values = heap.set_index("version")["value"]
    if first in values and last in values and first != last:
        text += f": heap per served CRD {fmt_bytes(values[first])} on {first}, {fmt_bytes(values[last])} on {last}"
    causes = history.changepoints[history.changepoints["cause"] != "total"]
    if len(causes):
        r = causes.iloc[0]
        text += (
            f"; the largest change by cause: {r['cause']} ({r['quantity']}) {fmt_bytes(r['difference'], signed=True)} "
            f"[{fmt_bytes(r['low'], signed=True)}, {fmt_bytes(r['high'], signed=True)}] from {r['older']} to {r['newer']}"
        )
    elif len(history.versions) > 1:
        text += "; no changepoint (no difference between consecutive releases is both sure and 10 % or more)"
    return text + "."


def history_markdown(history: History, captions: Sequence[tuple[str, str]] = (), report_html: str = "") -> str:
    """``findings.md`` of a history: the command, the releases and how they were chosen, the per-release
    table, the changepoints and the figures."""
    t = history.manifest.get("history") or {}
    lines = [
        f"# crdscale history: {history.manifest.get('name', 'history')}",
        "",
        f"**{headline(history)}**",
        "",
        "```sh",
        history.command(),
        "```",
        "",
    ]
    if history.missing:
        lines += [f"> **Not complete:** {len(history.missing)} cell(s) not completed: "
                  + ", ".join(f"{k} ({v})" for k, v in list(history.missing.items())[:5]), ""]  # fmt: skip
    lines += ["## Releases", ""] + [f"- {c}" for c in t.get("choices", history.versions)] + [""]
    lines += [
        "## Per release (totals, 95 % intervals)",
        "",
        "Heap per CRD and per custom resource from the heap profiles, RSS and CPU per CRD from the served steps' "
        "series, peak and settled RSS over the run; a release's repeats pooled (their mean, the interval from "
        "their spread, never narrower than the runs' own). kube-controller-manager's and etcd's heap and RSS per "
        "CRD come from their own heap profiles and /proc samples at every step (empty for runs that did not "
        "profile them).",
        "",
        _markdown(release_rows(history)),
        "",
        "## Changepoints",
        "",
        f"Consecutive releases whose difference's 95 % interval excludes 0 and is at least "
        f"{100 * float(t.get('min_relative', h.DEFAULT_MIN_RELATIVE)):.0f} % of the older release's value, "
        "with the functions whose heap per CRD moved most in that process's profiles (the newer release's last "
        "served profile against the older's, growth per CRD).",
        "",
        _markdown(changepoint_rows(history), index=False),
        "",
        "## Beside the seeds",
        "",
        "What the seeds quote per CRD for a release, beside the history's measurement at that release (its "
        "minor, else the nearest release the history holds) and at the newest.",
        "",
        _markdown(seed_rows(history), index=False),
        "",
    ]
    for caption, png in captions:
        lines += [f"![{caption}]({png})", "", f"*{caption}*", ""]
    if report_html:
        lines += [f"The whole page: `{report_html}`.", ""]
    return "\n".join(lines)


def history_json(history: History) -> dict:
    """The history's numbers as plain JSON-able data (NaN -> None): ``crdscale history --show DIR -o json``
    and the page's ``findings.json``. ``releases``: every quantity by component, cause and release;
    ``changes``: every consecutive difference; ``changepoints``: those that are; ``seeds``: the seeds'
    numbers beside the measured ones."""

    def records(frame: pd.DataFrame) -> list[dict]:
        return [{k: (None if is_missing(v) else v) for k, v in r.items()} for r in frame.to_dict("records")]

    return {
        "history_dir": str(history.path),
        "command": history.command(),
        "versions": history.versions,
        "missing": history.missing,
        "releases": records(history.releases),
        "changes": records(history.changes),
        "changepoints": records(history.changepoints),
        "seeds": records(history.seeds),
    }


# --------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------

FIGURES = (
    ("heap-per-crd", h.HEAP_PER_CRD),
    ("heap-per-custom-resource", h.HEAP_PER_CR),
    ("rss-per-crd", h.RSS_PER_CRD),
    ("cpu-per-crd", h.CPU_PER_CRD),
    ("peak-rss", h.RSS_PEAK),
    ("settled-rss", h.RSS_SETTLED),
)
# kube-controller-manager's and etcd's totals, one figure per quantity.
COMPONENT_FIGURES = (("components-heap-per-crd", h.HEAP_PER_CRD), ("components-rss-per-crd", h.RSS_PER_CRD))


def history_content(history: History):
    """What the history page says besides its notebook (:class:`crdscale.report.render.ReportContent`)."""
    # lazy: the optional report extra
    import nbformat

    figures = []
    apiserver = history.releases[history.releases["component"] == h.APISERVER]
    for name, quantity in FIGURES:
        if not (apiserver["quantity"] == quantity).any():
            continue
        fig, ax = new_figure(10, 4.5)
        plot_release_curves(ax, history.releases, quantity)
        figures.append(FigureSpec(name, f"{quantity} by release and cause, 95 % intervals", fig))
    others = history.releases[history.releases["component"] != h.APISERVER]
    for name, quantity in COMPONENT_FIGURES:
        if not (others["quantity"] == quantity).any():
            continue
        fig, ax = new_figure(10, 4.5)
        plot_component_curves(ax, history.releases, quantity)
        figures.append(
            FigureSpec(name, f"kube-controller-manager and etcd: {quantity} by release, 95 % intervals", fig)
        )
    title = f"crdscale history: {history.manifest.get('name', 'history')} ({', '.join(history.versions)})"
    first = (
        f"# {title}\n\n**{headline(history)}**\n\n```sh\n{history.command()}\n```\n\n"
        f"## Per release (totals)\n\n{_markdown(release_rows(history))}\n\n"
        f"## Changepoints\n\n{_markdown(changepoint_rows(history), index=False)}\n\n"
        f"## Beside the seeds\n\n{_markdown(seed_rows(history), index=False)}"
    )
    return ReportContent(
        title=title,
        figures=figures,
        findings_md=lambda captions, html: history_markdown(history, captions, html),
        findings_json=history_json(history),
        first_cells=lambda _pngs: [nbformat.v4.new_markdown_cell(first)],
    )


def render_history(
    history_dir: str | Path,
    out_dir: str | Path | None = None,
    *,
    notebooks_dir: str | Path | None = None,
    timeout: int | None = None,
):
    """The history page of ``history_dir`` into ``out_dir`` (default ``HISTORY_DIR/report``): a
    :class:`crdscale.report.render.ReportResult`."""
    history = load_history(history_dir)  # before the kernel starts: what is wrong is said in seconds
    out = check_output_dir(Path(out_dir).resolve() if out_dir else history.path.resolve() / "report")
    notebooks_dir = (Path(notebooks_dir) if notebooks_dir else default_notebooks_dir()).resolve()
    notebook = notebooks_dir / f"{HISTORY_NOTEBOOK}.py"
    if not notebook.is_file():
        raise UsageError(f"notebook {notebook} not found (use --notebooks DIR: the notebooks/ of a crdscale checkout)")
    for cell, status in history.missing.items():
        log.warning(f"cell {cell} not completed ({status}): its release is left out or has fewer runs")
    return write_report(
        out,
        [(notebook, {"run_dir": str(history.path.resolve())})],
        lambda: history_content(history),
        timeout=timeout or CELL_TIMEOUT_S,
    )
