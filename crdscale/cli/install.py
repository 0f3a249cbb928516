"""Install a CRD set step by step, wait until each step is Established, optionally serve it.

Examples:
  crdscale install crds/ --step 100 --serve watch
  crdscale install provider-package/ --existing update --kubeconfig ~/.kube/config

SOURCE is a directory tree or file(s) of YAML/JSON (multi-document streams and
provider packages too: only CustomResourceDefinitions are kept). Every CRD
gets crdscale's ownership labels with this run's id; 'crdscale clean --run ID'
removes them again. Writes a run directory (default ./runs/<UTC time>-install):
its manifest (sources, options, per-step counts), events (steps and phases)
and crds.jsonl (per CRD: created, NamesAccepted, Established times).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from crdscale.cli.common import add_cluster_arguments, add_yes_argument, confirm_cluster_write, resolve_kubeconfig
from crdscale.cli.options import label_value, nonnegative_float, nonnegative_int, positive_float, positive_int
from crdscale.crds.options import DEFAULT_MAX_WATCHES, ERROR_MODES, EXISTING_MODES, SERVE_MODES
from crdscale.errors import CRDError, UsageError
from crdscale.ownership import new_run_id
from crdscale.paths import runs_dir


class _Bars:
    """tqdm bars per phase, created lazily so quiet runs print nothing."""

    def __init__(self, enabled: bool, step_label: str):
        self.enabled = enabled
        self.label = step_label
        self.bars: dict = {}

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled or total == 0:
            return
        # lazy: would bring tqdm into --help
        from tqdm import tqdm

        bar = self.bars.get(phase)
        if bar is None:
            bar = self.bars[phase] = tqdm(
                total=total, desc=f"{self.label} {phase}", unit="crd", leave=False, file=sys.stderr
            )
        bar.update(done - bar.n)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars = {}


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("sources", nargs="+", metavar="SOURCE", help="directory or file(s) with CRDs")
        parser.add_argument(
            "--step", type=nonnegative_int, default=0, metavar="N", help="CRDs per step (default: all in one step)"
        )
        parser.add_argument(
            "--concurrency", type=positive_int, default=16, help="parallel create requests (default 16)"
        )
        parser.add_argument(
            "--qps", type=nonnegative_float, default=0, help="client-side request rate limit (default: none)"
        )
        parser.add_argument("--burst", type=positive_int, help="rate limiter burst (default: qps)")
        parser.add_argument(
            "--serve",
            choices=SERVE_MODES,
            default="none",
            help="after each step: LIST each new resource (list), run a client-go informer for it (watch), or nothing",
        )
        parser.add_argument(
            "--serve-clients",
            type=positive_int,
            default=1,
            metavar="N",
            help="with --serve watch: client processes sharing the informers, e.g. one per provider (default 1)",
        )
        parser.add_argument(
            "--hold",
            type=nonnegative_float,
            default=0,
            metavar="SECONDS",
            help="with --serve watch, keep the watches open this long after the last step",
        )
        parser.add_argument(
            "--max-watches", type=positive_int, default=DEFAULT_MAX_WATCHES, help="upper bound on open watches"
        )
        parser.add_argument(
            "--existing",
            choices=EXISTING_MODES,
            default="skip",
            help="CRDs already present: skip, update (only crdscale's own), or fail (default skip)",
        )
        parser.add_argument(
            "--on-rejected",
            choices=ERROR_MODES,
            default="continue",
            help="when the server rejects a CRD: continue with the rest, or stop (default continue)",
        )
        parser.add_argument(
            "--timeout",
            type=positive_float,
            default=300,
            metavar="SECONDS",
            help="per step, wait this long for Established (default 300)",
        )
        parser.add_argument("--run-id", type=label_value, help="run id for the ownership labels (default: a new one)")
        parser.add_argument(
            "--out", metavar="DIR", help="parent of the run directory (default: $CRDSCALE_RUNS or ./runs)"
        )
        parser.add_argument("--quiet", action="store_true", help="no progress bars")
        add_cluster_arguments(parser)
        add_yes_argument(parser)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        # The HTTP client and the CRD machinery only when installing: `crdscale install --help` stays fast.
        # lazy: would bring requests, yaml into --help
        from crdscale.cluster.clients import connect
        from crdscale.crds.install import Installer, split_steps
        from crdscale.crds.load import load_crds, require_crds
        from crdscale.crds.serve import ResourceServer
        from crdscale.rundir import RunWriter
        from crdscale.rundir.layout import CRD_RECORDS

        if args.step < 0:
            raise UsageError("--step must be >= 0")
        loaded = load_crds(args.sources)
        require_crds(loaded, ", ".join(args.sources))
        summary = loaded.summary()
        skipped = ", ".join(f"{n} {kind}" for kind, n in sorted(loaded.skipped.items()))
        print(summary.render())
        if skipped:
            print(f"skipped documents: {skipped}")
        for warning in loaded.warnings:
            print(f"crdscale: warning: {warning}", file=sys.stderr)

        run_id = args.run_id or new_run_id()
        kubeconfig = resolve_kubeconfig(args.kubeconfig)
        confirm_cluster_write(kubeconfig, args.context, yes=args.yes, what="install")
        cluster = connect(kubeconfig, args.context)
        cluster.server_version()  # a server that does not answer is one line now, not a failed run directory
        steps = split_steps(loaded.crds, args.step)
        run = RunWriter.create(Path(args.out) if args.out else runs_dir(), "install")
        print(
            f"run {run_id}: {len(loaded.crds)} CRDs in {len(steps)} step(s) to {cluster.server}; records in {run.path}"
        )
        run.start_manifest(
            run_id=run_id,
            kind="install",
            target={"kind": "kubeconfig", "server": cluster.server},
            sources=[str(s) for s in args.sources],
            skipped_documents=dict(loaded.skipped),
            options={
                k: getattr(args, k)
                for k in (
                    "step",
                    "concurrency",
                    "qps",
                    "burst",
                    "serve",
                    "serve_clients",
                    "existing",
                    "on_rejected",
                    "timeout",
                )
            },
        )
        run.write_crd_summary({"source": [str(s) for s in args.sources], "summary": summary.to_dict()})
        run.update_manifest(crds=summary.to_dict())
        bars = _Bars(not args.quiet and sys.stderr.isatty(), "")
        events = run.events
        installer = Installer(
            cluster,
            run_id,
            concurrency=args.concurrency,
            qps=args.qps,
            burst=args.burst,
            existing=args.existing,
            on_rejected=args.on_rejected,
            establish_timeout_s=args.timeout,
            events=events,
            progress=bars,
        )
        server = ResourceServer(
            cluster,
            args.serve,
            concurrency=args.concurrency,
            max_watches=args.max_watches,
            events=events,
            run_id=run_id,
            progress=bars,
            clients=args.serve_clients,
            record_process=run.record_process,
        )
        started = time.monotonic()
        installed = 0
        failed, status, reason = False, "interrupted", "stopped early"
        try:
            events.emit("run.start", run_id=run_id, crds=len(loaded.crds), steps=len(steps), serve=args.serve)
            for index, chunk in enumerate(steps, start=1):
                bars.label = f"step {index}/{len(steps)}"
                events.emit("step.start", run_id=run_id, step=index, crds_before=installed, crds_in_step=len(chunk))
                result = installer.install_step(index, chunk)
                serve = server.serve(index, result.served_resources())
                bars.close()
                installed += len(chunk)
                counts = result.counts()
                events.emit(
                    "step.end",
                    run_id=run_id,
                    step=index,
                    crds=installed,
                    **counts,
                    install_s=round(result.duration_s, 3),
                    serve_s=round(serve.finished_at - serve.started_at, 3),
                )
                line = (
                    f"step {index}/{len(steps)}: {counts['created']} created, {counts['updated']} updated, "
                    f"{counts['skipped']} skipped, {counts['rejected'] + counts['failed']} rejected; "
                    f"{counts['established']} Established in {result.duration_s:.1f} s"
                )
                if args.serve != "none":
                    line += f"; served {serve.listed} ({server.open_watches} watches open)"
                print(line, flush=True)
                for record in result.rejected:
                    print(f"  {record.name}: {record.action}: {record.message}", file=sys.stderr)
                for name in result.timed_out:
                    print(f"  {name}: not Established after {args.timeout:.0f} s", file=sys.stderr)
                failed = failed or not result.ok
            if args.hold and args.serve == "watch":
                print(f"holding {server.open_watches} watches for {args.hold:.0f} s", flush=True)
                time.sleep(args.hold)
            status, reason = ("failed", "some CRDs were rejected or not Established") if failed else ("completed", None)
        except BaseException as err:
            status, reason = (
                ("interrupted", "SIGINT received")
                if isinstance(err, KeyboardInterrupt)
                else ("failed", f"{type(err).__name__}: {err}")
            )
            raise
        finally:
            bars.close()
            server.close()
            installer.close()
            run.write_jsonl(CRD_RECORDS, [record.to_dict() for record in installer.records])
            duration_s = round(time.monotonic() - started, 3)
            events.emit("run.end", run_id=run_id, status=status, reason=reason, duration_s=duration_s)
            run.finish(
                status,
                reason,
                duration_s=duration_s,
                steps=[{"step": r.step, **r.counts(), "duration_s": round(r.duration_s, 3)} for r in installer.results],
            )
            cluster.close()
        print(f"done in {duration_s:.1f} s; remove with: crdscale clean --run {run_id}")
        if failed:
            raise CRDError(f"some CRDs were rejected or not Established; see {run.path / CRD_RECORDS}")
        return 0
