from __future__ import annotations

import logging

from crdscale.cluster import binaries
from crdscale.cluster.gobuild import go_version
from crdscale.cluster.kubesource import check_tree, describe_build
from crdscale.errors import BinaryError, CrdscaleError, UsageError

log = logging.getLogger(__name__)


class Command:
    """Find or build the binaries crdscale runs, and print where they are.

    kube-apiserver, kube-controller-manager and etcd are built from Go modules
    with the installed Go and cached per version (one go build for
    kube-apiserver and kube-controller-manager: 8-11 minutes on 2 cores for
    kube-apiserver, 3-5 more for kube-controller-manager, once).
    Prometheus and Debian's etcd 3.4 come from apt (see scripts/bootstrap.sh).

    --kube-source DIR builds kube-apiserver from a local Kubernetes source
    tree, e.g. your checkout with a patch, the same way: a throwaway module
    that replaces k8s.io/kubernetes (and staging/src/k8s.io/*, when the tree
    has them) with the tree. It is cached by the tree's git commit plus the
    sha256 of its uncommitted changes (untracked files included), or by the
    sha256 of its files when it is not a git checkout: an unchanged tree is
    never rebuilt, any change is. After a build of the release the tree is
    based on, only the packages your patch touches (and their importers) are
    compiled again. The release comes from 'git describe'; for a tree without
    git tags it is --kube-version (one; default the pinned 1.37.1), and when
    the tree has no staging/ (a copy of the Go module zip) its staging modules
    come from that release. /version then reports e.g. v1.37.1-dirty.

    Examples:
      crdscale binaries                       # default kube-apiserver and etcd
      crdscale binaries --kube-version 1.24.0
      crdscale binaries --no-controller-manager   # kube-apiserver alone (for 'up --no-controller-manager')
      crdscale binaries --kube-source ~/src/kubernetes   # your checkout, as it is now
      crdscale binaries --kubectl             # also a real kubectl (benchmarks)
      crdscale binaries --kubectl-version 1.23.3 --client   # kubectl v1.23.3 and crdscale-client
      crdscale binaries --versitygw           # the local S3 server of the results-store tests
      crdscale binaries --node                # also kubelet and kube-scheduler ('crdscale up --node')
    """

    @staticmethod
    def add_arguments(parser):
        parser.add_argument(
            "--kube-version",
            metavar="X.Y.Z",
            action="append",
            help="kube-apiserver version(s) to ensure (repeatable; 'default' = the pinned one)",
        )
        parser.add_argument(
            "--kube-source",
            metavar="DIR",
            action="append",
            default=[],
            help="also build kube-apiserver from this Kubernetes source tree (repeatable; "
            "cached per commit + uncommitted diff)",
        )
        parser.add_argument(
            "--no-controller-manager",
            dest="controller_manager",
            action="store_false",
            help="do not ensure kube-controller-manager beside each kube-apiserver",
        )
        parser.add_argument("--etcd", metavar="VERSION|system|PATH", help="etcd to ensure (default: pinned version)")
        parser.add_argument("--kubectl", action="store_true", help="also ensure a real kubectl")
        parser.add_argument(
            "--kubectl-version",
            metavar="X.Y.Z",
            action="append",
            help="also build kubectl at this version from Go modules (repeatable)",
        )
        parser.add_argument(
            "--client",
            action="store_true",
            help="also build crdscale-client (client-go informers, discovery, cache memory)",
        )
        parser.add_argument("--prometheus", action="store_true", help="also check for prometheus")
        parser.add_argument(
            "--registry",
            action="store_true",
            help="also build an OCI registry (distribution v3; tests of 'crdscale image build --push')",
        )
        parser.add_argument(
            "--versitygw",
            action="store_true",
            help="also build versitygw (an S3-compatible server over a directory: the results-store tests' bucket)",
        )
        parser.add_argument(
            "--node",
            action="store_true",
            help="also the kubelet and kube-scheduler of a test node ('crdscale up --node'), built by the same "
            "go build as kube-apiserver and kube-controller-manager of the first --kube-version",
        )

    @staticmethod
    def run(args) -> int:
        found = []
        versions = [None if v == "default" else v for v in args.kube_version or ["default"]]
        if args.kube_source and len(versions) > 1:
            raise UsageError(
                "with --kube-source give at most one --kube-version: the release a tree without git tags is based on"
            )
        trees = [check_tree(tree) for tree in args.kube_source]  # a bad path fails before any build
        _check_before_building(args, versions)
        kcm = binaries.KUBE_CONTROLLER_MANAGER
        if args.node:  # first: one go build makes whatever of the four is missing
            found += sorted(binaries.node_binaries(versions[0]).items())
        for version in versions:
            found.append(("kube-apiserver", binaries.kube_apiserver(version)))
            if args.controller_manager:
                found.append((kcm, binaries.kube_controller_manager(version)))
        for tree in trees:
            found.append(("kube-apiserver", binaries.kube_apiserver(versions[0], source=tree)))
            if args.controller_manager:
                found.append((kcm, binaries.kube_controller_manager(versions[0], source=tree)))
        found.append(("etcd", binaries.etcd(args.etcd)))
        if args.kubectl:
            found.append(("kubectl", binaries.kubectl()))
        for version in args.kubectl_version or []:
            found.append(("kubectl", binaries.kubectl(version)))
        if args.client:
            found.append(("crdscale-client", binaries.crdscale_client()))
        if args.versitygw:
            found.append(("versitygw", binaries.versitygw()))
        if args.registry:
            found.append(("registry", binaries.registry()))
        if args.prometheus:
            try:
                found.append(("prometheus", binaries.prometheus()))
            except BinaryError as err:
                log.warning(err)
        print(f"go          {go_version()}")
        for name, b in found:
            print(f"{name:<23} {b.version:<10} {b.source:<18} {b.path}")
            if b.built_from:
                print(f"{'':<23} {describe_build(b.built_from)}")
        return 0


def _check_before_building(args, versions: list[str | None]) -> None:
    """Every version and path asked for, checked before the first build (a kube-apiserver build takes
    8-11 minutes; a bad --etcd or --kubectl-version after it wasted them): versions well-formed,
    --etcd a version the module proxy serves, an executable, or "system"."""
    # lazy: would add 9 modules to --help
    from crdscale.cluster import buildable

    for version in versions:
        if version is not None:
            buildable.kube_version(version)
    for version in args.kubectl_version or []:
        try:
            buildable.kube_version(version)
        except UsageError as err:
            raise UsageError(f"--kubectl-version: {err}") from None
    try:
        plan = buildable.plan_etcd(args.etcd, given="--etcd")
    except CrdscaleError as err:
        given = buildable.etcd_given(args.etcd, "--etcd")
        raise type(err)(f"{given}: {err}" if given else str(err)) from None
    if plan.warning:
        log.warning(plan.warning)
