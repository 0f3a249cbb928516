"""A history of releases: one workload run on every release, side by side, resumable.

A history directory is an experiment directory (:mod:`crdscale.scenario.experiment`) whose ``[matrix]``
has one axis, ``target.kube_version`` (times ``repeat``), and whose ``experiment.json`` carries a
``history`` table (:data:`HISTORY_KEY`: the releases asked for and how each was chosen, the Go, the
changepoint thresholds). Everything an experiment does, a history does: cells run one after another and a
completed cell is never run again (``crdscale history --resume DIR`` or ``crdscale run --resume DIR``
continue from the first cell not completed), ``--cluster`` submits the cells as the Indexed Job, and
``crdscale status``/``down`` follow it. ``crdscale report DIR`` renders the history page
(:mod:`crdscale.report.history`) instead of a comparison of cells.

Layout::

    runs/<UTC timestamp>-history/
        experiment.json                        the workload, the versions, every cell with its status,
                                               and the "history" table
        <UTC timestamp>-kube_version=1.24.17,repeat=1/   an ordinary run directory per cell
        ...
        report/                                written by `crdscale report DIR`

**Which releases** (:func:`resolve_versions`): ``--versions`` takes minors (``1.30``: its newest patch
release the Go module proxy serves whole, :func:`crdscale.cluster.releases.newest_buildable`), ranges of
minors (``1.24..1.37``) and exact releases (``1.24.0``); a cached build always passes. A range with no
buildable release, or a release the proxy does not serve, is one line and exit 2 before anything is built.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crdscale.errors import UsageError

log = logging.getLogger(__name__)

HISTORY_KEY = "history"
VERSION_AXIS = "target.kube_version"
DEFAULT_VERSIONS = "1.24..1.37"
DEFAULT_REPEATS = 3
# The default workload, beside default.toml: `crdscale history --print-default` shows it.
WORKLOAD_FILE = "history.toml"
# The notebook of a history (notebooks/history.py): rendered by `crdscale report`, opened by `crdscale lab`.
HISTORY_NOTEBOOK = "history"

MIN_MINOR = 16  # apiextensions.k8s.io/v1 (crdscale.cluster.buildable.MIN_KUBE_MINOR)
_MINOR = re.compile(r"^v?1\.(\d+)$")
_PATCH = re.compile(r"^v?1\.(\d+)\.(\d+)$")


@dataclass(frozen=True)
class VersionItem:
    """One item of ``--versions``: ``kind`` is ``range`` (``first``..``last``, minors), ``minor`` or ``release``."""

    kind: str
    first: str
    last: str = ""

    def __str__(self) -> str:
        return f"{self.first}..{self.last}" if self.kind == "range" else self.first


@dataclass
class VersionPlan:
    """The releases of a history, oldest first, and how each was chosen (one line per minor or release)."""

    versions: list[str]
    choices: list[str] = field(default_factory=list)


def parse_versions(spec: str) -> list[VersionItem]:
    """``--versions`` as items: comma-separated minors (``1.30``), ranges of minors (``1.24..1.37``) and
    releases (``1.24.0``). UsageError (one line) for anything else."""
    items = []
    for part in (p.strip() for p in str(spec).split(",")):
        if not part:
            continue
        first, sep, last = part.partition("..")
        if sep:
            a, b = _MINOR.match(first.strip()), _MINOR.match(last.strip())
            if not (a and b):
                raise UsageError(f"--versions {part!r}: a range goes from one minor to another, e.g. 1.24..1.37")
            if int(a[1]) > int(b[1]):
                raise UsageError(f"--versions {part!r}: the older minor comes first, e.g. 1.24..1.37")
            items.append(VersionItem("range", f"1.{a[1]}", f"1.{b[1]}"))
        elif _MINOR.match(part):
            items.append(VersionItem("minor", f"1.{_MINOR.match(part)[1]}"))
        elif _PATCH.match(part):
            m = _PATCH.match(part)
            items.append(VersionItem("release", f"v1.{m[1]}.{m[2]}"))
        else:
            raise UsageError(
                f"--versions {part!r}: not a minor (1.30), a range of minors (1.24..1.37) or a release (1.24.0)"
            )
    if not items:
        raise UsageError("--versions: name at least one release, e.g. 1.24..1.37 or 1.24.0,1.37.1")
    for item in items:
        if int(item.first.split(".")[1]) < MIN_MINOR:
            raise UsageError(
                f"--versions {item}: crdscale installs apiextensions.k8s.io/v1 CRDs, served from 1.{MIN_MINOR} on"
            )
    return items


def resolve_versions(
    spec: str,
    *,
    lookup: Callable[[str, str], dict] | None = None,
    cache_path: Path | None = None,
) -> VersionPlan:
    """The releases ``spec`` (:func:`parse_versions`) names, oldest first, each checked against the Go
    module proxy (``lookup``: :func:`crdscale.cluster.releases._lookup` by default) unless built already.

    Minors and ranges are resolved to each minor's newest buildable patch; the choices are cached for
    :data:`~crdscale.cluster.releases.CHOICE_TTL_S` in ``cache_path`` (default
    ``~/.cache/crdscale/history-releases-<digest>.json``, one file per Go module source). Raises UsageError (exit 2) for a range with no buildable
    release and for a release the proxy does not serve (or serves without a staging module it needs)."""
    # lazy: would bring pandas, numpy, pyarrow into --help
    from crdscale.analysis.history import release_order
    from crdscale.cluster import releases

    lookup = lookup or releases._lookup
    items = parse_versions(spec)
    cache_path = cache_path or releases.choice_cache_path()
    cache = releases.read_answers(cache_path)
    now = time.time()
    minors = []
    for item in items:
        if item.kind == "range":
            minors += releases.minors_between(item.first, item.last)
        elif item.kind == "minor":
            minors.append(item.first)
    minors = list(dict.fromkeys(minors))
    with ThreadPoolExecutor(max_workers=4) as pool:  # each minor asks the proxy about its patches in turn
        chosen = dict(zip(minors, pool.map(lambda m: releases.cached_choice(m, cache, now, lookup), minors)))
    releases.write_answers(cache_path, cache)

    versions, lines = [], []
    for item in items:
        if item.kind == "release":
            try:
                versions.append(check_served(item.first, lookup, cache=cache, now=now))
            finally:  # what it asked, refused or not
                releases.write_answers(cache_path, cache)
            lines.append(f"{item.first}: asked for")
            continue
        group = releases.minors_between(item.first, item.last) if item.kind == "range" else [item.first]
        picked = [chosen[m] for m in group]
        if not any(c.version for c in picked):
            raise UsageError(
                f"--versions {item}: no release of {', '.join(group)} can be built from the Go module proxy's "
                f"modules ({'; '.join(c.describe() for c in picked)[:300]})"
            )
        versions += [c.version for c in picked if c.version]
        lines += [c.describe() for c in picked]
    return VersionPlan(release_order(versions), list(dict.fromkeys(lines)))


def check_served(version: str, lookup, *, cache: dict | None = None, now: float | None = None) -> str:
    """``version`` if a build of it is cached here or the Go module proxy serves it whole; one-line
    UsageError otherwise (the build would fail minutes in). ``cache``: the cached answers about releases
    (:func:`crdscale.cluster.releases.read_answers`), read and added to."""
    # lazy: would add 22 modules to --help
    from crdscale.cluster import releases

    if releases.built_here(version):
        return version
    info = lookup("k8s.io/kubernetes", version)
    if info.get("Error"):
        if info.get("Unreachable"):
            raise UsageError(f"--versions {version}: the Go module proxy did not answer ({info['Error']})")
        raise UsageError(f"--versions {version}: the Go module proxy does not serve k8s.io/kubernetes {version}")
    cache = {} if cache is None else cache
    found = releases.unbuildable_from(version, cache, time.time() if now is None else now, lookup, info)
    if found:
        raise UsageError(f"--versions {version}: cannot be built, {found.reason()}; {found.fix('--versions')}")
    return version


def workload_text() -> str:
    """The default workload of a history (``crdscale history --print-default``)."""
    # lazy: would add 11 modules to --help
    from importlib import resources

    return resources.files("crdscale.scenario").joinpath(WORKLOAD_FILE).read_text()


def history_scenario(
    workload: str | Path | None,
    versions: list[str],
    *,
    repeats: int = DEFAULT_REPEATS,
    go: str | None = None,
    overrides: dict | None = None,
):
    """The scenario of a history: ``workload`` (a scenario file without a ``[matrix]``; None: the default
    workload) with ``overrides`` (``--set``) and ``target.go`` = ``go``, and the matrix
    ``target.kube_version`` = ``versions`` times ``repeats``. UsageError for a workload that cannot be one."""
    # lazy: would add 36 modules to --help
    from crdscale.scenario.config import load_scenario

    overrides = dict(overrides or {})
    if VERSION_AXIS in overrides:
        raise UsageError(f"--set {VERSION_AXIS}: a history's releases come from --versions")
    if go:
        overrides["target.go"] = go
    if not 1 <= repeats <= 20:
        raise UsageError(f"--repeats {repeats}: from 1 to 20 runs per release")
    path = Path(workload) if workload else _default_workload_path()
    scenario = load_scenario(path, overrides=overrides)
    if scenario.matrix:
        raise UsageError(f"{path.name}: a history's one axis is the release; drop the [matrix] table")
    if not scenario.is_local:
        raise UsageError(f"{path.name}: a history runs each release on a local control plane (target.kind = local)")
    if scenario.target.apiserver_binary or scenario.target.kube_source:
        raise UsageError(f"{path.name}: a history builds each release; drop target.apiserver_binary and kube_source")
    scenario.matrix = {VERSION_AXIS: [v.lstrip("v") for v in versions], "repeat": repeats}
    if not workload:
        scenario.source_path = None  # the built-in workload: cells say "history", not a path in site-packages
    return scenario


def _default_workload_path() -> Path:
    # lazy: would add 11 modules to --help
    from importlib import resources

    return Path(str(resources.files("crdscale.scenario").joinpath(WORKLOAD_FILE)))


def history_table(plan: VersionPlan, *, spec: str, repeats: int, go: str, workload: str | None) -> dict[str, Any]:
    """The ``history`` table of ``experiment.json``: what a report and a resume need beyond the matrix."""
    # lazy: would bring pandas, numpy, pyarrow into --help
    from crdscale.analysis.history import DEFAULT_MIN_RELATIVE

    return {
        "versions": plan.versions,
        "spec": spec,
        "choices": plan.choices,
        "repeats": repeats,
        "go": go,
        "workload": str(workload) if workload else "default",
        "min_relative": DEFAULT_MIN_RELATIVE,  # the changepoints' threshold (crdscale.analysis.history)
    }


def is_history(experiment) -> bool:
    """An experiment (:class:`~crdscale.scenario.experiment.Experiment` or its manifest) that is a history."""
    manifest = experiment if isinstance(experiment, dict) else experiment.manifest
    return isinstance(manifest.get(HISTORY_KEY), dict)


def is_history_directory(path: str | Path) -> bool:
    # lazy: would add 17 modules to --help
    from crdscale.rundir import layout

    manifest = Path(path) / layout.EXPERIMENT_MANIFEST
    if not manifest.is_file():
        return False
    try:
        return is_history(json.loads(manifest.read_text()))
    except (OSError, ValueError):
        return False


def create_history(parent: str | Path, scenario, table: dict[str, Any], *, check: bool = True):
    """A new history directory under ``parent``: an experiment of ``scenario`` (its cells checked first
    unless ``check`` is False) with the ``history`` table recorded."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario.experiment import Experiment

    experiment = Experiment.create(parent, scenario, check=check)
    experiment.manifest[HISTORY_KEY] = table
    experiment.save()
    return experiment


def open_history(path: str | Path):
    """Reopen a history directory (an :class:`~crdscale.scenario.experiment.Experiment`); UsageError if it is
    another kind of directory."""
    # lazy: would bring pandas, numpy, pyarrow, requests, yaml into --help
    from crdscale.scenario.experiment import Experiment

    experiment = Experiment.open(path)
    if not is_history(experiment):
        raise UsageError(f"{path}: an experiment, not a history (crdscale run --resume continues it)")
    return experiment


def version_of(cell) -> str:
    """The release a cell runs (``v1.24.17``)."""
    return "v" + str(cell.values[VERSION_AXIS]).lstrip("v")


def completed_by_version(experiment) -> dict[str, list[Path]]:
    """Release -> the run directories of its completed cells (repeats), oldest release first."""
    # lazy: would bring pandas, numpy, pyarrow into --help
    from crdscale.analysis.history import release_order

    runs: dict[str, list[Path]] = {}
    for state in experiment.cells:
        if state.status == "completed" and state.run_dir:
            runs.setdefault(version_of(state.cell), []).append(experiment.path / state.run_dir)
    return {v: runs[v] for v in release_order(runs)}


def progress_line(experiment) -> str:
    """``k of n cells completed (releases complete: a of b)``."""
    total = len(experiment.cells)
    done = sum(1 for c in experiment.cells if c.status == "completed")
    by_version: dict[str, list[bool]] = {}
    for c in experiment.cells:
        by_version.setdefault(version_of(c.cell), []).append(c.status == "completed")
    whole = sum(1 for flags in by_version.values() if all(flags))
    return f"{done} of {total} cells completed; {whole} of {len(by_version)} releases complete"
