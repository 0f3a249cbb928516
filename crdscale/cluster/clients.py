"""Clients for any kubeconfig: the local instance's or a user's cluster.

:func:`connect` returns a :class:`Cluster` holding both a configured
``kubernetes`` ApiClient and a ``requests`` session with the same credentials,
TLS verified against the cluster CA. The session is what collectors use for raw
paths such as ``/debug/pprof/heap`` and ``/metrics``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from crdscale.errors import ClusterError, UsageError

DEFAULT_TIMEOUT_S = 30.0


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


@dataclass
class Cluster:
    """A connection to one API server.

    Attributes:
        kubeconfig: the kubeconfig file it was built from.
        context: the context used (``None`` means the kubeconfig's current one).
        server: base URL, e.g. ``https://127.0.0.1:40123``.
        api_client: a ``kubernetes.client.ApiClient``.
        session: an authenticated ``requests.Session``; paths are relative to ``server``.
    """

    kubeconfig: Path
    context: str | None
    server: str
    api_client: Any
    session: requests.Session
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def url(self, path: str) -> str:
        return self.server.rstrip("/") + "/" + path.lstrip("/")

    def get(self, path: str, *, timeout: float = DEFAULT_TIMEOUT_S, **kwargs) -> requests.Response:
        """GET ``path`` with the cluster's credentials; raises :class:`ClusterError` when unreachable."""
        try:
            return self.session.get(self.url(path), timeout=timeout, **kwargs)
        except requests.exceptions.SSLError as err:
            raise ClusterError(f"TLS verification failed for {self.server}: {err}") from err
        except requests.exceptions.ConnectionError as err:
            raise ClusterError(f"cannot reach API server {self.server}: {_root_cause(err)}") from err
        except requests.exceptions.Timeout as err:
            raise ClusterError(f"API server {self.server} did not answer {path} within {timeout:.0f} s") from err

    def get_json(self, path: str, **kwargs) -> Any:
        resp = self.get(path, **kwargs)
        if resp.status_code >= 400:
            raise ClusterError(f"GET {path} -> HTTP {resp.status_code}: {resp.text.strip()[:200]}")
        return resp.json()

    def server_version(self) -> str:
        """``gitVersion`` from ``/version``, e.g. ``v1.37.1``."""
        return str(self.get_json("/version", timeout=10).get("gitVersion", "unknown"))

    def close(self) -> None:
        self.session.close()
        try:
            self.api_client.close()
        except Exception:  # the kubernetes client's pool may already be gone
            pass


def _root_cause(err: BaseException) -> str:
    while err.__cause__ is not None or err.__context__ is not None:
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    text = str(err)
    return text.split(":")[-1].strip() or type(err).__name__


def connect(kubeconfig: str | Path, context: str | None = None, *, pool_size: int = 64) -> Cluster:
    """Build a :class:`Cluster` from a kubeconfig file.

    Parameters:
        kubeconfig: path to a kubeconfig file.
        context: context name; default is the file's ``current-context``.
        pool_size: HTTP connections kept per host by the requests session (the
            discovery probe issues hundreds of requests in parallel).

    Raises :class:`UsageError` for a missing or unusable kubeconfig. No request
    is made; call :meth:`Cluster.server_version` to check reachability.
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

    session = ClusterSession()
    adapter = HTTPAdapter(pool_connections=4, pool_maxsize=pool_size)
    session.mount("https://", adapter)
    session.mount("http://", adapter)
    if configuration.verify_ssl:
        session.verify = configuration.ssl_ca_cert or True
    else:
        # Only when the kubeconfig itself says insecure-skip-tls-verify: true.
        session.verify = False
    if configuration.cert_file and configuration.key_file:
        session.cert = (configuration.cert_file, configuration.key_file)
    # The kubernetes package knows every kubeconfig auth form (token, token file,
    # exec plugin); take the headers it would send.
    if configuration.refresh_api_key_hook is not None:
        configuration.refresh_api_key_hook(configuration)
    for setting in configuration.auth_settings().values():
        if setting.get("in") == "header" and setting.get("value"):
            session.headers[setting["key"].title()] = setting["value"]
    session.headers["User-Agent"] = "crdscale"

    api_client = client.ApiClient(configuration)
    return Cluster(kubeconfig=path, context=context, server=configuration.host, api_client=api_client, session=session)
