"""A run's evidence checked against itself: every file of a run directory says something the others can confirm.

A heap profile says which program it sampled (its sample period and its executable's mapping and build ID)
and when (``time_nanos``); ``events.jsonl`` says in which order the profiles were saved and at how many CRDs;
``manifest.json`` says which kube-apiserver ran, how the run ended and how many series rows it exported;
the series say when they were sampled. :func:`check_run` reads them side by side and returns a
:class:`Problem` for each contradiction: a foreign profile (another program's, another build's), profiles
swapped or saved twice, a CRD count that falls, a status the events deny, a version the server denies,
series that are not finite, repeat a timestamp, lie outside the run or are missing. Nothing here writes,
computes a fit or prints; the reader (:mod:`crdscale.rundir.reader`) applies the verdicts:

- ``refuse``: the numbers a problem affects are not given. Heap numbers refused stop ``analyze``,
  ``report`` and ``compare`` with one line (:class:`crdscale.errors.EvidenceError`, exit 2): nothing valid
  remains of a per-CRD fit through a foreign or misplaced profile. A series refused is left out of
  :attr:`Run.series <crdscale.rundir.reader.Run.series>` (its rows or its metric), so no RSS figure is
  computed from it, and the problem is stated.
- ``unreliable``: the numbers are given, and the problem is stated beside them (a status the events deny).

Each problem is stated, and counted, wherever a run's numbers are: ``analyze``'s and ``compare``'s console,
the report's first screen and ``findings.md`` (:func:`warnings`).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import NamedTuple

import pandas as pd

from crdscale.analysis.pprof.decode import parse_profile_header
from crdscale.errors import EvidenceError, ProfileError, UsageError
from crdscale.rundir import layout
from crdscale.rundir.manifest import Manifest

# Severities: what becomes of the numbers a problem affects.
REFUSE = "refuse"  # not given (a one-line error where nothing valid remains)
UNRELIABLE = "unreliable"  # given, with the problem stated beside them

# Which numbers a problem affects.
HEAP = "heap"  # every number fitted from the heap profiles (per CRD, per object, install/serve, profile diffs)
SERIES = "series"  # the numbers read from the metrics series (RSS, heap in use, CPU, fds... per CRD and at the end)
ALL = "all"  # every number of the run
VERSION = "version"  # which kube-apiserver the numbers belong to (labels, headlines)

# Go's default heap sampling period (runtime.MemProfileRate): what kube-apiserver's heap profiles record,
# unless the run set GODEBUG=memprofilerate=N (the one way to change it without rebuilding).
GO_HEAP_PERIOD = 512 * 1024
_MEMPROFILERATE = re.compile(r"(?:^|,)memprofilerate=(\d+)(?:,|$)")
# A release in a path component or a version string (v1.37.1, 1.24.0-go1.18.1): its x.y.z.
_VERSION = re.compile(r"^v?(\d+\.\d+\.\d+)")
# Steps grown this way never remove a CRD: their counts can only stay or grow.
MONOTONIC_GROWTH = (None, "crds", "objects")
# The series may start a scrape before the run's recorded start and end a scrape after its end (a
# Prometheus range query aligns to its step); a row further out than this slack is not the run's.
SERIES_SLACK_SECONDS = 60.0
# Statuses a finished run's manifest records, which its run.end event must repeat.
FINISHED = ("completed", "failed", "interrupted")
BUILD_INFO = "kubernetes_build_info"


class Check(NamedTuple):
    """One kind of problem: what it catches, which numbers it affects and its severity (a check may make it
    :data:`REFUSE` where nothing of those numbers is left, as its row says)."""

    catches: str
    affects: str
    severity: str


# Every problem the checks find: code -> its Check. The one catalogue: a Problem takes its numbers and severity
# from its row here, and the docs page (docs/explanation/evidence.md) and the tests are held to it.
CODES: dict[str, Check] = {
    "profile-sample-period": Check("a heap profile sampled at another period: another program's", HEAP, REFUSE),
    "profile-binary": Check("a heap profile of another executable or build ID than the run's", HEAP, REFUSE),
    "profile-time-order": Check(
        "profiles whose own times (time_nanos) run against the order they were saved", HEAP, REFUSE
    ),
    "profile-duplicate": Check("byte-identical profiles under two steps or phases", HEAP, REFUSE),
    "crd-count-falls": Check("a step records fewer CRDs than the step before, where steps only add", HEAP, REFUSE),
    "crd-count-disagrees": Check("one step recorded at two CRD counts", HEAP, REFUSE),
    "status-disagrees": Check("manifest.json's status and the run.end event differ", ALL, UNRELIABLE),
    "version-disagrees": Check(
        "manifest.json's kube-apiserver version and the server's own differ", VERSION, UNRELIABLE
    ),
    "series-not-a-file": Check("the exported series is a directory", SERIES, REFUSE),
    "series-missing": Check("the exported series is missing, though the manifest counted its rows", SERIES, REFUSE),
    "series-row-count": Check(
        "the series holds another number of rows than the manifest counted (none: refused)", SERIES, UNRELIABLE
    ),
    "series-outside-run": Check("rows sampled outside the run's time span (all of them: refused)", SERIES, UNRELIABLE),
    "series-not-finite": Check("NaN or infinite values (a series with nothing finite: refused)", SERIES, UNRELIABLE),
    "series-duplicate-timestamps": Check("a series with two values at one timestamp", SERIES, REFUSE),
    "series-duplicate-rows": Check("rows copied within a series (same timestamp and value)", SERIES, UNRELIABLE),
}


@dataclass(frozen=True)
class Problem:
    """One contradiction between a run's files.

    Attributes:
        code: a short stable name (``profile-sample-period``, ``series-not-finite``...).
        what: one sentence saying what contradicts what, naming the files and values.
        files: the run's files involved (paths inside the run directory).
        steps: the steps involved, when it is about steps.
        affects: which numbers: :data:`HEAP`, :data:`SERIES`, :data:`ALL` or :data:`VERSION` (default: its
            code's in :data:`CODES`).
        severity: :data:`REFUSE` (those numbers are not given) or :data:`UNRELIABLE` (given and marked)
            (default: its code's in :data:`CODES`).
    """

    code: str
    what: str
    files: tuple[str, ...] = ()
    steps: tuple[int, ...] = ()
    affects: str = ""  # "": its code's in CODES
    severity: str = ""

    def __post_init__(self) -> None:
        check = CODES.get(self.code)
        for name in ("affects", "severity"):
            if not getattr(self, name):
                if check is None:
                    raise ValueError(f"evidence problem {self.code!r}: not in CODES, so its {name} must be given")
                object.__setattr__(self, name, getattr(check, name))

    @property
    def consequence(self) -> str:
        """What became of the numbers it affects, as a clause."""
        if self.severity == REFUSE:
            return {
                HEAP: "the heap numbers are refused",
                SERIES: "left out of the series numbers",
                ALL: "no number of this run is given",
                VERSION: "the version is refused",
            }[self.affects]
        return {
            HEAP: "the heap numbers are unreliable",
            SERIES: "the series numbers are unreliable",
            ALL: "every number of this run is unreliable",
            VERSION: "which kube-apiserver these numbers belong to is unreliable",
        }[self.affects]

    def __str__(self) -> str:
        return f"{self.what} ({self.code}: {self.consequence})"

    def to_json(self, run: str | None = None) -> dict:
        """The problem as one item of an ``evidence`` list of ``-o json`` and ``findings.json``: the check
        (``code``), ``severity``, which numbers it ``affects``, the ``message`` (:attr:`what`), its
        ``consequence``, the ``files`` and ``steps`` involved, and the ``run`` (a label) when given."""
        return {
            **({"run": run} if run is not None else {}),
            "code": self.code,
            "severity": self.severity,
            "affects": self.affects,
            "message": self.what,
            "consequence": self.consequence,
            "files": list(self.files),
            "steps": list(self.steps),
        }


@dataclass(frozen=True)
class Evidence:
    """What :func:`check_run` found: the problems, and the facts the checks established (the
    executable and build ID the run's heap profiles come from), which a comparison checks across runs."""

    problems: tuple[Problem, ...] = ()
    binary: str | None = None
    build_id: str | None = None

    def __len__(self) -> int:
        return len(self.problems)

    def refused(self, affects: str = HEAP) -> list[Problem]:
        """The problems that refuse the numbers ``affects`` names (or all numbers)."""
        return [p for p in self.problems if p.severity == REFUSE and p.affects in (affects, ALL)]

    def require(self, affects: str, where: str | Path) -> None:
        """Raise :class:`EvidenceError` (one line) when a problem refuses the ``affects`` numbers."""
        refused = self.refused(affects)
        if refused:
            first = refused[0]
            more = (
                f"; and {len(refused) - 1} more: " + ", ".join(dict.fromkeys(p.code for p in refused[1:]))
                if len(refused) > 1
                else ""
            )
            raise EvidenceError(
                f"{where}: {_count(refused)} refuse{'s' if len(refused) == 1 else ''} its {affects} numbers: "
                f"{first.what} ({first.code}){more}"
            )

    def warnings(self) -> list[str]:
        """The sentences a reader of the run's numbers must see: the count, then each problem."""
        return warnings(self.problems)


def warnings(problems: Sequence[Problem]) -> list[str]:
    """``N evidence problem(s): ...`` first (the count and the codes), then one sentence per problem;
    none when there is none."""
    if not problems:
        return []
    codes = ", ".join(dict.fromkeys(p.code for p in problems))
    head = f"{_count(problems)} in this run's files ({codes}): the numbers they affect are left out or unreliable"
    return [head] + [f"evidence: {p}" for p in problems]


def _count(problems: Sequence) -> str:
    return f"{len(problems)} evidence problem{'' if len(problems) == 1 else 's'}"


# --------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------


def check_run(run) -> Evidence:
    """Every check of one run directory (a :class:`crdscale.rundir.reader.Run`, which calls this: the
    reader imports this module, not the other way round): its heap profiles, CRD counts, status, version and series
    (the series' own problems are found as :attr:`Run.series` reads them: :func:`screen_series`)."""
    profiles = _heap_headers(run)
    binary, build_id, problems = _binary_problems(run.manifest, profiles)
    problems += _period_problems(run.manifest, profiles)
    duplicates = _duplicate_problems(run, profiles)
    problems += duplicates
    # Copies are taken at one time: the time order is checked between profiles that are not copies.
    copies = {f for p in duplicates for f in p.files[1:]}
    problems += _time_order_problems([p for p in profiles if p.file not in copies])
    problems += _crd_count_problems(run)
    problems += _status_problems(run.manifest, run.events)
    problems += _version_problems(run.manifest, run.events, run.series, _most_common(p.binary for p in profiles))
    problems += run.series_problems
    return Evidence(tuple(problems), binary, build_id)


@dataclass(frozen=True)
class _Header:
    """A heap profile's row of :attr:`Run.profiles` with what its header says."""

    file: str
    step: int
    crds: int
    saved: pd.Timestamp  # when its profile event was recorded
    period: int
    time_nanos: int
    binary: str
    build_id: str


def _heap_headers(run) -> list[_Header]:
    """The run's heap profiles that hold heap samples, in the order they were saved (their events'),
    with their headers. A profile that cannot be read or is not a heap profile inside is the fits'
    to set aside and name (as before): it is not evidence here."""
    heap = run.heap_profiles().sort_values(["timestamp", "file"], kind="stable")
    out = []
    for r in heap.itertuples(index=False):
        try:
            header = parse_profile_header(run.profile_bytes(r.file), name=str(run.path / r.file))
        except ProfileError:
            continue
        types = {t.type for t in header.meta.sample_types}
        if not types & {"inuse_space", "inuse_objects"}:
            continue
        binary, build_id = header.mappings[0] if header.mappings else ("", "")
        out.append(
            _Header(
                r.file,
                int(r.step),
                int(r.crds),
                r.timestamp,
                header.meta.period,
                header.meta.time_nanos,
                binary,
                build_id,
            )
        )
    return out


def expected_period(manifest: Manifest) -> int:
    """The heap sampling period the run's kube-apiserver used: Go's default, or the
    ``GODEBUG=memprofilerate=N`` the scenario set."""
    godebug = str(manifest.scenario.target.env.get("GODEBUG") or "")
    found = _MEMPROFILERATE.search(godebug)
    return int(found.group(1)) if found and int(found.group(1)) > 0 else GO_HEAP_PERIOD


def _period_problems(manifest: Manifest, profiles: Sequence[_Header]) -> list[Problem]:
    period = expected_period(manifest)
    foreign = [p for p in profiles if p.period != period]
    if not foreign:
        return []
    said = ", ".join(f"{p.file} samples every {p.period:,} bytes" for p in foreign[:3])
    more = f" (and {len(foreign) - 3} more)" if len(foreign) > 3 else ""
    return [
        _about(
            "profile-sample-period",
            f"{said}{more}, not every {period:,} as kube-apiserver's heap profiles in this run do: "
            f"another program's profile",
            foreign,
        )
    ]


def _about(code: str, what: str, profiles: Sequence[_Header]) -> Problem:
    """A problem of some heap profiles: their files and their steps."""
    return Problem(code, what, tuple(p.file for p in profiles), tuple(sorted({p.step for p in profiles})))


def _same_binary(a: str, b: str) -> bool:
    """Two paths of one executable: equal, or the same last two components (a directory per release,
    ``.../v1.37.1/kube-apiserver``), so a home directory reached through a symlink still matches."""
    return a == b or PurePosixPath(a).parts[-2:] == PurePosixPath(b).parts[-2:]


def _binary_problems(manifest: Manifest, profiles: Sequence[_Header]) -> tuple[str | None, str | None, list]:
    """The executable and build ID the run's heap profiles come from, and the profiles of another:
    the manifest's kube-apiserver binary when it records one, else what most profiles say."""
    recorded = manifest.binaries.get("kube-apiserver")
    path = recorded.path if recorded and recorded.path else None
    binary = path or _most_common(p.binary for p in profiles)
    build_id = _most_common(p.build_id for p in profiles if not binary or _same_binary(p.binary, binary))
    foreign = [
        p
        for p in profiles
        if (binary and p.binary and not _same_binary(p.binary, binary))
        or (build_id and p.build_id and p.build_id != build_id)
    ]
    if not foreign:
        return binary, build_id, []
    f = foreign[0]
    more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
    source = "manifest.json's kube-apiserver" if path else "the run's other profiles'"
    return (
        binary,
        build_id,
        [
            _about(
                "profile-binary",
                f"{f.file}{more} sampled {f.binary or 'an unnamed executable'} (build ID {_short(f.build_id)}), "
                f"not {source} {binary or 'executable'} (build ID {_short(build_id)}): a profile of another build",
                foreign,
            )
        ],
    )


def _most_common(values: Iterable[str]) -> str | None:
    """The value most of ``values`` are (the first of a tie), ignoring empty ones; None when none."""
    counts = Counter(v for v in values if v)
    return counts.most_common(1)[0][0] if counts else None


def _short(build_id: str | None) -> str:
    return (build_id[:12] + "…") if build_id and len(build_id) > 12 else (build_id or "none")


def _time_order_problems(profiles: Sequence[_Header]) -> list[Problem]:
    """Each profile's own time (``time_nanos``) must follow the order events.jsonl saved them in:
    profiles swapped between steps, or one saved twice, run against it."""
    timed = [p for p in profiles if p.time_nanos > 0]  # 0: the profile does not say (a synthetic one)
    pairs = [(a, b) for a, b in zip(timed, timed[1:]) if b.time_nanos <= a.time_nanos]
    if not pairs:
        return []
    a, b = pairs[0]
    more = f" (and {len(pairs) - 1} more pair{'s' if len(pairs) > 2 else ''})" if len(pairs) > 1 else ""
    when = "at the same time as" if a.time_nanos == b.time_nanos else "before"
    files = tuple(dict.fromkeys(f for pair in pairs for f in (pair[0].file, pair[1].file)))
    return [
        Problem(
            "profile-time-order",
            f"{b.file} (step {b.step}) was taken {when} {a.file} (step {a.step}), which {layout.EVENTS} saved "
            f"first ({_clock(b.time_nanos)} vs {_clock(a.time_nanos)}){more}: profiles swapped or copied between steps",
            files,
            tuple(sorted({p.step for pair in pairs for p in pair})),
        )
    ]


def _clock(time_nanos: int) -> str:
    return pd.Timestamp(time_nanos, unit="ns", tz="UTC").strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _duplicate_problems(run, profiles: Sequence[_Header]) -> list[Problem]:
    """Byte-identical profiles: one profile saved under two steps (or phases). A profile that says when
    it was taken (as Go's do) is one of a kind; two that say it byte for byte are copies."""
    by_digest: dict[str, list[_Header]] = {}
    for p in profiles:
        if not p.time_nanos:  # a profile that does not say when it was taken (a synthetic one) may repeat
            continue
        by_digest.setdefault(hashlib.sha256(run.profile_bytes(p.file)).hexdigest(), []).append(p)
    return [
        _about(
            "profile-duplicate",
            f"{len(g)} byte-identical profiles: {_listed([p.file for p in g], 4, 'files')}: "
            f"one profile saved under {len(g)} steps or phases",
            g,
        )
        for g in by_digest.values()
        if len(g) > 1
    ]


def _crd_count_problems(run) -> list[Problem]:
    """CRD counts recorded per step (profile and step.end events) must never fall in a run whose steps
    only add (``steps.grow`` crds or objects), nor differ within one step."""
    if run.manifest.scenario.steps.grow not in MONOTONIC_GROWTH:
        return []
    counts: dict[int, dict[int, list[str]]] = {}  # step -> crds -> files (or events) saying so
    profiles = run.profiles
    for r in profiles.itertuples(index=False):
        counts.setdefault(int(r.step), {}).setdefault(int(r.crds), []).append(r.file)
    events = run.events
    if len(events) and {"step", "crds"} <= set(events.columns):
        for e in events[events["kind"] == "step.end"][["step", "crds"]].itertuples(index=False):
            step, crds = _int(e.step), _int(e.crds)
            if step is not None and crds is not None:
                counts.setdefault(step, {}).setdefault(crds, []).append(f"{layout.EVENTS} step.end")
    problems, before = [], None  # (step, crds) of the last step with one count
    for step in sorted(counts):
        said = counts[step]
        if len(said) > 1:
            text = " and ".join(f"{crds} ({', '.join(dict.fromkeys(where))})" for crds, where in sorted(said.items()))
            problems.append(
                Problem(
                    "crd-count-disagrees",
                    f"step {step} records {text} CRDs",
                    tuple(f for where in said.values() for f in where if not f.startswith(layout.EVENTS)),
                    (step,),
                )
            )
            continue
        crds = next(iter(said))
        if before is not None and crds < before[1]:
            problems.append(
                Problem(
                    "crd-count-falls",
                    f"step {step} records {crds} CRDs after {before[1]} at step {before[0]} ({layout.EVENTS}); "
                    f"this run's steps only add CRDs",
                    tuple(f for f in said[crds] if not f.startswith(layout.EVENTS)),
                    (before[0], step),
                )
            )
        before = (step, crds)
    return problems


def _int(value) -> int | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if math.isfinite(number) else None


def _status_problems(manifest: Manifest, events: pd.DataFrame) -> list[Problem]:
    """A finished run's manifest status and its run.end event must agree."""
    if not len(events) or manifest.status not in FINISHED:
        return []
    ends = events[events["kind"] == "run.end"]
    if not len(ends) or "status" not in ends.columns:
        return []
    end = ends.iloc[-1]
    status = end.get("status")
    if not isinstance(status, str) or status == manifest.status:
        return []
    reason = end.get("reason")
    why = f" ({reason})" if isinstance(reason, str) and reason else ""
    said = f" ({manifest.reason})" if manifest.reason else ""
    return [
        Problem(
            "status-disagrees",
            f"{layout.MANIFEST} says the run {manifest.status}{said}, but the run.end event in {layout.EVENTS} says "
            f"{status}{why}: how the run ended is unknown",
            (layout.MANIFEST, layout.EVENTS),
        )
    ]


def release(text: str | None) -> str | None:
    """The ``x.y.z`` of a version or of a path's release directory (``.../v1.37.1/kube-apiserver``)."""
    if not text:
        return None
    found = _VERSION.match(str(text))
    if found:
        return found.group(1)
    for part in reversed(PurePosixPath(str(text)).parts[:-1]):
        found = _VERSION.match(part)
        if found:
            return found.group(1)
    return None


def _version_problems(
    manifest: Manifest, events: pd.DataFrame, series: pd.DataFrame, sampled: str | None
) -> list[Problem]:
    """The manifest's kube-apiserver version against what the server itself said: its version at
    target.ready, its build_info series, and the release directory of the executable its profiles sampled."""
    claimed = manifest.versions.kube_apiserver
    if not release(claimed):
        return []
    said: list[tuple[str | None, str]] = []  # (x.y.z, where)
    if len(events) and "version" in events.columns:
        ready = events[events["kind"] == "target.ready"]["version"].dropna()
        said += [(release(v), f"{v} at target.ready in {layout.EVENTS}") for v in ready if isinstance(v, str)]
    if len(series) and BUILD_INFO in set(series["metric"]):
        for labels in series.loc[series["metric"] == BUILD_INFO, "labels"].drop_duplicates():
            found = re.search(r'"git_version"\s*:\s*"([^"]+)"', str(labels))
            if found:
                said.append((release(found.group(1)), f"{found.group(1)} in its {BUILD_INFO} series"))
    recorded = manifest.binaries.get("kube-apiserver")
    if sampled:
        said.append((release(sampled), f"its heap profiles sampled {sampled}"))
    if recorded and recorded.path:
        said.append((release(recorded.path), f"{layout.MANIFEST}'s own binary is {recorded.path}"))
    denied = [where for version, where in said if version and version != release(claimed)]
    if not denied:
        return []
    text = "; ".join(dict.fromkeys(denied))
    return [
        Problem(
            "version-disagrees",
            f"{layout.MANIFEST} says kube-apiserver {claimed}, but the server said otherwise: {text}",
            (layout.MANIFEST,),
        )
    ]


# --------------------------------------------------------------------------
# The series
# --------------------------------------------------------------------------


def screen_series(
    series: pd.DataFrame, manifest: Manifest, events: pd.DataFrame, file: Path
) -> tuple[pd.DataFrame, list[Problem]]:
    """The run's series without what cannot be its evidence, and why: rows outside the run's time span,
    values that are not finite, timestamps a series repeats (with other values: the whole series; with
    the same: the copies), and a table that is not where the manifest's row count says it is. ``file``
    is the run's exported series (``metrics/series.parquet``), which may be a directory or missing."""
    problems: list[Problem] = []
    rows = manifest.metrics.rows
    where = layout.SERIES
    if file.is_dir():
        problems.append(
            Problem(
                "series-not-a-file",
                f"{where} is a directory, not the run's series: no series numbers"
                + (f" ({layout.MANIFEST} records {rows:,} rows)" if rows else ""),
                (where,),
            )
        )
    elif isinstance(rows, int) and rows > 0 and not file.is_file() and not len(series):
        problems.append(
            Problem(
                "series-missing",
                f"{where} is missing, though {layout.MANIFEST} records {rows:,} rows: no series numbers",
                (where,),
            )
        )
    elif file.is_file() and isinstance(rows, int) and rows != len(series):
        problems.append(
            Problem(
                "series-row-count",
                f"{where} holds {len(series):,} rows, but {layout.MANIFEST} records {rows:,}"
                + (": no series numbers" if not len(series) else ": rows lost or added since the run"),
                (where,),
                severity=REFUSE if not len(series) else UNRELIABLE,
            )
        )
    if not len(series):
        return series, problems
    keep = pd.Series(True, index=series.index)
    span = _span(manifest, events)
    if span is not None:
        start, end = span
        inside = (series["timestamp"] >= start) & ((series["timestamp"] <= end) if end is not None else True)
        if not inside.all():
            out = series.loc[~inside, "timestamp"]
            everything = not inside.any()
            problems.append(
                Problem(
                    "series-outside-run",
                    f"{where}: {'all ' if everything else ''}{len(out):,} rows lie outside the run "
                    f"({_day(out.min())} to {_day(out.max())}; the run's span, slack included: {_day(start)} to "
                    f"{_day(end) if end is not None else 'now'}), left out",
                    (where,),
                    severity=REFUSE if everything else UNRELIABLE,
                )
            )
            keep &= inside
    values = pd.to_numeric(series["value"], errors="coerce")
    finite = values.abs() < math.inf  # False for NaN and ±inf
    bad = keep & ~finite
    if bad.any():
        names = series.loc[bad].groupby(["job", "metric"], sort=True).size()
        wholly = [f"{m} ({j})" for (j, m) in names.index if not (keep & finite & _of(series, j, m)).any()]
        problems.append(
            Problem(
                "series-not-finite",
                f"{where}: {int(bad.sum()):,} values are NaN or infinite in {_names(names.index)}"
                + (f"; nothing finite in {_listed(wholly)}" if wholly else "")
                + ", left out",
                (where,),
                severity=REFUSE if wholly else UNRELIABLE,
            )
        )
        keep &= finite
    kept = series.loc[keep]
    key = ["timestamp", "job", "metric", "labels"]
    repeated = kept.duplicated(key, keep=False)
    if repeated.any():
        copies = kept.loc[repeated]
        conflicting = copies.groupby(key, sort=False)["value"].nunique() > 1
        bad_series = conflicting[conflicting].reset_index()[["job", "metric"]].drop_duplicates()
        if len(bad_series):
            drop = kept.set_index(["job", "metric"]).index.isin(pd.MultiIndex.from_frame(bad_series))
            keep.loc[kept.index[drop]] = False
            problems.append(
                Problem(
                    "series-duplicate-timestamps",
                    f"{where}: {int(repeated.sum()):,} rows repeat a timestamp of their series with another value "
                    f"in {_names(pd.MultiIndex.from_frame(bad_series))}: which value was sampled is unknown, "
                    f"those series left out",
                    (where,),
                )
            )
        extra = kept.duplicated(key, keep="first") & keep.loc[kept.index]
        if extra.any():
            keep.loc[extra[extra].index] = False
            problems.append(
                Problem(
                    "series-duplicate-rows",
                    f"{where}: {int(extra.sum()):,} rows are copies of another row (same series, timestamp "
                    f"and value), left out",
                    (where,),
                )
            )
    if keep.all():
        return series, problems
    return series.loc[keep].reset_index(drop=True), problems


def _of(series: pd.DataFrame, job: str, metric: str) -> pd.Series:
    return (series["job"] == job) & (series["metric"] == metric)


def _names(index: Iterable) -> str:
    return _listed([f"{m} ({j})" for j, m in index])


def _listed(names: Sequence[str], first: int = 3, what: str = "series") -> str:
    return ", ".join(names[:first]) + (f" and {len(names) - first} more {what}" if len(names) > first else "")


def _day(ts) -> str:
    return pd.Timestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def _span(manifest: Manifest, events: pd.DataFrame) -> tuple[pd.Timestamp, pd.Timestamp | None] | None:
    """When the run could have sampled, with :data:`SERIES_SLACK_SECONDS` (and two of its longest scrape
    intervals) either side: from the manifest's start (else the first event) to its end (or the last event,
    if later); no end for a run that recorded none (still running, or its runner died: it may have sampled
    past its last event). None when the run says nothing of when it started."""
    start, end = _time(manifest.started_at), _time(manifest.ended_at)
    if len(events):
        start = start if start is not None else events["ts"].min()
        end = max(end, events["ts"].max()) if end is not None else None
    if start is None:
        return None
    intervals = [manifest.metrics.scrape_interval_s, *manifest.metrics.job_interval_s.values()]
    longest = max((float(s) for s in intervals if isinstance(s, int | float) and math.isfinite(s)), default=0.0)
    slack = pd.Timedelta(seconds=SERIES_SLACK_SECONDS + 2 * longest)
    return start - slack, (end + slack if end is not None else None)


def _time(value) -> pd.Timestamp | None:
    """A manifest's ISO 8601 time in UTC (a time without a zone is UTC); None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        ts = pd.Timestamp(value)
    except (TypeError, ValueError):
        return None
    if ts is pd.NaT:
        return None
    return ts.tz_localize("UTC") if ts.tzinfo is None else ts.tz_convert("UTC")


# --------------------------------------------------------------------------
# Runs side by side
# --------------------------------------------------------------------------


def check_distinct(runs: Sequence) -> None:
    """Refuse (UsageError, one line) two runs that are one run: the same ``run_id`` (a ``cp -r`` copy)."""
    seen: dict[str, Path] = {}
    for run in runs:
        run_id = run.manifest.run_id
        if not run_id:
            continue
        if run_id in seen:
            raise UsageError(
                f"{run.path} and {seen[run_id]} are the same run (run_id {run_id}; one is a copy of the other): "
                f"a run compared with itself differs by exactly nothing; compare needs two different runs"
            )
        seen[run_id] = run.path


def compare_problems(evidence: Mapping[str, Evidence], manifests: Mapping[str, Manifest]) -> list[tuple[str, Problem]]:
    """Runs compared as different builds whose heap profiles come from one build (label -> each run's
    :class:`Evidence` and manifest): ``(label, problem)`` for the later run of each such pair, whose
    sentence is ``f"{label}: evidence: {problem}"``."""
    out = []
    labels = list(evidence)
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            ea, eb = evidence[a], evidence[b]
            va, vb = manifests[a].versions.kube_apiserver, manifests[b].versions.kube_apiserver
            if ea.build_id and ea.build_id == eb.build_id and va != vb:
                problem = Problem(
                    "version-disagrees",
                    f"its manifest says kube-apiserver {vb} and {a}'s says {va}, but both runs' heap profiles "
                    f"sampled one build (build ID {_short(ea.build_id)}): a comparison of a build with itself",
                    (layout.MANIFEST,),
                )
                out.append((b, problem))
    return out


__all__ = [
    "ALL",
    "CODES",
    "HEAP",
    "REFUSE",
    "SERIES",
    "UNRELIABLE",
    "VERSION",
    "Check",
    "Evidence",
    "Problem",
    "check_distinct",
    "check_run",
    "compare_problems",
    "expected_period",
    "release",
    "screen_series",
    "warnings",
]
