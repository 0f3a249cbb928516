"""Plumbing shared by subcommands: finding the cluster, writing tables the user asked for."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from crdscale.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd


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


def write_table(table: pd.DataFrame, path: str | Path) -> Path:
    """Write ``table`` to ``path`` as ``.csv`` or ``.parquet`` (chosen by extension); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flat = table.copy()
    flat.attrs = {}  # attrs are not serializable by every writer; the columns carry the data
    if path.suffix == ".csv":
        flat.to_csv(path, index=False)
    elif path.suffix in (".parquet", ".pq"):
        flat.to_parquet(path, index=False)
    else:
        raise UsageError(f"{path}: table output must end in .csv or .parquet")
    return path
