"""An in-memory API server behind crdscale's transport seam, for fast unit tests.

``FakeApiServer`` is a :class:`crdscale.cluster.clients.Transport`: pass it to
``Cluster(server, transport)`` and the installer, watcher, resource server and
cleaner talk to it as to kube-apiserver. It keeps objects per collection with
uids and resourceVersions, answers LIST (label selectors, pages), GET, POST,
PUT (optimistic concurrency), DELETE (uid/resourceVersion preconditions) and
WATCH (a live stream from a resourceVersion), and marks CRDs NamesAccepted and
Established right after they are created, as the apiextensions controllers do.

Error answers are the Status bodies kube-apiserver sent for the same
situations, recorded in ``tests/data/fakeapi/status.json`` by
``scripts/record_fakeapi_status.py`` (and APF's plain-text 429, see
:func:`too_many_requests`); tests script others with :meth:`FakeApiServer.inject`. Every request is kept in
``requests`` for assertions.
"""

from __future__ import annotations

import copy
import io
import itertools
import json
import queue
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import requests

STATUS_FILE = Path(__file__).parent.parent / "data" / "fakeapi" / "status.json"
RECORDED_STATUS: dict[str, dict[str, Any]] = json.loads(STATUS_FILE.read_text())
CRD_COLLECTION = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def status_body(kind: str, **values: str) -> dict[str, Any]:
    """A recorded Status (``already_exists``, ``conflict``, ``invalid``, ``precondition``, ``not_found``)
    with its ``{name}``-style placeholders filled in from ``values``."""
    text = json.dumps(RECORDED_STATUS[kind])
    for placeholder, value in values.items():
        text = text.replace("{" + placeholder + "}", json.dumps(value)[1:-1])
    return json.loads(text)


def too_many_requests(retry_after_s: int) -> dict[str, Any]:
    """Keyword arguments for :meth:`FakeApiServer.inject`: APF's 429, plain text with ``Retry-After``."""
    recorded = RECORDED_STATUS["too_many_requests"]
    return {
        "body": recorded["body"],
        "headers": {"Content-Type": recorded["content_type"], "Retry-After": str(retry_after_s)},
    }


@dataclass
class Sent:
    """One request the fake received."""

    method: str
    path: str
    params: dict[str, str]
    body: Any

    @property
    def watch(self) -> bool:
        return self.params.get("watch") in ("1", "true")


@dataclass
class _Injection:
    method: str
    match: Callable[[Sent], bool]
    status: int
    body: Any
    headers: dict[str, str]
    times: int
    before: Callable[[Sent], None] | None = None


class _Stream(io.RawIOBase):
    """A blocking byte stream fed by the server: what a WATCH response body reads from."""

    def __init__(self):
        self._queue: queue.Queue[bytes | None] = queue.Queue()
        self._closed = threading.Event()

    def feed(self, data: bytes | None) -> None:
        self._queue.put(data)

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        while not self._closed.is_set():
            try:
                data = self._queue.get(timeout=0.05)
            except queue.Empty:
                continue
            if data is None:
                self._closed.set()
                return b""
            return data
        return b""

    def close(self) -> None:
        self._closed.set()
        super().close()


@dataclass
class _Watcher:
    collection: str
    selector: str
    stream: _Stream
    remaining: int | None  # events before the server ends this watch early (None: never)


def _response(
    status: int, body: Any = None, headers: Mapping[str, str] | None = None, *, raw=None
) -> requests.Response:
    response = requests.Response()
    response.status_code = status
    response.headers.update({"Content-Type": "application/json", **(headers or {})})
    if raw is not None:
        response.raw = raw
    elif isinstance(body, str):
        response._content = body.encode()
    else:
        response._content = b"" if body is None else json.dumps(body).encode()
    response.encoding = "utf-8"
    return response


def matches(labels: Mapping[str, str] | None, selector: str) -> bool:
    """Equality-based label selector (``a=b,c``) as the server applies it."""
    labels = labels or {}
    for term in filter(None, (selector or "").split(",")):
        key, eq, value = term.partition("=")
        if eq and labels.get(key) != value:
            return False
        if not eq and key not in labels:
            return False
    return True


class _View:
    """The fake seen through a fresh transport (:meth:`FakeApiServer.fresh`): same objects, its own close."""

    def __init__(self, server: FakeApiServer):
        self.server = server

    def request(self, method, url, **kwargs):
        return self.server.request(method, url, **kwargs)

    def fresh(self, *, pool_size: int = 16) -> _View:
        return _View(self.server)

    def close(self) -> None:
        pass


class FakeApiServer:
    """A scriptable in-memory kube-apiserver answering through the transport interface.

    Parameters:
        reject: CRD names the server refuses with the recorded 422 ``Invalid`` Status.
        watch_event_limit: end every WATCH after this many events, as a server restart
            or a short ``timeoutSeconds`` would (None: watches run until closed).
        honour_selectors: apply label selectors on LIST (False plays a server or proxy
            that ignores them, so the client's own checks are what protects foreign objects).
        known_collections: collection paths that exist; others answer 404 on LIST.
    """

    def __init__(
        self,
        *,
        reject: set[str] = frozenset(),
        watch_event_limit: int | None = None,
        honour_selectors: bool = True,
        known_collections: set[str] | None = None,
        establish: bool = True,
    ):
        self.reject = set(reject)
        self.watch_event_limit = watch_event_limit
        self.honour_selectors = honour_selectors
        self.known_collections = known_collections
        self.establish = establish
        self.requests: list[Sent] = []
        self.objects: dict[str, dict[str, dict[str, Any]]] = {}  # collection -> item path -> object
        self._rv = itertools.count(100)
        self._events: list[tuple[int, str, str, dict[str, Any]]] = []  # rv, collection, type, object
        self._watchers: list[_Watcher] = []
        self._injections: list[_Injection] = []
        self._lock = threading.RLock()

    # -- scripting

    def inject(
        self,
        method: str,
        path: str | Callable[[Sent], bool],
        status: int,
        body: Any = None,
        *,
        headers: Mapping[str, str] | None = None,
        times: int = 1,
        before: Callable[[Sent], None] | None = None,
    ) -> None:
        """Answer the next ``times`` requests of ``method`` to ``path`` (or matching a predicate) with ``status``.

        ``before(request)`` runs first (e.g. to change the stored object, as another client would).
        ``status=0`` only runs ``before`` and then serves the request normally.
        """
        match = path if callable(path) else (lambda sent, p=path: sent.path == p and not sent.watch)
        self._injections.append(_Injection(method, match, status, body, dict(headers or {}), times, before))

    def add(self, collection: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as if another client created it; returns the stored copy (with uid, resourceVersion)."""
        with self._lock:
            stored = self._store(collection, copy.deepcopy(obj), "ADDED")
            if collection == CRD_COLLECTION and self.establish:
                self._establish(collection, stored["metadata"])
            return copy.deepcopy(self.get(collection, stored["metadata"]["name"]))

    def get(self, collection: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.objects.get(collection, {}).get(self._item_path(collection, name, namespace))

    def sent(self, method: str | None = None, *, watch: bool | None = None) -> list[Sent]:
        """Requests received, optionally only of ``method`` and (not) watches."""
        return [
            r for r in self.requests if (method is None or r.method == method) and (watch is None or r.watch == watch)
        ]

    # -- the transport interface

    def request(self, method, url, *, params=None, data=None, headers=None, timeout=None, stream=False):
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query)) | {k: str(v) for k, v in (params or {}).items()}  # as requests merges
        sent = Sent(method, parts.path, query, json.loads(data) if data else None)
        with self._lock:
            self.requests.append(sent)
            for injection in self._injections:
                if injection.times > 0 and injection.method == method and injection.match(sent):
                    injection.times -= 1
                    if injection.before is not None:
                        injection.before(sent)
                    if injection.status:
                        return _response(injection.status, injection.body, injection.headers)
                    break
            return self._serve(sent)

    def fresh(self, *, pool_size: int = 16) -> _View:
        """What a client with its own connections sees: this server (closing it closes nothing)."""
        return _View(self)

    def feed_watches(self, event: dict[str, Any]) -> None:
        """Send a raw ``event`` (e.g. an ``ERROR`` 410 Expired) to every open watch."""
        with self._lock:
            for watcher in self._watchers:
                watcher.stream.feed(json.dumps(event).encode() + b"\n")

    def close(self) -> None:
        with self._lock:
            for watcher in self._watchers:
                watcher.stream.feed(None)
            self._watchers.clear()

    # -- the server

    def _item_path(self, collection: str, name: str, namespace: str | None) -> str:
        if namespace and collection.startswith("/api/v1/"):
            return f"/api/v1/namespaces/{namespace}/{collection.rsplit('/', 1)[1]}/{name}"
        return f"{collection}/{name}"

    def _split(self, path: str) -> tuple[str, str | None, str | None]:
        """``(collection, namespace, name)`` of a request path; namespaced kinds share one all-namespaces collection."""
        parts = path.strip("/").split("/")
        base, rest = (parts[:2], parts[2:]) if parts[0] == "api" else (parts[:3], parts[3:])
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        collection = "/" + "/".join(base + rest[:1])
        return collection, namespace, rest[1] if len(rest) > 1 else None

    def _serve(self, sent: Sent) -> requests.Response:
        collection, namespace, name = self._split(sent.path)
        if sent.watch:
            return self._watch(collection, sent.params)
        if name is None:
            if sent.method == "GET":
                return self._list(collection, sent.params)
            if sent.method == "POST":
                return self._create(collection, sent.body)
            if sent.method == "DELETE":
                return self._delete_collection(collection, sent.params)
        else:
            item_path = self._item_path(collection, name, namespace)
            current = self.objects.get(collection, {}).get(item_path)
            if current is None:
                return _response(404, status_body("not_found", name=name))
            if sent.method == "GET":
                return _response(200, current)
            if sent.method == "PUT":
                return self._update(collection, item_path, current, sent.body)
            if sent.method == "DELETE":
                return self._delete(collection, item_path, current, sent.body)
        return _response(
            405,
            {
                "kind": "Status",
                "status": "Failure",
                "code": 405,
                "reason": "MethodNotAllowed",
                "message": f"{sent.method} {sent.path} is not supported by the fake",
            },
        )

    def _store(self, collection: str, obj: dict[str, Any], event: str) -> dict[str, Any]:
        metadata = obj.setdefault("metadata", {})
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata["resourceVersion"] = str(next(self._rv))
        path = self._item_path(collection, metadata["name"], metadata.get("namespace"))
        self.objects.setdefault(collection, {})[path] = obj
        self._emit(collection, event, obj)
        return copy.deepcopy(obj)

    def _emit(self, collection: str, kind: str, obj: dict[str, Any]) -> None:
        snapshot = copy.deepcopy(obj)
        self._events.append((int(snapshot["metadata"]["resourceVersion"]), collection, kind, snapshot))
        for watcher in list(self._watchers):
            if watcher.collection == collection:
                self._send(watcher, kind, snapshot)

    def _send(self, watcher: _Watcher, kind: str, obj: dict[str, Any]) -> None:
        """Stream one event to ``watcher`` if its selector matches; end the watch when its budget is spent."""
        if watcher.remaining is not None and watcher.remaining <= 0:
            return
        if not matches(obj["metadata"].get("labels"), watcher.selector):
            return
        watcher.stream.feed(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
        if watcher.remaining is not None:
            watcher.remaining -= 1
            if watcher.remaining <= 0:
                watcher.stream.feed(None)
                if watcher in self._watchers:
                    self._watchers.remove(watcher)

    def _list(self, collection: str, params: Mapping[str, str]) -> requests.Response:
        if self.known_collections is not None and collection not in self.known_collections:
            return _response(404, status_body("not_found", name=collection.rsplit("/", 1)[1]))
        items = list(self.objects.get(collection, {}).values())
        if self.honour_selectors:
            items = [i for i in items if matches(i["metadata"].get("labels"), params.get("labelSelector", ""))]
        start = int(params.get("continue") or 0)
        limit = int(params.get("limit") or 0) or len(items) or 1
        page = items[start : start + limit]
        metadata = {"resourceVersion": str(self._current_rv())}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        return _response(200, {"kind": "List", "apiVersion": "v1", "metadata": metadata, "items": copy.deepcopy(page)})

    def _current_rv(self) -> int:
        return self._events[-1][0] if self._events else 99

    def _create(self, collection: str, body: dict[str, Any]) -> requests.Response:
        name = body["metadata"]["name"]
        if collection == CRD_COLLECTION and name in self.reject:
            return _response(422, status_body("invalid", name=name))
        path = self._item_path(collection, name, body["metadata"].get("namespace"))
        if path in self.objects.get(collection, {}):
            return _response(409, status_body("already_exists", name=name))
        created = self._store(collection, copy.deepcopy(body), "ADDED")
        if collection == CRD_COLLECTION and self.establish:
            self._establish(collection, created["metadata"])
        return _response(201, created)

    def _establish(self, collection: str, metadata: Mapping[str, Any]) -> None:
        """What the apiextensions controllers do after a create: accept the names, then establish."""
        stored = self.objects[collection][self._item_path(collection, metadata["name"], None)]
        for condition in ("NamesAccepted", "Established"):
            conditions = stored.setdefault("status", {}).setdefault("conditions", [])
            conditions.append({"type": condition, "status": "True"})
            stored["metadata"]["resourceVersion"] = str(next(self._rv))
            self._emit(collection, "MODIFIED", stored)

    def _update(
        self, collection: str, item_path: str, current: dict[str, Any], body: dict[str, Any]
    ) -> requests.Response:
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            return _response(409, status_body("conflict", name=current["metadata"]["name"]))
        body = copy.deepcopy(body)
        body["metadata"]["uid"] = current["metadata"]["uid"]
        body.setdefault("status", current.get("status"))
        return _response(200, self._store(collection, body, "MODIFIED"))

    def _delete(self, collection: str, item_path: str, current: dict[str, Any], body: Any) -> requests.Response:
        preconditions = (body or {}).get("preconditions") or {}
        metadata = current["metadata"]
        for key in ("uid", "resourceVersion"):
            if key in preconditions and preconditions[key] != metadata[key]:
                return _response(
                    409,
                    status_body(
                        "precondition",
                        key={"uid": "UID"}.get(key, "ResourceVersion"),
                        name=metadata["name"],
                        want=preconditions[key],
                        have=metadata[key],
                    ),
                )
        del self.objects[collection][item_path]
        metadata["resourceVersion"] = str(next(self._rv))
        self._emit(collection, "DELETED", current)
        return _response(
            200,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Success",
                "details": {"name": metadata["name"], "uid": metadata["uid"]},
            },
        )

    def _delete_collection(self, collection: str, params: Mapping[str, str]) -> requests.Response:
        for path, obj in list(self.objects.get(collection, {}).items()):
            if matches(obj["metadata"].get("labels"), params.get("labelSelector", "")):
                self._delete(collection, path, obj, None)
        return _response(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

    def _watch(self, collection: str, params: Mapping[str, str]) -> requests.Response:
        stream = _Stream()
        watcher = _Watcher(collection, params.get("labelSelector", ""), stream, self.watch_event_limit)
        since = int(params.get("resourceVersion") or 0)
        # Replay what happened after the client's version, then follow live.
        self._watchers.append(watcher)
        for rv, event_collection, kind, obj in self._events:
            if rv > since and event_collection == collection:
                self._send(watcher, kind, obj)
        return _response(200, raw=stream)
