"""Make the API server build storage for CRDs, as a provider's controllers would.

kube-apiserver creates a CRD's storage (etcd client, watch cache, handlers)
lazily, on the first request for the resource, so an installed CRD nobody
uses costs far less than a served one. :class:`ResourceServer` closes that
gap on purpose:

* ``list``: one LIST per resource once its CRD is Established;
* ``watch``: a client-go informer per resource (its LIST, then a WATCH kept
  open until :meth:`ResourceServer.close`), run by ``clients`` crdscale-client
  processes (:class:`crdscale.cluster.goclient.InformerClients`), each one
  client sharing one HTTP/2 connection, as a provider's controller manager;
* ``none``: nothing (installed-only cost).

When crdscale-client cannot be built (no Go, a failed build) ``watch`` falls
back, with a warning, to a Python watcher: one background thread with an
asyncio loop holding one raw HTTP/1.1 connection per watch, at most
``max_watches`` of them. That fallback is biased: the API server then holds one
more TLS connection (a file descriptor, buffers and goroutines) per watched
resource than it would for a real provider. (Multiplexing over HTTP/2 with
httpx was tried: right after a CRD's first LIST its watch cache is still
initializing, the server answers 429 or holds requests, and httpx/h2 then
leaked streams until the connection's 100-stream limit stalled the rest.
client-go's reflector retries such watches with backoff.) ``watch_lifetime_s``
applies to the fallback only.

Events emitted: ``serve.client`` (which client serves the watches, the
crdscale-client PIDs, or why the fallback), ``serve.start`` and ``serve.end``
(with LIST or informer sync counts and latencies, open watches), and
``process.stop`` per crdscale-client process at :meth:`ResourceServer.close`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from crdscale.cluster import goclient
from crdscale.cluster.clients import Cluster, status_message
from crdscale.cluster.retry import RetryPolicy, send_with_retry
from crdscale.crds.install import ResourceRef, resource_ref
from crdscale.crds.options import DEFAULT_MAX_WATCHES, SERVE_MODES
from crdscale.errors import BinaryError, ClusterError, UsageError

if TYPE_CHECKING:  # the rundir package imports pandas; `crdscale install --help` should not
    from crdscale.rundir.events import EventLog

log = logging.getLogger(__name__)

# The server ends each watch after this long; the keeper re-opens it, as client-go does.
WATCH_TIMEOUT_S = 300
# 404 right after Established: the handler is still being set up; 429: APF; 5xx: busy.
LIST_RETRY = RetryPolicy(statuses=frozenset({404, 429, 500, 502, 503, 504}))
# A watch that cannot connect keeps trying in the background, backing off up to 30 s.
WATCH_RETRY = RetryPolicy(backoff_s=0.5, max_backoff_s=30.0)
# How long serve() waits for new informers to sync: a base plus their share of the
# client's rate limit (a LIST and a WATCH per resource at the client's QPS).
_SYNC_BASE_TIMEOUT_S = 60


@dataclass
class ServeResult:
    """What one :meth:`ResourceServer.serve` call did. Latencies in seconds."""

    step: int | None
    mode: str
    resources: int = 0
    listed: int = 0
    list_errors: list[str] = field(default_factory=list)
    list_latencies_s: list[float] = field(default_factory=list)
    watches_requested: int = 0
    watches_open: int = 0
    started_at: float = 0.0
    finished_at: float = 0.0

    def to_fields(self) -> dict[str, Any]:
        latencies = self.list_latencies_s
        return {
            "mode": self.mode,
            "resources": self.resources,
            "listed": self.listed,
            "list_errors": len(self.list_errors),
            "list_p50_s": round(statistics.median(latencies), 4) if latencies else None,
            "list_max_s": round(max(latencies), 4) if latencies else None,
            "watches_requested": self.watches_requested,
            "watches_open": self.watches_open,
            "duration_s": round(self.finished_at - self.started_at, 3),
        }


class _WatchLoop:
    """An asyncio loop in a daemon thread holding many raw HTTP/1.1 watch streams."""

    def __init__(self, cluster: Cluster, deadline: float | None):
        parts = urlsplit(cluster.server)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base_path = parts.path.rstrip("/")
        self.server = cluster.server
        self.credentials = cluster.credentials
        self._ssl: dict[tuple[str, str] | None, ssl.SSLContext | None] = {}
        self.deadline = deadline  # monotonic; None = until close()
        self.open = 0
        self.events = 0
        self.errors: dict[str, str] = {}
        self._connected: dict[str, threading.Event] = {}
        self._tasks: list[asyncio.Task] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="crdscale-watches", daemon=True)
        self._thread.start()

    def _ssl_context(self, cert: tuple[str, str] | None) -> ssl.SSLContext | None:
        # One context per client certificate: building one per watch would reload the CA thousands of times.
        if cert not in self._ssl:
            self._ssl[cert] = self.credentials.ssl_context(self.server, cert)
        return self._ssl[cert]

    def start(self, path: str, resource_version: str) -> threading.Event:
        """Open a watch on ``path`` in the background; the returned event is set once it is
        connected (a first attempt that fails is retried with backoff)."""
        connected = self._connected[path] = threading.Event()

        def spawn():
            self._tasks.append(self._loop.create_task(self._watch(path, resource_version, connected)))

        self._loop.call_soon_threadsafe(spawn)
        return connected

    async def _watch(self, path: str, resource_version: str, connected: threading.Event) -> None:
        failures = 0
        while self.deadline is None or time.monotonic() < self.deadline:
            timeout_s = WATCH_TIMEOUT_S
            if self.deadline is not None:
                timeout_s = max(1, min(timeout_s, int(self.deadline - time.monotonic())))
            query = urlencode(
                {
                    "watch": "1",
                    "allowWatchBookmarks": "true",
                    "timeoutSeconds": timeout_s,
                    "resourceVersion": resource_version,
                }
            )
            writer = None
            counted = False
            try:
                # Per connection: an exec plugin's token or certificate may have been refreshed.
                auth = await asyncio.to_thread(self.credentials.current_auth)
                context = self._ssl_context(auth.cert)
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=context, server_hostname=self.host if context else None
                )
                head = [
                    f"GET {self.base_path}{path}?{query} HTTP/1.1",
                    f"Host: {self.host}:{self.port}",
                    "Accept: application/json",
                    "User-Agent: crdscale-serve",
                ]
                head += [f"{k}: {v}" for k, v in auth.headers.items()]
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
                await writer.drain()
                status = int((await reader.readline()).split()[1])
                headers = {}
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    key, _, value = line.decode("latin-1").partition(":")
                    headers[key.strip().title()] = value.strip()
                chunked = "chunked" in headers.get("Transfer-Encoding", "").lower()
                if status != 200:
                    self.errors[path] = f"HTTP {status}"
                    if status == 401:  # stale credentials: rotate them before the retry below
                        await asyncio.to_thread(self.credentials.after_unauthorized)
                    await asyncio.sleep(WATCH_RETRY.delay_s(failures, headers))
                    failures += 1
                    continue
                self.open += 1
                counted = True
                self.errors.pop(path, None)
                connected.set()
                failures = 0
                resource_version = await self._read_stream(reader, chunked, resource_version)
            except asyncio.CancelledError:
                raise
            except (OSError, ValueError, IndexError, asyncio.IncompleteReadError, ssl.SSLError) as err:
                self.errors[path] = f"{type(err).__name__}: {err}"
                await asyncio.sleep(WATCH_RETRY.delay_s(failures))
                failures += 1
            finally:
                if counted:
                    self.open -= 1
                if writer is not None:
                    writer.close()

    async def _read_stream(self, reader: asyncio.StreamReader, chunked: bool, resource_version: str) -> str:
        """Drain one watch response; returns the last resourceVersion seen ('' after 410 Gone)."""
        buffer = b""
        while True:
            if chunked:
                size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    return resource_version
                data = await reader.readexactly(size + 2)
                buffer += data[:-2]
            else:
                data = await reader.read(65536)
                if not data:
                    return resource_version
                buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                self.events += 1
                event = json.loads(line)
                if event.get("type") == "ERROR":
                    return ""  # expired: start over from "now", as a re-list would
                version = (event.get("object") or {}).get("metadata", {}).get("resourceVersion")
                if version:
                    resource_version = version

    def close(self) -> None:
        def cancel_all():
            for task in self._tasks:
                task.cancel()

        self._loop.call_soon_threadsafe(cancel_all)

        async def drained():
            await asyncio.gather(*self._tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(drained(), self._loop).result(timeout=10)
        except Exception:  # a task that would not die must not block shutdown
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()


class ResourceServer:
    """LISTs (and WATCHes) custom resources so the API server builds their storage.

    Parameters:
        cluster: the API server (loopback or the user's cluster, never another).
        mode: ``list``, ``watch`` or ``none``.
        concurrency: parallel LIST requests.
        max_watches: refuse to hold more watches than this (each is a socket here
            and an etcd watch plus a cache watcher on the server).
        watch_lifetime_s: close watches after this long (None: at :meth:`close`); Python fallback only.
        events: an :class:`EventLog` (optional).
        progress: ``progress(phase, done, total)`` with phase ``"list"``/``"watch"`` (optional).
        clients: ``watch`` mode: crdscale-client processes sharing the resources (e.g. one per provider).
        client_qps, client_burst: each client's rate limiter (controller-runtime's defaults).
        go_client: ``watch`` mode: ``True`` (crdscale-client, falling back to the Python
            watcher with a warning when it cannot be built) or ``False`` (the Python watcher).
        record_process: ``record_process(name, pid)`` for each crdscale-client process, so that a
            run that dies can have them stopped (:meth:`crdscale.rundir.RunWriter.record_process`).
    """

    def __init__(
        self,
        cluster: Cluster,
        mode: str = "watch",
        *,
        concurrency: int = 16,
        max_watches: int = DEFAULT_MAX_WATCHES,
        watch_lifetime_s: float | None = None,
        events: EventLog | None = None,
        run_id: str | None = None,
        progress: Callable[[str, int, int], None] | None = None,
        clients: int = 1,
        client_qps: float = 20.0,
        client_burst: int = 30,
        go_client: bool = True,
        record_process: Callable[[str, int], None] | None = None,
    ):
        if mode not in SERVE_MODES:
            raise UsageError(f"serve mode must be one of {', '.join(SERVE_MODES)}, got {mode!r}")
        self.cluster = cluster
        self.mode = mode
        self.concurrency = concurrency
        self.max_watches = max_watches
        self.events = events
        self.run_id = run_id
        self.progress = progress
        self.served: set[str] = set()
        self.results: list[ServeResult] = []
        self.client_qps = client_qps
        self._informers = None
        self._watches = None
        self._watched: set[str] = set()
        if mode == "watch" and go_client:
            self._informers = _start_informers(cluster, clients, client_qps, client_burst, events, run_id)
            for pid in self._informers.pids if self._informers is not None and record_process else ():
                record_process("crdscale-client", pid)
        if mode == "watch" and self._informers is None:
            deadline = time.monotonic() + watch_lifetime_s if watch_lifetime_s else None
            self._watches = _WatchLoop(cluster, deadline)

    @property
    def open_watches(self) -> int:
        """Watches currently connected (informers: synced ones, each holding its watch)."""
        if self._informers is not None:
            return len(self._informers.synced())
        return self._watches.open if self._watches else 0

    @property
    def client(self) -> str:
        """What serves ``watch``: ``go-informers``, ``python-watcher`` or ``none``."""
        return "go-informers" if self._informers is not None else ("python-watcher" if self._watches else "none")

    def _list(self, ref: ResourceRef) -> tuple[float, str | None, str | None]:
        """LIST one resource; returns (latency s of the successful attempt, resourceVersion, error)."""
        started = 0.0

        def send():
            nonlocal started
            started = time.monotonic()
            return self.cluster.get(ref.path, params={"limit": 500}, timeout=60)

        try:
            response = send_with_retry(send, LIST_RETRY)
        except ClusterError as err:
            return 0.0, None, f"{ref.path}: {err}"
        latency = time.monotonic() - started
        if response.status_code != 200:
            return 0.0, None, f"{ref.path}: HTTP {response.status_code}: {status_message(response)}"
        return latency, response.json().get("metadata", {}).get("resourceVersion", ""), None

    def serve(self, step: int | None, resources: Sequence[ResourceRef | Mapping[str, Any]]) -> ServeResult:
        """Serve ``resources`` (refs, or CRD dicts: their storage version) not served before.

        Returns a :class:`ServeResult`.

        In ``watch`` mode this returns once every new watch has connected, or after
        30 s for those that have not yet (they keep retrying in the background).
        """
        refs = [r if isinstance(r, ResourceRef) else resource_ref(r) for r in resources]
        new = [r for r in dict.fromkeys(refs) if r.path not in self.served]
        result = ServeResult(step=step, mode=self.mode, resources=len(new), started_at=time.time())
        self.results.append(result)
        if self.events is not None:
            self.events.emit("serve.start", run_id=self.run_id, step=step, mode=self.mode, resources=len(new))
        if self._informers is not None and new:
            self._serve_informers(new, result)
        elif self.mode != "none" and new:
            if self._watches is not None and len(self._watched) + len(new) > self.max_watches:
                raise UsageError(f"serving {len(new)} more resources would exceed --max-watches {self.max_watches}")
            done = 0
            connecting = []
            with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="crdscale-list") as pool:
                for ref, (latency, version, error) in zip(new, pool.map(self._list, new)):
                    done += 1
                    if self.progress:
                        self.progress("list", done, len(new))
                    if error:
                        result.list_errors.append(error)
                        continue
                    result.listed += 1
                    result.list_latencies_s.append(latency)
                    self.served.add(ref.path)
                    if self._watches is not None:
                        connecting.append(self._watches.start(ref.path, version or ""))
                        self._watched.add(ref.path)
            result.watches_requested = len(connecting)
            # A watch whose first attempt fails (a 429 from APF on a busy server, say) is
            # retried in the background; give the batch 30 s to connect before moving on.
            deadline = time.monotonic() + 30
            for n, connected in enumerate(connecting, start=1):
                connected.wait(max(0.0, deadline - time.monotonic()))
                if self.progress:
                    self.progress("watch", n, len(connecting))
        result.watches_open = self.open_watches
        result.finished_at = time.time()
        if self.events is not None:
            self.events.emit("serve.end", run_id=self.run_id, step=step, **result.to_fields())
        return result

    def _serve_informers(self, new: list[ResourceRef], result: ServeResult) -> None:
        """Start an informer per new resource and wait for them to sync (their LIST and WATCH)."""
        keys = self._informers.add((r.group, r.version, r.plural) for r in new)
        result.watches_requested = len(keys)
        timeout_s = _SYNC_BASE_TIMEOUT_S + 2 * len(keys) / max(self.client_qps, 1.0)
        deadline = time.monotonic() + timeout_s
        done: dict[str, dict] = {}
        while len(done) < len(keys) and time.monotonic() < deadline:
            done = self._informers.wait_synced(keys, timeout_s=min(2.0, max(0.0, deadline - time.monotonic())))
            if self.progress:
                self.progress("watch", len(done), len(keys))
        for ref, key in zip(new, keys):
            if key in done:
                self.served.add(ref.path)
                result.listed += 1
                result.list_latencies_s.append(float(done[key]["seconds"]))
            else:
                result.list_errors.append(f"{ref.path}: informer not synced within {timeout_s:.0f} s")

    def close(self) -> None:
        """Close every watch (returns within ~15 s even if the server does not answer)."""
        if self._informers is not None:
            self._informers.close()
            if self.events is not None:
                for pid, code in self._informers.exit_codes().items():
                    self.events.emit("process.stop", name="crdscale-client", pid=pid, exit_code=code)
            self._informers = None
        if self._watches is not None:
            self._watches.close()
            self._watches = None

    def __enter__(self) -> ResourceServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


Server = ResourceServer


def _start_informers(
    cluster: Cluster,
    clients: int,
    qps: float,
    burst: int,
    events: EventLog | None,
    run_id: str | None,
):
    """crdscale-client informer processes, or ``None`` (with a warning) when they cannot be built."""
    try:
        informers = goclient.InformerClients(cluster.kubeconfig, cluster.context, clients=clients, qps=qps, burst=burst)
    except BinaryError as err:
        log.warning(
            "serve=watch falls back to the Python watcher (one HTTP/1.1 connection per "
            "watch, unlike client-go): crdscale-client unavailable: %s",
            err,
        )
        if events is not None:
            events.emit("serve.client", run_id=run_id, client="python-watcher", reason=str(err))
        return None
    if events is not None:
        events.emit(
            "serve.client",
            run_id=run_id,
            client="go-informers",
            pids=informers.pids,
            clients=clients,
            qps=qps,
            burst=burst,
        )
    return informers


"""Short name used by the scenario runner."""
