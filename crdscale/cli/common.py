"""Plumbing shared by subcommands: finding the cluster, ``-o json`` output, writing tables the user asked for."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

from crdscale.cli.options import positive_int
from crdscale.errors import UsageError

if TYPE_CHECKING:
    import pandas as pd

    from crdscale.cluster.kubeconfig import KubeconfigFiles

log = logging.getLogger(__name__)


def resolve_kubeconfig(
    explicit: str | None,
    *,
    local_instance: bool = True,
    missing: str = "no cluster: pass --kubeconfig, start one with 'crdscale up', or set $KUBECONFIG",
) -> KubeconfigFiles:
    """``--kubeconfig`` (one file, or ``a:b`` merged), else the one ready local instance (unless
    ``local_instance`` is false; several are refused), else every file of ``$KUBECONFIG`` merged as kubectl merges them,
    else ``~/.kube/config``; else a UsageError saying ``missing``."""
    # lazy: would bring requests, yaml into --help
    from crdscale.cluster.kubeconfig import KubeconfigFiles
    from crdscale.cluster.local import default_kubeconfig

    if explicit:
        return KubeconfigFiles.parse(explicit)
    local = default_kubeconfig() if local_instance else None
    if local:
        return KubeconfigFiles.parse(Path(local))
    env = os.environ.get("KUBECONFIG", "")
    if any(env.split(os.pathsep)):
        return KubeconfigFiles.from_list(env.split(os.pathsep))
    default = Path.home() / ".kube" / "config"
    if default.is_file():
        return KubeconfigFiles.parse(default)
    raise UsageError(missing)


# What a command does without --kubeconfig: find a cluster (resolve_kubeconfig).
FIND_CLUSTER = "the local instance (if exactly one is up), then $KUBECONFIG, then ~/.kube/config"


def add_cluster_arguments(parser: argparse.ArgumentParser, *, default: str = FIND_CLUSTER) -> None:
    """``--kubeconfig`` and ``--context``, the one definition every command uses; ``default`` says
    what the command does without ``--kubeconfig`` (most find a cluster with :func:`resolve_kubeconfig`)."""
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help=f"kubeconfig file, or FILE:FILE:... merged as kubectl merges $KUBECONFIG (default: {default})",
    )
    parser.add_argument("--context", help="kubeconfig context (default: its current context)")


def add_yes_argument(parser: argparse.ArgumentParser) -> None:
    """``--yes``: go ahead on a cluster that is not a crdscale local instance without asking (see
    :func:`confirm_cluster_write`)."""
    parser.add_argument(
        "--yes",
        action="store_true",
        help="write to a cluster that is not a crdscale local instance without asking "
        "(needed when stdin is not a terminal)",
    )


def confirm_cluster_write(files: KubeconfigFiles, context: str | None, *, yes: bool, what: str) -> None:
    """Before ``crdscale WHAT`` writes to the cluster of ``files``/``context``: nothing to ask when it is a
    crdscale local instance (its server is a ready instance's); otherwise name the cluster and the context,
    and go ahead with ``yes`` or when the user answers y on a terminal. Without a terminal and without
    ``yes``, and on any other answer: a UsageError, before anything was written."""
    # lazy: would bring yaml into --help
    from crdscale.cluster.instances import list_instances
    from crdscale.cluster.kubeconfig import load, select

    selection = select(load(files), context, where=str(files))
    server = selection.cluster["server"]
    if any(info.status == "ready" and info.server.rstrip("/") == server.rstrip("/") for info in list_instances()):
        return
    target = f"cluster {server} (context {selection.context} of {files})"
    if yes:
        log.info(f"{what} writes to {target}: --yes given")
        return
    if not sys.stdin.isatty():
        raise UsageError(f"crdscale {what} would write to {target}, not a crdscale local instance: pass --yes")
    answer = input(
        f"crdscale {what} will create objects on {target}, which is not a crdscale local instance. Go ahead? [y/N] "
    )
    if answer.strip().lower() not in ("y", "yes"):
        raise UsageError(f"not confirmed: crdscale {what} wrote nothing to {server}")


def write_table(table: pd.DataFrame, path: str | Path) -> Path:
    """Write ``table`` to ``path`` as ``.csv`` or ``.parquet`` (chosen by extension); returns the path."""
    path = Path(path)
    if path.suffix not in (".csv", ".parquet", ".pq"):
        raise UsageError(f"{path}: table output must end in .csv or .parquet")
    flat = table.copy()
    flat.attrs = {}  # attrs are not serializable by every writer; the columns carry the data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".csv":
            flat.to_csv(path, index=False)
        else:
            flat.to_parquet(path, index=False)
    except OSError as err:  # a read-only run directory, a full disk
        raise UsageError(f"{path}: cannot write ({err.strerror or err})") from None
    return path


def check_output_file(path: str | Path, flag: str) -> Path:
    """UsageError (one line) unless ``path`` can be written as a file: its folder exists and is
    writable, and it is not a directory. Checked before the work that fills it starts."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a directory")
    if not folder.is_dir():
        raise UsageError(f"{flag} {path}: no directory {folder}")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise UsageError(f"{flag} {path}: not writable")
    return path


def write_output_text(path: str | Path, text: str, flag: str) -> Path:
    """Write ``text`` to the file ``path`` a flag named, atomically (a reader never sees half of it, a
    failed write leaves the file as it was); OSError becomes a one-line UsageError."""
    # lazy: would add 11 modules to --help
    from crdscale.fsutil import write_atomic

    path = Path(path)
    try:
        write_atomic(path, text)
    except OSError as err:
        raise UsageError(f"{flag} {path}: cannot write ({err.strerror or err})") from None
    return path


def add_output_argument(parser: argparse.ArgumentParser, *, human: str = "table") -> None:
    """``-o/--output table|json``: the human output (default; ``human`` names it: ``table``, or ``text`` for
    the commands that print prose) or one JSON document on stdout, as kubectl's ``-o json``."""
    parser.add_argument(
        "-o",
        "--output",
        choices=(human, "json"),
        default=human,
        help=f"output format: {human} (default, for people) or json (one document on stdout, for scripts and CI)",
    )


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    """``--set SECTION.KEY=VALUE`` (repeatable): override one key of the scenario (``run``) or of the workload
    (``ab``, ``history``), read as ``crdscale.scenario.config.parse_override`` reads it."""
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one scenario key; the value is read as TOML and typed by the key "
        '(steps.count=3, steps.serve=list, target.kube_version=1.30 stays "1.30", target.env.GOGC=50 is "50", '
        "profiles.kinds=heap,cpu); on a key that is a [matrix] axis it replaces the axis by that one value "
        "(--set target.kube_version=1.37.1 runs one version of a two-version scenario)",
    )


# crdscale.report.render.CELL_TIMEOUT_S, which the commands' --help may not import (pandas); a test holds them equal.
CELL_TIMEOUT_S = 600


def add_notebook_arguments(parser: argparse.ArgumentParser, *, timeout: bool = True) -> None:
    """``--notebooks DIR`` and (with ``timeout``) ``--timeout SECONDS``: where the jupytext notebooks are and
    how long one of their cells may run, for the commands that execute them (report, lab, compare)."""
    parser.add_argument(
        "--notebooks",
        metavar="DIR",
        help="directory of the jupytext notebooks (default: notebooks/ of this checkout)",
    )
    if timeout:
        parser.add_argument(
            "--timeout",
            type=positive_int,
            default=CELL_TIMEOUT_S,
            metavar="SECONDS",
            help=f"longest a single notebook cell may run while the notebooks execute, > 0 (default {CELL_TIMEOUT_S})",
        )


def jsonable(value: Any) -> Any:
    """``value`` made of JSON types only: DataFrames become lists of records, NaN and NaT
    become null, numpy scalars plain numbers, times ISO 8601 strings, paths strings."""
    # lazy: would add 5 modules to --help (datetime, dataclasses, math, units), for -o json only
    import dataclasses
    import datetime
    import math

    from crdscale.units import is_missing  # lazy: as above

    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, (datetime.datetime, datetime.date)):
        return None if is_missing(value) else value.isoformat()  # pandas' NaT is a datetime
    if isinstance(value, PurePath):
        return str(value)
    module = type(value).__module__.split(".")[0]
    if module == "pandas":
        # lazy: would bring pandas, numpy, pyarrow into --help
        import pandas as pd

        if isinstance(value, pd.DataFrame):
            # to_json knows every pandas dtype (NaN/NaT -> null, Timestamps -> ISO 8601).
            return json.loads(value.to_json(orient="records", date_format="iso", default_handler=str))
        if isinstance(value, pd.Series):
            return jsonable(value.to_dict())
        if value is pd.NA:
            return None
    if module == "numpy":
        return jsonable(value.tolist())
    return str(value)


def print_json(value: Any) -> None:
    """Print ``value`` (see :func:`jsonable`) as one indented JSON document on stdout."""
    print(json.dumps(jsonable(value), indent=2, allow_nan=False))


class BarProgress:
    """A :class:`crdscale.scenario.runner.Progress` for the terminal: tqdm bars per step plus a
    one-line summary per step, on stderr."""

    def __init__(self):
        # lazy: would bring tqdm into --help
        from tqdm import tqdm

        self._tqdm = tqdm
        self.bar = None

    def message(self, text: str) -> None:
        self._tqdm.write(f"crdscale: {text}", file=sys.stderr)

    def step_started(self, step: int, steps: int, crds: int, unit: str = "CRD") -> None:
        self.bar = self._tqdm(
            total=crds, desc=f"step {step}/{steps}", unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True
        )

    def advance(self, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def step_finished(self, summary) -> None:
        self.close()
        self._tqdm.write(summary.line(), file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def run_with_progress(scenario, parent, run_name: str | None = None) -> Path:
    """Run one scenario with progress bars on stderr; returns its run directory (``run_name``
    names it, e.g. an experiment's cell)."""
    from crdscale.scenario.runner import ScenarioRunner  # lazy: pandas & co, only when running

    progress = BarProgress()
    runner = ScenarioRunner(scenario, runs_parent=parent, progress=progress, run_name=run_name)
    log.info(f"run {runner.run_id}: {scenario.description or scenario.name}")
    try:
        run = runner.execute()
    finally:
        progress.close()
    return run.path
