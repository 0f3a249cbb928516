"""Compare runs: bytes per CRD by cause and their difference with its interval, memory, CPU, a profile diff.

Examples:
  crdscale compare data/reference-run data/reference-run-v1.24.0
  crdscale compare runs/A runs/B runs/C --out /tmp/cmp
  crdscale compare runs/A runs/B -o json

The first run is the reference; every other run is compared against it. For
each cause of heap growth (zap counters, watch caches, OpenAPI...) the bytes
per served CRD of each run (its growth from first to last profile) and their
difference, with an interval from both runs' own variances (Welch); repeats of
a configuration (a matrix's repeat) are pooled and their spread gives the
interval. Also: RSS, heap in use, goroutines, open fds and CPU seconds
per CRD and at the end, peak RSS, seconds to Established, and the last served
heap profiles diffed (go tool pprof -diff_base) per CRD. Runs of different
CRD sets (by sha256) are compared with a warning; so are runs that did not
complete (with their recorded reason) and profiles a run's fits leave out. A
run compared with itself (also by two paths, or a copy with its run_id) is
refused, and so is a run whose files contradict each other where its heap
numbers come from; other evidence problems (a series left out, a version the
server denies, one build under two versions) are named under the headline
(docs/explanation/evidence.md); -o json lists them in "evidence", one {"run",
"code", "severity", "affects", "message", "consequence", "files", "steps"} each.

Process figures (RSS, CPU seconds, open fds, threads) come from the most
complete record each run holds, named in the table's source column: the 1 s
/proc samples of a local target (job kube-apiserver-proc) unless kube-apiserver's
own /metrics cover the run better; "metrics resolution" describes that record.

A gate for CI: --fail-on 'total.per_crd > +10%' (repeatable) judges each
compared run; a condition regresses only when its 95% interval's bound crosses
the threshold (the low end for >, the high end for <), not the point estimate
alone. Then the command exits 1, appends a "Gate" section to its output, and
writes JUnit XML (--junit FILE, one test case per condition and run) and the
markdown summary (--summary FILE). Figures: CAUSE.per_crd (heap per served CRD
by cause, or total), CAUSE.per_object, rss|heap_inuse|cpu|goroutine_count|open_fds
.per_crd, SERIES_peak / SERIES_end (e.g. rss_peak), and the other processes:
kcm.per_crd and etcd.per_crd (kube-controller-manager's and etcd's heap per
served CRD, from their own heap profiles), kcm.rss.per_crd and etcd.rss.per_crd
(their RSS per served CRD); thresholds are +10% (of the reference's value),
200MiB, -50KiB, 0.5, 2s. A component a run did not profile passes, and says so.
Examples:
  crdscale compare runs/base runs/new --fail-on 'total.per_crd > +10%' --fail-on 'rss_peak > +200MiB' --junit gate.xml
  crdscale compare runs/base runs/new --fail-on 'kcm.per_crd > +10%' --fail-on 'etcd.per_crd > +50KiB'

With --out DIR, also executes notebooks/compare.py and writes DIR/findings.md
(headline = the delta, both runs' provenance), report.html, report-nocode.html
and the figures; the path of the HTML is printed last.
"""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from crdscale.cli.common import add_notebook_arguments, add_output_argument
from crdscale.errors import UsageError

log = logging.getLogger(__name__)


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories; the first is the reference")
        parser.add_argument(
            "--label",
            action="append",
            default=[],
            metavar="LABEL",
            help="a name per run, in order (default: what differs: version, matrix cell, directory)",
        )
        parser.add_argument(
            "--out", metavar="DIR", help="also render the comparison notebook, HTML and findings.md here"
        )
        add_notebook_arguments(parser, timeout=False)
        add_output_argument(parser, human="text")
        parser.add_argument(
            "--fail-on",
            action="append",
            default=[],
            metavar="CONDITION",
            help="exit 1 when this holds with the interval's bound, e.g. 'total.per_crd > +10%%', "
            "'rss_peak > +200MiB', 'kcm.per_crd > +10%%', 'etcd.rss.per_crd > +50KiB'",
        )
        parser.add_argument(
            "--junit", metavar="FILE", help="with --fail-on: write JUnit XML, a test case per condition"
        )
        parser.add_argument("--summary", metavar="FILE", help="with --fail-on: write the gate's markdown summary")

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        # lazy: would bring pandas, numpy, pyarrow into --help
        from crdscale.analysis.compare import compare_runs
        from crdscale.analysis.gate import evaluate, junit_xml, parse_condition, regressed, summary_markdown
        from crdscale.cli.common import check_output_file, write_output_text
        from crdscale.report.compare import comparison_json, comparison_markdown, render_comparison
        from crdscale.rundir.layout import FINDINGS_JSON

        if args.out:  # never onto a run read, into a run directory, or over a non-empty directory
            __import__("crdscale.outputs").outputs.check_out_directory(args.out, inputs=args.runs)
        if len(args.runs) < 2:
            raise UsageError("compare needs two or more run directories")
        # The gate's conditions and output paths are checked before any run is read.
        conditions = [parse_condition(text) for text in args.fail_on]
        if (args.junit or args.summary) and not conditions:
            raise UsageError("--junit and --summary need at least one --fail-on condition")
        for flag, path in (("--junit", args.junit), ("--summary", args.summary)):
            if path:
                check_output_file(path, flag)
                target = Path(path).resolve()
                if any(target.is_relative_to(Path(run).resolve()) for run in args.runs):
                    raise UsageError(f"{flag} {path}: inside a run directory being compared; write it elsewhere")
        if args.junit and args.summary and Path(args.junit).resolve() == Path(args.summary).resolve():
            raise UsageError(f"--junit and --summary name the same file {args.junit}")

        if args.out:
            result = render_comparison(args.runs, args.out, labels=args.label or None, notebooks_dir=args.notebooks)
            comparison = None
            text = result.findings_md.read_text()
        else:
            comparison = compare_runs(args.runs, args.label or None)
            text = comparison_markdown(comparison)
        gate = []
        if conditions:
            gate = evaluate(comparison or compare_runs(args.runs, args.label or None), conditions)
            text += "\n" + summary_markdown(gate)
            if args.junit:
                write_output_text(args.junit, junit_xml(gate), "--junit")
            if args.summary:
                write_output_text(args.summary, summary_markdown(gate), "--summary")
        if args.output == "json":
            data = json.loads((result.out_dir / FINDINGS_JSON).read_text()) if args.out else comparison_json(comparison)
            if conditions:
                data["gate"] = {"regressed": regressed(gate), "results": [r.to_json() for r in gate]}
            print(json.dumps(data, indent=2, default=str))
        else:
            print(text, end="")
        status = 1 if regressed(gate) else 0
        if args.out:
            for failure in result.failures:
                log.info(f"notebook failed at {failure.describe()}")
            print(result.html_nocode)
            return status or (0 if result.ok else 1)
        return status
