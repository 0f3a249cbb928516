"""Credentials that change during a run: exec plugins and token files, refreshed as client-go does.

An EKS or GKE kubeconfig runs a plugin (``aws eks get-token``,
``gke-gcloud-auth-plugin``) that prints an ``ExecCredential`` with a token
valid for minutes; a bound service-account token file is rewritten by the
kubelet. Read once, either dies in a long run. So, as client-go's exec
authenticator (``plugin/pkg/client/auth/exec``) and its cached token file:

* :class:`ExecAuthenticator` keeps the plugin's answer until its
  ``status.expirationTimestamp`` passes (forever if it has none), then runs
  the plugin again; after a 401 it runs it again once -- unless another
  request already did (one run for any number of concurrent 401s).
* :class:`TokenFileAuthenticator` re-reads ``tokenFile`` every minute and
  after a 401.
* :func:`send_authenticated` sends a request with the current credentials and,
  after a 401 that brought new ones, sends it **once** more. client-go only
  rotates (its callers, informers, retry by themselves); crdscale's installer
  and probes send one-shot requests, and a step must not fail because a token
  expired between two requests. A second 401 is returned as is: no loop.

Every authenticator gives an :class:`AuthState` (headers and client
certificate files) that a transport applies per request
(:class:`crdscale.cluster.clients.ClusterSession`, the raw watch loop).
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from crdscale.errors import ClusterError, UsageError

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
EXEC_TIMEOUT_S = 120.0  # a plugin may call a cloud API; a hung one must not hang the run
# client-go re-reads a tokenFile at most once a minute (NewCachedFileTokenSource).
TOKEN_FILE_PERIOD_S = 60.0


@dataclass(frozen=True)
class AuthState:
    """What one request is sent with: extra ``headers`` (``Authorization``) and a client ``cert``
    as ``(certificate file, key file)``. Compared by value: equal states are the same credentials."""

    headers: Mapping[str, str] = field(default_factory=dict)
    cert: tuple[str, str] | None = None

    def __hash__(self) -> int:
        return hash((tuple(sorted(self.headers.items())), self.cert))


class Authenticator(Protocol):
    """Credentials that may change: ``current()`` for the next request, ``rotate(stale)`` after a 401."""

    def current(self) -> AuthState: ...

    def rotate(self, stale: AuthState) -> AuthState: ...


def send_authenticated(authenticator: Authenticator, send: Callable[[AuthState], Any]) -> Any:
    """``send(state)`` with the current credentials; after a 401, with rotated ones once more.

    ``send`` returns a response with ``status_code`` (and ``close()``). Returns the last response.
    """
    state = authenticator.current()
    response = send(state)
    if response.status_code != 401:
        return response
    fresh = authenticator.rotate(state)
    if fresh == state:
        return response  # nothing new to try: the 401 stands
    response.close()
    return send(fresh)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


CREDENTIALS_PREFIX = "crdscale-credentials-"


class _PrivateFiles:
    """A 0700 directory for key material that requests and ssl need as files (exec plugins'
    client certificates, kubeconfigs' ``*-data`` fields); removed when the process exits.

    A process killed with SIGKILL cannot remove it: its name carries the pid, and the next
    crdscale process that needs one removes those whose process is gone."""

    def __init__(self, parent: str | None = None):
        self._dir: Path | None = None
        self._parent = parent
        self._lock = threading.Lock()
        self._count = 0

    def write(self, name: str, data: bytes) -> str:
        with self._lock:
            if self._dir is None:
                parent = Path(self._parent or tempfile.gettempdir())
                remove_orphaned_credentials(parent)
                self._dir = Path(tempfile.mkdtemp(prefix=f"{CREDENTIALS_PREFIX}{os.getpid()}-", dir=parent))  # 0700
                atexit.register(shutil.rmtree, self._dir, True)
            self._count += 1
            path = self._dir / f"{self._count:04d}-{name}"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return str(path)


PRIVATE_FILES = _PrivateFiles()


def remove_orphaned_credentials(parent: Path) -> list[Path]:
    """Remove the credential directories under ``parent`` of crdscale processes that no
    longer run (killed before their exit handler); returns them. Only ours: named
    ``crdscale-credentials-<pid>-*`` and owned by this user."""
    removed = []
    for path in parent.glob(f"{CREDENTIALS_PREFIX}*-*"):
        pid = path.name[len(CREDENTIALS_PREFIX) :].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if path.lstat().st_uid != os.getuid() or not path.is_dir() or path.is_symlink():
                continue
            os.kill(int(pid), 0)
            continue  # still running (or the pid was reused: leave it)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        except OSError:
            continue  # a process of another user has that pid: not ours to judge
    return removed


def decode_data(value: str, what: str) -> bytes:
    """A kubeconfig ``*-data`` field (base64) as bytes; raises :class:`UsageError` naming the field."""
    try:
        return base64.b64decode(value, validate=False)
    except (ValueError, TypeError) as err:
        raise UsageError(f"kubeconfig: {what} is not valid base64") from err


# ------------------------------------------------------------------ token file


class TokenFileAuthenticator:
    """A bearer token read from ``path``, re-read every :data:`TOKEN_FILE_PERIOD_S` and after a 401."""

    def __init__(
        self, path: str | Path, *, clock: Callable[[], float] = time.monotonic, period_s: float = TOKEN_FILE_PERIOD_S
    ):
        self.path = Path(path)
        self.clock = clock
        self.period_s = period_s
        self._lock = threading.Lock()
        self._state: AuthState | None = None
        self._read_at = 0.0

    def _read(self) -> AuthState:
        try:
            token = self.path.read_text().strip()
        except OSError as err:
            raise UsageError(f"cannot read token file {self.path}: {err.strerror}") from err
        if not token:
            raise UsageError(f"token file {self.path} is empty")
        self._read_at = self.clock()
        self._state = AuthState(bearer(token))
        return self._state

    def current(self) -> AuthState:
        with self._lock:
            if self._state is None or self.clock() - self._read_at >= self.period_s:
                return self._read()
            return self._state

    def rotate(self, stale: AuthState) -> AuthState:
        with self._lock:
            if self._state is not None and self._state != stale:
                return self._state
            return self._read()


# ------------------------------------------------------------------ exec plugins


@dataclass(frozen=True)
class ExecCredential:
    """One answer of an exec plugin. ``expires_at`` is UTC, ``None`` when the plugin set no expiry."""

    token: str | None
    client_certificate_data: str | None
    client_key_data: str | None
    expires_at: datetime | None


def parse_exec_credential(stdout: str, api_version: str, command: str) -> ExecCredential:
    """Decode and check a plugin's stdout as client-go does; raises :class:`ClusterError` (one line)."""
    try:
        data = json.loads(stdout)
    except ValueError as err:
        raise ClusterError(f"exec plugin {command}: stdout is not an ExecCredential (JSON): {err}") from err
    if not isinstance(data, dict) or data.get("kind") != "ExecCredential":
        raise ClusterError(f"exec plugin {command}: stdout is not an ExecCredential")
    if data.get("apiVersion") != api_version:
        raise ClusterError(
            f"exec plugin {command} is configured to use API version {api_version}, "
            f"plugin returned version {data.get('apiVersion')}"
        )
    status = data.get("status")
    if not isinstance(status, dict):
        raise ClusterError(f"exec plugin {command} didn't return a status field")
    token = status.get("token") or None
    cert, key = status.get("clientCertificateData") or None, status.get("clientKeyData") or None
    if not token and not cert and not key:
        raise ClusterError(f"exec plugin {command} didn't return a token or cert/key pair")
    if bool(cert) != bool(key):
        raise ClusterError(f"exec plugin {command} returned only certificate or key, not both")
    expires_at = None
    if status.get("expirationTimestamp"):
        try:
            expires_at = datetime.fromisoformat(str(status["expirationTimestamp"]).replace("Z", "+00:00"))
        except ValueError as err:
            raise ClusterError(
                f"exec plugin {command}: bad expirationTimestamp {status['expirationTimestamp']!r}"
            ) from err
        if expires_at.tzinfo is None:
            expires_at = expires_at.replace(tzinfo=timezone.utc)
    return ExecCredential(token, cert, key, expires_at)


@dataclass(frozen=True)
class ExecPlugin:
    """A kubeconfig ``user.exec`` stanza, ready to run.

    Attributes:
        command: the program (a relative path already resolved by :mod:`crdscale.cluster.kubeconfig`).
        args, env: its arguments and the extra environment (``[{name, value}]`` in the kubeconfig).
        api_version: ``client.authentication.k8s.io/v1`` or ``/v1beta1``.
        interactive_mode: ``Never``, ``IfAvailable`` or ``Always``.
        cluster_info: ``spec.cluster`` when ``provideClusterInfo`` is set, else ``None``.
        install_hint: shown when the command cannot be run.
    """

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = EXEC_API_VERSIONS[0]
    interactive_mode: str = "IfAvailable"
    cluster_info: Mapping[str, Any] | None = None
    install_hint: str = ""

    @classmethod
    def from_kubeconfig(cls, exec_config: Mapping[str, Any], cluster: Mapping[str, Any]) -> ExecPlugin:
        """From ``user.exec`` and the context's ``cluster`` mapping; raises :class:`UsageError` when malformed."""
        api_version = exec_config.get("apiVersion")
        if api_version not in EXEC_API_VERSIONS:
            raise UsageError(
                f"kubeconfig exec plugin: apiVersion must be one of {', '.join(EXEC_API_VERSIONS)}, got {api_version!r}"
            )
        if not exec_config.get("command"):
            raise UsageError("kubeconfig exec plugin: no command")
        mode = exec_config.get("interactiveMode") or ("" if api_version.endswith("/v1") else "IfAvailable")
        if not mode:
            raise UsageError(
                f"kubeconfig exec plugin: interactiveMode is required for {api_version} (Never, IfAvailable or Always)"
            )
        if mode not in ("Never", "IfAvailable", "Always"):
            raise UsageError(
                f"kubeconfig exec plugin: interactiveMode must be Never, IfAvailable or Always, got {mode!r}"
            )
        env = tuple((str(e["name"]), str(e.get("value", ""))) for e in exec_config.get("env") or [])
        return cls(
            command=str(exec_config["command"]),
            args=tuple(str(a) for a in exec_config.get("args") or []),
            env=env,
            api_version=api_version,
            interactive_mode=mode,
            cluster_info=_cluster_info(cluster) if exec_config.get("provideClusterInfo") else None,
            install_hint=str(exec_config.get("installHint") or ""),
        )

    def request(self, interactive: bool) -> dict[str, Any]:
        """The ``ExecCredential`` handed to the plugin in ``$KUBERNETES_EXEC_INFO``."""
        spec: dict[str, Any] = {"interactive": interactive}
        if self.cluster_info is not None:
            spec["cluster"] = dict(self.cluster_info)
        return {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}


def _cluster_info(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """``spec.cluster`` for ``provideClusterInfo`` (client-go's ``clientauthentication.Cluster``)."""
    info: dict[str, Any] = {"server": cluster.get("server", "")}
    if cluster.get("certificate-authority-data"):
        info["certificate-authority-data"] = cluster["certificate-authority-data"]
    elif cluster.get("certificate-authority"):
        try:
            info["certificate-authority-data"] = base64.b64encode(
                Path(cluster["certificate-authority"]).read_bytes()
            ).decode()
        except OSError:
            pass
    for key in ("tls-server-name", "insecure-skip-tls-verify", "proxy-url", "disable-compression"):
        if cluster.get(key):
            info[key] = cluster[key]
    for extension in cluster.get("extensions") or []:
        if extension.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = extension.get("extension")
    return info


Runner = Callable[[Sequence[str], Mapping[str, str], bool], str]


def run_plugin(argv: Sequence[str], env: Mapping[str, str], interactive: bool) -> str:
    """Run a plugin as client-go does: its stderr goes to ours (it may print a login prompt or a
    warning), stdin only when interactive. Returns its stdout; raises :class:`ClusterError`."""
    try:
        proc = subprocess.run(
            list(argv),
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=None,
            stdin=None if interactive else subprocess.DEVNULL,
            text=True,
            timeout=EXEC_TIMEOUT_S,
        )
    except FileNotFoundError as err:
        raise ClusterError(f"exec plugin {argv[0]} not found") from err
    except PermissionError as err:
        raise ClusterError(f"exec plugin {argv[0]} is not executable") from err
    except subprocess.TimeoutExpired as err:
        raise ClusterError(f"exec plugin {argv[0]} did not answer within {EXEC_TIMEOUT_S:.0f} s") from err
    if proc.returncode != 0:
        raise ClusterError(f"exec plugin {argv[0]} exited {proc.returncode} (its stderr is above)")
    return proc.stdout


class ExecAuthenticator:
    """Credentials from an exec plugin, cached until they expire or a 401 says they are stale.

    Parameters:
        plugin: what to run.
        runner: runs it and returns stdout (tests pass a fake; default :func:`run_plugin`).
        now: the UTC clock (tests move it).
        stdin_is_terminal: whether a plugin may prompt (``interactiveMode``).

    ``calls`` counts plugin runs.
    """

    def __init__(
        self,
        plugin: ExecPlugin,
        *,
        runner: Runner = run_plugin,
        now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
        stdin_is_terminal: Callable[[], bool] = lambda: sys.stdin is not None and sys.stdin.isatty(),
    ):
        self.plugin = plugin
        self.runner = runner
        self.now = now
        self.stdin_is_terminal = stdin_is_terminal
        self.calls = 0
        self._lock = threading.Lock()
        self._state: AuthState | None = None
        self._expires_at: datetime | None = None
        self._cert_data: tuple[str, str] | None = None

    def _expired(self) -> bool:
        return self._expires_at is not None and self.now() > self._expires_at

    def current(self) -> AuthState:
        with self._lock:
            if self._state is None or self._expired():
                self._refresh()
            return self._state  # type: ignore[return-value]

    def rotate(self, stale: AuthState) -> AuthState:
        with self._lock:
            if self._state is not None and self._state != stale:
                return self._state  # another request rotated them already
            self._refresh()
            return self._state  # type: ignore[return-value]

    def _interactive(self) -> bool:
        mode = self.plugin.interactive_mode
        if mode == "Never":
            return False
        terminal = self.stdin_is_terminal()
        if mode == "Always" and not terminal:
            raise ClusterError(
                f"exec plugin {self.plugin.command} needs an interactive terminal "
                f"(interactiveMode: Always) and stdin is not one"
            )
        return terminal

    def _refresh(self) -> None:
        interactive = self._interactive()
        env = {
            **os.environ,
            **dict(self.plugin.env),
            "KUBERNETES_EXEC_INFO": json.dumps(self.plugin.request(interactive)),
        }
        self.calls += 1
        try:
            stdout = self.runner([self.plugin.command, *self.plugin.args], env, interactive)
        except ClusterError as err:
            hint = (
                f" ({self.plugin.install_hint.strip()})" if self.plugin.install_hint and "not found" in str(err) else ""
            )
            raise ClusterError(f"{err}{hint}") from err
        credential = parse_exec_credential(stdout, self.plugin.api_version, self.plugin.command)
        cert = None
        if credential.client_certificate_data:
            data = (credential.client_certificate_data, credential.client_key_data or "")
            if self._state is not None and self._state.cert and data == self._cert_data:
                cert = self._state.cert  # the same pair: keep the files, and so requests' connection pool
            else:
                cert = (
                    PRIVATE_FILES.write("exec-client.crt", data[0].encode()),
                    PRIVATE_FILES.write("exec-client.key", data[1].encode()),
                )
            self._cert_data = data
        self._state = AuthState(bearer(credential.token) if credential.token else {}, cert)
        self._expires_at = credential.expires_at
