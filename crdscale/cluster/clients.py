"""Clients for any kubeconfig: the local instance's or a user's cluster.

:func:`connect` returns a :class:`Cluster`: the server URL, the credentials
from the kubeconfig (TLS trust, client certificate, bearer token, or an
exec plugin or token file refreshed during the run, :mod:`crdscale.cluster.auth`)
and a :class:`Transport` that sends the requests. Which files and which
context: :mod:`crdscale.cluster.kubeconfig`. Every request of the installer,
watcher, resource server, cleaner and probes goes through the cluster's
methods (:meth:`Cluster.request`, ``get``/``post``/``put``/``delete``,
:meth:`Cluster.list`, :meth:`Cluster.watch`), which turn "no answer" into a
one-line :class:`ClusterError`.

The transport is injectable, as lightkube's ``Client(transport=...)``: real
use sends through ``requests`` (:class:`RequestsTransport`); unit tests pass a
fake that answers from recorded responses, so the code above needs no server.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter

from crdscale.cluster import kubeconfig as kubeconfig_files
from crdscale.cluster.auth import (
    PRIVATE_FILES,
    Authenticator,
    AuthState,
    ExecAuthenticator,
    ExecPlugin,
    TokenFileAuthenticator,
    decode_data,
    send_authenticated,
)
from crdscale.cluster.kubeconfig import KubeconfigFiles
from crdscale.errors import ClusterError, UsageError

DEFAULT_TIMEOUT_S = 30.0
Timeout = float | tuple[float, float]


class ClusterSession(requests.Session):
    """A ``requests.Session`` whose own ``verify`` (the cluster CA) always wins, and that sends
    every request with its ``authenticator``'s current credentials (refreshed after a 401, see
    :func:`crdscale.cluster.auth.send_authenticated`).

    Plain sessions let ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` from the
    environment override ``session.verify`` (requests issue #3829), which breaks
    TLS to a cluster with its own CA on machines that set those variables.
    """

    authenticator: Authenticator | None = None

    def request(self, method, url, *args, headers=None, **kwargs):
        if self.authenticator is None:
            return super().request(method, url, *args, headers=headers, **kwargs)

        def send(state: AuthState) -> requests.Response:
            if state.cert is not None:
                kwargs["cert"] = state.cert  # a new pair: requests keys its connection pools by it
            return super(ClusterSession, self).request(
                method, url, *args, headers={**state.headers, **(headers or {})}, **kwargs
            )

        return send_authenticated(self.authenticator, send)

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
        authenticator: credentials that change during a run (exec plugin, token file); what it
            gives each request goes on top of ``headers`` and ``cert``.
    """

    verify: bool | str = True
    cert: tuple[str, str] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    authenticator: Authenticator | None = None

    def current_auth(self) -> AuthState:
        """What the next request authenticates with: the static ``Authorization`` and ``cert``,
        overridden by the authenticator's current state (which may run an exec plugin)."""
        static = {k: v for k, v in self.headers.items() if k.lower() == "authorization"}
        if self.authenticator is None:
            return AuthState(static, self.cert)
        state = self.authenticator.current()
        return AuthState({**static, **state.headers}, state.cert or self.cert)

    def after_unauthorized(self) -> None:
        """A request sent with :meth:`current_auth` got 401: rotate the credentials (once for
        any number of such requests), for clients that retry by themselves (the raw watch loop)."""
        if self.authenticator is not None:
            self.authenticator.rotate(self.authenticator.current())

    def session(self, *, pool_size: int = 16) -> requests.Session:
        """A new ``requests`` session with these credentials and ``pool_size`` connections per host."""
        session = ClusterSession()
        adapter = HTTPAdapter(pool_connections=4, pool_maxsize=max(pool_size, 1))
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        session.verify = self.verify
        session.cert = self.cert
        session.headers.update(self.headers)
        session.authenticator = self.authenticator
        return session

    def ssl_context(self, server: str, cert: tuple[str, str] | None = None) -> ssl.SSLContext | None:
        """An SSL context with the same trust and client certificate (``cert`` if given, e.g. from
        :meth:`current_auth`), for raw sockets (``None`` for http)."""
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
        cert = cert or self.cert
        if cert:
            context.load_cert_chain(cert[0], cert[1])
        return context


class Transport(Protocol):
    """What a :class:`Cluster` sends its requests through.

    ``request`` takes a full URL and returns a ``requests.Response`` whatever the
    HTTP status; it raises ``requests.RequestException`` when no answer came.
    With ``stream=True`` the body is read as it arrives (``iter_lines``).
    """

    def request(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        data: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout = DEFAULT_TIMEOUT_S,
        stream: bool = False,
    ) -> requests.Response: ...

    def close(self) -> None: ...

    def fresh(self, *, pool_size: int = 16) -> Transport:
        """A transport to the same server with the same credentials and no warm connections, keeping
        ``pool_size`` connections (a probe timing a cold client; parallel writers). Close it when done;
        closing it leaves this one open. A fake may answer with a view of itself."""
        ...


class RequestsTransport:
    """The real transport: one pooled ``requests`` session with the cluster's credentials
    (an exec plugin's or token file's refreshed per request, :class:`ClusterSession`)."""

    def __init__(self, credentials: Credentials, *, pool_size: int = 64):
        self.credentials = credentials
        self.session = credentials.session(pool_size=pool_size)

    def fresh(self, *, pool_size: int = 16) -> RequestsTransport:
        return RequestsTransport(self.credentials, pool_size=pool_size)

    def request(self, method, url, *, params=None, data=None, headers=None, timeout=DEFAULT_TIMEOUT_S, stream=False):
        return self.session.request(
            method, url, params=params, data=data, headers=headers, timeout=timeout, stream=stream
        )

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

    def __enter__(self) -> Watch:
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
        kubeconfig: the kubeconfig file(s) it was built from (``None`` when built by hand); Go
            programs and kubectl get them through :meth:`KubeconfigFiles.child_env`.
        context: the context used (``None`` means the kubeconfig's current one).
    """

    server: str
    transport: Transport
    credentials: Credentials = field(default_factory=Credentials)
    kubeconfig: KubeconfigFiles | None = None
    context: str | None = None

    def url(self, path: str) -> str:
        return self.server.rstrip("/") + "/" + path.lstrip("/")

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: Timeout = DEFAULT_TIMEOUT_S,
        stream: bool = False,
    ) -> requests.Response:
        """Send one request; ``body`` (if not None) goes as JSON. Returns the response whatever its status.

        Raises :class:`ClusterError` when no answer came (unreachable, TLS failure, timeout).
        """
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            headers = {"Content-Type": "application/json", **(headers or {})}
        try:
            return self.transport.request(
                method, self.url(path), params=params, data=data, headers=headers, timeout=timeout, stream=stream
            )
        except requests.exceptions.SSLError as err:
            raise ClusterError(f"TLS verification failed for {self.server}: {err}") from err
        except requests.exceptions.ConnectionError as err:
            raise ClusterError(f"cannot reach API server {self.server}: {_root_cause(err)}") from err
        except requests.exceptions.Timeout as err:
            seconds = timeout if isinstance(timeout, (int, float)) else max(timeout)
            raise ClusterError(
                f"API server {self.server} did not answer {method} {path} within {seconds:.0f} s"
            ) from err
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

    def list(
        self, path: str, *, params: Mapping[str, Any] | None = None, page_size: int = 500, timeout: Timeout = 60.0
    ) -> tuple[list[dict[str, Any]], str]:
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

    def watch(
        self, path: str, *, resource_version: str, params: Mapping[str, Any] | None = None, timeout_s: int = 300
    ) -> Watch:
        """Open a WATCH on collection ``path`` from ``resource_version``, with bookmarks; the server ends it
        after ``timeout_s`` seconds. Returns a :class:`Watch`; raises :class:`ApiError` if refused."""
        query = {
            **(params or {}),
            "watch": "1",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(int(timeout_s)),
        }
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


def read_credentials(kubeconfig: str | Path | KubeconfigFiles, context: str | None = None) -> tuple[str, Credentials]:
    """``(server URL, credentials)`` of a kubeconfig context (default: its ``current-context``).

    ``kubeconfig`` is one file, or a ``:``-separated list merged as kubectl merges
    ``$KUBECONFIG`` (:mod:`crdscale.cluster.kubeconfig`). Users authenticate with a
    token, ``tokenFile`` (re-read every minute), a client certificate, basic auth, an
    exec plugin (run again when its credential expires or after a 401) or an oidc
    ``auth-provider``'s ``id-token`` (not refreshed). ``*-data`` fields are written
    to a private temporary directory removed at exit. Raises :class:`UsageError`
    for a missing or unusable kubeconfig; nothing is run or sent yet.
    """
    files = KubeconfigFiles.parse(kubeconfig)
    where = f"kubeconfig {files}"
    selection = kubeconfig_files.select(kubeconfig_files.load(files), context, where=where)
    cluster, user = selection.cluster, selection.user
    verify: bool | str = True
    if cluster.get("insecure-skip-tls-verify"):
        verify = False
    elif cluster.get("certificate-authority-data"):
        verify = PRIVATE_FILES.write(
            "ca.crt", decode_data(cluster["certificate-authority-data"], "certificate-authority-data")
        )
    elif cluster.get("certificate-authority"):
        verify = _existing(cluster["certificate-authority"], "certificate-authority", where)
    cert = _client_cert(user, where)
    headers = {"User-Agent": "crdscale"}
    authenticator: Authenticator | None = None
    # client-go's order: a token set in the kubeconfig wins over an exec plugin.
    if user.get("tokenFile"):
        authenticator = TokenFileAuthenticator(_existing(user["tokenFile"], "tokenFile", where))
    elif user.get("token"):
        headers["Authorization"] = f"Bearer {user['token']}"
    elif user.get("exec"):
        authenticator = ExecAuthenticator(ExecPlugin.from_kubeconfig(user["exec"], cluster))
    elif user.get("auth-provider"):
        headers["Authorization"] = f"Bearer {_auth_provider_token(user['auth-provider'], where)}"
    elif user.get("username"):
        basic = base64.b64encode(f"{user['username']}:{user.get('password', '')}".encode()).decode()
        headers["Authorization"] = f"Basic {basic}"
    return str(cluster["server"]), Credentials(verify=verify, cert=cert, headers=headers, authenticator=authenticator)


def _existing(path: str, what: str, where: str) -> str:
    if not Path(path).is_file():
        raise UsageError(f"{where}: {what} {path} not found")
    return str(path)


def _client_cert(user: Mapping[str, Any], where: str) -> tuple[str, str] | None:
    if user.get("client-certificate-data"):
        cert = PRIVATE_FILES.write(
            "client.crt", decode_data(user["client-certificate-data"], "client-certificate-data")
        )
    elif user.get("client-certificate"):
        cert = _existing(user["client-certificate"], "client-certificate", where)
    else:
        return None
    if user.get("client-key-data"):
        key = PRIVATE_FILES.write("client.key", decode_data(user["client-key-data"], "client-key-data"))
    elif user.get("client-key"):
        key = _existing(user["client-key"], "client-key", where)
    else:
        raise UsageError(f"{where}: the user has a client certificate but no client key")
    return cert, key


def _auth_provider_token(provider: Mapping[str, Any], where: str) -> str:
    """An oidc ``auth-provider``'s ``id-token``; other providers left client-go in 1.26."""
    name = provider.get("name")
    token = (provider.get("config") or {}).get("id-token")
    if name != "oidc" or not token:
        raise UsageError(
            f"{where}: auth-provider {name!r} is not supported; use its exec plugin "
            f"(e.g. gke-gcloud-auth-plugin, kubelogin)"
        )
    return str(token)


def connect(
    kubeconfig: str | Path | KubeconfigFiles,
    context: str | None = None,
    *,
    pool_size: int = 64,
    transport: Transport | None = None,
) -> Cluster:
    """Build a :class:`Cluster` from a kubeconfig.

    Parameters:
        kubeconfig: one file, or a ``:``-separated list merged as ``$KUBECONFIG``
            (see :mod:`crdscale.cluster.kubeconfig`).
        context: context name; default is the (merged) ``current-context``.
        pool_size: HTTP connections kept per host by the requests transport (the
            discovery probe issues hundreds of requests in parallel).
        transport: send requests through this instead (tests).

    Raises :class:`UsageError` for a missing or unusable kubeconfig. No request
    is made; call :meth:`Cluster.server_version` to check reachability.
    """
    files = KubeconfigFiles.parse(kubeconfig)
    server, credentials = read_credentials(files, context)
    return Cluster(
        server=server,
        transport=transport or RequestsTransport(credentials, pool_size=pool_size),
        credentials=credentials,
        kubeconfig=files,
        context=context,
    )
