"""Plumbing shared by subcommands that talk to a cluster."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from crdscale.errors import UsageError


def resolve_kubeconfig(explicit: str | None) -> Path:
    """``--kubeconfig``, else the newest ready local instance, else ``$KUBECONFIG``, else ``~/.kube/config``."""
    from crdscale.cluster.local import default_kubeconfig

    if explicit:
        return Path(explicit).expanduser()
    local = default_kubeconfig()
    if local:
        return Path(local)
    env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    if env:
        return Path(env).expanduser()
    default = Path.home() / ".kube" / "config"
    if default.is_file():
        return default
    raise UsageError("no cluster: pass --kubeconfig, start one with 'crdscale up', or set $KUBECONFIG")


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", metavar="PATH",
                        help="cluster to use (default: the newest local instance, then $KUBECONFIG, then ~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context (default: its current context)")
