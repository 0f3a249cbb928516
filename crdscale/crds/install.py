"""Install a CRD set into an API server step by step, as a provider install does.

The library half of ``crdscale install``; the scenario runner drives it too::

    installer = Installer(cluster, run_id, events=log)
    server = Server(cluster, "watch", events=log)              # crdscale.crds.serve
    for step, crds in enumerate(split_steps(all_crds, 100), start=1):
        result = installer.install_step(step, crds)             # -> StepResult
        # profile "installed" here
        server.serve(step, result.served_resources())
        # profile end of step here
    server.close(); installer.close()

Per CRD the installer records when the create returned and when
``NamesAccepted`` and ``Established`` were first seen true (one WATCH on
CRDs with this run's label, not a poll per CRD). Every CRD it creates or
updates carries the ownership labels of :mod:`crdscale.ownership`; a CRD that
exists without them is never modified.

Events emitted (kinds): ``install.start``, ``install.end`` (requests done, with
counts), ``established`` (all of the step Established, or timed out).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import requests

from crdscale.cluster.clients import ApiError, Cluster, Watch, status_message
from crdscale.cluster.retry import DEFAULT_RETRY, RETRY_STATUSES, RetryPolicy, send_with_retry
from crdscale.crds.options import ERROR_MODES, EXISTING_MODES
from crdscale.errors import ClusterError, CRDError, UsageError
from crdscale.ownership import is_owned, owned_selector, ownership_labels

if TYPE_CHECKING:  # the rundir package imports pandas; `crdscale install --help` should not
    from crdscale.rundir.events import EventLog

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
FIELD_MANAGER = "crdscale"
# GET + PUT rounds when an update races another writer (409 on the PUT).
_CONFLICT_ATTEMPTS = 5
_SERVER_METADATA = (
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)

Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)`` with phase ``"create"`` or ``"establish"``."""


class CrdRejected(CRDError):
    """The server refused a CRD (or a step timed out) and the user asked to stop; ``.result`` has the step."""

    def __init__(self, message: str, result: StepResult):
        super().__init__(message)
        self.result = result


@dataclass
class CrdRecord:
    """What happened to one CRD. Times are Unix epoch seconds (client clock); ``None`` = never.

    ``created_at`` is when the client first knew the CRD existed: the create
    response, or an earlier watch event showing one of its conditions.

    Attributes:
        action: ``created``, ``updated``, ``skipped`` (present already), ``rejected``
            (the server said no: ``message`` has its words) or ``failed`` (no answer).
    """

    name: str
    step: int
    action: str = "pending"
    message: str = ""
    http_status: int | None = None
    submitted_at: float | None = None
    created_at: float | None = None
    names_accepted_at: float | None = None
    established_at: float | None = None
    group: str = ""
    version: str = ""
    plural: str = ""
    namespaced: bool = False

    @property
    def installed(self) -> bool:
        return self.action in ("created", "updated")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StepResult:
    """One step: its CRD records and timing (epoch seconds; durations in seconds)."""

    step: int
    records: list[CrdRecord] = field(default_factory=list)
    started_at: float = 0.0
    requests_done_at: float = 0.0
    finished_at: float = 0.0
    timed_out: list[str] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(1 for r in self.records if r.action == action)

    @property
    def established(self) -> int:
        return sum(1 for r in self.records if r.installed and r.established_at is not None)

    @property
    def rejected(self) -> list[CrdRecord]:
        return [r for r in self.records if r.action in ("rejected", "failed")]

    @property
    def ok(self) -> bool:
        return not self.rejected and not self.timed_out

    @property
    def duration_s(self) -> float:
        return self.finished_at - self.started_at

    def served_resources(self) -> list[ResourceRef]:
        """Resources of the CRDs this step created or updated and saw Established (what to serve)."""
        return [
            ResourceRef(r.group, r.version, r.plural, r.namespaced)
            for r in self.records
            if r.installed and r.established_at is not None
        ]

    def counts(self) -> dict[str, int]:
        return {
            "crds_in_step": len(self.records),
            "created": self.count("created"),
            "updated": self.count("updated"),
            "skipped": self.count("skipped"),
            "rejected": self.count("rejected"),
            "failed": self.count("failed"),
            "established": self.established,
            "timed_out": len(self.timed_out),
        }


@dataclass(frozen=True)
class ResourceRef:
    """A custom resource to LIST/WATCH: ``/apis/{group}/{version}/{plural}`` (all namespaces)."""

    group: str
    version: str
    plural: str
    namespaced: bool = False

    @property
    def path(self) -> str:
        return f"/apis/{self.group}/{self.version}/{self.plural}"


def storage_version(crd: Mapping[str, Any]) -> str:
    """Name of the CRD's storage version (the first served one if none is marked)."""
    versions = crd["spec"]["versions"]
    for version in versions:
        if version.get("storage"):
            return version["name"]
    return next((v["name"] for v in versions if v.get("served", True)), versions[0]["name"])


def resource_ref(crd: Mapping[str, Any]) -> ResourceRef:
    """The resource a controller of this CRD would watch: its storage version, all namespaces."""
    spec = crd["spec"]
    return ResourceRef(spec["group"], storage_version(crd), spec["names"]["plural"], spec.get("scope") == "Namespaced")


def split_steps(crds: Sequence[Mapping[str, Any]], step_size: int) -> list[list[Mapping[str, Any]]]:
    """``crds`` in consecutive chunks of ``step_size`` (the last may be shorter); 0 = one step."""
    if step_size < 0:
        raise UsageError(f"step size must be >= 0, got {step_size}")
    if step_size == 0 or step_size >= len(crds):
        return [list(crds)] if crds else []
    return [list(crds[i : i + step_size]) for i in range(0, len(crds), step_size)]


def owned_body(crd: Mapping[str, Any], run_id: str) -> dict[str, Any]:
    """A copy of ``crd`` ready to create: server fields and status dropped, ownership labels added."""
    metadata = {k: v for k, v in (crd.get("metadata") or {}).items() if k not in _SERVER_METADATA}
    metadata["labels"] = {**(metadata.get("labels") or {}), **ownership_labels(run_id)}
    body = {k: v for k, v in crd.items() if k not in ("status", "metadata")}
    body["metadata"] = metadata
    return body


def conditions_true(obj: Mapping[str, Any]) -> set[str]:
    """Condition types that are ``True`` in ``obj['status']['conditions']``."""
    return {c.get("type") for c in (obj.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}


class ConditionWatcher:
    """One WATCH on this run's CRDs, noting when each is first seen NamesAccepted / Established.

    A background thread lists then watches ``customresourcedefinitions`` with
    the run's label selector, re-listing when the watch expires. ``wait`` blocks
    until given CRDs are Established.
    """

    def __init__(self, cluster: Cluster, run_id: str, *, watch_timeout_s: int = 60, list_timeout_s: float = 30.0):
        self.cluster = cluster
        self.selector = owned_selector(run_id)
        self.watch_timeout_s = watch_timeout_s
        self.names_accepted_at: dict[str, float] = {}
        self.established_at: dict[str, float] = {}
        self.error: str | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._watch_handle: Watch | None = None
        # The first LIST runs here so that a refusal (403, no such API) fails the
        # caller at once; answers worth a retry are retried for ``list_timeout_s``.
        resource_version = self._first_list(time.monotonic() + list_timeout_s)
        self._thread = threading.Thread(
            target=self._run, args=(resource_version,), name="crdscale-crd-watch", daemon=True
        )
        self._thread.start()

    def _first_list(self, deadline: float) -> str:
        while True:
            try:
                return self._list()
            except ApiError as err:
                if err.status not in RETRY_STATUSES or time.monotonic() > deadline:
                    raise ClusterError(f"cannot list CRDs on {self.cluster.server}: {err}") from err
            except ClusterError as err:
                if time.monotonic() > deadline:
                    raise ClusterError(f"cannot list CRDs on {self.cluster.server}: {err}") from err
            time.sleep(0.5)

    def _note(self, obj: Mapping[str, Any]) -> None:
        name = obj.get("metadata", {}).get("name")
        true = conditions_true(obj)
        now = time.time()
        with self._changed:
            if "NamesAccepted" in true:
                self.names_accepted_at.setdefault(name, now)
            if "Established" in true:
                self.established_at.setdefault(name, now)
            self._changed.notify_all()

    def _list(self) -> str:
        items, resource_version = self.cluster.list(CRD_PATH, params={"labelSelector": self.selector})
        for item in items:
            self._note(item)
        return resource_version

    def _run(self, resource_version: str | None) -> None:
        while not self._stop.is_set():
            try:
                if resource_version is None:
                    resource_version = self._list()
                resource_version = self._watch(resource_version)
            except (ClusterError, ValueError) as err:
                if self._stop.is_set():
                    return
                self.error = str(err)
                resource_version = None
                self._stop.wait(0.5)

    def _watch(self, resource_version: str) -> str | None:
        """Follow one watch until the server ends it; returns where to resume (``None``: list again)."""
        with self.cluster.watch(
            CRD_PATH,
            resource_version=resource_version,
            params={"labelSelector": self.selector},
            timeout_s=self.watch_timeout_s,
        ) as watch:
            self._watch_handle = watch
            if self._stop.is_set():  # closed while connecting
                return None
            for event in watch:
                if self._stop.is_set():
                    return None
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    return None  # 410 Gone and friends: list again
                resource_version = obj.get("metadata", {}).get("resourceVersion", resource_version)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self._note(obj)
        # The server ended the watch (its timeout, or earlier): resume from the last version seen.
        return resource_version

    def wait(self, names: Sequence[str], deadline: float, progress: Callable[[int], None] | None = None) -> list[str]:
        """Block until every CRD in ``names`` is Established or ``deadline`` (monotonic) passes.

        Returns the names still not Established.
        """
        wanted = set(names)
        with self._changed:
            while True:
                missing = [n for n in names if n not in self.established_at]
                if progress:
                    progress(len(wanted) - len(missing))
                if not missing:
                    return []
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return missing
                self._changed.wait(min(remaining, 1.0))

    def close(self) -> None:
        self._stop.set()
        if self._watch_handle is not None:
            self._watch_handle.close()
        self._thread.join(timeout=5)


class Installer:
    """Creates CRDs with ownership labels and waits until they are Established.

    Parameters:
        cluster: where to install.
        run_id: the run whose labels go on every CRD (see :func:`crdscale.ownership.new_run_id`).
        concurrency: parallel create requests.
        qps: client-side rate limit for create/update requests (None or <= 0: none); ``burst`` defaults to qps.
        existing: for a CRD that is already there: ``skip`` it, ``update`` it (only if
            crdscale owns it; others are skipped and left alone), or ``fail`` (record as rejected).
        on_rejected: ``continue`` past rejected CRDs and establish timeouts, or ``stop``
            (send no more creates, raise :class:`CrdRejected` at the end of the step).
        establish_timeout_s: how long a step waits for its CRDs to be Established.
        events: an :class:`EventLog` to append to (optional).
        progress: ``progress(phase, done, total)`` callback (optional, for CLIs).
        retry: how requests are retried on 429/5xx (``Retry-After`` is honoured).
    """

    def __init__(
        self,
        cluster: Cluster,
        run_id: str,
        *,
        concurrency: int = 16,
        qps: float | None = None,
        burst: int | None = None,
        existing: str = "skip",
        on_rejected: str = "continue",
        establish_timeout_s: float = 300.0,
        events: EventLog | None = None,
        progress: Progress | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ):
        if existing not in EXISTING_MODES:
            raise UsageError(f"existing must be one of {', '.join(EXISTING_MODES)}, got {existing!r}")
        if on_rejected not in ERROR_MODES:
            raise UsageError(f"on_rejected must be one of {', '.join(ERROR_MODES)}, got {on_rejected!r}")
        if concurrency < 1:
            raise UsageError(f"concurrency must be >= 1, got {concurrency}")
        self.cluster = cluster
        self.run_id = run_id
        self.concurrency = concurrency
        from crdscale.models.tokenbucket import Limiter  # lazy: numpy and pandas, only once installing

        # client-go's default burst for a given QPS is at least the QPS itself.
        self.limiter = Limiter(burst if burst is not None else int(max(qps or 0, 1)), qps or 0)
        self.existing = existing
        self.on_rejected = on_rejected
        self.establish_timeout_s = establish_timeout_s
        self.events = events
        self.progress = progress
        self.retry = retry
        self.results: list[StepResult] = []
        self._watcher: ConditionWatcher | None = None
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="crdscale-install")

    # -- requests

    def _request(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> requests.Response:
        """One request through the rate limiter, retried on throttling and busy answers (honouring Retry-After).

        Raises :class:`ClusterError` when it got no usable answer after the policy's attempts.
        """
        params = {"fieldManager": FIELD_MANAGER} if method in ("POST", "PUT") else None

        def send() -> requests.Response:
            self.limiter.wait()
            return self.cluster.request(method, path, params=params, body=body, timeout=60)

        try:
            response = send_with_retry(send, self.retry)
        except ClusterError as err:
            raise ClusterError(f"{method} {path}: gave up after {self.retry.attempts} attempts: {err}") from err
        if response.status_code in self.retry.statuses:
            raise ClusterError(
                f"{method} {path}: gave up after {self.retry.attempts} attempts: "
                f"HTTP {response.status_code}: {status_message(response)}"
            )
        return response

    def _install_one(self, crd: Mapping[str, Any], record: CrdRecord) -> CrdRecord:
        body = owned_body(crd, self.run_id)
        record.submitted_at = time.time()
        try:
            response = self._request("POST", CRD_PATH, body)
            if response.status_code == 409:
                response = self._handle_existing(body, record)
                if response is None:
                    return record
        except ClusterError as err:
            record.action, record.message = "failed", str(err)
            return record
        record.http_status = response.status_code
        if response.status_code in (200, 201):
            record.created_at = time.time()
            record.action = "created" if response.status_code == 201 else "updated"
            self._note_conditions(response.json(), record)
        else:
            record.action, record.message = "rejected", status_message(response)
        return record

    def _handle_existing(self, body: dict[str, Any], record: CrdRecord) -> requests.Response | None:
        """Apply the ``existing`` policy to a CRD that is already there; None when nothing more to do."""
        path = f"{CRD_PATH}/{record.name}"
        for _ in range(_CONFLICT_ATTEMPTS):
            current = self._request("GET", path)
            if current.status_code == 404:  # deleted meanwhile: create it after all
                return self._request("POST", CRD_PATH, body)
            if current.status_code != 200:
                return current
            obj = current.json()
            labels = obj.get("metadata", {}).get("labels")
            record.http_status = 409
            if self.existing == "fail":
                record.action, record.message = "rejected", "already exists"
                return None
            if self.existing == "skip" or not is_owned(labels):
                record.action = "skipped"
                record.message = (
                    "already exists" if is_owned(labels) else "already exists and is not crdscale's: left alone"
                )
                self._note_conditions(obj, record)
                return None
            update = dict(body)
            update["metadata"] = {**body["metadata"], "resourceVersion": obj["metadata"]["resourceVersion"]}
            response = self._request("PUT", path, update)
            if response.status_code != 409:  # 409 here: changed since our GET, try again
                return response
        return response

    def _note_conditions(self, obj: Mapping[str, Any], record: CrdRecord) -> None:
        true = conditions_true(obj)
        now = time.time()
        if "NamesAccepted" in true and record.names_accepted_at is None:
            record.names_accepted_at = now
        if "Established" in true and record.established_at is None:
            record.established_at = now

    # -- steps

    def _emit(self, kind: str, **fields: Any) -> None:
        if self.events is not None:
            self.events.emit(kind, run_id=self.run_id, **fields)

    def _progress(self, phase: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(phase, done, total)

    def install_step(
        self,
        step: int,
        crds: Sequence[Mapping[str, Any]],
        *,
        on_established: Callable[[int], None] | None = None,
    ) -> StepResult:
        """Create (or skip/update) ``crds`` in parallel and wait until they are Established.

        ``on_established(n)`` is called as ``n`` more CRDs of the step are seen
        Established (for progress bars). Returns the :class:`StepResult`. With
        ``on_rejected="stop"`` raises :class:`CrdRejected` (carrying the result)
        if any CRD was rejected or not Established in time.
        """
        if self._watcher is None:
            self._watcher = ConditionWatcher(self.cluster, self.run_id)
        result = StepResult(step=step, started_at=time.time())
        self.results.append(result)
        records = []
        for crd in crds:
            ref = resource_ref(crd)
            records.append(
                CrdRecord(
                    name=crd["metadata"]["name"],
                    step=step,
                    group=ref.group,
                    version=ref.version,
                    plural=ref.plural,
                    namespaced=ref.namespaced,
                )
            )
        result.records = records
        self._emit("install.start", step=step, crds_in_step=len(crds))

        stop = threading.Event()
        done = 0
        done_lock = threading.Lock()

        def work(pair):
            nonlocal done
            crd, record = pair
            if stop.is_set():
                record.action, record.message = "failed", "not sent: stopped after an earlier rejection"
            else:
                self._install_one(crd, record)
                if self.on_rejected == "stop" and record.action in ("rejected", "failed"):
                    stop.set()
            with done_lock:
                done += 1
                self._progress("create", done, len(records))
            return record

        list(self._pool.map(work, zip(crds, records)))
        result.requests_done_at = time.time()
        self._emit(
            "install.end",
            step=step,
            duration_s=round(result.requests_done_at - result.started_at, 3),
            **result.counts(),
        )

        waiting = [r.name for r in records if r.installed]
        deadline = time.monotonic() + self.establish_timeout_s
        reported = 0

        def established(n: int) -> None:
            nonlocal reported
            self._progress("establish", n, len(waiting))
            if on_established is not None and n > reported:
                on_established(n - reported)
            reported = max(reported, n)

        result.timed_out = self._watcher.wait(waiting, deadline, established)
        for record in records:
            if record.installed:
                if record.names_accepted_at is None:
                    record.names_accepted_at = self._watcher.names_accepted_at.get(record.name)
                if record.established_at is None:
                    record.established_at = self._watcher.established_at.get(record.name)
                # An answer that already said Established is the earliest sighting.
                record.names_accepted_at = _earliest(
                    record.names_accepted_at, self._watcher.names_accepted_at.get(record.name)
                )
                record.established_at = _earliest(record.established_at, self._watcher.established_at.get(record.name))
                # The watch can report a condition before the create call's response is
                # processed; the CRD existed by then, so that sighting is its creation time.
                record.created_at = _earliest(record.created_at, record.names_accepted_at, record.established_at)
        result.finished_at = time.time()
        self._emit(
            "established",
            step=step,
            duration_s=round(result.finished_at - result.requests_done_at, 3),
            established=result.established,
            timed_out=len(result.timed_out),
        )
        if self.on_rejected == "stop" and not result.ok:
            raise CrdRejected(_failure_line(result), result)
        return result

    def steps(self, crds: Sequence[Mapping[str, Any]], step_size: int) -> Iterator[StepResult]:
        """Install ``crds`` in steps of ``step_size``, yielding each :class:`StepResult` before the next starts."""
        for step, chunk in enumerate(split_steps(crds, step_size), start=len(self.results) + 1):
            yield self.install_step(step, chunk)

    @property
    def records(self) -> list[CrdRecord]:
        """Records of every step so far, in install order."""
        return [r for result in self.results for r in result.records]

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._watcher is not None:
            self._watcher.close()

    def __enter__(self) -> Installer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _earliest(*times: float | None) -> float | None:
    """The earliest of the times that are known, or ``None``."""
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _failure_line(result: StepResult) -> str:
    if result.rejected:
        first = result.rejected[0]
        more = f" (and {len(result.rejected) - 1} more)" if len(result.rejected) > 1 else ""
        return f"step {result.step}: CRD {first.name} {first.action}: {first.message}{more}"
    return f"step {result.step}: {len(result.timed_out)} CRD(s) not Established in time, e.g. {result.timed_out[0]}"
