"""Fit the memory cost per CRD, by cause, from a run directory's heap profiles.

Examples:
  crdscale analyze runs/20261122T031500Z-default
  crdscale analyze runs/<run> --metric objects --confidence 0.9
  crdscale analyze runs/<run-50-props> runs/<run-100-props>   # adds bytes per property

Reads RUN_DIR/profiles/heap-stepNN-crdsNNNN[-installed].pb.gz (and
RUN_DIR/metrics/series.parquet when present), attributes every heap sample to
a cause, and gives each cause's growth per CRD from the first profile to the
last, with a confidence interval from the step increments (Go's heap
sampling carries a profile's error into every later profile, so the steps,
not the profiles, are independent; the sampling variance the profiles report
is its known part and its floor: never narrower than the sampling alone
allows; with fewer than 3 steps a warning says that causes of a sample or two
per step are unreliable), for the served phase and,
when recorded, the installed phase. Writes RUN_DIR/analysis/percrd.csv and
.parquet (plus residuals and series fits). Given several runs whose CRD
schemas differ in size, also fits bytes per schema property by cause.

-o json prints one document instead of the tables: {"metric", "confidence",
"runs": [{"run_dir", "status", "reason", "heap_profiles", "skipped_profiles",
"warnings", "evidence", "phases", "fits", "install_serve", "series_fits", "per_object",
"amplification", "openapi_v2", "components", "components_skipped", "unattributed_share",
"written"}], "per_property"}, each table a list of records (bytes and objects per CRD, null
where undefined).

Per component: kube-apiserver's, kube-controller-manager's and etcd's heap in
use per CRD (each from its own heap profiles, taken at the same marks, fitted
as the total is) and RSS per CRD ("components", analysis/components.csv); a
run without a component's profiles says why ("components_skipped").

A run that grew objects (steps.grow = "objects") adds the per-object view:
heap per object of each kind (custom resources, ConfigMaps, Secrets) by
cause, with intervals from the increments of the steps that added that
kind, and the amplification ratio (heap per object over its serialized
size, the server's apiserver_resource_size_estimate_bytes when recorded).

A run that fetched /openapi/v2 after its profiles (profiles.openapi_v2) has
a third phase, openapiv2 (served, and a client fetched the v2 spec), and
adds what that GET holds per CRD: each step's openapiv2 profile minus its
served profile over the CRDs the step added (the server keeps the previous
step's spec until the next GET replaces it), interval from the steps' spread.

CRD counts and phases come from the run's events.jsonl (a profile's file name
is only a label: a name that disagrees with its event is an error). A profile
that cannot be fitted (a CPU profile under a heap name, one no event records)
is left out and named with why; a run that did not complete is stated with its
reason; both under the table's first line (-o json: "warnings" and stderr).

The run's files are checked against each other first (crdscale.rundir.evidence): a heap
profile of another program or build, profiles swapped or copied between steps, or a CRD
count that falls refuses the run (one line, exit 2); a series that is not finite, repeats
a timestamp, lies outside the run or misses its rows is left out (no RSS figure from it);
a status or version the run's other files deny is stated. Each is counted and named first
among the warnings (docs/explanation/evidence.md); -o json also lists them in "evidence",
one {"code", "severity", "affects", "message", "consequence", "files", "steps"} each.
"""

from __future__ import annotations

import argparse
import sys

from crdscale.cli.common import add_output_argument, print_json, write_table
from crdscale.errors import UsageError
from crdscale.units import fmt_per_crd, is_missing

# `crdscale --help` imports this module: analysis/ and rundir/ (pandas, numpy, protobuf) are imported in
# the functions that use them, so that the help stays fast. Every function-level import below is for that.


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directory written by `crdscale run`")
        parser.add_argument(
            "--metric",
            choices=["bytes", "objects"],
            default="bytes",
            help="what to print (both are written): heap bytes or objects in use",
        )
        parser.add_argument(
            "--confidence", type=float, default=0.95, help="confidence level of the intervals (default 0.95)"
        )
        parser.add_argument("--no-write", action="store_true", help="print only; do not write RUN_DIR/analysis/")
        add_output_argument(parser)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        # Lazy: --help stays fast (see the note at the top).
        from crdscale.analysis.percrd import unattributed_share
        from crdscale.analysis.registry import csv_files
        from crdscale.analysis.run import analyze_run, per_property_from_runs
        from crdscale.rundir import read_run

        if not 0 < args.confidence < 1:
            raise UsageError("--confidence must be between 0 and 1")
        table = args.output == "table"
        analyses, results, runs = [], [], [read_run(run_dir) for run_dir in args.run_dirs]
        for run in runs:
            analysis = analyze_run(run, confidence=args.confidence)
            analyses.append(analysis)
            if not table:  # the table states them under its first line; a script's reader sees stderr
                for warning in analysis.warnings:
                    print(f"crdscale: warning: {run.path}: {warning}", file=sys.stderr)
            if run.status == "abandoned":
                print(f"crdscale: export its series with: crdscale recover {run.path}", file=sys.stderr)
            shares = {phase: unattributed_share(analysis.fits, phase, args.metric) for phase in analysis.phases}
            if table:
                print(render(analysis, args.metric, args.confidence))
                for phase, share in shares.items():
                    if not is_missing(share):
                        print(f"unattributed ({phase}): {100 * share:.1f}% of the growth per CRD")
            written = []
            if not args.no_write:
                out = run.output_dir()
                written = [
                    write_table(analysis.fits, out / "percrd.csv"),
                    write_table(analysis.fits, out / "percrd.parquet"),
                    write_table(analysis.residuals, out / "percrd_residuals.csv"),
                    write_table(analysis.points, out / "percrd_points.csv"),
                ]
                if len(analysis.series_fits):
                    written.append(write_table(analysis.series_fits, out / "series_percrd.csv"))
                if len(analysis.install_serve):
                    written.append(write_table(analysis.install_serve, out / "install_serve.csv"))
                written += [write_table(frame, out / name) for name, frame in csv_files(analysis.results)]
                if table:
                    print("wrote " + ", ".join(str(p) for p in written))
            if table:
                print()
            results.append(_json_run(analysis, args.metric, shares, written))
        per_property = None
        if len(analyses) > 1:
            per_property = per_property_from_runs(analyses, metric=args.metric, confidence=args.confidence)
            if len(per_property) and table:
                print(f"Per schema property ({args.metric}, served phase, {100 * args.confidence:g}% CI):")
                for r in per_property.itertuples(index=False):
                    print(
                        f"{r.cause:<18} {fmt_per_crd(r.per_property, args.metric):>12} per property "
                        f"[{fmt_per_crd(r.per_property_low, args.metric)}, {fmt_per_crd(r.per_property_high, args.metric)}]"
                        f"  + {fmt_per_crd(r.fixed_per_crd, args.metric)} per CRD"
                    )
            elif table:
                print("(runs do not differ in properties per CRD: no per-property fit)")
            if len(per_property) and not args.no_write:
                for run in runs:
                    write_table(per_property, run.output_dir() / "per_property.csv")
        if not table:
            print_json(
                {
                    "metric": args.metric,
                    "confidence": args.confidence,
                    "runs": results,
                    "per_property": per_property if per_property is not None and len(per_property) else None,
                }
            )
        return 0


def _json_run(analysis, metric: str, shares: dict, written: list) -> dict:
    """One run's results for ``-o json``: every fit (both metrics), the unattributed share of ``metric``."""
    from crdscale.analysis.registry import json_tables  # lazy: --help stays fast

    return {
        "run_dir": analysis.run_dir,
        "status": analysis.status,
        "reason": analysis.reason,
        "heap_profiles": len(analysis.profiles),
        "skipped_profiles": [{"file": s.file, "reason": s.reason} for s in analysis.skipped],
        "warnings": analysis.warnings,
        "evidence": [p.to_json() for p in analysis.evidence],
        "phases": analysis.phases,
        "fits": analysis.fits,
        "install_serve": analysis.install_serve,
        "series_fits": analysis.series_fits,
        **json_tables(analysis.results),  # the registry's analyses (crdscale.analysis.registry), in order
        "unattributed_share": shares,
        "written": written,
    }


def _r2(value: float) -> str:
    return "   n/a" if is_missing(value) else f"{value:6.3f}"


def headline(analysis, metric: str = "bytes", confidence: float = 0.95) -> str | None:
    """The answer in one sentence, as ``compare`` opens with one: heap per CRD of the last phase (served,
    when the run served its CRDs) with its interval, the two causes that hold most, and RSS per CRD."""
    fits = analysis.fits[analysis.fits["metric"] == metric] if len(analysis.fits) else analysis.fits
    if not len(fits):
        return None
    phase = "served" if "served" in set(fits["phase"]) else fits["phase"].iloc[-1]
    fits = fits[fits["phase"] == phase]
    total = fits[fits["cause"] == "total"]
    if not len(total):
        return None
    t = total.iloc[0]
    manifest = analysis.manifest or {}
    version = ((manifest.get("versions") or {}).get("kube-apiserver")) or "kube-apiserver"
    causes = fits[(fits["cause"] != "total") & (fits["per_crd"] > 0)].nlargest(2, "per_crd")
    mostly = " and ".join(f"{r.cause} ({fmt_per_crd(r.per_crd, metric)})" for r in causes.itertuples(index=False))
    crds = int(analysis.points["crds"].max()) if len(analysis.points) and "crds" in analysis.points else None
    what = "of heap" if metric == "bytes" else "heap objects"
    sentence = (
        f"**kube-apiserver {version} holds {fmt_per_crd(t.per_crd, metric)} {what} per {phase} CRD "
        f"({100 * confidence:g}% CI [{fmt_per_crd(t.per_crd_low, metric)}, {fmt_per_crd(t.per_crd_high, metric)}]"
        + (f", {crds} CRDs" if crds else "")
        + ")"
        + (f", mostly {mostly}" if mostly else "")
    )
    rss = analysis.series_fits
    if len(rss):
        rss = rss[(rss["metric"] == "rss_bytes") & (rss["phase"] == phase)]
        if len(rss):
            sentence += f"; RSS grows {fmt_per_crd(rss.iloc[0].per_crd, 'bytes')} per CRD"
    return sentence + ".**"


def render(analysis, metric: str = "bytes", confidence: float = 0.95) -> str:
    """The per-CRD table as text: the answer in one sentence, then one block per phase, causes by cost,
    total last, and what the columns mean."""
    from crdscale.analysis.process import source_label  # lazy: --help stays fast
    from crdscale.analysis.registry import text_lines  # lazy: as above

    left_out = f"; {len(analysis.skipped)} left out" if analysis.skipped else ""
    answer = headline(analysis, metric, confidence)
    lines = [answer, ""] if answer else []
    lines += [f"Run: {analysis.run_dir}  ({len(analysis.profiles)} heap profiles fitted{left_out})"]
    lines += [f"warning: {w}" for w in analysis.warnings]
    unit = "bytes" if metric == "bytes" else "objects"
    level = f"{100 * confidence:g}% CI"
    for phase in analysis.phases:
        fits = analysis.fits[(analysis.fits["phase"] == phase) & (analysis.fits["metric"] == metric)]
        if not len(fits):
            continue
        n = int(fits["n"].iloc[0])
        lines.append("")
        lines.append(f"Heap in use per CRD ({unit}), phase {phase}, {n} points, {level}:")
        lines.append(f"{'cause':<18} {'per CRD':>14} {level:>29} {'share':>7} {'base':>14} {'r2':>6}")
        for r in fits.itertuples(index=False):
            ci = f"[{fmt_per_crd(r.per_crd_low, metric)}, {fmt_per_crd(r.per_crd_high, metric)}]"
            share = "" if is_missing(r.share) else f"{100 * r.share:6.1f}%"
            lines.append(
                f"{r.cause:<18} {fmt_per_crd(r.per_crd, metric):>14} {ci:>29} {share:>7} "
                f"{fmt_per_crd(r.base, metric):>14} {_r2(r.r2)}"
            )
    split = analysis.install_serve
    if len(split) and len(split[split["metric"] == metric]):
        lines.append("")
        lines.append(
            f"Installing vs serving ({unit} per CRD, paired increments: install a step, then serve it; {level}):"
        )
        lines.append(f"{'cause':<18} {'installed':>14} {level:>29} {'+ served':>14} {level:>29}")
        for r in split[split["metric"] == metric].itertuples(index=False):
            ci_i = f"[{fmt_per_crd(r.per_installed_low, metric)}, {fmt_per_crd(r.per_installed_high, metric)}]"
            ci_s = f"[{fmt_per_crd(r.per_served_low, metric)}, {fmt_per_crd(r.per_served_high, metric)}]"
            lines.append(
                f"{r.cause:<18} {fmt_per_crd(r.per_installed, metric):>14} {ci_i:>29} "
                f"{fmt_per_crd(r.per_served, metric):>14} {ci_s:>29}"
            )
    lines += text_lines(analysis.results, metric, confidence)  # the registry's analyses, in order
    if len(analysis.series_fits):
        lines.append("")
        points = analysis.series_points
        sources = (
            "; ".join(
                f"{metric} from {source_label(job)}"
                for metric, job in points.drop_duplicates("metric")[["metric", "source"]].itertuples(index=False)
            )
            if "source" in points
            else "kube-apiserver's /metrics"
        )
        lines.append(f"From the metrics series (bytes per CRD, {level}; {sources}):")
        for r in analysis.series_fits.itertuples(index=False):
            ci = f"[{fmt_per_crd(r.per_crd_low, 'bytes')}, {fmt_per_crd(r.per_crd_high, 'bytes')}]"
            lines.append(f"{r.metric + ' (' + r.phase + ')':<30} {fmt_per_crd(r.per_crd, 'bytes'):>14} {ci:>29}")
    lines += [
        "",
        "points: the CRD counts a phase was profiled at (the baseline and each step); the heap profiles fitted",
        "count both phases. base: the fit's heap at 0 CRDs (what the cause held before the first CRD). r2: how",
        "well a line through the points explains them (1 = all of it; negative: worse than a flat line, so read",
        "that cause's interval, not its slope).",
        "per CRD: growth from the first profile to the last. CI: Student's t from the step increments (Go's",
        "heap sampling carries each profile's error into the next, so steps, not profiles, are independent):",
        "the sampling variance the profiles report plus what the increments add beyond it, never narrower",
        "than the sampling alone; a cause no heap sample touched gets the bounds one 512 KiB sample allows.",
        "-o json adds sampling_se, what heap sampling alone would give. benchmarks/coverage.py checks coverage.",
    ]
    return "\n".join(lines)
