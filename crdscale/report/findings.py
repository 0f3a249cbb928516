"""The key numbers of a run and where they came from, as plain data and Markdown.

:func:`provenance` says what was run on what (scenario, versions, CRD set,
machine); :func:`key_numbers` takes the per-CRD analysis
(:class:`crdscale.analysis.run.RunAnalysis`) and the memory series
(:func:`crdscale.report.series.memory_frame`) and returns one row per number
with its confidence interval and unit, the raw values exactly as the analysis
functions return them; :func:`findings_markdown` renders both for a GitHub
issue or a KEP. Nothing here reads files or draws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from crdscale.analysis.percrd import OTHER, unattributed_share

# KIND_LABELS, OBJECT_LISTS_NOTE and object_lists_table are crdscale.report.compare's too, from here.
from crdscale.analysis.perobject import KIND_LABELS, OBJECT_LISTS_NOTE, object_lists_table  # noqa: F401
from crdscale.analysis.process import METRICS_JOB, PROC_JOB, source_label
from crdscale.analysis.registry import Section, findings_rows, report_sections, table
from crdscale.analysis.targets import TOTAL
from crdscale.cluster.kubesource import describe_build
from crdscale.crds.objects import CUSTOM_RESOURCES
from crdscale.rundir.manifest import Manifest, MetricsRecord
from crdscale.units import fmt_bytes, fmt_interval, fmt_value, is_missing

# Columns of the key-numbers table: ``value``/``low``/``high`` in ``unit`` (bytes, CRDs, ...).
NUMBER_COLUMNS = ["key", "finding", "value", "low", "high", "unit", "source"]

# How many causes the findings list by name (the rest are in the notebook).
TOP_CAUSES = 5


@dataclass(frozen=True)
class Findings:
    """What was run (``provenance``: label -> text) and what came out (``numbers``)."""

    provenance: dict[str, str]
    numbers: pd.DataFrame
    warnings: list[str] = field(default_factory=list)  # said first, before any number
    # The registry's sections after the key numbers (the LISTs of a run's objects, when it timed them).
    sections: list[Section] = field(default_factory=list)


# --------------------------------------------------------------------------
# Formatting
# --------------------------------------------------------------------------


# --------------------------------------------------------------------------
# Provenance
# --------------------------------------------------------------------------


def provenance(manifest: Manifest | Mapping, process_job: str | None = None) -> dict[str, str]:
    """What was run, on which versions and machine, from a run's ``manifest.json``.

    Keys: scenario, run, kube-apiserver, etcd, Go, CRD set, CRD set sha256,
    machine, crdscale (missing facts say ``unknown``), and, when the run
    recorded them, metrics resolution (the largest gap between samples and
    how close they reach the run's end) and harness cost (CPU of crdscale and
    Prometheus as a share of kube-apiserver's). ``process_job`` is the job the
    report's process figures (RSS, CPU, fds, threads) were read from
    (:func:`crdscale.analysis.process.process_source`); the resolution line
    describes that record first.
    """
    manifest = Manifest.of(manifest)
    scenario, versions, crds, machine, metrics = (
        manifest.scenario,
        manifest.versions,
        manifest.crds,
        manifest.machine,
        manifest.metrics,
    )
    steps = scenario.steps
    unknown = "unknown"

    crd_set = unknown
    if crds:
        parts = [f"{_or(crds.count, '?')} CRDs", f"{_or(crds.groups, '?')} groups"]
        if crds.properties_median is not None:
            parts.append(f"median {crds.properties_median:g} properties")
        if crds.schema_bytes_median is not None:
            parts.append(f"median schema {fmt_bytes(crds.schema_bytes_median)}")
        origin = scenario.crds
        if origin.source == "generate":
            parts.append(f"generated, preset {_or(origin.preset, '?')}, seed {_or(origin.seed, '?')}")
        elif origin.source:
            parts.append(f"from {origin.source}")
        crd_set = ", ".join(parts)

    mem = machine.memory_bytes
    machine_text = (
        ", ".join(
            p
            for p in (
                f"{machine.cpus} CPUs" if machine.cpus else None,
                machine.cpu_model,
                f"{fmt_bytes(mem, unit='GiB', digits=0)} RAM" if mem else None,
                f"Linux {machine.kernel}" if machine.kernel else None,
            )
            if p
        )
        or unknown
    )

    go = versions.kube_apiserver_go or unknown
    if versions.go_toolchain and versions.go_toolchain != versions.kube_apiserver_go:
        go += f" (toolchain {versions.go_toolchain})"
    run = f"{_or(manifest.run_id, unknown)}, {_or(manifest.status, unknown)}"
    if manifest.started_at:
        run += f", {manifest.started_at} to {manifest.ended_at or '?'}"
    if steps:
        run += (
            f"; {_or(steps.count, '?')} steps, serve {_or(steps.serve, '?')}, settle {_or(steps.settle_seconds, '?')} s"
        )
    if metrics.source:
        run += f"; metrics via {metrics.source} every {_or(metrics.scrape_interval_s, '?')} s"
        # /metrics jobs may have their own (longer, possibly adapted) cadence: say which.
        jobs = {job: s for job, s in metrics.job_interval_s.items() if s != metrics.scrape_interval_s}
        if jobs:
            run += " (" + ", ".join(f"{job} /metrics every {s:g} s" for job, s in sorted(jobs.items())) + ")"
    env, flags = scenario.target.env, scenario.target.apiserver_flags
    apiserver = manifest.binaries.get("kube-apiserver")
    built_from = apiserver.built_from if apiserver else None
    facts = {
        "scenario": f"{_or(scenario.name, unknown)}: {scenario.description or ''}".rstrip(": "),
        "run": run,
        "kube-apiserver": str(versions.kube_apiserver or unknown)
        + (f" (flags {' '.join(flags)})" if flags else "")
        + (f" (env {', '.join(f'{k}={v}' for k, v in env.items())})" if env else "")
        + (f" ({describe_build(built_from)})" if built_from else ""),
        "etcd": str(versions.etcd or unknown),
        "Go": go,
        "CRD set": crd_set,
        "CRD set sha256": str(crds.sha256 or unknown),
        "machine": machine_text,
        "crdscale": str(versions.crdscale or manifest.crdscale_version or unknown),
    }
    resolution = _resolution_line(metrics, process_job)
    if resolution:
        facts["metrics resolution"] = resolution
    harness = manifest.harness
    if harness.harness_share_of_apiserver_cpu is not None:
        facts["harness cost"] = (
            f"crdscale {harness.crdscale_cpu_seconds:.1f} s + Prometheus {harness.prometheus_cpu_seconds or 0:.1f} s "
            f"CPU = {100 * harness.harness_share_of_apiserver_cpu:.1f}% of kube-apiserver's "
            f"{harness.kube_apiserver_cpu_seconds:.1f} s"
        )
        scrapes = harness.apiserver_scrapes
        if harness.scrape_share_of_apiserver_cpu is not None:
            facts["harness cost"] += (
                f"; its {scrapes.count} /metrics scrapes cost kube-apiserver at most ~{scrapes.cpu_seconds_estimate:.1f} "
                f"CPU-s = {100 * harness.scrape_share_of_apiserver_cpu:.1f}% of its own work (their wall time x "
                f"{_or(scrapes.cpu_per_wall_second, 1.3):g}, which counts waiting for a CPU on a busy machine)"
            )
    return facts


def _or(value, default):
    """``value`` unless the manifest left it out (``None``)."""
    return default if value is None else value


def _end_gap(seconds: float) -> str:
    """Where the last sample lies against the run's end: "0.9 s before the end", "0.2 s after the end"."""
    return f"{abs(seconds):.1f} s {'after' if round(seconds, 1) < 0 else 'before'} the end"


def _resolution_line(metrics: MetricsRecord, process_job: str | None) -> str | None:
    """How dense the record behind the process figures is (``resolution_proc``: crdscale's /proc
    sampler; ``resolution``: kube-apiserver's /metrics), the record used first."""
    records = {PROC_JOB: metrics.resolution_proc, METRICS_JOB: metrics.resolution}
    used = process_job if process_job in records else METRICS_JOB
    parts = []
    for job in [used] + [j for j in records if j != used]:
        r = records[job]
        if r.max_gap_s is None:
            continue
        text = (
            f"{source_label(job)}: {r.samples:,} samples of {r.metric}, median gap {r.median_gap_s:g} s, "
            f"largest {r.max_gap_s:g} s, last sample {_end_gap(r.end_gap_s)}"
        )
        parts.append(("process figures (RSS, CPU, fds, threads) from " if job == used else "") + text)
    if parts and process_job is not None and records[used].max_gap_s is None:
        parts.insert(0, f"process figures (RSS, CPU, fds, threads) from {source_label(used)}")
    return "; also ".join(parts) or None


# --------------------------------------------------------------------------
# Key numbers
# --------------------------------------------------------------------------


def _fit_row(fits: pd.DataFrame, phase: str, metric: str, cause: str):
    sel = fits[(fits["phase"] == phase) & (fits["metric"] == metric) & (fits["cause"] == cause)]
    return sel.iloc[0] if len(sel) else None


def _series_value(points: pd.DataFrame, metric: str, crds: int, phase: str = "served") -> float | None:
    sel = points[(points["metric"] == metric) & (points["crds"] == crds)]
    if crds != 0:
        sel = sel[sel["phase"] == phase]
    return float(sel["value"].iloc[-1]) if len(sel) else None


def _at_mark_source(points: pd.DataFrame, metric: str, when: str) -> str:
    """``/proc (job kube-apiserver-proc) at the last profile``: where a series value at a mark came from."""
    sel = points[points["metric"] == metric] if "source" in points else points.iloc[0:0]
    return f"{source_label(sel['source'].iloc[0])} {when}" if len(sel) else f"metrics series {when}"


def key_numbers(
    analysis, memory: pd.DataFrame | None = None, *, phase: str = "served", top_causes: int = TOP_CAUSES
) -> pd.DataFrame:
    """The numbers a performance engineer asks for first, one row each.

    Parameters:
        analysis: :class:`crdscale.analysis.run.RunAnalysis` of the run.
        memory: :func:`crdscale.report.series.memory_frame` of the run (for the
            peak RSS and RSS - (heap + stacks)); optional.
        phase: which fits to report (``served``: after the step's resources
            were listed and watched).
        top_causes: how many causes to list by name (largest per-CRD cost first).

    Returns ``key, finding, value, low, high, unit, source``: ``value`` and the
    95% interval ``low``/``high`` are the analysis functions' own numbers
    (bytes, bytes per CRD, CRDs, or a share 0-1); ``key`` is stable for code.
    """
    # The registry's analyses open the key numbers (a run that grew objects: its per-object view).
    rows: list[tuple] = findings_rows(getattr(analysis, "results", {}), top_causes)
    nan = math.nan
    points, fits, sfits, spoints = analysis.points, analysis.fits, analysis.series_fits, analysis.series_points
    max_crds = int(points["crds"].max()) if len(points) else 0
    rows.append(("crds", "CRDs installed at the end", float(max_crds), nan, nan, "CRDs", "heap profiles"))

    # Memory from the series at the profile marks (what percrd.series_points returns).
    for metric, label in (("rss_bytes", "RSS"), ("heap_inuse_bytes", "Heap in use")):
        first = _series_value(spoints, metric, 0) if len(spoints) else None
        last = _series_value(spoints, metric, max_crds, phase) if len(spoints) else None
        if first is not None:
            rows.append(
                (
                    f"{metric}_baseline",
                    f"{label} with 0 CRDs",
                    first,
                    nan,
                    nan,
                    "bytes",
                    _at_mark_source(spoints, metric, "at the baseline profile"),
                )
            )
        if last is not None:
            rows.append(
                (
                    f"{metric}_final",
                    f"{label} with {max_crds} CRDs ({phase})",
                    last,
                    nan,
                    nan,
                    "bytes",
                    _at_mark_source(spoints, metric, "at the last profile"),
                )
            )
    process = table(getattr(analysis, "results", {}), "process")
    rss = process[process["metric"] == "process_resident_memory_bytes"] if process is not None and len(process) else ()
    if len(rss):
        r = rss.iloc[0]
        rows.append(
            (
                "rss_bytes_peak",
                "Peak RSS during the run",
                float(r["peak"]),
                nan,
                nan,
                "bytes",
                f"{source_label(r['source'])}, {int(r['samples'])} samples",
            )
        )
    elif memory is not None and "rss" in memory and memory["rss"].notna().any():
        rows.append(
            (
                "rss_bytes_peak",
                "Peak RSS during the run",
                float(memory["rss"].max()),
                nan,
                nan,
                "bytes",
                "metrics series",
            )
        )
    if memory is not None and "rss_minus_heap_stack" in memory and memory["rss_minus_heap_stack"].notna().any():
        rows.append(
            (
                "rss_minus_heap_stack_final",
                "RSS - (heap in use + stacks) at the end",
                float(memory["rss_minus_heap_stack"].dropna().iloc[-1]),
                nan,
                nan,
                "bytes",
                "metrics series",
            )
        )

    # Per CRD: the total from heap profiles, RSS and heap from the series.
    def per_crd(key: str, label: str, r, points: str) -> tuple:
        source = f"growth over {int(r['n'])} {points}, interval from their increments"
        return (key, label, float(r["per_crd"]), float(r["per_crd_low"]), float(r["per_crd_high"]), "bytes/CRD", source)

    total = _fit_row(fits, phase, "bytes", TOTAL)
    if total is not None:
        rows.append(per_crd("heap_per_crd", f"Heap in use per CRD (profiles, {phase})", total, "heap profiles"))
    other_phase = "installed" if phase == "served" else "served"
    total_other = _fit_row(fits, other_phase, "bytes", TOTAL)
    if total_other is not None:
        label = f"Heap in use per CRD (profiles, {other_phase})"
        rows.append(per_crd(f"heap_per_crd_{other_phase}", label, total_other, "heap profiles"))
    for metric, label in (
        ("rss_bytes", "RSS per CRD (metrics)"),
        ("heap_inuse_bytes", "Heap in use per CRD (metrics)"),
    ):
        sel = sfits[(sfits["phase"] == phase) & (sfits["metric"] == metric)] if len(sfits) else sfits
        if len(sel):
            rows.append(per_crd(f"{metric}_per_crd", f"{label}, {phase}", sel.iloc[0], "marks"))

    # Per CRD by cause, largest first, and what no rule explains.
    causes = fits[(fits["phase"] == phase) & (fits["metric"] == "bytes") & (~fits["cause"].isin([TOTAL, OTHER]))]
    causes = causes.sort_values("per_crd", ascending=False, kind="stable").head(top_causes)
    for r in causes.itertuples(index=False):
        rows.append(
            (
                f"cause:{r.cause}",
                f"per CRD: {r.cause} ({100 * r.share:.0f}% of growth)",
                float(r.per_crd),
                float(r.per_crd_low),
                float(r.per_crd_high),
                "bytes/CRD",
                "heap profiles by cause",
            )
        )
    share = unattributed_share(fits, phase, "bytes")
    if not is_missing(share):
        rows.append(
            (
                "unattributed_share",
                "Growth no attribution rule explains",
                share,
                nan,
                nan,
                "share",
                "cause 'other' / total",
            )
        )
    return pd.DataFrame(rows, columns=NUMBER_COLUMNS)


def object_headline(numbers: pd.DataFrame) -> str | None:
    """The headline of a run that grew objects: what each kind's object holds, by cause, and the
    amplification, custom resources against the control kinds (``None`` without per-object rows)."""
    by = numbers.set_index("key")
    kinds = [k.split(":", 1)[1] for k in numbers["key"] if k.startswith("heap_per_object:")]
    if not kinds:
        return None
    parts = []
    for kind in sorted(kinds, key=lambda k: k != CUSTOM_RESOURCES):
        r = by.loc[f"heap_per_object:{kind}"]
        label = KIND_LABELS.get(kind, kind)
        sent = by.loc[f"object_bytes:{kind}", "value"] if f"object_bytes:{kind}" in by.index else None
        text = f"a {label}" + (f" of {fmt_bytes(sent)}" if sent else "") + f" holds {fmt_bytes(r['value'])} of heap"
        ci = fmt_interval(r["low"], r["high"], "bytes")
        extras = [f"95% CI {ci}"] if ci else []
        if f"amplification:{kind}" in by.index:
            a = by.loc[f"amplification:{kind}"]
            extras.append(f"{a['value']:.1f}× its {fmt_bytes(by.loc[f'serialized_bytes:{kind}', 'value'])} serialized")
        causes = numbers[numbers["key"].str.startswith(f"object_cause:{kind}:")].head(3)
        if len(causes):
            extras.append(
                "mostly "
                + ", ".join(f"{k.rsplit(':', 1)[1]} {fmt_bytes(v)}" for k, v in zip(causes["key"], causes["value"]))
            )
        parts.append(text + (f" ({'; '.join(extras)})" if extras else ""))
    sentence = "; ".join(parts)
    ratios = numbers[numbers["key"].str.startswith("ratio:")]
    for key, value in zip(ratios["key"], ratios["value"]):
        other = key.split("/", 1)[1]
        sentence += f"; a custom resource costs {value:.1f}× a {KIND_LABELS.get(other, other)}"
    return sentence[0].upper() + sentence[1:] + "."


def compute_findings(manifest: Manifest | Mapping, analysis, memory: pd.DataFrame | None = None, **options) -> Findings:
    """:func:`provenance` and :func:`key_numbers` together, with the analysis' warnings (a run
    that did not complete, profiles left out) and the sections of the registry's analyses
    (:func:`crdscale.analysis.registry.report_sections`: the LISTs of its objects when it timed them)."""
    return Findings(
        provenance(manifest, _process_job(analysis)),
        key_numbers(analysis, memory, **options),
        list(getattr(analysis, "warnings", [])),
        report_sections(getattr(analysis, "results", {})),
    )


def _process_job(analysis) -> str | None:
    """The job the analysis read RSS from (``None`` when it had no process series)."""
    process = table(getattr(analysis, "results", {}), "process")
    if process is None or not len(process):
        return None
    rss = process[process["metric"] == "process_resident_memory_bytes"]
    return str(rss["source"].iloc[0]) if len(rss) else None


# --------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def numbers_markdown(numbers: pd.DataFrame) -> str:
    """The key numbers as a Markdown table: finding, value, 95% CI, source."""
    lines = ["| finding | value | 95% CI | source |", "|---|---:|---|---|"]
    for r in numbers.itertuples(index=False):
        lines.append(
            f"| {_md_escape(r.finding)} | {fmt_value(r.value, r.unit)} | "
            f"{fmt_interval(r.low, r.high, r.unit)} | {_md_escape(r.source)} |"
        )
    return "\n".join(lines)


def frame_markdown(frame: pd.DataFrame) -> str:
    """A table of strings as Markdown (``|`` in cells escaped)."""
    lines = ["| " + " | ".join(map(_md_escape, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join("" if is_missing(v) else _md_escape(v) for v in row) + " |")
    return "\n".join(lines)


def warnings_markdown(warnings: Sequence[str]) -> list[str]:
    """Markdown lines stating each warning (a quoted **Warning:** line each, then a blank line); none when empty."""
    # A blank line after each: consecutive quoted lines would render as one paragraph.
    return [line for w in warnings for line in (f"> **Warning:** {_md_escape(w)}", "")]


def provenance_markdown(prov: dict[str, str]) -> str:
    """Provenance as a two-column Markdown table."""
    lines = ["| | |", "|---|---|"]
    lines += [f"| **{_md_escape(k)}** | {_md_escape(v)} |" for k, v in prov.items()]
    return "\n".join(lines)


def headline(numbers: pd.DataFrame) -> str:
    """One sentence: how memory grew and what a CRD costs, e.g. for the report's first line."""
    by = numbers.set_index("key")

    def get(key):
        return by.loc[key] if key in by.index else None

    objects = object_headline(numbers)
    if objects is not None:
        return objects
    crds, per_crd, rss0, rss1 = get("crds"), get("heap_per_crd"), get("rss_bytes_baseline"), get("rss_bytes_final")
    parts = []
    if crds is not None and rss0 is not None and rss1 is not None:
        parts.append(
            f"RSS grew from {fmt_bytes(rss0['value'])} to {fmt_bytes(rss1['value'])} with {int(crds['value'])} CRDs"
        )
    if per_crd is not None:
        ci = fmt_interval(per_crd["low"], per_crd["high"], "bytes")
        parts.append(f"the heap grew by {fmt_bytes(per_crd['value'])} per CRD" + (f" (95% CI {ci})" if ci else ""))
    causes = numbers[numbers["key"].str.startswith("cause:")].head(3)
    if len(causes):
        parts.append(
            "mostly "
            + ", ".join(f"{k.split(':', 1)[1]} {fmt_bytes(v)}" for k, v in zip(causes["key"], causes["value"]))
        )
    return ("; ".join(parts) + ".") if parts else "No per-CRD numbers (fewer than two CRD counts profiled)."


def findings_markdown(
    findings: Findings,
    figures: Sequence[tuple[str, str]] = (),
    *,
    title: str = "crdscale findings",
    report_html: str | None = None,
) -> str:
    """``findings.md``: headline, provenance, key numbers, then figures
    (``(caption, png path relative to the file)``; an SVG of the same name sits next to each)."""
    parts = [
        f"# {title}",
        "",
        *warnings_markdown(findings.warnings),
        headline(findings.numbers),
        "",
        "## What was run",
        "",
        provenance_markdown(findings.provenance),
        "",
        "## Key numbers",
        "",
        numbers_markdown(findings.numbers),
        "",
    ]
    for section in findings.sections:
        parts += [f"## {section.title}", "", section.note, "", frame_markdown(section.table), ""]
    if figures:
        parts += ["## Figures", ""]
        for caption, png in figures:
            svg = png[: -len(".png")] + ".svg" if png.endswith(".png") else None
            parts += [f"**{caption}**" + (f" ([SVG]({svg}))" if svg else ""), "", f"![{caption}]({png})", ""]
    parts.append(
        "Bytes per CRD are the growth of heap in use from the first profile to the last per CRD, with 95% "
        "confidence intervals from the step increments and the profiles' own sampling variance (Student's t; Go's heap sampling "
        "carries a profile's error into every later one, so the steps, not the profiles, are independent: "
        "see `crdscale.analysis.intervals`); causes come from crdscale's attribution rules "
        "(`crdscale.analysis.attribution.RULES`). The heap profiles are taken right after a forced GC "
        "(`gc=1`) and count live objects only; the `heap_inuse` metric is sampled at any moment and also "
        "holds garbage not yet collected and partly empty spans, so its per-CRD slope is larger. "
        "An interval is this run's own: it holds the noise this run's profiles show, not how much the cost moves "
        "from run to run; repeated at provider scale, runs varied more than one run's intervals say "
        "(docs/results/repeatability.md). Where a number must hold across runs, repeat the run "
        "(`[matrix] repeat`) and quote the repeats' mean."
        + (
            " Bytes per object are the growth over the steps that added objects of that kind, per object "
            "added, with intervals from those steps' increments; their causes come from "
            "`crdscale.analysis.attribution.OBJECT_RULES`; the amplification divides them by the object's "
            "serialized size (the server's `apiserver_resource_size_estimate_bytes` when recorded)."
            if findings.numbers["key"].str.startswith("heap_per_object:").any()
            else ""
        )
        + (f" Full report: {report_html}." if report_html else "")
    )
    return "\n".join(parts) + "\n"


def per_crd_table(fits: pd.DataFrame, phase: str = "served", metric: str = "bytes") -> pd.DataFrame:
    """Per-CRD fits of one phase as a readable table: ``cause, per CRD, 95% CI low, 95% CI high,
    share of growth (%), base, r2, points``; bytes become KiB (``base``: MiB), biggest first, total last."""
    sel = fits[(fits["phase"] == phase) & (fits["metric"] == metric)]
    kib, mib = (2**10, 2**20) if metric == "bytes" else (1, 1)
    unit, base_unit = ("KiB", "MiB") if metric == "bytes" else ("objects", "objects")
    return pd.DataFrame(
        {
            "cause": sel["cause"].to_numpy(),
            f"per CRD ({unit})": (sel["per_crd"] / kib).round(1).to_numpy(),
            "95% CI low": (sel["per_crd_low"] / kib).round(1).to_numpy(),
            "95% CI high": (sel["per_crd_high"] / kib).round(1).to_numpy(),
            "share of growth (%)": (100 * sel["share"]).round(1).to_numpy(),
            f"at 0 CRDs ({base_unit})": (sel["base"] / mib).round(1).to_numpy(),
            "r2": sel["r2"].round(3).to_numpy(),
            "points": sel["n"].to_numpy(),
        }
    )
