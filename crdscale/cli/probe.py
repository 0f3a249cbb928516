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
  crdscale probe clientmem                 # client-go cache of Secrets: full vs metadata-only, peak heap and RSS
  crdscale probe list -o json              # the tables as one JSON document on stdout (for scripts and CI)
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path

from crdscale.cli.common import KUBECONFIG_HELP, add_output_argument, print_json, resolve_kubeconfig
from crdscale.errors import UsageError


def _add_connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", metavar="PATH", help=KUBECONFIG_HELP)
    parser.add_argument("--context", help="kubeconfig context (default: current)")
    parser.add_argument(
        "--runs-dir", metavar="DIR", help="parent of the run directory (default: $CRDSCALE_RUNS or ./runs)"
    )
    parser.add_argument("--keep", action="store_true", help="leave the created objects in place")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    add_output_argument(parser)


def _add_objects(parser: argparse.ArgumentParser, *, custom_resources: int = 2000) -> None:
    g = parser.add_argument_group("objects")
    g.add_argument(
        "--custom-resources",
        type=int,
        default=custom_resources,
        metavar="N",
        help=f"custom resources to create (default {custom_resources})",
    )
    g.add_argument("--cr-bytes", type=int, default=1024, metavar="B", help="data per custom resource (default 1024)")
    g.add_argument("--secrets", type=int, default=0, metavar="N", help="Secrets to create (default 0)")
    g.add_argument("--secret-bytes", type=int, default=100_000, metavar="B", help="data per Secret (default 100000)")
    g.add_argument("--configmaps", type=int, default=0, metavar="N", help="ConfigMaps to create (default 0)")
    g.add_argument(
        "--configmap-bytes", type=int, default=10_000, metavar="B", help="data per ConfigMap (default 10000)"
    )
    g.add_argument(
        "--pods",
        type=int,
        default=0,
        metavar="N",
        help="Pods to create, bound to 10 nodes that do not exist (default 0)",
    )
    g.add_argument(
        "--pod-bytes",
        type=int,
        default=20_000,
        metavar="B",
        help="data per Pod, in environment variables (default 20000)",
    )
    g.add_argument(
        "--namespaces", type=int, default=2, metavar="N", help="spread objects over N namespaces (default 2)"
    )
    g.add_argument(
        "--repeats",
        type=int,
        default=3,
        metavar="N",
        help="measurements per LIST kind; the median is reported (default 3)",
    )
    g.add_argument("--page-size", type=int, default=500, metavar="N", help="limit for paged LISTs (default 500)")
    g.add_argument("--kinds", nargs="+", metavar="KIND", help="LIST kinds to measure (default: all)")


class Command:
    """Redo the client-side and request-cost experiments (discovery, LIST, APF, client memory).

    Each probe writes runs/<UTC time>-probe-<name>/ with manifest.json and its
    tables, prints a summary, and deletes the objects it created.

      crdscale probe discovery --sweep   # measured vs predicted throttling, 192 and 368 group-versions
      crdscale probe list                # latency, bytes, server CPU per LIST kind: watch cache vs etcd
      crdscale probe apf                 # APF seats: object-count vs size-based vs the server
      crdscale probe clientmem           # client-go cache memory: full objects vs metadata only
    """

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="probe", metavar="PROBE")
        sub.required = True

        d = sub.add_parser(
            "discovery",
            help="legacy/aggregated discovery and client-side throttling",
            description=__doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _add_connection(d)
        d.add_argument(
            "--limits",
            nargs="+",
            metavar="LIMIT",
            help="rate limits: presets legacy (100,5), kubectl-1.24 (300,50), burst-400 (400,50), disabled, or BURST,QPS "
            "(default: legacy kubectl-1.24 disabled; with --sweep: legacy kubectl-1.24 burst-400 disabled)",
        )
        d.add_argument(
            "--sweep",
            action="store_true",
            help="add CRDs in new groups up to each --targets count and compare measured with predicted delays",
        )
        d.add_argument(
            "--targets",
            nargs="+",
            type=int,
            default=[192, 368],
            metavar="GVS",
            help="group-version counts for --sweep (default 192 368)",
        )
        d.add_argument(
            "--sweep-repeats", type=int, default=1, metavar="N", help="discoveries per limit and target (default 1)"
        )
        d.add_argument("--no-kubectl", action="store_true", help="skip the kubectl measurement")
        d.add_argument(
            "--kubectl",
            metavar="VERSIONS",
            help="kubectl versions to build from Go modules and time (get pods, api-resources), "
            "e.g. 1.23.3,1.24.0,1.37.1 (default: a real kubectl on PATH, if any)",
        )
        d.add_argument(
            "--tolerance",
            type=float,
            default=0.15,
            help="sweep: allowed relative error (default 0.15); exit 1 beyond it",
        )

        lst = sub.add_parser(
            "list",
            help="LIST latency, bytes and server cost per request kind, from the watch cache and from etcd",
            description="Each LIST kind is sent to the kube-apiserver and, on a crdscale local instance, to a second "
            "kube-apiserver started with --watch-cache=false on the same etcd: the same request on the same objects, "
            "once from the watch cache and once from etcd (each place read from the server's own counters), with the "
            "etcd/cache ratios of latency, CPU and allocated bytes.\n\n" + __doc__,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _add_connection(lst)
        _add_objects(lst)
        lst.add_argument(
            "--no-etcd-comparison",
            action="store_true",
            help="do not start the second, etcd-only kube-apiserver (only the server's own paths are measured)",
        )
        lg = lst.add_argument_group("concurrent load (optional)")
        lg.add_argument(
            "--load",
            metavar="LEVELS",
            help="concurrency levels, e.g. 1,4,16 (loopback servers only unless --allow-remote-load)",
        )
        lg.add_argument("--load-requests", type=int, default=100, metavar="N", help="requests per level (default 100)")
        lg.add_argument(
            "--load-seconds", type=float, default=30.0, metavar="S", help="time limit per level (default 30)"
        )
        lg.add_argument(
            "--allow-remote-load", action="store_true", help="allow load against a non-loopback cluster (yours)"
        )
        sg = lst.add_argument_group(
            "one response size, two shapes (optional)",
            "Does kube-apiserver's memory under concurrent LISTs follow the response's bytes or its object count? "
            "Creates one namespace of Secrets per shape OBJECTSxBYTES (about the same total data), LISTs each "
            "namespace with --load clients per level (default 1,4,16) and reports, per level, peak heap and RSS growth "
            "over the level's baseline and kube-apiserver CPU, then the ratios many-small / few-large of memory, "
            "objects and bytes. Replaces the per-kind measurement; the object options above are ignored.\n"
            "  crdscale probe list --load-shapes 40x1000000,4000x10000 --load 1,4,16 --load-seconds 20",
        )
        sg.add_argument(
            "--load-shapes",
            metavar="SHAPES",
            help="comma-separated OBJECTSxBYTES, e.g. 40x1000000,4000x10000 (40 MB each; at most 1000000 B per Secret)",
        )
        sg.add_argument(
            "--load-kinds",
            default="rv0",
            metavar="KINDS",
            help="LISTs per shape: rv0 (resourceVersion=0), consistent (unset), or rv0,consistent (default rv0)",
        )

        a = sub.add_parser(
            "apf",
            help="APF seats of LISTs: object-count vs size-based estimator vs the server",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        _add_connection(a)
        _add_objects(a)
        a.add_argument(
            "--no-observe",
            action="store_true",
            help="do not replay LISTs as a non-exempt user to read the server's seats",
        )

        c = sub.add_parser("clientmem", help="peak memory of a client-go cache of full objects vs metadata only")
        _add_connection(c)
        c.add_argument("--secrets", type=int, default=100, metavar="N", help="Secrets to create (default 100)")
        c.add_argument(
            "--secret-bytes",
            type=int,
            default=1_000_000,
            metavar="B",
            help="data per Secret (default 1000000: 100 x 1 MB as in the cert-manager PR)",
        )

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        handler = {"discovery": _discovery, "list": _list, "apf": _apf, "clientmem": _clientmem}[args.probe]
        return handler(args)


# --- shared plumbing ------------------------------------------------------------


def _echo(args):
    if args.quiet:
        return None
    return lambda msg: print(msg, file=sys.stderr, flush=True)


class ProbeRun:
    """A standalone probe's run directory (through the one run-directory writer) and its cluster."""

    def __init__(self, name: str, args: argparse.Namespace, parameters: dict):
        from crdscale.cluster.clients import connect
        from crdscale.ownership import new_run_id
        from crdscale.paths import runs_dir
        from crdscale.rundir import RunWriter

        self.name = name
        self.run_id = new_run_id()
        self.kubeconfig = resolve_kubeconfig(args.kubeconfig)
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
        from crdscale.rundir import read_run

        tables = sorted(read_run(self.dir).probe_tables())
        self.manifest = self.writer.finish(
            status, reason, seconds=round(time.time() - self.started, 3), tables=tables, **extra
        )
        self.cluster.close()


def _run(name: str, args, parameters: dict, body) -> int:
    """Run one probe's ``body(run, echo) -> (exit code, manifest extras, {table name: DataFrame})``
    in its run directory; with ``-o json`` the tables go to stdout as one JSON document and the
    human tables to stderr (nowhere with --quiet)."""
    run = ProbeRun(name, args, parameters)
    echo = _echo(args)
    if echo:
        echo(f"probe {name}: {run.cluster.server} ({run.server_version}) -> {run.dir}")
    as_json = args.output == "json"
    human = contextlib.nullcontext()
    if as_json:
        human = contextlib.redirect_stdout(io.StringIO() if args.quiet else sys.stderr)
    try:
        with human:
            code, extra, tables = body(run, echo)
    except BaseException as err:
        run.finish("interrupted" if isinstance(err, KeyboardInterrupt) else "failed", str(err) or type(err).__name__)
        raise
    status = "completed" if code == 0 else "failed"
    run.finish(status, None if code == 0 else f"exit code {code}", **extra)
    if as_json:
        print_json(
            {
                "probe": name,
                "run_dir": run.dir,
                "status": status,
                "exit_code": code,
                "server": run.cluster.server,
                "server_version": run.server_version,
                "parameters": parameters,
                "result": extra,
                "tables": tables,
            }
        )
    else:
        print(f"\nrun directory: {run.dir}")
    return code


def _blank_missing(fn):
    def wrapped(v):
        if v is None or (isinstance(v, float) and v != v):
            return ""
        return fn(v)

    return wrapped


def _int(v) -> str:
    return str(int(v))


# Count-like columns print as integers even when missing values made them floats.
_INT_COLUMNS = (
    "group_versions",
    "requests",
    "bytes",
    "revalidate_status",
    "revalidate_bytes",
    "gets",
    "items",
    "pages",
    "errors",
)


def _print(frame, columns, formats=None) -> None:
    import pandas as pd

    shown = frame[[c for c in columns if c in frame.columns]].astype(object)
    formatters = {c: _int for c in _INT_COLUMNS if c in shown.columns}
    formatters.update(formats or {})
    formatters = {c: _blank_missing(fn) for c, fn in formatters.items()}
    for col in shown.columns:
        formatters.setdefault(col, _blank_missing(str))
    with pd.option_context("display.max_rows", 500, "display.width", 250, "display.max_colwidth", 90):
        print(shown.to_string(index=False, formatters=formatters, na_rep=""))


def _ms(v) -> str:
    return "" if v != v else f"{v * 1000:.1f}"


def _mib(v) -> str:
    """Bytes in MiB (2^20 B), as crdscale's other tables count them."""
    return "" if v != v else f"{v / 2**20:.3f}"


def _count(v) -> str:
    return "" if v != v else f"{v:g}"


def _s(v) -> str:
    return "" if v is None or v != v else f"{v:.2f}"


# --- discovery -------------------------------------------------------------------


def _discovery(args) -> int:
    from crdscale.collect.probes import discovery, write_tables
    from crdscale.models.tokenbucket import SWEEP_PRESETS

    names = args.limits or (list(SWEEP_PRESETS) if args.sweep else ["legacy", "kubectl-1.24", "disabled"])
    limits = discovery.validate_limits(names)
    kubectl_versions = [v.strip() for v in (args.kubectl or "").split(",") if v.strip()]
    for version in kubectl_versions:
        discovery.kubectl_limit(version)  # a malformed version fails before anything is created
    parameters = {
        "limits": [limit.label() for limit in limits],
        "sweep": args.sweep,
        "targets": args.targets,
        "repeats": args.sweep_repeats,
        "kubectl": kubectl_versions,
    }

    def body(run: ProbeRun, echo):
        extra: dict = {}
        if args.sweep:
            tables = discovery.sweep(
                run.cluster,
                run_id=run.run_id,
                targets=args.targets,
                limits=limits,
                repeats=args.sweep_repeats,
                keep=args.keep,
                with_kubectl=not args.no_kubectl,
                kubectl_versions=kubectl_versions,
                echo=echo,
            )
            write_tables(run.writer, "discovery", 0, tables, main="sweep")
            table = tables["sweep"]
            print("\nLegacy discovery: measured vs predicted client-side throttling delay (s)")
            _print(
                table,
                [
                    "group_versions",
                    "limit",
                    "command",
                    "requests",
                    "wall_s",
                    "unthrottled_wall_s",
                    "measured_delay_s",
                    "predicted_delay_s",
                    "predicted_extra_wall_s",
                    "relative_error",
                    "model_relative_error",
                    "max_limiter_wait_s",
                    "wait_relative_error",
                ],
                {
                    k: _s
                    for k in (
                        "wall_s",
                        "unthrottled_wall_s",
                        "measured_delay_s",
                        "predicted_delay_s",
                        "predicted_extra_wall_s",
                        "max_limiter_wait_s",
                    )
                }
                | {
                    k: (lambda v: "" if v != v else f"{v:.1%}")
                    for k in ("relative_error", "model_relative_error", "wait_relative_error")
                },
            )
            print(
                "measured_delay = wall - unthrottled wall; predicted_delay = token-bucket longest wait; "
                "predicted_extra_wall = the wait net of the overlapping unthrottled transfer; "
                "relative_error is measured vs predicted_extra_wall (checked when >= 0.25 s)"
            )
            print("\nCold legacy discovery wall time (s), the shape of the Crossplane one-pager's table")
            # kubectl rows have one row per command; the row label names both.
            command = table["command"].fillna("") if "command" in table else ""
            labelled = table.assign(limit=(table["limit"] + " " + command).str.strip())
            pivot = labelled.pivot_table(
                index="limit", columns="group_versions", values="wall_s", aggfunc="median", sort=False
            )
            print(pivot.map(lambda v: f"{v:.2f}").to_string())
            checked = discovery.agreement(table, tolerance=args.tolerance)
            ok = bool(checked["within_tolerance"].all()) if len(checked) else True
            extra = {"agreement_within_tolerance": ok, "tolerance": args.tolerance}
            print(
                f"\nagreement within {args.tolerance:.0%}: {'yes' if ok else 'NO'} ({int(checked['within_tolerance'].sum())}/{len(checked)} checked rows)"
            )
            return (0 if ok else 1), extra, tables
        tables = discovery.probe(
            run.cluster,
            limits,
            kubeconfig=run.kubeconfig,
            with_kubectl=not args.no_kubectl,
            kubectl_versions=kubectl_versions,
            echo=echo,
        )
        write_tables(run.writer, "discovery", 0, tables, main="summary")
        summary = tables["summary"]
        print("\nDiscovery")
        _print(
            summary,
            [
                "mode",
                "limit",
                "command",
                "group_versions",
                "requests",
                "wall_s",
                "max_wait_s",
                "predicted_delay_s",
                "bytes",
                "version",
                "revalidate_status",
                "revalidate_bytes",
                "kubectl_version",
                "gets",
                "throttle_messages",
                "note",
            ],
            {"wall_s": _s, "max_wait_s": _s, "predicted_delay_s": _s},
        )
        return 0, extra, tables

    return _run("discovery", args, parameters, body)


# --- list / apf -------------------------------------------------------------------


def _config(args):
    from crdscale.collect.probes.listcost import LIST_KINDS, ListProbeConfig

    return ListProbeConfig(
        custom_resources=args.custom_resources,
        cr_bytes=args.cr_bytes,
        secrets=args.secrets,
        secret_bytes=args.secret_bytes,
        configmaps=args.configmaps,
        configmap_bytes=args.configmap_bytes,
        pods=args.pods,
        pod_bytes=args.pod_bytes,
        namespaces=args.namespaces,
        repeats=args.repeats,
        page_size=args.page_size,
        kinds=tuple(args.kinds) if args.kinds else LIST_KINDS,
        compare_etcd=not getattr(args, "no_etcd_comparison", True),
    )


def _levels(text: str | None) -> tuple[int, ...]:
    if not text:
        return ()
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError as err:
        raise UsageError(f"--load {text!r}: expected comma-separated integers such as 1,4,16") from err


LIST_COLUMNS = [
    "resource",
    "kind",
    "apiserver",
    "items",
    "pages",
    "bytes",
    "latency_s",
    "cpu_s",
    "alloc_bytes",
    "fetched_objects",
    "served_from",
    "expected_from_cache",
    "status",
]
COMPARISON_COLUMNS = [
    "resource",
    "kind",
    "items",
    "bytes",
    "latency_cache",
    "latency_etcd",
    "latency_ratio",
    "cpu_cache",
    "cpu_etcd",
    "cpu_ratio",
    "alloc_cache",
    "alloc_etcd",
    "alloc_ratio",
    "etcd_cpu_etcd",
    "fetched_cache",
    "fetched_etcd",
    "note",
]


def _list(args) -> int:
    import dataclasses

    from crdscale.analysis.probes import cache_vs_etcd
    from crdscale.collect.probes import listcost, write_tables

    if args.load_shapes:
        return _list_shapes(args)
    config = _config(args)
    config.validate()
    levels = _levels(args.load)
    parameters = {
        **dataclasses.asdict(config),
        "load_levels": list(levels),
        "load_requests": args.load_requests,
        "load_seconds": args.load_seconds,
    }

    def body(run: ProbeRun, echo):
        tables = listcost.probe(
            run.cluster,
            run_id=run.run_id,
            config=config,
            load_levels=levels,
            load_requests=args.load_requests,
            load_seconds=args.load_seconds,
            allow_remote_load=args.allow_remote_load,
            keep=args.keep,
            echo=echo,
        )
        write_tables(run.writer, "list", 0, tables, main="lists")
        lists = tables["lists"]
        print(
            f"\nLIST cost on {run.server_version} (median of {config.repeats}; served_from from each server's counters)"
        )
        _print(
            lists,
            LIST_COLUMNS,
            {"bytes": _mib, "latency_s": _ms, "cpu_s": _ms, "alloc_bytes": _mib, "fetched_objects": _count},
        )
        print(
            "(bytes and alloc_bytes in MiB, latency and cpu_s in ms; cpu_s, alloc_bytes (Go heap allocated) and "
            "fetched_objects (read from storage) per request, net of an idle second)"
        )
        note = tables["apiservers"]["note"].iloc[0]
        # Derived from the rows (crdscale.analysis.probes.cache_vs_etcd), so not stored in the run directory.
        comparison = cache_vs_etcd(lists)
        paired = comparison[comparison["same_response"]]
        print(f"\nThe same LIST from etcd and from the watch cache (etcd: {note}); ratio = etcd / cache")
        if len(paired):
            ratio = lambda v: f"{v:.1f}x"  # noqa: E731
            _print(
                comparison,
                COMPARISON_COLUMNS,
                {
                    "bytes": _mib,
                    "latency_cache": _ms,
                    "latency_etcd": _ms,
                    "cpu_cache": _ms,
                    "cpu_etcd": _ms,
                    "etcd_cpu_etcd": _ms,
                    "alloc_cache": _mib,
                    "alloc_etcd": _mib,
                    "fetched_cache": _count,
                    "fetched_etcd": _count,
                    "latency_ratio": ratio,
                    "cpu_ratio": ratio,
                    "alloc_ratio": ratio,
                },
            )
            print(
                "(latency, cpu = kube-apiserver CPU and etcd_cpu_etcd = etcd's CPU in ms per request; bytes and alloc in MiB; "
                "fetched = objects the storage layer read per request)"
            )
        else:
            print("no LIST was served from both places")
        if not tables["load"].empty:
            print("\nConcurrent load")
            _print(
                tables["load"],
                [
                    "resource",
                    "kind",
                    "concurrency",
                    "requests",
                    "errors",
                    "throughput_rps",
                    "latency_p50_s",
                    "latency_p99_s",
                    "rss_before_bytes",
                    "rss_max_bytes",
                    "heap_inuse_max_bytes",
                    "cpu_s",
                ],
                {
                    "latency_p50_s": _ms,
                    "latency_p99_s": _ms,
                    "rss_before_bytes": _mib,
                    "rss_max_bytes": _mib,
                    "heap_inuse_max_bytes": _mib,
                    "throughput_rps": lambda v: f"{v:.1f}",
                    "cpu_s": _s,
                },
            )
        errors = int((lists["status"] != 200).sum())
        default = lists[lists["apiserver"] == listcost.DEFAULT_APISERVER]
        extra = {
            "served_from": default.groupby("kind", sort=False)["served_from"].first().to_dict(),
            "etcd_comparison": note,
            # The manifest is plain JSON: a ratio that cannot be computed is null, not NaN.
            "etcd_over_cache": {
                f"{r.resource} {r.kind}": {
                    name: None if v != v else round(float(v), 2)
                    for name, v in (("latency", r.latency_ratio), ("cpu", r.cpu_ratio), ("alloc", r.alloc_ratio))
                }
                for r in paired.itertuples(index=False)
            },
        }
        return (1 if errors else 0), extra, {**tables, "comparison": comparison}

    return _run("list", args, parameters, body)


SHAPE_COLUMNS = [
    "kind",
    "shape",
    "concurrency",
    "requests",
    "errors",
    "latency_p50_s",
    "latency_p99_s",
    "bytes",
    "heap_inuse_before_bytes",
    "heap_inuse_growth_bytes",
    "rss_before_bytes",
    "rss_growth_bytes",
    "cpu_s",
    "cpu_source",
]
SHAPE_FINDING_COLUMNS = [
    "kind",
    "concurrency",
    "shape",
    "baseline_shape",
    "objects_ratio",
    "bytes_ratio",
    "heap_growth_ratio",
    "rss_growth_ratio",
    "cpu_per_request_ratio",
    "latency_p50_ratio",
    "heap_follows",
]


def _list_shapes(args) -> int:
    from crdscale.analysis.probes import shape_findings
    from crdscale.collect.probes import listcost

    shapes = listcost.parse_load_shapes(args.load_shapes)
    levels = _levels(args.load) or (1, 4, 16)
    kinds = tuple(k.strip() for k in args.load_kinds.split(",") if k.strip())
    unknown = set(kinds) - set(listcost.SHAPE_LIST_PARAMS)
    if unknown or not kinds:
        raise UsageError(f"--load-kinds {args.load_kinds!r}: choose from {', '.join(listcost.SHAPE_LIST_PARAMS)}")
    parameters = {
        "load_shapes": [s.label for s in shapes],
        "load_levels": list(levels),
        "load_kinds": list(kinds),
        "load_requests": args.load_requests,
        "load_seconds": args.load_seconds,
    }

    def body(run: ProbeRun, echo):
        load = listcost.shape_load(
            run.cluster,
            run_id=run.run_id,
            shapes=shapes,
            concurrency_levels=levels,
            kinds=kinds,
            requests_per_level=args.load_requests,
            max_seconds_per_level=args.load_seconds,
            allow_remote=args.allow_remote_load,
            keep=args.keep,
            echo=echo,
        )
        run.writer.write_probe_table("list", 0, load, "shapes")
        # Derived from the rows (crdscale.analysis.probes.shape_findings), so not stored in the run directory.
        findings = shape_findings(load)
        print(f"\nConcurrent LISTs of one namespace per shape on {run.server_version}")
        _print(
            load,
            SHAPE_COLUMNS,
            {
                "latency_p50_s": _ms,
                "latency_p99_s": _ms,
                "bytes": _mib,
                "heap_inuse_before_bytes": _mib,
                "heap_inuse_growth_bytes": _mib,
                "rss_before_bytes": _mib,
                "rss_growth_bytes": _mib,
                "cpu_s": _s,
            },
        )
        print(
            "(latency in ms; bytes = all responses of the level and memory in MiB; growth = peak over the level's baseline "
            "after a garbage collection; cpu_s = kube-apiserver CPU seconds over the level)"
        )
        ratio = lambda v: "" if v != v else f"{v:.2f}x"  # noqa: E731
        print(
            "\nEach shape / the shape of fewest objects: memory follows bytes if heap_growth_ratio is near bytes_ratio, "
            "object count if near objects_ratio"
        )
        _print(findings, SHAPE_FINDING_COLUMNS, {c: ratio for c in SHAPE_FINDING_COLUMNS if c.endswith("_ratio")})
        errors = int(load["errors"].sum())
        extra = {
            "heap_follows": {
                f"{r.kind} c={r.concurrency} {r.shape}": r.heap_follows for r in findings.itertuples(index=False)
            }
        }
        return (1 if errors else 0), extra, {"shapes": load, "shape_findings": findings}

    return _run("list", args, parameters, body)


def _apf(args) -> int:
    import dataclasses

    from crdscale.collect.probes import apf_step

    config = _config(args)
    config.validate()
    parameters = {**dataclasses.asdict(config), "observe": not args.no_observe}

    def body(run: ProbeRun, echo):
        options = {
            **dataclasses.asdict(config),
            "run_id": run.run_id,
            "observe": not args.no_observe,
            "echo": echo,
            "step": 0,
            "keep": args.keep,
        }
        table = apf_step(run.cluster, run.writer, options)
        print("\nAPF seats per LIST: object-count estimator (max 10) vs size-based (max 100)")
        _print(
            table,
            [
                "resource",
                "kind",
                "items",
                "bytes",
                "served_from",
                "estimator_assumes",
                "object_count_seats",
                "size_based_seats",
                "size_based_seats_measured_place",
                "observed_seats",
                "priority_level",
                "level_max_seats",
                "observed_matches",
            ],
            {"bytes": _mib, "observed_seats": _int, "level_max_seats": _int},
        )
        if "observed_matches" in table:
            counts = table["observed_matches"].replace("", "not observed").value_counts().to_dict()
            print(
                f"(bytes in MiB; observed = apiserver_flowcontrol_work_estimated_seats for an impersonated non-exempt user; estimates capped at the level's max seats, which the server derives from its nominal concurrency limit and the level's hand size: {counts})"
            )
        return 0, {}, {"seats": table}

    return _run("apf", args, parameters, body)


def _clientmem(args) -> int:
    from crdscale.collect.probes import clientmem_step

    parameters = {"secrets": args.secrets, "secret_bytes": args.secret_bytes}

    def body(run: ProbeRun, echo):
        table = clientmem_step(
            run.cluster, run.writer, {**parameters, "run_id": run.run_id, "echo": echo, "step": 0, "keep": args.keep}
        )
        mib = lambda v: f"{v:.1f}"  # noqa: E731
        print(f"\nClient cache of {args.secrets} Secrets x {args.secret_bytes} B: full vs metadata-only (MiB)")
        _print(
            table,
            [
                "client",
                "mode",
                "initial_sync",
                "items",
                "bytes",
                "seconds",
                "peak_heap_mib",
                "live_heap_mib",
                "peak_rss_mib",
            ],
            {"bytes": _mib, "seconds": _s, "peak_heap_mib": mib, "live_heap_mib": mib, "peak_rss_mib": mib},
        )
        return 0, {}, {"clientmem": table}

    return _run("clientmem", args, parameters, body)
