"""Parity: can prometheus-api-client's ``PrometheusConnect`` query a user's Prometheus with the auth crdscale supports?

crdscale reaches a user's Prometheus through :class:`crdscale.collect.prometheus.PrometheusAccess`
(scenario keys ``target.prometheus_*``): a bearer token from a file, basic auth with a password
from a file, a CA file, or explicitly no verification. This script starts a loopback HTTPS
"Prometheus" (``/api/v1/query``, ``/api/v1/query_range``, ``/api/v1/status/buildinfo``) that
demands one kind of credential per case, and queries it with

* ``crdscale``: ``PrometheusAccess(...).client().query(...)``;
* ``PrometheusConnect(kwargs)``: its own parameters only (``headers``, ``auth``, ``disable_ssl``),
  the secret read by the caller -- it has no parameter for a file, nor for a CA bundle;
* ``PrometheusConnect(session)``: given the ``requests.Session`` crdscale's ``PrometheusAccess`` builds.

and records ``ok`` or what happened, plus how each reports a refused password and a 503.
With ``--real`` it also runs Debian's ``prometheus`` (on PATH) on a loopback port with basic
auth and TLS from a ``--web.config.file`` and queries ``up`` through all three (needs bcrypt).

    python3 -m venv /tmp/deps-venv
    /tmp/deps-venv/bin/pip install -r requirements.lock --no-deps && /tmp/deps-venv/bin/pip install prometheus-api-client
    PYTHONPATH=$PWD /tmp/deps-venv/bin/python benchmarks/prometheus_client_parity.py [--real]

Reports only; exits 0.
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def _make_pki(directory: Path):
    from crdscale.testing.kubeconfig_parity import make_pki

    return make_pki(directory)


VECTOR = {"resultType": "vector", "result": [{"metric": {"__name__": "up", "job": "apiserver"}, "value": [1, "1"]}]}
MATRIX = {
    "resultType": "matrix",
    "result": [{"metric": {"__name__": "up", "job": "apiserver"}, "values": [[1, "1"], [16, "1"], [31, "1"]]}],
}


class FakePrometheus:
    """HTTPS on loopback; answers when ``accept(authorization header)`` holds, else 401;
    ``fail_with`` forces a status (e.g. 503) and counts the requests it refused."""

    def __init__(self, cert, accept: Callable[[str], bool]):
        self.accept = accept
        self.fail_with: int | None = None
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests += 1
                path = urlsplit(self.path).path
                if outer.fail_with:
                    status, body = outer.fail_with, {"status": "error", "error": "overloaded"}
                elif not outer.accept(self.headers.get("Authorization", "")):
                    status, body = 401, None
                else:
                    data = {"/api/v1/query": VECTOR, "/api/v1/query_range": MATRIX}.get(path, {"version": "3.0.0"})
                    status, body = 200, {"status": "success", "data": data}
                raw = json.dumps(body).encode() if body else b"Unauthorized\n"
                self.send_response(status)
                self.send_header("Content-Type", "application/json" if body else "text/plain")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            do_POST = do_GET

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert[0]), str(cert[1]))
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"https://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _one_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {' '.join(str(err).split())[:200]}"


def cases(tmp: Path, pki) -> list[tuple[str, Callable[[str], bool], dict[str, Any], dict[str, Any]]]:
    """``(name, what the server accepts, PrometheusAccess fields, PrometheusConnect kwargs)``."""
    (tmp / "token").write_text("s3cret-token\n")
    (tmp / "password").write_text("hunter2\n")
    basic = "Basic " + base64.b64encode(b"crdscale:hunter2").decode()
    return [
        (
            "bearer token file + CA file",
            lambda h: h == "Bearer s3cret-token",
            {"bearer_token_file": str(tmp / "token"), "ca_file": str(pki.ca)},
            {"headers": {"Authorization": "Bearer s3cret-token"}},  # no CA parameter: system trust only
        ),
        (
            "basic auth, password file + CA file",
            lambda h: h == basic,
            {"username": "crdscale", "password_file": str(tmp / "password"), "ca_file": str(pki.ca)},
            {"auth": ("crdscale", "hunter2")},
        ),
        (
            "no auth, insecure-skip-tls-verify",
            lambda h: True,
            {"insecure_skip_tls_verify": True},
            {"disable_ssl": True},
        ),
    ]


def run(pki, tmp: Path) -> dict[str, dict[str, str]]:
    from prometheus_api_client import PrometheusConnect

    from crdscale.collect.prometheus import PrometheusAccess

    now = datetime.now(timezone.utc)
    results: dict[str, dict[str, str]] = {}
    for name, accept, access_fields, connect_kwargs in cases(tmp, pki):
        server = FakePrometheus(pki.server, accept)
        access = PrometheusAccess(url=server.url, **access_fields)
        attempts = {
            "crdscale": lambda a=access: (
                a.client().query("up"),
                a.client().query_range("up", now - timedelta(seconds=30), now, 15),
            ),
            "PrometheusConnect(kwargs)": lambda u=server.url, kw=connect_kwargs: (
                (pc := PrometheusConnect(url=u, **kw)).custom_query("up"),
                pc.custom_query_range("up", now - timedelta(seconds=30), now, "15s"),
            ),
            "PrometheusConnect(session)": lambda a=access, u=server.url: (
                (pc := PrometheusConnect(url=u, session=a.session())).custom_query("up"),
                pc.custom_query_range("up", now - timedelta(seconds=30), now, "15s"),
            ),
        }
        row = {}
        for client, attempt in attempts.items():
            try:
                vector, matrix = attempt()
                row[client] = "ok" if vector == VECTOR["result"] and matrix == MATRIX["result"] else "wrong result"
            except Exception as err:
                row[client] = _one_line(err)
        results[name] = row
        server.close()

    # How each reports a wrong password and an overloaded server.
    server = FakePrometheus(pki.server, lambda h: False)
    (tmp / "wrong").write_text("wrong\n")
    access = PrometheusAccess(
        url=server.url, username="crdscale", password_file=str(tmp / "wrong"), ca_file=str(pki.ca)
    )
    row = {}
    for client, attempt in {
        "crdscale": lambda: access.client().query("up"),
        "PrometheusConnect(kwargs)": lambda: PrometheusConnect(url=server.url, auth=("crdscale", "wrong")).custom_query(
            "up"
        ),
        "PrometheusConnect(session)": lambda: PrometheusConnect(url=server.url, session=access.session()).custom_query(
            "up"
        ),
    }.items():
        try:
            attempt()
            row[client] = "no error"
        except Exception as err:
            row[client] = _one_line(err)
    results["wrong password"] = row
    server.fail_with = 503
    row = {}
    for client, attempt in {
        "crdscale": lambda: access.client().query("up"),
        "PrometheusConnect(session)": lambda: PrometheusConnect(url=server.url, session=access.session()).custom_query(
            "up"
        ),
    }.items():
        server.requests = 0
        started = time.monotonic()
        try:
            attempt()
            row[client] = "no error"
        except Exception as err:
            row[client] = _one_line(err)
        row[client] += f" ({server.requests} requests, {time.monotonic() - started:.1f} s)"
    results["HTTP 503"] = row
    server.close()
    return results


WEB_CONFIG = """tls_server_config:
  cert_file: {cert}
  key_file: {key}
basic_auth_users:
  crdscale: {hash}
"""


def run_real(pki, tmp: Path) -> dict[str, str]:
    """Debian's prometheus behind basic auth and TLS (--web.config.file), queried for ``up``."""
    import socket

    import bcrypt
    from prometheus_api_client import PrometheusConnect

    from crdscale.collect.prometheus import PrometheusAccess

    binary = shutil.which("prometheus")
    if not binary:
        return {"prometheus": "not on PATH"}
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp / "web.yml").write_text(
        WEB_CONFIG.format(
            cert=pki.server[0], key=pki.server[1], hash=bcrypt.hashpw(b"hunter2", bcrypt.gensalt(rounds=4)).decode()
        )
    )
    (tmp / "prometheus.yml").write_text("global: {scrape_interval: 15s}\nscrape_configs: []\n")
    (tmp / "password").write_text("hunter2\n")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp / 'prometheus.yml'}",
            f"--web.config.file={tmp / 'web.yml'}",
            f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.path={tmp / 'tsdb'}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"https://127.0.0.1:{port}"
    access = PrometheusAccess(url=url, username="crdscale", password_file=str(tmp / "password"), ca_file=str(pki.ca))
    out: dict[str, str] = {}
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                out["version"] = access.client().buildinfo()["version"]
                break
            except Exception:
                if time.monotonic() > deadline or proc.poll() is not None:
                    return {"prometheus": "did not start"}
                time.sleep(0.5)
        for client, attempt in {
            "crdscale": lambda: access.client().query("vector(1)"),
            "PrometheusConnect(session)": lambda: PrometheusConnect(url=url, session=access.session()).custom_query(
                "vector(1)"
            ),
        }.items():
            try:
                result = attempt()
                out[client] = "ok" if result and result[0]["value"][1] == "1" else f"wrong result {result}"
            except Exception as err:
                out[client] = _one_line(err)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--real", action="store_true", help="also query Debian's prometheus (TLS + basic auth)")
    args = parser.parse_args(argv)
    import prometheus_api_client
    import urllib3

    warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)  # the insecure case is on purpose
    print(f"prometheus-api-client {prometheus_api_client.__version__}")
    with tempfile.TemporaryDirectory(prefix="prom-parity-") as tmp:
        pki = _make_pki(Path(tmp) / "pki")
        results = run(pki, Path(tmp))
        clients = ["crdscale", "PrometheusConnect(kwargs)", "PrometheusConnect(session)"]
        print("| case | " + " | ".join(clients) + " |")
        print("|---|" + "---|" * len(clients))
        for name, row in results.items():
            print(f"| {name} | " + " | ".join(row.get(c, "-").replace("|", "/") for c in clients) + " |")
        if args.real:
            (Path(tmp) / "real").mkdir()
            print("real prometheus (TLS + basic auth):", run_real(pki, Path(tmp) / "real"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
