"""Talking to a Prometheus: where it is, how to authenticate, and its HTTP API.

:class:`PrometheusAccess` says how to reach one: the URL and, for a user's
Prometheus behind a proxy or with a ``--web.config.file``, a CA file (or
explicitly no verification), a bearer token or basic auth. Secrets are never
values of this object: it names the *file* (or the environment variable) that
holds them and reads them when a session is made, so the access can be
recorded in a run manifest as is (:meth:`PrometheusAccess.describe`) and no
secret shows in ``ps``.

:class:`PrometheusClient` is the seam every Prometheus query goes through
(``query``, ``query_range``, ``buildinfo``, and for the Prometheus crdscale
starts ``ready``, ``targets``, ``reload``), over an injectable
``requests.Session``: unit tests pass a fake one, as for
:class:`crdscale.cluster.clients.Cluster`'s transport. Errors a user can
cause (wrong password, unknown CA, unreachable) become one-line
:class:`ClusterError` messages.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests

from crdscale.errors import ClusterError, UsageError

# Where a secret may come from when no file is named: set by a CI system or a shell, never an argument.
TOKEN_ENV = "CRDSCALE_PROMETHEUS_TOKEN"
PASSWORD_ENV = "CRDSCALE_PROMETHEUS_PASSWORD"
QUERY_TIMEOUT_S = 60.0

# Scenario [target] keys -> PrometheusAccess fields.
TARGET_KEYS = {
    "prometheus_url": "url",
    "prometheus_bearer_token_file": "bearer_token_file",
    "prometheus_username": "username",
    "prometheus_password_file": "password_file",
    "prometheus_ca_file": "ca_file",
    "prometheus_insecure_skip_tls_verify": "insecure_skip_tls_verify",
}
FILE_KEYS = ("prometheus_bearer_token_file", "prometheus_password_file", "prometheus_ca_file")


@dataclass(frozen=True)
class PrometheusAccess:
    """How to reach a Prometheus. Holds file names, never secrets.

    Attributes:
        url: base URL, e.g. ``https://prometheus.example:9090`` (no ``user:password@``).
        bearer_token_file: file holding a bearer token (else ``$CRDSCALE_PROMETHEUS_TOKEN`` if set).
        username: basic-auth user; the password comes from ``password_file`` or else
            ``$CRDSCALE_PROMETHEUS_PASSWORD``.
        password_file: file holding the basic-auth password.
        ca_file: PEM bundle to verify the server with (default: the system's trust).
        insecure_skip_tls_verify: do not verify the server's certificate (explicit only).
    """

    url: str
    bearer_token_file: str | None = None
    username: str | None = None
    password_file: str | None = None
    ca_file: str | None = None
    insecure_skip_tls_verify: bool = False

    @classmethod
    def from_target(cls, target: Mapping[str, Any], *, where: str = "scenario") -> PrometheusAccess | None:
        """From a scenario's ``[target]`` (``prometheus_*`` keys); ``None`` without ``prometheus_url``."""
        fields = {field: target[key] for key, field in TARGET_KEYS.items() if target.get(key) not in (None, "")}
        if "url" not in fields:
            extra = sorted(k for k in TARGET_KEYS if k != "prometheus_url" and target.get(k))
            if extra:
                raise UsageError(f"{where}: {', '.join('target.' + k for k in extra)} need target.prometheus_url")
            return None
        access = cls(**fields)
        access.validate(where)
        return access

    def validate(self, where: str = "prometheus") -> None:
        """Check the combination and that the named files exist; raises :class:`UsageError` (one line)."""
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"{where}: prometheus URL must look like https://HOST:PORT, got {self.url!r}")
        if parts.username or parts.password:
            raise UsageError(
                f"{where}: put no credentials in the prometheus URL; use --prometheus-username with "
                f"--prometheus-password-file (or ${PASSWORD_ENV})"
            )
        if self.bearer_token_file and self.username:
            raise UsageError(f"{where}: choose a bearer token or basic auth for Prometheus, not both")
        if self.password_file and not self.username:
            raise UsageError(f"{where}: a Prometheus password file needs --prometheus-username")
        if self.ca_file and self.insecure_skip_tls_verify:
            raise UsageError(f"{where}: choose a Prometheus CA file or insecure-skip-tls-verify, not both")
        for what, path in (
            ("bearer token file", self.bearer_token_file),
            ("password file", self.password_file),
            ("CA file", self.ca_file),
        ):
            if path and not Path(path).is_file():
                raise UsageError(f"{where}: Prometheus {what} not found: {path}")
        if self.username and not self.password_file and not os.environ.get(PASSWORD_ENV):
            raise UsageError(
                f"{where}: Prometheus user {self.username!r} needs --prometheus-password-file or ${PASSWORD_ENV}"
            )
        # What the first scrape would read, read now: an empty secret, a secret that cannot be a header
        # (a newline in $CRDSCALE_PROMETHEUS_TOKEN) or a CA file without a certificate fail the check, not the run.
        try:
            secrets = [
                (f"Prometheus {what} {path}", _read_secret(path, what))
                for what, path in (("bearer token file", self.bearer_token_file), ("password file", self.password_file))
                if path
            ]
        except UsageError as err:
            raise UsageError(f"{where}: {err}") from None
        for env in (TOKEN_ENV, PASSWORD_ENV):
            if os.environ.get(env):
                secrets.append((f"${env}", os.environ[env].strip()))
        for what, value in secrets:
            if any(c in value for c in "\r\n\0"):
                raise UsageError(f"{where}: {what} holds a line break or NUL; a credential is one line")
        if self.ca_file:
            try:
                ssl.create_default_context(cafile=self.ca_file)
            except (ssl.SSLError, OSError, ValueError) as err:
                reason = getattr(err, "reason", None) or getattr(err, "strerror", None) or err
                raise UsageError(
                    f"{where}: Prometheus CA file {self.ca_file} holds no PEM certificate ({reason})"
                ) from None

    def session(self) -> requests.Session:
        """A session carrying these credentials (secrets read now). Raises :class:`UsageError`."""
        session = requests.Session()
        # Our CA must win over REQUESTS_CA_BUNDLE, as for the cluster (requests issue #3829).
        session.trust_env = False
        session.proxies.update(requests.utils.get_environ_proxies(self.url))
        session.verify = False if self.insecure_skip_tls_verify else (self.ca_file or True)
        token = (
            _read_secret(self.bearer_token_file, "bearer token file")
            if self.bearer_token_file
            else os.environ.get(TOKEN_ENV)
        )
        if self.username:
            password = (
                _read_secret(self.password_file, "password file")
                if self.password_file
                else os.environ.get(PASSWORD_ENV, "")
            )
            session.auth = (self.username, password)
        elif token:
            session.headers["Authorization"] = f"Bearer {token}"
        return session

    def client(self, *, session: requests.Session | None = None) -> PrometheusClient:
        return PrometheusClient(self.url, session=session or self.session())

    def auth_kind(self) -> str:
        if self.username:
            return "basic"
        if self.bearer_token_file or os.environ.get(TOKEN_ENV):
            return "bearer"
        return "none"

    def describe(self) -> dict[str, Any]:
        """What the run manifest records: URL, kind of auth, file names and TLS choice; no secret."""
        out: dict[str, Any] = {"prometheus_url": self.url, "prometheus_auth": self.auth_kind()}
        if self.username:
            out["prometheus_username"] = self.username
            out["prometheus_password_from"] = self.password_file or f"${PASSWORD_ENV}"
        elif self.auth_kind() == "bearer":
            out["prometheus_token_from"] = self.bearer_token_file or f"${TOKEN_ENV}"
        if self.ca_file:
            out["prometheus_ca_file"] = self.ca_file
        if self.insecure_skip_tls_verify:
            out["prometheus_insecure_skip_tls_verify"] = True
        return out


def _read_secret(path: str, what: str) -> str:
    try:
        value = Path(path).read_text().strip()
    except OSError as err:
        raise UsageError(f"cannot read Prometheus {what} {path}: {err.strerror}") from err
    if not value:
        raise UsageError(f"Prometheus {what} {path} is empty")
    return value


class PrometheusClient:
    """The Prometheus HTTP API (``/api/v1``), through ``session`` (default: a plain one).

    Every method raises :class:`ClusterError` with one line when Prometheus is
    unreachable, refuses the credentials (401/403) or answers an error.
    """

    def __init__(self, url: str, *, session: requests.Session | None = None, timeout_s: float = QUERY_TIMEOUT_S):
        self.url = url.rstrip("/")
        self.session = session or requests.Session()
        self.timeout_s = timeout_s

    def _request(
        self, method: str, path: str, params: Mapping[str, Any] | None = None, timeout_s: float | None = None
    ) -> requests.Response:
        """One request; unreachable, TLS failures and refused credentials become :class:`ClusterError`."""
        where = f"Prometheus at {self.url}"
        try:
            send = self.session.post if method == "POST" else self.session.get
            resp = send(f"{self.url}{path}", params=params, timeout=timeout_s or self.timeout_s)
        except requests.exceptions.SSLError as err:
            raise ClusterError(
                f"TLS verification failed for {where} (pass --prometheus-ca-file?): {_last_line(err)}"
            ) from err
        except requests.RequestException as err:
            raise ClusterError(f"cannot reach {where}: {_last_line(err)}") from err
        if resp.status_code in (401, 403):
            raise ClusterError(f"{where} refused the credentials: HTTP {resp.status_code} {resp.reason}")
        return resp

    def _get(self, path: str, params: Mapping[str, Any] | None = None, timeout_s: float | None = None) -> Any:
        where = f"Prometheus at {self.url}"
        resp = self._request("GET", path, params, timeout_s)
        try:
            body = resp.json()
        except ValueError:
            raise ClusterError(
                f"{where} answered {path} with HTTP {resp.status_code}, not JSON: {' '.join(resp.text.split())[:200]}"
            ) from None
        if resp.status_code != 200 or body.get("status") != "success":
            raise ClusterError(f"{where} refused {path}: HTTP {resp.status_code}: {body.get('error', body)}")
        return body["data"]

    def query(self, promql: str, time: datetime | float | None = None) -> list[dict]:
        """Instant query: the ``result`` list (``metric`` labels and ``value`` or ``values``)."""
        params: dict[str, Any] = {"query": promql}
        if time is not None:
            params["time"] = time.timestamp() if isinstance(time, datetime) else time
        return self._get("/api/v1/query", params)["result"]

    def query_range(self, promql: str, start: datetime, end: datetime, step_s: float) -> list[dict]:
        """Range query at ``step_s`` seconds: the ``result`` list (``metric`` labels and ``values``)."""
        return self._get(
            "/api/v1/query_range",
            {"query": promql, "start": start.timestamp(), "end": end.timestamp(), "step": f"{step_s:g}s"},
        )["result"]

    def buildinfo(self) -> dict:
        """``/api/v1/status/buildinfo``: ``version``, ``revision``, ..."""
        return self._get("/api/v1/status/buildinfo")

    def targets(self) -> list[dict]:
        """``/api/v1/targets``: the active targets (``labels``, ``health``, ``lastScrape``, ...)."""
        return self._get("/api/v1/targets", timeout_s=5.0)["activeTargets"]

    def ready(self, timeout_s: float = 2.0) -> bool:
        """Whether ``/-/ready`` answers 200 (False while it starts or is unreachable; no error)."""
        try:
            return self._request("GET", "/-/ready", timeout_s=timeout_s).status_code == 200
        except ClusterError:
            return False

    def reload(self) -> None:
        """``POST /-/reload`` (needs ``--web.enable-lifecycle``): re-read the configuration file."""
        resp = self._request("POST", "/-/reload", timeout_s=10.0)
        if resp.status_code != 200:
            raise ClusterError(
                f"Prometheus at {self.url} refused /-/reload: HTTP {resp.status_code}: {' '.join(resp.text.split())[:200]}"
            )

    def close(self) -> None:
        self.session.close()


def _last_line(err: BaseException) -> str:
    # urllib3 nests the cause several levels deep; its last words say what happened.
    while err.__cause__ is not None or err.__context__ is not None:
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    return " ".join(str(err).split())[-300:] or type(err).__name__
