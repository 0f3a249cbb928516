"""The one reader of run directories: :func:`read_run` returns a typed :class:`Run`.

Everything else — analysis, reports, notebooks, the CLI — gets a run's data
from here: manifest, events, metrics series, profiles with their step, CRD
count, phase and time, probe tables and the CRD-set summary. Tables are read
on first use and kept, so a notebook may touch ``run.series`` often.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow

from crdscale.analysis.pprof.decode import parse_profile, read_profile_bytes
from crdscale.errors import UsageError
from crdscale.fsutil import read_json_object
from crdscale.proc import is_alive
from crdscale.rundir import evidence, layout
from crdscale.rundir.events import read_events
from crdscale.rundir.manifest import Manifest

TIDY_COLUMNS = ["timestamp", "job", "metric", "labels", "value"]
PROFILE_COLUMNS = ["file", "kind", "step", "crds", "phase", "timestamp", "bytes"]


def events_frame(events: Iterable[Mapping]) -> pd.DataFrame:
    """Events as a DataFrame: ``ts`` (UTC), ``kind`` and every other field as a column, in time order."""
    frame = pd.DataFrame(list(events))
    if frame.empty:
        return pd.DataFrame(columns=["ts", "kind"])
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True, format="ISO8601")
    return frame.sort_values("ts", kind="stable").reset_index(drop=True)


def run_start(events: pd.DataFrame, series: pd.DataFrame | None = None) -> pd.Timestamp | None:
    """Time zero of a run's plots: when metrics collection started (the ``metrics.start``
    event; the control plane's start-up before it has no samples), else the first
    event, else the first sample; ``None`` for an empty run."""
    if len(events):
        started = events.loc[events["kind"] == "metrics.start", "ts"]
        return started.iloc[0] if len(started) else events["ts"].min()
    if series is not None and len(series):
        return pd.to_datetime(series["timestamp"], utc=True).min()
    return None


def status_warning(status: str | None, reason: str | None = None) -> str | None:
    """One sentence when a run did not complete (``failed``, ``interrupted``, ``abandoned``,
    still ``running``), with its recorded reason; ``None`` for a completed run. Its numbers
    cover only what it recorded before it stopped, which a reader must be told."""
    if status in (None, "completed"):  # None: no run behind the numbers (a library caller's profiles)
        return None
    why = f": {reason}" if reason else " (no reason recorded)"
    if status == "running":
        return "the run is still running; its numbers cover what it recorded so far"
    ended = {"failed": "failed", "interrupted": "was interrupted", "abandoned": "was abandoned"}
    if status == "abandoned" and not reason:
        why = ": its runner died without recording how the run ended"
    if status in ended:
        return f"the run {ended[status]}{why}; its numbers cover only what it recorded before it stopped"
    return f"the run's manifest records status {status!r}{why}; it may not have completed"


class Run:
    """One run directory, read. Build it with :func:`read_run`.

    Attributes:
        path: the run directory.
        manifest: ``manifest.json``, typed (:class:`crdscale.rundir.manifest.Manifest`: scenario,
            versions, binaries, machine, status…; also a read-only mapping over its JSON).
    """

    def __init__(self, path: Path, manifest: Manifest | Mapping[str, Any]):
        self.path = path
        self.manifest = Manifest.of(manifest)

    def __repr__(self) -> str:
        return f"Run({str(self.path)!r}, status={self.status!r})"

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def status(self) -> str:
        """``completed``, ``failed``, ``interrupted``, ``running`` — or ``abandoned`` when the
        manifest says running but the runner process that wrote it is gone (``kill -9``, OOM)."""
        status = self.manifest.status or "unknown"
        runner = self.manifest.runner
        if status == "running" and runner.pid and not is_alive(int(runner.pid), runner.start_ticks):
            return "abandoned"
        return status

    # ------------------------------------------------------------ tables

    @cached_property
    def events(self) -> pd.DataFrame:
        """``events.jsonl`` as a frame (``ts`` UTC, ``kind``, fields as columns); empty if none.

        Lines that are not events (a torn line of a killed writer, an edited file) are left
        out and counted in :attr:`skipped_event_lines`."""
        path = self.path / layout.EVENTS
        if not path.is_file():
            return events_frame([])
        events, bad = [], []
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, start=1):
                    if not line.strip():
                        continue
                    try:
                        event = json.loads(line)
                    except ValueError:
                        event = None
                    if (
                        isinstance(event, dict)
                        and isinstance(event.get("ts"), str)
                        and isinstance(event.get("kind"), str)
                    ):
                        events.append(event)
                    else:
                        bad.append(number)
        except OSError as err:
            raise UsageError(f"{path}: cannot read ({err.strerror or err})") from None
        self.__dict__["skipped_event_lines"] = bad
        try:
            return events_frame(events)
        except (ValueError, TypeError) as err:
            raise UsageError(f"{path}: an event's time is not an ISO 8601 timestamp ({err})") from None

    @property
    def skipped_event_lines(self) -> list[int]:
        """Line numbers of ``events.jsonl`` that are not events (not JSON objects with ``ts`` and ``kind``)."""
        self.events  # noqa: B018 (reading the events records them)
        return self.__dict__.get("skipped_event_lines", [])

    @cached_property
    def series(self) -> pd.DataFrame:
        """The tidy metrics table ``timestamp (UTC), job, metric, labels, value``; empty if none. Rows that
        cannot be the run's evidence (outside the run, not finite, a timestamp repeated) are left out, and
        said in :attr:`evidence` (:func:`crdscale.rundir.evidence.screen_series`)."""
        path = self.path / layout.SERIES
        series, self.__dict__["series_problems"] = evidence.screen_series(
            self.recorded_series, self.manifest, self.events, path
        )
        return series

    @cached_property
    def recorded_series(self) -> pd.DataFrame:
        """The tidy metrics table as the run's files hold it, nothing left out (what ``crdscale recover``
        exports); empty if none."""
        path = self.path / layout.SERIES
        if path.is_file():
            series = _read_parquet(path, TIDY_COLUMNS)
        else:  # a run that never exported (its runner died): the chunks written while it went
            chunks = sorted((self.path / layout.SERIES_CHUNKS).glob("series-*.parquet"))
            if not chunks:
                return pd.DataFrame(columns=TIDY_COLUMNS)
            series = pd.concat([_read_parquet(c, TIDY_COLUMNS) for c in chunks], ignore_index=True)
        if len(series):
            series = series.assign(timestamp=pd.to_datetime(series["timestamp"], utc=True))
        return series

    @property
    def series_problems(self) -> list[evidence.Problem]:
        """What :attr:`series` left out of the recorded series, and why."""
        self.series  # noqa: B018 (reading the series screens it)
        return self.__dict__.get("series_problems", [])

    @cached_property
    def evidence(self) -> evidence.Evidence:
        """The run's files checked against each other (:func:`crdscale.rundir.evidence.check_run`)."""
        return evidence.check_run(self)

    @property
    def start(self) -> pd.Timestamp | None:
        """Time zero of the run's plots (see :func:`run_start`)."""
        return run_start(self.events, self.series)

    @cached_property
    def profiles(self) -> pd.DataFrame:
        """Every profile file of kube-apiserver: ``file`` (path inside the run), ``kind``, ``step``, ``crds``,
        ``phase`` (None = end of step), ``timestamp`` (UTC) and ``bytes``, ordered by file name
        (step, then installed before served).

        Kind, step, CRD count and phase are what the run's ``profile`` event recorded when
        it saved the file; the file name is only a label. A name that disagrees with its
        event (a renamed file) raises UsageError; a file no event records, or an event
        whose file is gone, is left out and listed in :attr:`unrecorded_profiles`.
        The other components' profiles are :meth:`component_profiles`'.
        """
        return self.component_profiles(layout.APISERVER)

    def component_profiles(self, component: str = layout.APISERVER) -> pd.DataFrame:
        """:attr:`profiles` of one component of the control plane (:data:`crdscale.rundir.layout.COMPONENTS`:
        ``kube-controller-manager``, ``etcd``; default kube-apiserver), read and checked the same way;
        empty for a run that took none of its profiles. What it leaves out is in
        :meth:`unrecorded_component_profiles`."""
        cache = self.__dict__.setdefault("_profiles_by_component", {})
        if component not in cache:
            cache[component] = self._read_profiles(component)
        return cache[component][0]

    def unrecorded_component_profiles(self, component: str = layout.APISERVER) -> list[tuple[str, str]]:
        """:attr:`unrecorded_profiles` of one component."""
        self.component_profiles(component)
        return self.__dict__["_profiles_by_component"][component][1]

    def _read_profiles(self, component: str) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
        folder = self.path / layout.PROFILES
        files = {
            f"{layout.PROFILES}/{p.name}": p
            for p in (sorted(folder.iterdir()) if folder.is_dir() else [])
            if (name := layout.parse_profile_filename(p.name)) and name.component == component
        }
        recorded = {}
        if len(self.events) and "file" in self.events.columns:
            for e in self.events[self.events["kind"] == "profile"].to_dict("records"):
                if _component(e.get("component")) == component:
                    recorded[e["file"]] = e
        if files and not recorded:
            whose = "" if component == layout.APISERVER else f"{component}'s "
            raise UsageError(
                f"{self.path}: {layout.EVENTS} records none of its {len(files)} {whose}profiles, so their CRD counts "
                f"and phases are unknown (a file name is a label, not a record)"
            )
        by_slot = {(e.get("profile"), _int(e.get("step")), _phase(e.get("phase"))): e for e in recorded.values()}
        rows, unrecorded = [], []
        for relative, path in files.items():
            name = layout.parse_profile_filename(path.name)
            event = recorded.get(relative)
            if event is None:
                twin = by_slot.get((name.kind, name.step, name.phase))
                if twin is not None:
                    raise UsageError(
                        f"{self.path / relative}: its name says {name.crds} CRDs, but {layout.EVENTS} recorded "
                        f"step {name.step}'s {_describe(name.kind, name.phase)} as {twin['file']} at "
                        f"{_int(twin.get('crds'))} CRDs; the file was renamed or replaced"
                    )
                unrecorded.append(
                    (relative, f"no profile event in {layout.EVENTS} records it, so its CRD count is unknown")
                )
                continue
            said = (event.get("profile"), _int(event.get("step")), _int(event.get("crds")), _phase(event.get("phase")))
            if said != (name.kind, name.step, name.crds, name.phase):
                raise UsageError(
                    f"{self.path / relative}: its name says {_describe(name.kind, name.phase)}, step {name.step}, "
                    f"{name.crds} CRDs, but its event in {layout.EVENTS} says {_describe(said[0], said[3])}, "
                    f"step {said[1]}, {said[2]} CRDs"
                )
            rows.append((relative, *said[:3], said[3], event["ts"], path.stat().st_size))
        for relative in sorted(set(recorded) - set(files)):
            unrecorded.append((relative, f"recorded in {layout.EVENTS} but the file is missing"))
        frame = pd.DataFrame(rows, columns=PROFILE_COLUMNS)
        frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True)
        return frame, unrecorded

    @property
    def unrecorded_profiles(self) -> list[tuple[str, str]]:
        """``(file, why)`` of the profiles :attr:`profiles` leaves out: files no event records,
        events whose file is missing."""
        return self.unrecorded_component_profiles(layout.APISERVER)

    def heap_profiles(self) -> pd.DataFrame:
        """The rows of :attr:`profiles` that are heap profiles."""
        return self.profiles[self.profiles["kind"] == "heap"].reset_index(drop=True)

    def profile_marks(self, heap: pd.DataFrame | None = None) -> pd.DataFrame:
        """When each heap profile was taken: ``timestamp, crds, phase`` (``served`` for the end of a step);
        of the rows ``heap`` of :attr:`profiles` when given (those a fit takes), else of every heap profile."""
        return _marks(self.heap_profiles() if heap is None else heap)

    def profile_path(self, file: str) -> Path:
        """Absolute path of a profile given its ``file`` entry (for ``go tool pprof`` and friends)."""
        return self.path / file

    def profile_bytes(self, file: str) -> bytes:
        # bounded; a directory is a ProfileError
        return read_profile_bytes(self.path / file)

    def read_profile(self, file: str):
        """A profile decoded (:class:`crdscale.analysis.pprof.Profile`) given its ``file`` entry."""
        return parse_profile(self.profile_bytes(file), name=str(self.path / file))

    def probe_table(self, name: str, table: str | None = None) -> pd.DataFrame:
        """All steps of one probe table concatenated, with a ``step`` column (empty if none)."""
        stem = layout.probe_stem(name, table)
        frames = []
        folder = self.path / layout.PROBES
        for path in sorted(folder.glob("*.parquet")) if folder.is_dir() else []:
            parsed = layout.parse_probe_table_name(path.name)
            if parsed and parsed[0] == stem:
                frames.append(_read_parquet(path).assign(step=parsed[1]))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    def probe_tables(self) -> list[str]:
        """Paths (inside the run) of every probe table."""
        folder = self.path / layout.PROBES
        return (
            [
                f"{layout.PROBES}/{p.name}"
                for p in sorted(folder.glob("*.parquet"))
                if layout.parse_probe_table_name(p.name)
            ]
            if folder.is_dir()
            else []
        )

    def has_probe_table(self, name: str, table: str | None = None) -> bool:
        stem = layout.probe_stem(name, table)
        folder = self.path / layout.PROBES
        return folder.is_dir() and any(
            (p := layout.parse_probe_table_name(f.name)) and p[0] == stem for f in folder.glob("*.parquet")
        )

    @cached_property
    def crd_summary(self) -> dict[str, Any] | None:
        path = self.path / layout.CRD_SUMMARY
        return read_json_object(path) if path.is_file() else None

    def read_jsonl(self, relative: str) -> list[dict[str, Any]]:
        """Records of a JSON-lines file inside the run (e.g. ``crds.jsonl`` of ``crdscale install``)."""
        path = self.path / relative
        return list(read_events(path)) if path.is_file() else []

    def output_dir(self, name: str = layout.ANALYSIS) -> Path:
        """Where derived files go (``analysis/``, ``report/``), created on demand."""
        path = self.path / name
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as err:  # a read-only copy of a run: say so, in one line
            raise UsageError(f"{path}: cannot create ({err.strerror or err})") from None
        return path

    # ------------------------------------------------------------ steps

    @cached_property
    def object_steps(self) -> pd.DataFrame:
        """The steps that added objects (``steps.grow = "objects"``): ``step, kind, objects_in_step,
        objects`` (the kind's objects so far), ``object_bytes`` (their JSON bytes as sent), from
        the ``step.end`` events; empty for a run that grew CRDs."""
        columns = ["step", "kind", "objects_in_step", "objects", "object_bytes"]
        events = self.events
        if not len(events) or "object_kind" not in events.columns:
            return pd.DataFrame(columns=columns)
        ends = events[(events["kind"] == "step.end") & (events["grow"] == "objects")]
        rows = [
            (
                int(e["step"]),
                e["object_kind"],
                int(e["objects_in_step"]),
                int((e.get("objects") or {}).get(e["object_kind"], 0)),
                int((e.get("object_bytes") or {}).get(e["object_kind"], 0)),
            )
            for e in ends.to_dict("records")
        ]
        return pd.DataFrame(rows, columns=columns)

    @property
    def warnings(self) -> list[str]:
        """What a reader of this run's numbers must be told: a run that did not complete (with its
        reason), event-log lines that are not events (:attr:`skipped_event_lines`)."""
        state = status_warning(self.status, self.manifest.reason)
        return ([state] if state else []) + self.file_warnings

    @property
    def file_warnings(self) -> list[str]:
        """Problems of the run's files that leave something out or contradict each other (evidence problems,
        counted first; event-log lines that are not events)."""
        out = self.evidence.warnings()
        if self.skipped_event_lines:
            lines = ", ".join(map(str, self.skipped_event_lines[:5])) + (
                ", ..." if len(self.skipped_event_lines) > 5 else ""
            )
            out.append(
                f"{layout.EVENTS}: {len(self.skipped_event_lines)} line(s) that are not events left out (line {lines})"
            )
        return out


def _marks(heap: pd.DataFrame) -> pd.DataFrame:
    """When each heap profile of ``heap`` was taken: ``timestamp, crds, phase`` (``served`` for the end of a step)."""
    heap = heap.dropna(subset=["timestamp"])
    return pd.DataFrame(
        {"timestamp": heap["timestamp"], "crds": heap["crds"].astype(int), "phase": heap["phase"].fillna("served")}
    ).reset_index(drop=True)


def _component(value) -> str:
    """A profile event's component: kube-apiserver when it names none (NaN in a DataFrame's records)."""
    return value if isinstance(value, str) and value else layout.APISERVER


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _phase(value) -> str | None:
    """A profile event's phase: ``None`` (end of step) also when written as NaN by a DataFrame."""
    return value if isinstance(value, str) and value else None


def _describe(kind, phase) -> str:
    return f"{kind} profile" + (f" ({phase})" if phase else "")


def _read_parquet(path: Path, columns: Sequence[str] = ()) -> pd.DataFrame:
    """A parquet table of the run (with ``columns`` at least); UsageError (one line) when the file is
    empty, truncated or not parquet, as a copy interrupted or a disk filled up leaves it."""
    try:
        frame = pd.read_parquet(path)
    except (OSError, ValueError, pyarrow.ArrowException) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise UsageError(f"{path}: not a readable parquet file ({first})") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise UsageError(f"{path}: no column {', '.join(missing)}; not a crdscale table")
    return frame


def read_run(path: str | Path) -> Run:
    """Open a run directory. Raises :class:`UsageError` (one line) if it is not one."""
    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory")
    if not (path / layout.MANIFEST).is_file():
        raise UsageError(f"{path} is not a crdscale run directory (no {layout.MANIFEST})")
    return Run(path, Manifest.load(path))


def read_runs(paths: Sequence[str | Path]) -> list[Run]:
    """Open run directories that must be different runs (to compare them). Raises :class:`UsageError`
    (one line) when one is not a run, or two are one directory (also by two paths or a symlink): a run
    compared with itself differs by exactly nothing, which is no finding."""
    runs = [read_run(p) for p in paths]
    seen: dict[tuple[int, int], Path] = {}
    for run in runs:
        st = run.path.stat()
        key = (st.st_dev, st.st_ino)
        if key in seen:
            raise UsageError(f"{run.path} and {seen[key]} are the same run; compare needs two different runs")
        seen[key] = run.path
    evidence.check_distinct(runs)  # also a copy (the same run_id)
    return runs


def read_experiment_manifest(path: str | Path) -> dict[str, Any]:
    """An experiment directory's manifest. Raises :class:`UsageError` (one line) if it has none."""
    manifest_path = Path(path) / layout.EXPERIMENT_MANIFEST
    if not manifest_path.is_file():
        raise UsageError(f"{path} is not a crdscale experiment directory (no {layout.EXPERIMENT_MANIFEST})")
    return read_json_object(manifest_path)
