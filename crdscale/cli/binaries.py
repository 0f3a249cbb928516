from __future__ import annotations

from crdscale.cluster import binaries
from crdscale.cluster.gobuild import go_version, stderr_echo
from crdscale.errors import BinaryError


class Command:
    """Find or build the binaries crdscale runs, and print where they are.

    kube-apiserver and etcd are built from Go modules with the installed Go and
    cached per version (8-11 minutes for kube-apiserver on 2 cores, once).
    Prometheus and Debian's etcd 3.4 come from apt (see scripts/bootstrap.sh).

    Examples:
      crdscale binaries                       # default kube-apiserver and etcd
      crdscale binaries --kube-version 1.24.0
      crdscale binaries --kubectl             # also a real kubectl (benchmarks)
      crdscale binaries --kubectl-version 1.23.3 --client   # kubectl v1.23.3 and crdscale-client
    """

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("--kube-version", metavar="X.Y.Z", action="append",
                            help="kube-apiserver version(s) to ensure (repeatable; 'default' = the pinned one)")
        parser.add_argument("--etcd", metavar="VERSION|system|PATH", help="etcd to ensure (default: pinned version)")
        parser.add_argument("--kubectl", action="store_true", help="also ensure a real kubectl")
        parser.add_argument("--kubectl-version", metavar="X.Y.Z", action="append",
                            help="also build kubectl at this version from Go modules (repeatable)")
        parser.add_argument("--client", action="store_true",
                            help="also build crdscale-client (client-go informers, discovery, cache memory)")
        parser.add_argument("--prometheus", action="store_true", help="also check for prometheus")

    @staticmethod
    def run(args) -> int:
        found = []
        for version in args.kube_version or ["default"]:
            version = None if version == "default" else version
            found.append(("kube-apiserver", binaries.kube_apiserver(version, echo=stderr_echo)))
        found.append(("etcd", binaries.etcd(args.etcd, echo=stderr_echo)))
        if args.kubectl:
            found.append(("kubectl", binaries.kubectl(echo=stderr_echo)))
        for version in args.kubectl_version or []:
            found.append(("kubectl", binaries.kubectl(version, echo=stderr_echo)))
        if args.client:
            found.append(("crdscale-client", binaries.crdscale_client(echo=stderr_echo)))
        if args.prometheus:
            try:
                found.append(("prometheus", binaries.prometheus()))
            except BinaryError as err:
                stderr_echo(f"warning: {err}")
        print(f"go          {go_version()}")
        for name, b in found:
            print(f"{name:<15} {b.version:<10} {b.source:<18} {b.path}")
        return 0
