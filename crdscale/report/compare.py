"""Compare runs in words, tables and a rendered report.

The numbers come from :func:`crdscale.analysis.compare.compare_runs` (a
:class:`~crdscale.analysis.compare.Comparison` of plain DataFrames); this module
says them: the headline, the provenance of each run, ``findings.md`` and
``findings.json``. :func:`render_comparison` executes ``notebooks/compare.py``
on the runs and writes, through the same pipeline as
:func:`crdscale.report.render.render_report`
(:func:`crdscale.report.render.write_report`)::

    findings.md          headline = the delta, both runs' provenance, the differences table, figures
    findings.json        the same numbers, unformatted
    *.png, *.svg         figures
    report.html, report-nocode.html, notebooks/compare.ipynb
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from crdscale.analysis.compare import (
    Comparison,
    compare_runs,
    differences_table,
    repeat_spread_table,
    series_table,
)
from crdscale.analysis.process import PROC_JOB
from crdscale.analysis.targets import TOTAL
from crdscale.crds.objects import CUSTOM_RESOURCES
from crdscale.errors import UsageError
from crdscale.fsutil import check_output_dir
from crdscale.report import plots
from crdscale.report.components import COMPONENTS_NOTE
from crdscale.report.components import compare_table as component_table
from crdscale.report.figures import FigureSpec, new_figure
from crdscale.report.findings import (
    KIND_LABELS,
    OBJECT_LISTS_NOTE,
    object_lists_table,
    provenance,
    warnings_markdown,
)
from crdscale.report.render import CELL_TIMEOUT_S, ReportContent, default_notebooks_dir, write_report
from crdscale.rundir.manifest import Manifest
from crdscale.units import fmt_bytes, fmt_interval, fmt_value, is_missing

log = logging.getLogger(__name__)

COMPARE_NOTEBOOK = "compare"


def comparison_provenance(manifest: Manifest | Mapping, process_job: str | None = None) -> dict[str, str]:
    """:func:`crdscale.report.findings.provenance` plus the binaries (path and sha256 when recorded)
    and the Go runtime environment, so each side of a delta says exactly what ran; ``process_job``
    is where its process figures came from."""
    manifest = Manifest.of(manifest)
    out = provenance(manifest, process_job)
    for name, binary in manifest.binaries.items():
        out[f"binary {name}"] = " ".join(str(v) for v in (binary.path, binary.sha256) if v)
    return out


def comparison_provenances(comparison: Comparison) -> dict[str, dict[str, str]]:
    """label -> :func:`comparison_provenance` of each compared run."""
    return {
        label: comparison_provenance(comparison.manifests[label], comparison.process_jobs.get(label))
        for label in comparison.labels
    }


# --------------------------------------------------------------------------
# Numbers and Markdown
# --------------------------------------------------------------------------


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
            rel = f", {100 * t['relative']:+.0f}%" if not is_missing(t["relative"]) else ""
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
    sentences += per_object_headline(comparison)
    return " ".join(sentences) or "No per-CRD difference could be fitted."


def per_object_headline(comparison: Comparison) -> list[str]:
    """Sentences for runs that grew objects: heap per object of each kind against the reference's,
    and the amplification of each run (none when no run grew objects)."""
    joint = comparison.per_object_joint
    out = []
    if joint is not None and len(joint):
        for (run, kind), rows in joint[joint["cause"] == TOTAL].groupby(["run", "kind"], sort=False):
            t = rows.iloc[0]
            out.append(
                f"{run}: {_signed(t['difference'])} heap per {kind[:-1] if kind.endswith('s') else kind} than "
                f"{t['reference']} (95% CI {fmt_interval(t['difference_low'], t['difference_high'], 'bytes')}; "
                f"{fmt_bytes(t['per_object'])} vs {fmt_bytes(t['per_object_reference'])})."
            )
    out += list_headline(comparison)
    amp = comparison.amplification
    if amp is not None and len(amp):
        out.append(
            "Amplification (heap per object / serialized size): "
            + "; ".join(f"{r.run} {r.kind} {r.amplification:.1f}×" for r in amp.itertuples(index=False))
            + "."
        )
    return out


# The LISTs a comparison's headline names, in this order, when the runs timed them.
HEADLINE_LISTS = ("consistent", "rv0")


def list_headline(comparison: Comparison) -> list[str]:
    """Per run and kind whose LISTs moved: the consistent and ``resourceVersion=0`` LISTs of its objects
    against the reference run's (latency p50, where served, etcd CPU per LIST); none without LISTs."""
    moved = comparison.cost_moved
    if moved is None or not len(moved) or not len(comparison.object_lists):
        return []
    ref_label = comparison.first_run(comparison.reference)
    ref = moved[moved["run"] == ref_label].set_index(["kind", "list"])
    out = []
    for (run, kind), rows in moved[moved["run"] != ref_label].groupby(["run", "kind"], sort=False):
        parts = []
        for r in rows[rows["list"].isin(HEADLINE_LISTS)].itertuples(index=False):
            if (kind, r.list) not in ref.index:
                continue
            b = ref.loc[(kind, r.list)]
            if r.served_from == b["served_from"] and kind != CUSTOM_RESOURCES:
                continue  # a control kind its flags did not touch
            parts.append(
                f"{r.list} LIST p50 {_ms(r.latency_p50_s)} from {r.served_from} vs {_ms(b['latency_p50_s'])} from "
                f"{b['served_from']}, etcd CPU {_ms(r.etcd_cpu_s)} vs {_ms(b['etcd_cpu_s'])} per LIST"
            )
        if parts:
            out.append(
                f"{run}, LISTs of the {KIND_LABELS.get(kind, kind)}s against {ref_label}: " + "; ".join(parts) + "."
            )
    return out


def _ms(seconds) -> str:
    return "?" if is_missing(seconds) else f"{1000 * seconds:,.1f} ms"


def _short_source(job) -> str:
    """``/proc`` or ``/metrics``: where a process figure was read (see crdscale.analysis.process)."""
    return "/proc" if job == PROC_JOB else "/metrics"


def _signed(value: float) -> str:
    """``448.0 KiB more`` / ``1.2 MiB less``."""
    return f"{fmt_bytes(abs(value))} {'more' if value >= 0 else 'less'}"


def _markdown_table(frame: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join("" if is_missing(v) else str(v) for v in row) + " |")
    return "\n".join(lines)


def provenance_table(comparison: Comparison) -> pd.DataFrame:
    """Provenance of every run side by side: one row per fact, one column per run."""
    provenances = comparison_provenances(comparison)
    keys = list(dict.fromkeys(k for p in provenances.values() for k in p))
    return pd.DataFrame(
        {label: [provenances[label].get(k, "") for k in keys] for label in comparison.labels},
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
    if len(comparison.per_object_joint):
        table = comparison.per_object_joint[["run", "kind", "cause", "per_object_reference", "per_object"]].assign(
            difference_ci=[
                fmt_interval(lo, hi, "bytes")
                for lo, hi in zip(
                    comparison.per_object_joint["difference_low"], comparison.per_object_joint["difference_high"]
                )
            ]
        )
        for column in ("per_object_reference", "per_object"):
            table[column] = table[column].map(fmt_bytes)
        parts += [
            "## Heap per object by cause, difference from " + comparison.reference,
            "",
            _markdown_table(table),
            "",
        ]
    moved = object_lists_table(comparison.cost_moved) if len(comparison.object_lists) else pd.DataFrame()
    if len(moved):
        parts += [
            "## Heap per object and what a LIST of the objects costs, each run",
            "",
            "Where a resource's watch cache is off (`--watch-cache-sizes=<resource>#0`) its objects leave the heap "
            "and its LISTs go to etcd: heap per object from the object steps (as above), the LISTs timed after "
            "the last step. " + OBJECT_LISTS_NOTE,
            "",
            _markdown_table(moved),
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
            per_crd=[fmt_value(v, u, missing="") for v, u in zip(stable["per_crd"], stable["unit"])],
            end=[fmt_value(v, u, missing="") for v, u in zip(stable["end"], stable["unit"])],
            peak=[fmt_value(v, u, missing="") for v, u in zip(stable["peak"], stable["unit"])],
            difference_ci=[
                fmt_interval(lo, hi, "bytes") if u == "bytes" else ("" if is_missing(lo) else f"[{lo:.3g}, {hi:.3g}]")
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
    components = component_table(comparison_components(comparison), comparison.reference)
    if len(components):
        why = comparison.results.get("components", {}).get("components_skipped")
        missing = (
            [f"- {r.run}: no {r.component} heap profiles: {r.reason}" for r in why.itertuples(index=False)]
            if why is not None and len(why)
            else []
        )
        parts += [
            "## Per component: heap and RSS per served CRD, difference from " + comparison.reference,
            "",
            COMPONENTS_NOTE + " Intervals as for the causes above (Welch).",
            "",
            _markdown_table(components),
            "",
            *([*missing, ""] if missing else []),
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
        "the interval. A difference of single runs holds what each run's profiles show, not how much the cost "
        "moves from run to run (docs/results/repeatability.md): where it matters, repeat each configuration. "
        "Causes come from `crdscale.analysis.attribution.RULES`."
        + (f" Full report: {report_html}." if report_html else "")
    )
    return "\n".join(parts) + "\n"


def comparison_components(comparison: Comparison) -> pd.DataFrame:
    """Heap and RSS per CRD of each component against the reference: the ``components`` analysis'
    comparison (:func:`crdscale.analysis.components.compare_result`); empty when it has none."""
    found = comparison.results.get("components", {}).get("components")
    return found if found is not None else pd.DataFrame()


def comparison_json(comparison: Comparison) -> dict:
    """The comparison's numbers as plain JSON-able data (NaN -> None)."""

    def records(frame: pd.DataFrame) -> list[dict]:
        return [{k: (None if is_missing(v) else v) for k, v in row.items()} for row in frame.to_dict("records")]

    return {
        "labels": comparison.labels,
        "reference": comparison.reference,
        "run_dirs": [str(p) for p in comparison.run_dirs],
        "warnings": comparison.warnings,
        "evidence": [problem.to_json(run=label) for label, problem in comparison.evidence],
        "headline": headline(comparison),
        "provenance": comparison_provenances(comparison),
        "joint": records(comparison.joint),
        "series": records(series_table(comparison)),
        "per_crd": records(comparison.per_crd),
        "per_object": records(comparison.per_object),
        "amplification": records(comparison.amplification),
        "per_object_joint": records(comparison.per_object_joint),
        "object_lists": records(comparison.object_lists),
        "cost_moved": records(comparison.cost_moved),
        "components": records(comparison_components(comparison)),
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
):
    """Findings, figures and HTML comparing runs (see the module docstring).

    Returns a :class:`crdscale.report.render.ReportResult`; a failing notebook
    is kept with its partial output and listed in ``failures``.
    """
    out = check_output_dir(Path(out_dir).resolve())
    notebooks_dir = (Path(notebooks_dir) if notebooks_dir else default_notebooks_dir()).resolve()
    notebook = notebooks_dir / f"{COMPARE_NOTEBOOK}.py"
    if not notebook.is_file():
        raise UsageError(f"notebook {notebook} not found (use --notebooks DIR: the notebooks/ of a crdscale checkout)")
    run_dirs = [str(Path(p).resolve()) for p in run_dirs]
    log.info("comparing " + ", ".join(run_dirs))
    # Computed before the kernel starts: what is wrong with the runs is said before minutes of notebook.
    comparison = compare_runs(run_dirs, labels)
    return write_report(
        out,
        [(notebook, {"run_dirs": run_dirs, "labels": comparison.labels})],
        lambda: comparison_content(comparison),
        timeout=timeout or CELL_TIMEOUT_S,
    )


def comparison_content(comparison: Comparison):
    """What a comparison's report says besides its notebook (:class:`crdscale.report.render.ReportContent`)."""
    import nbformat  # lazy: the optional report extra

    figures = []
    for name, caption, draw, data in (
        (
            "memory-vs-crds",
            "RSS and heap in use against CRDs, each run",
            plots.plot_runs_against_crds,
            comparison.series_points,
        ),
        (
            "per-crd-difference",
            f"Heap per CRD by cause: difference from {comparison.reference} with 95% CI",
            plots.plot_difference_bars,
            comparison.joint,
        ),
    ):
        fig, ax = new_figure(10, 4.5)
        draw(ax, data)
        figures.append(FigureSpec(name, caption, fig))
    title = "crdscale comparison: " + " vs ".join(comparison.labels)
    stated = "".join(f"> **Warning:** {w}\n\n" for w in comparison.warnings)  # on the first screen
    return ReportContent(
        title=title,
        figures=figures,
        findings_md=lambda captions, html: comparison_markdown(comparison, captions, report_html=html),
        findings_json=comparison_json(comparison),
        first_cells=lambda _pngs: [nbformat.v4.new_markdown_cell(f"# {title}\n\n{stated}**{headline(comparison)}**")],
    )
