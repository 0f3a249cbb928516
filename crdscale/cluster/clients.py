"""Clients for any kubeconfig: the local instance's or a user's cluster.

:func:`connect` returns a :class:`Cluster`: the server URL, the credentials
from the kubeconfig (TLS trust, client certificate, bearer token) and a
:class:`Transport` that sends the requests. Every request of the installer,
watcher, resource server, cleaner and probes goes through the cluster's
methods (:meth:`Cluster.request`, ``get``/``post``/``put``/``delete``,
:meth:`Cluster.list`, :meth:`Cluster.watch`), which turn "no answer" into a
one-line :class:`ClusterError`.

The transport is injectable, as lightkube's ``Client(transport=...)``: real
use sends through ``requests`` (:class:`RequestsTransport`); unit tests pass a
fake that answers from recorded responses, so the code above needs no server.
"""

from __future__ import annotations

import json
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

from crdscale.errors import ClusterError, UsageError

DEFAULT_TIMEOUT_S = 30.0
Timeout = float | tuple[float, float]


class ClusterSession(requests.Session):
    """A ``requests.Session`` whose own ``verify`` (the cluster CA) always wins.

    Plain sessions let ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` from the
    environment override ``session.verify`` (requests issue #3829), which breaks
    TLS to a cluster with its own CA on machines that set those variables.
    """

    def merge_environment_settings(self, url, proxies, stream, verify, cert):
        settings = super().merge_environment_settings(url, proxies, stream, verify, cert)
        if verify is None or verify is True:
            settings["verify"] = self.verify
        return settings


@dataclass(frozen=True)
class Credentials:
    """How to reach and authenticate to an API server.

    Attributes:
        verify: CA bundle path, ``True`` (system trust) or ``False`` (only when the
            kubeconfig says ``insecure-skip-tls-verify``).
        cert: client certificate and key paths, if the kubeconfig uses them.
        headers: headers sent with every request (``Authorization``, ``User-Agent``).
    """

    verify: bool | str = True
    cert: tuple[str, str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def session(self, *, pool_size: int = 16) -> requests.Session:
        """A new ``requests`` session with these credentials and ``pool_size`` connections per host."""
        session = ClusterSession()
        adapter = HTTPAdapter(pool_connections=4, pool_maxsize=max(pool_size, 1))
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        session.verify = self.verify
        session.cert = self.cert
        session.headers.update(self.headers)
        return session

    def ssl_context(self, server: str) -> ssl.SSLContext | None:
        """An SSL context with the same trust and client certificate, for raw sockets (``None`` for http)."""
        if urlsplit(server).scheme != "https":
            return None
        if self.verify is False:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif isinstance(self.verify, str):
            context = ssl.create_default_context(cafile=self.verify)
        else:
            context = ssl.create_default_context()
        if self.cert:
            context.load_cert_chain(self.cert[0], self.cert[1])
        return context


class Transport(Protocol):
    """What a :class:`Cluster` sends its requests through.

    ``request`` takes a full URL and returns a ``requests.Response`` whatever the
    HTTP status; it raises ``requests.RequestException`` when no answer came.
    With ``stream=True`` the body is read as it arrives (``iter_lines``).
    """

    def request(self, method: str, url: str, *, params: Mapping[str, Any] | None = None,
                data: bytes | None = None, headers: Mapping[str, str] | None = None,
                timeout: Timeout = DEFAULT_TIMEOUT_S, stream: bool = False) -> requests.Response: ...

    def close(self) -> None: ...


class RequestsTransport:
    """The real transport: one pooled ``requests`` session with the cluster's credentials."""

    def __init__(self, credentials: Credentials, *, pool_size: int = 64):
        self.session = credentials.session(pool_size=pool_size)

    def request(self, method, url, *, params=None, data=None, headers=None, timeout=DEFAULT_TIMEOUT_S, stream=False):
        return self.session.request(method, url, params=params, data=data, headers=headers, timeout=timeout,
                                    stream=stream)

    def close(self) -> None:
        self.session.close()


class ApiError(ClusterError):
    """The server answered, but not with success. ``status`` is the HTTP status, ``reason`` the Status reason."""

    def __init__(self, what: str, response: requests.Response):
        self.status = response.status_code
        self.reason = _status_field(response, "reason")
        super().__init__(f"{what} -> HTTP {self.status}: {status_message(response)}")


def _status_field(response: requests.Response, key: str) -> str:
    try:
        body = response.json()
    except ValueError:
        return ""
    return str(body.get(key) or "") if isinstance(body, dict) else ""


def status_message(response: requests.Response) -> str:
    """The ``message`` of a Kubernetes ``Status`` answer, else the start of the body, on one line."""
    message = _status_field(response, "message")
    return " ".join((message or response.text or f"HTTP {response.status_code}").split())[:1000]


class Watch:
    """An open WATCH: iterate for events (``{"type": ..., "object": ...}`` dicts), :meth:`close` from any thread.

    Iteration ends when the server ends the watch (its ``timeoutSeconds``, or
    a restart); a broken connection raises :class:`ClusterError`.
    """

    def __init__(self, response: requests.Response, what: str):
        self.response = response
        self.what = what

    def __iter__(self) -> Iterator[dict[str, Any]]:
        try:
            for line in self.response.iter_lines(chunk_size=None):
                if line:
                    yield json.loads(line)
        except requests.RequestException as err:
            raise ClusterError(f"{self.what} broke: {type(err).__name__}: {_root_cause(err)}") from err

    def close(self) -> None:
        """End the watch now, even while another thread is blocked reading it."""
        try:
            # urllib3 2.x keeps the connection on the response; shutting its socket
            # down wakes a reader blocked in recv, which closing alone does not.
            self.response.raw._connection.sock.shutdown(socket.SHUT_RDWR)
        except Exception:  # already closed, a fake, or another urllib3 layout: the watch timeout ends it anyway
            pass
        self.response.close()

    def __enter__(self) -> "Watch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class Cluster:
    """A connection to one API server.

    Attributes:
        server: base URL, e.g. ``https://127.0.0.1:40123``.
        transport: what requests are sent through (:class:`RequestsTransport` unless a test fakes it).
        credentials: TLS trust, client certificate and headers (for probes that need
            fresh connections or a child process with the same identity).
        kubeconfig: the kubeconfig file it was built from (``None`` when built by hand).
        context: the context used (``None`` means the kubeconfig's current one).
    """

    server: str
    transport: Transport
    credentials: Credentials = field(default_factory=Credentials)
    kubeconfig: Path | None = None
    context: str | None = None

    def url(self, path: str) -> str:
        return self.server.rstrip("/") + "/" + path.lstrip("/")

    def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, body: Any = None,
                headers: Mapping[str, str] | None = None, timeout: Timeout = DEFAULT_TIMEOUT_S,
                stream: bool = False) -> requests.Response:
        """Send one request; ``body`` (if not None) goes as JSON. Returns the response whatever its status.

        Raises :class:`ClusterError` when no answer came (unreachable, TLS failure, timeout).
        """
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        try:
            return self.transport.request(method, self.url(path), params=params, data=data, headers=headers,
                                          timeout=timeout, stream=stream)
        except requests.exceptions.SSLError as err:
            raise ClusterError(f"TLS verification failed for {self.server}: {err}") from err
        except requests.exceptions.ConnectionError as err:
            raise ClusterError(f"cannot reach API server {self.server}: {_root_cause(err)}") from err
        except requests.exceptions.Timeout as err:
            seconds = timeout if isinstance(timeout, (int, float)) else max(timeout)
            raise ClusterError(f"API server {self.server} did not answer {method} {path} within {seconds:.0f} s") from err
        except requests.RequestException as err:
            raise ClusterError(f"{method} {path} failed: {type(err).__name__}: {err}") from err

    def get(self, path: str, **kwargs) -> requests.Response:
        """GET ``path`` (keyword arguments as :meth:`request`)."""
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any, **kwargs) -> requests.Response:
        """POST ``body`` as JSON to ``path``."""
        return self.request("POST", path, body=body, **kwargs)

    def put(self, path: str, body: Any, **kwargs) -> requests.Response:
        """PUT ``body`` as JSON to ``path``."""
        return self.request("PUT", path, body=body, **kwargs)

    def delete(self, path: str, body: Any = None, **kwargs) -> requests.Response:
        """DELETE ``path``, with ``body`` (``DeleteOptions``) if given."""
        return self.request("DELETE", path, body=body, **kwargs)

    def get_json(self, path: str, **kwargs) -> Any:
        """GET ``path`` and decode its JSON; raises :class:`ApiError` on an HTTP error."""
        resp = self.get(path, **kwargs)
        if resp.status_code >= 400:
            raise ApiError(f"GET {path}", resp)
        return resp.json()

    def list(self, path: str, *, params: Mapping[str, Any] | None = None, page_size: int = 500,
             timeout: Timeout = 60.0) -> tuple[list[dict[str, Any]], str]:
        """LIST collection ``path`` page by page: ``(items, resourceVersion of the list)``.

        Raises :class:`ApiError` on an HTTP error (``status`` 404 when the server has no such resource).
        """
        query = {**(params or {}), "limit": page_size}
        items: list[dict[str, Any]] = []
        while True:
            resp = self.get(path, params=query, timeout=timeout)
            if resp.status_code != 200:
                raise ApiError(f"LIST {path}", resp)
            page = resp.json()
            items += page.get("items") or []
            metadata = page.get("metadata") or {}
            if not metadata.get("continue"):
                return items, str(metadata.get("resourceVersion", ""))
            query["continue"] = metadata["continue"]

    def watch(self, path: str, *, resource_version: str, params: Mapping[str, Any] | None = None,
              timeout_s: int = 300) -> Watch:
        """Open a WATCH on collection ``path`` from ``resource_version``, with bookmarks; the server ends it
        after ``timeout_s`` seconds. Returns a :class:`Watch`; raises :class:`ApiError` if refused."""
        query = {**(params or {}), "watch": "1", "resourceVersion": resource_version,
                 "allowWatchBookmarks": "true", "timeoutSeconds": str(int(timeout_s))}
        # Connect within 10 s; then allow the server its timeout plus a margin between events.
        resp = self.get(path, params=query, stream=True, timeout=(10, timeout_s + 30))
        if resp.status_code != 200:
            resp.close()
            raise ApiError(f"WATCH {path}", resp)
        return Watch(resp, f"WATCH {path}")

    def server_version(self) -> str:
        """``gitVersion`` from ``/version``, e.g. ``v1.37.1``."""
        return str(self.get_json("/version", timeout=10).get("gitVersion", "unknown"))

    def close(self) -> None:
        self.transport.close()


def _root_cause(err: BaseException) -> str:
    while err.__cause__ is not None or err.__context__ is not None:
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    text = str(err)
    return text.split(":")[-1].strip() or type(err).__name__


def read_credentials(kubeconfig: str | Path, context: str | None = None) -> tuple[str, Credentials]:
    """``(server URL, credentials)`` of a kubeconfig context (default: its ``current-context``).

    The ``kubernetes`` package reads the kubeconfig: it knows every auth form
    (token, token file, client certificate, exec plugin). Raises
    :class:`UsageError` for a missing or unusable kubeconfig.
    """
    from kubernetes import client, config

    path = Path(kubeconfig).expanduser()
    if not path.is_file():
        raise UsageError(f"kubeconfig not found: {path}")
    configuration = client.Configuration()
    try:
        config.load_kube_config(config_file=str(path), context=context, client_configuration=configuration)
    except Exception as err:  # the kubernetes package raises several unrelated types here
        raise UsageError(f"cannot use kubeconfig {path}: {err}") from err
    if configuration.refresh_api_key_hook is not None:
        configuration.refresh_api_key_hook(configuration)
    headers = {"User-Agent": "crdscale"}
    for setting in configuration.auth_settings().values():
        if setting.get("in") == "header" and setting.get("value"):
            headers[setting["key"].title()] = setting["value"]
    verify: bool | str = (configuration.ssl_ca_cert or True) if configuration.verify_ssl else False
    cert = (configuration.cert_file, configuration.key_file) if configuration.cert_file and configuration.key_file else None
    return configuration.host, Credentials(verify=verify, cert=cert, headers=headers)


def connect(kubeconfig: str | Path, context: str | None = None, *, pool_size: int = 64,
            transport: Transport | None = None) -> Cluster:
    """Build a :class:`Cluster` from a kubeconfig file.

    Parameters:
        kubeconfig: path to a kubeconfig file.
        context: context name; default is the file's ``current-context``.
        pool_size: HTTP connections kept per host by the requests transport (the
            discovery probe issues hundreds of requests in parallel).
        transport: send requests through this instead (tests).

    Raises :class:`UsageError` for a missing or unusable kubeconfig. No request
    is made; call :meth:`Cluster.server_version` to check reachability.
    """
    server, credentials = read_credentials(kubeconfig, context)
    return Cluster(server=server, transport=transport or RequestsTransport(credentials, pool_size=pool_size),
                   credentials=credentials, kubeconfig=Path(kubeconfig).expanduser(), context=context)
