"""Delete what crdscale created (objects with its ownership labels) and nothing else.

Examples:
  crdscale clean --run 20261122t031500-3fa2
  crdscale clean --all-owned --dry-run
  crdscale clean --all-owned --kubeconfig ~/.kube/config

Objects are selected by crdscale's labels, checked again before each DELETE,
and deleted with uid/resourceVersion preconditions; then the command waits
until they are gone and prints counts.
"""

from __future__ import annotations

import argparse

from crdscale.cli.common import add_cluster_arguments, resolve_kubeconfig
from crdscale.cli.options import nonnegative_float
from crdscale.errors import ClusterError


class Command:
    __doc__ = __doc__

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--run", metavar="ID", help="objects of this run")
        which.add_argument("--all-owned", action="store_true", help="objects of every crdscale run")
        parser.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
        parser.add_argument(
            "--timeout",
            type=nonnegative_float,
            default=300,
            metavar="SECONDS",
            help="wait this long for deleted objects to be gone (default 300)",
        )
        add_cluster_arguments(parser)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        # lazy: would bring requests, yaml into --help
        from crdscale.cluster.clients import connect
        from crdscale.crds.clean import clean

        cluster = connect(resolve_kubeconfig(args.kubeconfig), args.context)
        try:
            result = clean(
                cluster, run_id=args.run, all_owned=args.all_owned, dry_run=args.dry_run, wait_timeout_s=args.timeout
            )
        finally:
            cluster.close()
        target = f"run {args.run}" if args.run else "all crdscale runs"
        if args.dry_run:
            print(f"dry run on {cluster.server}: would delete {result.total_found} object(s) of {target}")
            for kind, names in result.names.items():
                for name in names:
                    print(f"  {kind}/{name}")
            return 0
        for kind, found in result.found.items():
            if found:
                print(f"{kind}: {found} found, {result.deleted.get(kind, 0)} deleted, {result.gone.get(kind, 0)} gone")
        print(
            f"cleaned {target} on {cluster.server}: {sum(result.gone.values())} of {result.total_found} object(s) gone"
        )
        for error in result.errors:
            print(f"  {error}")
        remaining = sum(len(v) for v in result.remaining.values())
        if result.errors or remaining:
            raise ClusterError(f"{len(result.errors)} deletion error(s), {remaining} object(s) still present")
        return 0
