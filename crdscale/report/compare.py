"""Compare runs: read them, compute the differences, write the comparison report.

:func:`compare_runs` is what notebooks call: it reads run directories (through
:func:`crdscale.rundir.read_run`) and returns a :class:`Comparison` of plain
DataFrames computed by :mod:`crdscale.analysis.compare`. :func:`render_comparison`
executes ``notebooks/compare.py`` on the runs and writes, like
:func:`crdscale.report.render.render_report`::

    findings.md          headline = the delta, both runs' provenance, the differences table, figures
    findings.json        the same numbers, unformatted
    *.png, *.svg         figures
    report.html, report-nocode.html, notebooks/compare.ipynb
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from crdscale.analysis import compare as C
from crdscale.analysis.percrd import TOTAL, fit_per_crd, fit_series_per_crd, profile_points
from crdscale.analysis.pprof import diff
from crdscale.analysis.process import points_by_source, process_source
from crdscale.errors import UsageError
from crdscale.report.findings import fmt_bytes, fmt_interval, provenance, warnings_markdown

COMPARE_NOTEBOOK = "compare"
PROFILE_DIFF_ROWS = 25


@dataclass
class Comparison:
    """Runs side by side; every table has a ``run`` column holding the run's label.

    Attributes:
        labels: one short label per run (what differs: version, cell, directory).
        reference: the label the differences are taken against (the first run).
        run_dirs: the run directories, in label order.
        manifests: label -> manifest.
        warnings: sentences about runs that should not be compared as they are
            (different CRD sets, runs not completed).
        points: heap by cause at each profile (:func:`~crdscale.analysis.percrd.profile_points`).
        per_crd: each run's own per-CRD fits (:func:`~crdscale.analysis.percrd.fit_per_crd`).
        joint: heap bytes per CRD by cause, difference to the reference with its
            95% CI of the difference (Welch, each run's own variance: :func:`~crdscale.analysis.compare.per_crd_differences`).
        series_points: RSS, heap in use, goroutines, fds and CPU seconds at each profile mark.
        series_fits: each run's own per-CRD slopes of those series
            (:func:`~crdscale.analysis.percrd.fit_series_per_crd`).
        series_joint: the same differences on those series (per CRD: bytes, goroutines, fds, CPU s).
        end: each series at the start, the end and its peak (:func:`~crdscale.analysis.compare.series_end_values`).
        establish: seconds until each step's CRDs were Established.
        profile_diff: last served heap profile of each run minus the reference's
            (``go tool pprof -diff_base``), with ``flat_per_crd``/``cum_per_crd``: the difference of
            the runs' growths from their first profile, in bytes per CRD (baselines cancel, as in the fits).
        provenance: label -> what was run on what (``crdscale.report.findings.provenance`` plus binaries).
        replicates: label -> configuration, when a configuration was run more than once (a matrix's
            ``repeat``): ``joint`` and ``series_joint`` then compare configurations (the mean of their
            repeats, the interval from their spread), and ``reference`` is a configuration.
        repeat_spread: per configuration and cause, the repeats' spread against one run's interval
            (:func:`~crdscale.analysis.compare.replicate_spread`); empty without repeats.
    """

    labels: list[str]
    reference: str
    run_dirs: list[Path]
    manifests: dict[str, dict]
    warnings: list[str]
    points: pd.DataFrame
    per_crd: pd.DataFrame
    joint: pd.DataFrame
    series_points: pd.DataFrame
    series_fits: pd.DataFrame
    series_joint: pd.DataFrame
    end: pd.DataFrame
    establish: pd.DataFrame
    profile_diff: pd.DataFrame
    provenance: dict[str, dict[str, str]] = field(default_factory=dict)
    replicates: dict[str, str] = field(default_factory=dict)
    repeat_spread: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def compared(self) -> list[str]:
        """What is compared against the reference: configurations with repeats, else runs."""
        names = [self.replicates.get(label, label) for label in self.labels]
        return [n for n in dict.fromkeys(names) if n != self.reference]

    def first_run(self, name: str) -> str:
        """The first run label of a configuration (the label itself for a single run)."""
        return next((label for label in self.labels if self.replicates.get(label, label) == name), name)


# A matrix cell's label ends in ",repeat=N" when its configuration was repeated (crdscale.scenario.matrix).
_REPEAT = re.compile(r",?repeat=\d+$")


def configurations(labels: Sequence[str]) -> dict[str, str]:
    """label -> configuration for runs that repeat a configuration (labels ending in ``repeat=N``);
    empty when no configuration has two runs."""
    config = {label: _REPEAT.sub("", label) or label for label in labels}
    counts = pd.Series(list(config.values())).value_counts()
    return config if (counts > 1).any() else {}


def run_labels(manifests: Sequence[dict], names: Sequence[str]) -> list[str]:
    """A short distinct label per run: the experiment cell, else the kube-apiserver version
    (plus GOGC/GOMEMLIMIT/flags when they differ), else the directory name."""

    def candidates(m: dict, name: str) -> list[str]:
        scenario = m.get("scenario") or {}
        target = scenario.get("target") or {}
        version = (m.get("versions") or {}).get("kube-apiserver") or (
            f"v{target['kube_version'].lstrip('v')}" if target.get("kube_version") else None
        )
        env = ",".join(f"{k}={v}" for k, v in sorted((target.get("env") or {}).items()))
        flags = " ".join(target.get("apiserver_flags") or [])
        cell = (scenario.get("experiment") or {}).get("cell")
        detailed = " ".join(p for p in (version, env, flags) if p)
        return [c for c in (cell, version, detailed, name) if c]

    options = [candidates(m, n) for m, n in zip(manifests, names)]
    for depth in range(max(len(o) for o in options)):
        labels = [o[min(depth, len(o) - 1)] for o in options]
        if len(set(labels)) == len(labels):
            return labels
    return [f"{i + 1}:{n}" for i, n in enumerate(names)]


def _served(heap: pd.DataFrame) -> pd.DataFrame:
    """Heap profiles taken at the end of a step (after serving)."""
    return heap[heap["phase"].isna() | heap["phase"].isin(["", "served"])]


def compare_runs(
    run_dirs: Sequence[str | Path], labels: Sequence[str] | None = None, *, confidence: float = 0.95
) -> Comparison:
    """Read two or more run directories and compare them against the first.

    Raises UsageError when fewer than two runs are given, a directory is not a
    run, or a run has heap profiles at fewer than two CRD counts.
    """
    from crdscale.rundir import read_run

    if len(run_dirs) < 2:
        raise UsageError("compare needs two or more run directories")
    runs = [read_run(p) for p in run_dirs]
    same_run(runs)
    manifests = [r.manifest or {} for r in runs]
    labels = list(labels) if labels else run_labels(manifests, [Path(r.path).name for r in runs])
    if len(labels) != len(runs) or len(set(labels)) != len(labels):
        raise UsageError("give one distinct label per run")

    points, spoints, ends, establish, per_crd, last_served = {}, {}, {}, {}, {}, {}
    notes = []  # what each run's numbers leave out or cannot vouch for
    for label, run in zip(labels, runs):
        found = run.heap_profile_set()  # profiles that cannot be fitted are set aside, and said
        heap, profiles = found.rows, found.decoded
        notes += [f"{label}: {w}" for w in run.warnings] + [
            f"{label}: left out of the fits: {s}" for s in found.skipped
        ]
        if heap["crds"].nunique() < 2:
            raise UsageError(f"{run.path}: needs heap profiles at two or more CRD counts")
        points[label] = profile_points(
            (int(r.crds), r.phase if isinstance(r.phase, str) and r.phase else None, profiles[r.file])
            for r in heap.itertuples(index=False)
        )
        per_crd[label] = fit_per_crd(points[label], confidence)[0]
        spoints[label] = points_by_source(run.series, run.profile_marks(), C.COMPARE_SERIES)
        ends[label] = C.series_end_values(run.series)
        establish[label] = C.establish_times(run.events)
        served = _served(heap)
        last = served.iloc[-1] if len(served) else heap.iloc[-1]
        first = (served if len(served) else heap).iloc[0]
        last_served[label] = (int(last["crds"]), profiles[last["file"]], int(first["crds"]), profiles[first["file"]])

    replicates = configurations(labels)
    reference = replicates.get(labels[0], labels[0])
    warnings = C.crd_set_warnings(
        {label: m.get("crds") or run.crd_summary for label, m, run in zip(labels, manifests, runs)}
    )
    warnings = notes + warnings
    stacked = C.stack_runs(points)
    sstacked = C.stack_runs(spoints)
    diffs = []
    ref_crds, ref_profile, ref_first_crds, ref_first = last_served[labels[0]]
    # Each run's growth from its first served profile to its last: per CRD, what the fits measure.
    ref_growth = diff(ref_profile, ref_first, "inuse_space")
    for label in labels[1:]:
        crds, profile, first_crds, first = last_served[label]
        if crds != ref_crds:
            warnings.append(f"{label}: last served profile at {crds} CRDs, {labels[0]} at {ref_crds}")
        table = C.per_crd_profile_diff(
            diff(profile, ref_profile, "inuse_space"),
            diff(profile, first, "inuse_space"),
            ref_growth,
            crds - first_crds,
            ref_crds - ref_first_crds,
        )
        diffs.append(table.assign(run=label, reference=labels[0]))
    return Comparison(
        labels=labels,
        reference=reference,
        run_dirs=[Path(r.path) for r in runs],
        manifests=dict(zip(labels, manifests)),
        warnings=warnings,
        points=stacked,
        per_crd=C.stack_runs(per_crd),
        joint=C.per_crd_differences(stacked, reference=reference, confidence=confidence, replicates=replicates),
        series_points=sstacked,
        series_fits=C.stack_runs({label: fit_series_per_crd(p, confidence) for label, p in spoints.items() if len(p)}),
        series_joint=C.per_crd_differences(
            sstacked, reference=reference, by=["metric"], confidence=confidence, replicates=replicates
        )
        if len(sstacked)
        else pd.DataFrame(columns=C.JOINT_COLUMNS),
        end=C.stack_runs(ends),
        establish=C.stack_runs(establish),
        profile_diff=pd.concat(diffs, ignore_index=True) if diffs else pd.DataFrame(),
        provenance={
            label: comparison_provenance(m, process_source(run.series))
            for label, m, run in zip(labels, manifests, runs)
        },
        replicates=replicates,
        repeat_spread=C.replicate_spread(C.stack_runs(per_crd), replicates, confidence)
        if replicates
        else pd.DataFrame(),
    )


def same_run(runs: Sequence) -> None:
    """UsageError (one line) when two of ``runs`` are one directory (also by two paths): a run
    compared with itself differs by exactly nothing, which is no finding."""
    seen: dict[tuple[int, int], Path] = {}
    for run in runs:
        st = Path(run.path).stat()
        key = (st.st_dev, st.st_ino)
        if key in seen:
            raise UsageError(f"{run.path} and {seen[key]} are the same run; compare needs two different runs")
        seen[key] = Path(run.path)


def comparison_provenance(manifest: dict, process_job: str | None = None) -> dict[str, str]:
    """:func:`crdscale.report.findings.provenance` plus the binaries (path and sha256 when recorded)
    and the Go runtime environment, so each side of a delta says exactly what ran; ``process_job``
    is where its process figures came from."""
    out = provenance(manifest, process_job)
    for name, value in (manifest.get("binaries") or {}).items():
        if isinstance(value, dict):
            text = " ".join(str(value[k]) for k in ("path", "sha256") if value.get(k))
        else:
            text = str(value)
        out[f"binary {name}"] = text
    return out


# --------------------------------------------------------------------------
# Numbers and Markdown
# --------------------------------------------------------------------------


def differences_table(comparison: Comparison, metric: str = "bytes") -> pd.DataFrame:
    """The per-CRD differences as a readable table: ``run, cause, reference (KiB/CRD),
    run (KiB/CRD), difference (KiB/CRD), 95% CI low, 95% CI high, relative (%)``;
    biggest |difference| first, total last."""
    sel = comparison.joint[comparison.joint["metric"] == metric].copy()
    sel["_total"] = sel["cause"] == TOTAL
    sel["_abs"] = -sel["difference"].abs()
    sel = sel.sort_values(["run", "_total", "_abs"], kind="stable")
    kib = 1024 if metric == "bytes" else 1
    return pd.DataFrame(
        {
            "run": sel["run"].to_numpy(),
            "cause": sel["cause"].to_numpy(),
            "reference per CRD": (sel["per_crd_reference"] / kib).round(1).to_numpy(),
            "run per CRD": (sel["per_crd"] / kib).round(1).to_numpy(),
            "difference": (sel["difference"] / kib).round(1).to_numpy(),
            "95% CI low": (sel["difference_low"] / kib).round(1).to_numpy(),
            "95% CI high": (sel["difference_high"] / kib).round(1).to_numpy(),
            "relative (%)": (100 * sel["relative"]).round(1).to_numpy(),
        }
    )


def series_table(comparison: Comparison) -> pd.DataFrame:
    """Per run: each series per CRD (its growth per CRD; the difference's interval is Welch's), at the end and at
    its peak, plus seconds to Established; one row per run and metric, units in ``unit``."""
    rows = []
    joint = comparison.series_joint.set_index(["run", "metric"]) if len(comparison.series_joint) else None
    fits = comparison.series_fits
    own = (
        fits[fits["phase"] == "served"].set_index(["run", "metric"])["per_crd"] if len(fits) else pd.Series(dtype=float)
    )
    for label in comparison.labels:
        end = comparison.end[comparison.end["run"] == label].set_index("metric") if len(comparison.end) else None
        for metric, unit in C.SERIES_UNITS.items():
            per_crd = float(own.get((label, metric), math.nan))
            low = high = math.nan
            key = (comparison.replicates.get(label, label), metric)
            if joint is not None and key in joint.index:
                low, high = joint.loc[key, ["difference_low", "difference_high"]]
            last = end.loc[metric, "last"] if end is not None and metric in end.index else math.nan
            peak = end.loc[metric, "peak"] if end is not None and metric in end.index else math.nan
            first = end.loc[metric, "first"] if end is not None and metric in end.index else math.nan
            source = end.loc[metric, "source"] if end is not None and metric in end.index else ""
            if metric == "cpu_seconds":  # a counter: what the run used, not its value
                last, peak = last - first, math.nan
            rows.append((label, metric, unit, per_crd, low, high, last, peak, source))
        est = comparison.establish[comparison.establish["run"] == label] if len(comparison.establish) else None
        if est is not None and len(est):
            rows.append(
                (
                    label,
                    "establish_seconds",
                    "s",
                    est["seconds"].sum() / max(est["crds"].sum(), 1),
                    math.nan,
                    math.nan,
                    est["seconds"].sum(),
                    est["seconds"].max(),
                    "events",
                )
            )
    return pd.DataFrame(
        rows,
        columns=["run", "metric", "unit", "per_crd", "difference_low", "difference_high", "end", "peak", "source"],
    )


def headline(comparison: Comparison) -> str:
    """One sentence per compared run: the heap per-CRD delta with its interval, the biggest
    cause of it, and peak RSS of both runs."""
    sentences = []
    ref = comparison.reference
    for label in comparison.compared:
        joint = comparison.joint[(comparison.joint["run"] == label) & (comparison.joint["metric"] == "bytes")]
        total = joint[joint["cause"] == TOTAL]
        parts = []
        if len(total):
            t = total.iloc[0]
            rel = f", {100 * t['relative']:+.0f}%" if not math.isnan(t["relative"]) else ""
            parts.append(
                f"{label} holds {_signed(t['difference'])} heap per served CRD than {ref} "
                f"(95% CI {fmt_interval(t['difference_low'], t['difference_high'], 'bytes')}{rel}; "
                f"{fmt_bytes(t['per_crd'])} vs {fmt_bytes(t['per_crd_reference'])} per CRD)"
            )
        causes = joint[joint["cause"] != TOTAL]
        if len(causes):
            c = causes.loc[causes["difference"].abs().idxmax()]
            parts.append(
                f"mostly {c['cause']} {_signed(c['difference'])} per CRD "
                f"[{fmt_bytes(c['difference_low'])}, {fmt_bytes(c['difference_high'])}]"
            )
        rss = (
            comparison.end[(comparison.end["metric"] == "rss_bytes")].set_index("run")
            if len(comparison.end)
            else pd.DataFrame(columns=["peak", "source"])
        )
        run, ref_run = comparison.first_run(label), comparison.first_run(ref)
        if run in rss.index and ref_run in rss.index:
            sources = {_short_source(rss.loc[r, "source"]) for r in (run, ref_run)}
            where = f" ({sources.pop()})" if len(sources) == 1 else ""
            parts.append(
                f"peak RSS {fmt_bytes(rss.loc[run, 'peak'])}"
                + ("" if where else f" ({_short_source(rss.loc[run, 'source'])})")
                + f" vs {fmt_bytes(rss.loc[ref_run, 'peak'])}"
                + ("" if where else f" ({_short_source(rss.loc[ref_run, 'source'])})")
                + where
            )
        if parts:
            sentences.append("; ".join(parts) + ".")
    return " ".join(sentences) or "No per-CRD difference could be fitted."


def _short_source(job) -> str:
    """``/proc`` or ``/metrics``: where a process figure was read (see crdscale.analysis.process)."""
    from crdscale.analysis.process import PROC_JOB

    return "/proc" if job == PROC_JOB else "/metrics"


def repeat_spread_table(comparison: Comparison, metric: str = "bytes", phase: str = "served") -> pd.DataFrame:
    """The repeats' spread by configuration and cause, in KiB per CRD (largest mean first, total last)."""
    sel = comparison.repeat_spread
    sel = sel[(sel["metric"] == metric) & (sel["phase"] == phase)].copy()
    if not len(sel):
        return pd.DataFrame()
    sel["_total"] = sel["cause"] == TOTAL
    sel = sel.sort_values(["configuration", "_total", "mean"], ascending=[True, True, False], kind="stable")
    kib = 1024.0
    return pd.DataFrame(
        {
            "configuration": sel["configuration"].to_numpy(),
            "cause": sel["cause"].to_numpy(),
            "repeats": sel["repeats"].to_numpy(),
            "mean (KiB/CRD)": (sel["mean"] / kib).round(1).to_numpy(),
            "95% CI": [f"[{lo / kib:.1f}, {hi / kib:.1f}]" for lo, hi in zip(sel["low"], sel["high"])],
            "between-run sd": (sel["between_sd"] / kib).round(1).to_numpy(),
            "one run ±": (sel["within_half_width"] / kib).round(1).to_numpy(),
            "sd / one run's se": sel["sd_ratio"].round(2).to_numpy(),
            "repeats for ±10%": sel["repeats_for_10pct"].to_numpy(),
        }
    )


def _signed(value: float) -> str:
    """``448.0 KiB more`` / ``1.2 MiB less``."""
    return f"{fmt_bytes(abs(value))} {'more' if value >= 0 else 'less'}"


def _markdown_table(frame: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join("" if (isinstance(v, float) and math.isnan(v)) else str(v) for v in row) + " |")
    return "\n".join(lines)


def provenance_table(comparison: Comparison) -> pd.DataFrame:
    """Provenance of every run side by side: one row per fact, one column per run."""
    keys = list(dict.fromkeys(k for p in comparison.provenance.values() for k in p))
    return pd.DataFrame(
        {label: [comparison.provenance[label].get(k, "") for k in keys] for label in comparison.labels},
        index=pd.Index(keys, name="fact"),
    )


def comparison_markdown(
    comparison: Comparison, figures: Sequence[tuple[str, str]] = (), *, report_html: str | None = None
) -> str:
    """``findings.md`` of a comparison: the delta first, then what was run, the tables, figures."""
    title = "crdscale comparison: " + " vs ".join(comparison.labels)
    parts = [f"# {title}", "", f"**{headline(comparison)}**", ""]
    parts += warnings_markdown(comparison.warnings)
    prov = provenance_table(comparison).reset_index()
    parts += ["## What was run", "", _markdown_table(prov.map(lambda v: str(v).replace("|", "\\|"))), ""]
    parts += [
        "## Heap per served CRD by cause (KiB), difference from " + comparison.reference,
        "",
        _markdown_table(differences_table(comparison)),
        "",
    ]
    if len(comparison.repeat_spread):
        parts += [
            "## Repeats: how much runs of one configuration differ",
            "",
            "Each configuration's per-CRD cost is the mean of its repeats, its interval from their spread "
            "(Student's t). `between-run sd` is the spread of the runs' own per-CRD costs, `one run ±` the "
            "median half width of a single run's 95% interval (from its step increments), and `sd / one run's se` "
            "their ratio in standard errors: about 1 when one run's interval is right, well above 1 when runs "
            "differ by more than one run says (with 5 repeats the ratio itself is uncertain by about ±35 %). `repeats for ±10%` is how many "
            "repeats would give the mean a ±10% interval at this spread.",
            "",
            _markdown_table(repeat_spread_table(comparison)),
            "",
        ]
    stable = series_table(comparison)
    if len(stable):
        shown = stable.assign(
            per_crd=[_fmt_unit(v, u) for v, u in zip(stable["per_crd"], stable["unit"])],
            end=[_fmt_unit(v, u) for v, u in zip(stable["end"], stable["unit"])],
            peak=[_fmt_unit(v, u) for v, u in zip(stable["peak"], stable["unit"])],
            difference_ci=[
                fmt_interval(lo, hi, "bytes") if u == "bytes" else ("" if math.isnan(lo) else f"[{lo:.3g}, {hi:.3g}]")
                for lo, hi, u in zip(stable["difference_low"], stable["difference_high"], stable["unit"])
            ],
            source=[_short_source(j) if j and j != "events" else j for j in stable["source"]],
        )[["run", "metric", "per_crd", "difference_ci", "end", "peak", "source"]]
        parts += [
            "## Process per CRD, at the end and at peak",
            "",
            "`per_crd` is the slope against CRDs; `difference_ci` the 95% CI of its difference from "
            f"{comparison.reference} (Welch); CPU `end` is CPU seconds used during the run; "
            "`establish_seconds` per CRD is the summed wait for Established over the CRDs installed; "
            "`source` is the record a figure was read from: process figures (RSS, CPU, fds, threads) from the "
            "most complete one the run holds (`/proc`, read every second, else kube-apiserver's `/metrics`).",
            "",
            _markdown_table(shown),
            "",
        ]
    if figures:
        parts += ["## Figures", ""]
        for caption, png in figures:
            parts += [f"**{caption}**", "", f"![{caption}]({png})", ""]
    parts.append(
        "Bytes per CRD are each run's growth from its first heap profile to its last, per CRD. Go's heap "
        "sampling carries a profile's error into every later one, so each run's variance comes from the "
        "spread of its step increments (never below what the sampling alone allows), and a difference's "
        "95% interval combines both runs' own variances with Welch's degrees of freedom "
        "(`crdscale.analysis.intervals`); repeats of one configuration are pooled, their spread giving "
        "the interval. Causes come from `crdscale.analysis.attribution.RULES`."
        + (f" Full report: {report_html}." if report_html else "")
    )
    return "\n".join(parts) + "\n"


def _fmt_unit(value: float, unit: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if unit == "bytes":
        return fmt_bytes(value)
    return f"{value:,.3g} {unit}"


def comparison_json(comparison: Comparison) -> dict:
    """The comparison's numbers as plain JSON-able data (NaN -> None)."""

    def records(frame: pd.DataFrame) -> list[dict]:
        return [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            for row in frame.to_dict("records")
        ]

    return {
        "labels": comparison.labels,
        "reference": comparison.reference,
        "run_dirs": [str(p) for p in comparison.run_dirs],
        "warnings": comparison.warnings,
        "headline": headline(comparison),
        "provenance": comparison.provenance,
        "joint": records(comparison.joint),
        "series": records(series_table(comparison)),
        "per_crd": records(comparison.per_crd),
    }


# --------------------------------------------------------------------------
# The rendered report
# --------------------------------------------------------------------------


def render_comparison(
    run_dirs: Sequence[str | Path],
    out_dir: str | Path,
    *,
    labels: Sequence[str] | None = None,
    notebooks_dir: str | Path | None = None,
    timeout: int | None = None,
    echo: Callable[[str], None] | None = None,
):
    """Findings, figures and HTML comparing runs (see the module docstring).

    Returns a :class:`crdscale.report.render.ReportResult`; a failing notebook
    is kept with its partial output and listed in ``failures``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import nbformat

    from crdscale.fsutil import check_output_dir
    from crdscale.report import plots
    from crdscale.report import render as R

    echo = echo or (lambda _m: None)
    out = check_output_dir(Path(out_dir).resolve())
    notebooks_dir = (Path(notebooks_dir) if notebooks_dir else R.default_notebooks_dir()).resolve()
    notebook = notebooks_dir / f"{COMPARE_NOTEBOOK}.py"
    if not notebook.is_file():
        raise UsageError(f"notebook {notebook} not found (use --notebooks DIR: the notebooks/ of a crdscale checkout)")
    run_dirs = [str(Path(p).resolve()) for p in run_dirs]
    echo("comparing " + ", ".join(run_dirs))
    comparison = compare_runs(run_dirs, labels)

    captions, files = [], []
    for name, caption, draw in (
        ("memory-vs-crds", "RSS and heap in use against CRDs, each run", plots.plot_runs_against_crds),
        (
            "per-crd-difference",
            f"Heap per CRD by cause: difference from {comparison.reference} with 95% CI",
            plots.plot_difference_bars,
        ),
    ):
        fig, ax = plt.subplots(figsize=(10, 4.5), layout="constrained")
        draw(ax, comparison.series_points if name == "memory-vs-crds" else comparison.joint)
        for ext in ("png", "svg"):
            fig.savefig(out / f"{name}.{ext}", dpi=110)
            files.append(out / f"{name}.{ext}")
        plt.close(fig)
        captions.append((caption, f"{name}.png"))

    html, html_nocode = out / "report.html", out / "report-nocode.html"
    findings_md = out / "findings.md"
    findings_md.write_text(comparison_markdown(comparison, captions, report_html=html_nocode.name), encoding="utf-8")
    (out / "findings.json").write_text(
        json.dumps(comparison_json(comparison), indent=2, default=str) + "\n", encoding="utf-8"
    )

    echo(f"executing {notebook.name}")
    target = out / "notebooks" / f"{notebook.stem}.ipynb"
    nb, stopped = R.execute_notebook(
        notebook,
        target,
        {"run_dirs": run_dirs, "labels": comparison.labels},
        cwd=notebook.parent,
        timeout=timeout or R.CELL_TIMEOUT_S,
    )
    source = notebook.read_text(encoding="utf-8")
    failure = R.find_failure(nb, str(notebook), source) or (
        R.unfinished_cell(nb, str(notebook), stopped, source) if stopped else None
    )
    if failure:
        echo(f"notebook failed: {failure.describe()}")
    title = "crdscale comparison: " + " vs ".join(comparison.labels)
    stated = "".join(f"> **Warning:** {w}\n\n" for w in comparison.warnings)  # on the first screen
    first = nbformat.v4.new_markdown_cell(f"# {title}\n\n{stated}**{headline(comparison)}**")
    report = R.combine([nb], [first])
    R.export_html(report, html, title=title, with_code=True)
    R.export_html(report, html_nocode, title=title, with_code=False)
    return R.ReportResult(out, html, html_nocode, findings_md, files, [target], [failure] if failure else [])
