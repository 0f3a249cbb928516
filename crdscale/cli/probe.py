"""Redo the client-side and request-cost experiments: discovery, LIST cost, APF seats, client memory.

Each probe writes a run directory (runs/<UTC time>-probe-<name>/) with a
manifest.json and its tables under probes/, and prints a summary table.
Objects it creates carry crdscale's ownership labels and are deleted afterwards.

  crdscale probe discovery                 # legacy (per limit) + aggregated + kubectl
  crdscale probe discovery --sweep         # 192 and 368 group-versions: client-go measured vs predicted
  crdscale probe discovery --sweep --kubectl 1.23.3,1.24.0,1.37.1   # plus kubectl built at those versions
  crdscale probe list                      # 2,000 custom resources, every LIST kind, from the watch cache and from etcd
  crdscale probe list --secrets 100 --secret-bytes 100000 --custom-resources 0
  crdscale probe list --pods 1000 --pod-bytes 20000   # plus 1,000 Pods of ~20 KB (fieldSelector=spec.nodeName)
  crdscale probe list --load-shapes 40x1000000,4000x10000 --load 1,4,16   # memory vs concurrency: few large vs many small
  crdscale probe apf                       # seats: object-count vs size-based vs server
  crdscale probe clientmem                 # client-go cache of Secrets: full, metadata-only, transformed; heap and RSS
  crdscale probe clientmem --cache custom-resources --objects 10000 --object-bytes 1024   # 10k CRs of ~1 KiB
  crdscale probe clientmem --cache crds --crds-from provider.xpkg --modes full,transform   # CRDs with/without schemas
  crdscale probe list -o json              # the tables as one JSON document on stdout (for scripts and CI)
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import logging
import sys
import time
from pathlib import Path

from crdscale.cli.common import (
    add_cluster_arguments,
    add_output_argument,
    add_yes_argument,
    confirm_cluster_write,
    print_json,
    resolve_kubeconfig,
)
from crdscale.collect import probes
from crdscale.collect.probes import configs
from crdscale.units import COLUMN_FORMATS, blank_missing


class Command:
    """Redo the client-side and request-cost experiments (discovery, LIST, APF, client memory).

    Each probe writes runs/<UTC time>-probe-<name>/ with manifest.json and its
    tables, prints a summary, and deletes the objects it created.

      crdscale probe discovery --sweep   # measured vs predicted throttling, 192 and 368 group-versions
      crdscale probe list                # latency, bytes, server CPU per LIST kind: watch cache vs etcd
      crdscale probe apf                 # APF seats: object-count vs size-based vs the server
      crdscale probe clientmem           # client-go cache memory: full, metadata-only, transformed
    """

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="probe", metavar="PROBE")
        sub.required = True
        for name, cls in configs.PROBES.items():
            # The config's docstring opens --help: what the probe measures, how, and what it reproduces.
            examples = "\n".join(line for line in __doc__.splitlines() if f"crdscale probe {name} " in line + " ")
            p = sub.add_parser(
                name,
                help=cls.summary,
                description=f"{inspect.cleandoc(cls.__doc__)}\n\nExamples:\n{examples}",
                formatter_class=argparse.RawDescriptionHelpFormatter,
            )
            add_cluster_arguments(p)
            add_yes_argument(p)
            p.add_argument(
                "--runs-dir", metavar="DIR", help="parent of the run directory (default: $CRDSCALE_RUNS or ./runs)"
            )
            p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
            add_output_argument(p)
            configs.add_arguments(p, cls)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        config = configs.from_args(configs.PROBES[args.probe], args)  # bad values fail before anything starts

        def body(run: ProbeRun):
            result = probes.run_probe(args.probe, run.cluster, run.writer, config, run_id=run.run_id)
            shown = {**result.tables, **result.derived}
            for section in result.sections:
                print(f"\n{section.title}")
                if section.columns:
                    formats = {c: COLUMN_FORMATS[u] for c, u in section.units.items()}
                    _print(shown[section.table], section.columns, formats)
                if section.note:
                    print(section.note)
            return result.exit_code, result.summary, shown

        return _run(args.probe, args, config.parameters(), body)


# --- shared plumbing ------------------------------------------------------------


class ProbeRun:
    """A standalone probe's run directory (through the one run-directory writer) and its cluster."""

    def __init__(self, name: str, args: argparse.Namespace, parameters: dict):
        # lazy: would bring requests, yaml into --help
        from crdscale.cluster.clients import connect
        from crdscale.ownership import new_run_id
        from crdscale.paths import runs_dir
        from crdscale.rundir import RunWriter

        self.name = name
        self.run_id = new_run_id()
        self.kubeconfig = resolve_kubeconfig(args.kubeconfig)
        confirm_cluster_write(self.kubeconfig, args.context, yes=args.yes, what=f"probe {name}")
        self.cluster = connect(self.kubeconfig, args.context)
        self.server_version = self.cluster.server_version()
        self.writer = RunWriter.create(Path(args.runs_dir) if args.runs_dir else runs_dir(), f"probe-{name}")
        self.dir = self.writer.path
        self.started = time.time()
        self.manifest = self.writer.start_manifest(
            run_id=self.run_id,
            kind="probe",
            probe=name,
            parameters=parameters,
            target={"kind": "kubeconfig", "server": self.cluster.server, "kubeconfig": str(self.kubeconfig)},
        )
        self.writer.update_manifest(versions={**self.manifest["versions"], "kube-apiserver": self.server_version})

    def finish(self, status: str, reason: str | None = None, **extra) -> None:
        # lazy: would add 8 modules to --help
        from crdscale.rundir import read_run

        tables = sorted(read_run(self.dir).probe_tables())
        self.manifest = self.writer.finish(
            status, reason, seconds=round(time.time() - self.started, 3), tables=tables, **extra
        )
        self.cluster.close()


def _run(name: str, args, parameters: dict, body) -> int:
    """Run one probe's ``body(run) -> (exit code, manifest extras, {table name: DataFrame})``
    in its run directory; with ``-o json`` the tables go to stdout as one JSON document and the
    human tables to stderr (nowhere with --quiet). Progress is the library's logging (see cli.main),
    silenced below warnings by --quiet."""
    run = ProbeRun(name, args, parameters)
    if args.quiet:  # as `crdscale -q probe ...`
        logging.getLogger("crdscale").setLevel(logging.WARNING)
    logging.getLogger(__name__).info(f"probe {name}: {run.cluster.server} ({run.server_version}) -> {run.dir}")
    as_json = args.output == "json"
    human = contextlib.nullcontext()
    if as_json:
        human = contextlib.redirect_stdout(io.StringIO() if args.quiet else sys.stderr)
    try:
        with human:
            code, extra, tables = body(run)
    except BaseException as err:
        run.finish("interrupted" if isinstance(err, KeyboardInterrupt) else "failed", str(err) or type(err).__name__)
        raise
    status = "completed" if code == 0 else "failed"
    run.finish(status, None if code == 0 else f"exit code {code}", **extra)
    if as_json:
        document = {"probe": name, "run_dir": run.dir, "status": status, "exit_code": code}
        document |= {"server": run.cluster.server, "server_version": run.server_version, "parameters": parameters}
        print_json(document | {"result": extra, "tables": tables})
    else:
        print(f"\nrun directory: {run.dir}")
    return code


# Count-like columns print as integers even when missing values made them floats.
_INT_COLUMNS = ("group_versions", "requests", "bytes", "revalidate_status", "revalidate_bytes", "gets", "items")
_INT_COLUMNS += ("pages", "errors")


def _print(frame, columns, formats=None) -> None:
    # lazy: would bring pandas, numpy, pyarrow into --help
    import pandas as pd

    shown = frame[[c for c in columns if c in frame.columns]].astype(object)
    formatters = {c: COLUMN_FORMATS["int"] for c in _INT_COLUMNS if c in shown.columns} | dict(formats or {})
    formatters = {c: blank_missing(formatters.get(c, str)) for c in shown.columns}
    with pd.option_context("display.max_rows", 500, "display.width", 250, "display.max_colwidth", 90):
        print(shown.to_string(index=False, formatters=formatters, na_rep=""))
