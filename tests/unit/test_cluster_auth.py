"""Exec-plugin and token-file credentials refreshed on expiry and after a 401, as client-go does."""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from crdscale.cluster.auth import (
    AuthState,
    ExecAuthenticator,
    ExecPlugin,
    TokenFileAuthenticator,
    parse_exec_credential,
    run_plugin,
    send_authenticated,
)
from crdscale.cluster.clients import Cluster, Credentials, RequestsTransport
from crdscale.errors import ClusterError

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


class Clock:
    def __init__(self):
        self.now = T0

    def __call__(self):
        return self.now


class Plugin:
    """A fake exec plugin: hands out token-1, token-2, ... each valid ``lifetime`` from the clock."""

    def __init__(
        self,
        clock: Clock,
        lifetime: timedelta | None = timedelta(minutes=15),
        api_version: str = V1,
        same_token: bool = False,
    ):
        self.clock, self.lifetime, self.api_version, self.same_token = clock, lifetime, api_version, same_token
        self.calls: list[dict] = []
        self.lock = threading.Lock()

    def __call__(self, argv, env, interactive):
        with self.lock:
            self.calls.append(
                {
                    "argv": list(argv),
                    "exec_info": json.loads(env["KUBERNETES_EXEC_INFO"]),
                    "env": env,
                    "interactive": interactive,
                }
            )
            status = {"token": "token-1" if self.same_token else f"token-{len(self.calls)}"}
        if self.lifetime is not None:
            status["expirationTimestamp"] = (self.clock() + self.lifetime).strftime("%Y-%m-%dT%H:%M:%SZ")
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential", "status": status})


def _authenticator(plugin: Plugin, clock: Clock, **exec_config) -> ExecAuthenticator:
    config = {
        "apiVersion": V1,
        "command": "get-token",
        "args": ["--cluster", "x"],
        "interactiveMode": "Never",
        "env": [{"name": "PLUGIN_REGION", "value": "eu"}],
        **exec_config,
    }
    return ExecAuthenticator(
        ExecPlugin.from_kubeconfig(config, {"server": "https://k", "certificate-authority-data": "Q0E="}),
        runner=plugin,
        now=clock,
        stdin_is_terminal=lambda: False,
    )


def test_the_token_is_kept_until_it_expires_then_the_plugin_runs_again():
    clock = Clock()
    plugin = Plugin(clock)
    auth = _authenticator(plugin, clock)
    assert auth.current().headers == {"Authorization": "Bearer token-1"}
    clock.now += timedelta(minutes=14)
    assert auth.current().headers["Authorization"] == "Bearer token-1"
    clock.now += timedelta(minutes=2)  # past expirationTimestamp
    assert auth.current().headers["Authorization"] == "Bearer token-2"
    assert auth.calls == 2


def test_without_an_expiry_the_token_is_kept_until_a_401():
    clock = Clock()
    plugin = Plugin(clock, lifetime=None)
    auth = _authenticator(plugin, clock)
    first = auth.current()
    clock.now += timedelta(days=30)
    assert auth.current() is first and auth.calls == 1
    assert auth.rotate(first).headers["Authorization"] == "Bearer token-2"


def test_the_plugin_gets_its_environment_and_exec_info():
    clock = Clock()
    plugin = Plugin(clock)
    _authenticator(plugin, clock, provideClusterInfo=True).current()
    call = plugin.calls[0]
    assert call["argv"] == ["get-token", "--cluster", "x"]
    assert call["env"]["PLUGIN_REGION"] == "eu" and call["env"]["PATH"] == os.environ["PATH"]
    assert call["exec_info"] == {
        "apiVersion": V1,
        "kind": "ExecCredential",
        "spec": {"interactive": False, "cluster": {"server": "https://k", "certificate-authority-data": "Q0E="}},
    }
    assert call["interactive"] is False


class Response:
    def __init__(self, status_code):
        self.status_code = status_code
        self.closed = False

    def close(self):
        self.closed = True


def _server_accepting(*tokens):
    """A fake send: 200 for the tokens given, 401 for anything else; records what it was sent."""
    sent = []

    def send(state: AuthState):
        sent.append(state.headers.get("Authorization"))
        return Response(200 if state.headers.get("Authorization") in {f"Bearer {t}" for t in tokens} else 401)

    return send, sent


def test_a_401_runs_the_plugin_once_and_resends_once():
    clock = Clock()
    auth = _authenticator(Plugin(clock), clock)
    send, sent = _server_accepting("token-2")  # the server revoked token-1 before it expired
    assert send_authenticated(auth, send).status_code == 200
    assert sent == ["Bearer token-1", "Bearer token-2"] and auth.calls == 2
    assert send_authenticated(auth, send).status_code == 200 and auth.calls == 2  # kept


def test_a_second_401_is_returned_without_a_loop():
    clock = Clock()
    auth = _authenticator(Plugin(clock), clock)
    send, sent = _server_accepting()  # nothing is accepted
    assert send_authenticated(auth, send).status_code == 401
    assert sent == ["Bearer token-1", "Bearer token-2"] and auth.calls == 2


def test_a_plugin_that_returns_the_same_token_after_a_401_is_not_resent():
    clock = Clock()
    auth = _authenticator(Plugin(clock, same_token=True), clock)
    send, sent = _server_accepting()
    assert send_authenticated(auth, send).status_code == 401
    assert sent == ["Bearer token-1"] and auth.calls == 2


def test_concurrent_401s_with_the_same_stale_token_run_the_plugin_once():
    clock = Clock()
    auth = _authenticator(Plugin(clock), clock)
    stale = auth.current()
    barrier = threading.Barrier(8)
    results = []

    def worker():
        barrier.wait()
        results.append(auth.rotate(stale).headers["Authorization"])

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert auth.calls == 2 and set(results) == {"Bearer token-2"}


@pytest.mark.parametrize(
    "status,api_version,message",
    [
        ({}, V1, "didn't return a token or cert/key pair"),
        ({"clientCertificateData": "C"}, V1, "only certificate or key"),
        (
            {"token": "t"},
            V1BETA1,
            "configured to use API version client.authentication.k8s.io/v1, plugin returned version",
        ),
        ({"token": "t", "expirationTimestamp": "soon"}, V1, "bad expirationTimestamp"),
    ],
)
def test_bad_exec_credentials_are_one_line_errors(status, api_version, message):
    stdout = json.dumps({"apiVersion": api_version, "kind": "ExecCredential", "status": status})
    with pytest.raises(ClusterError, match=message) as err:
        parse_exec_credential(stdout, V1, "get-token")
    assert "\n" not in str(err.value)


def test_exec_client_certificates_become_private_files_kept_while_unchanged():
    pair = {"clientCertificateData": "-----CERT-----", "clientKeyData": "-----KEY-----"}

    def runner(argv, env, interactive):
        return json.dumps({"apiVersion": V1, "kind": "ExecCredential", "status": pair})

    auth = ExecAuthenticator(ExecPlugin(command="p", interactive_mode="Never"), runner=runner)
    first = auth.current()
    assert first.headers == {} and Path(first.cert[1]).read_text() == "-----KEY-----"
    assert stat.S_IMODE(os.stat(first.cert[1]).st_mode) == 0o600
    assert auth.rotate(first).cert == first.cert  # same pair, same files (and so the same connection pool)


def test_a_real_plugin_process_and_its_failures(tmp_path):
    script = tmp_path / "plugin.py"
    script.write_text(
        "import json, os, sys\n"
        "info = json.loads(os.environ['KUBERNETES_EXEC_INFO'])\n"
        "if sys.argv[1:] == ['fail']: sys.exit('login expired')\n"
        "print(json.dumps({'apiVersion': info['apiVersion'], 'kind': 'ExecCredential',"
        " 'status': {'token': 'real'}}))\n"
    )
    plugin = ExecPlugin(command=sys.executable, args=(str(script),), interactive_mode="Never")
    assert ExecAuthenticator(plugin).current().headers == {"Authorization": "Bearer real"}
    with pytest.raises(ClusterError, match="exited 1"):
        run_plugin([sys.executable, str(script), "fail"], dict(os.environ), False)
    missing = ExecPlugin(command="/nonexistent/aws", interactive_mode="Never", install_hint="install the AWS CLI")
    with pytest.raises(ClusterError, match=r"not found \(install the AWS CLI\)"):
        ExecAuthenticator(missing).current()


def test_interactive_mode_always_without_a_terminal_is_refused():
    auth = ExecAuthenticator(
        ExecPlugin(command="p", interactive_mode="Always"), runner=lambda *a: "", stdin_is_terminal=lambda: False
    )
    with pytest.raises(ClusterError, match="needs an interactive terminal"):
        auth.current()


def test_a_token_file_is_reread_every_minute_and_after_a_401(tmp_path):
    path = tmp_path / "token"
    path.write_text("one\n")
    now = [0.0]
    auth = TokenFileAuthenticator(path, clock=lambda: now[0])
    first = auth.current()
    path.write_text("two")
    assert auth.current() == first
    assert auth.rotate(first).headers["Authorization"] == "Bearer two"
    path.write_text("three")
    now[0] = 61.0
    assert auth.current().headers["Authorization"] == "Bearer three"


class _RotatingServer(BaseHTTPRequestHandler):
    """An API server that accepts only ``accepted`` as bearer token."""

    accepted = "Bearer token-1"
    seen: list[str] = []

    def do_GET(self):
        got = self.headers.get("Authorization", "")
        type(self).seen.append(got)
        ok = got == type(self).accepted
        body = json.dumps({"gitVersion": "v1.37.1"} if ok else {"kind": "Status", "message": "Unauthorized"}).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_requests_transport_refreshes_on_expiry_and_after_a_401():
    clock = Clock()
    plugin = Plugin(clock)
    credentials = Credentials(authenticator=_authenticator(plugin, clock))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RotatingServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _RotatingServer.seen = []
    try:
        cluster = Cluster(f"http://127.0.0.1:{server.server_address[1]}", RequestsTransport(credentials), credentials)
        assert cluster.server_version() == "v1.37.1"
        # Expired: the next request runs the plugin first, no 401 needed.
        clock.now += timedelta(minutes=16)
        _RotatingServer.accepted = "Bearer token-2"
        assert cluster.server_version() == "v1.37.1"
        # Revoked early: 401, one plugin run, one resend.
        _RotatingServer.accepted = "Bearer token-3"
        assert cluster.server_version() == "v1.37.1"
        assert _RotatingServer.seen == ["Bearer token-1", "Bearer token-2", "Bearer token-2", "Bearer token-3"]
        assert len(plugin.calls) == 3
        # A fresh probe session (discovery, LIST probes) sends the current token too.
        assert credentials.session().get(cluster.url("/version")).status_code == 200
        cluster.close()
    finally:
        server.shutdown()
        _RotatingServer.accepted = "Bearer token-1"


def test_the_raw_watch_loop_rotates_credentials_after_a_401():
    """The Python watcher (raw HTTP/1.1 streams) sends the current token per connection and rotates it after a 401."""
    import time
    from urllib.parse import parse_qs, urlsplit

    from crdscale.crds.generate import GeneratorParams, generate_crds
    from crdscale.crds.install import resource_ref
    from crdscale.crds.serve import ResourceServer

    watch_auth: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            query = {k: v[0] for k, v in parse_qs(urlsplit(self.path).query).items()}
            if query.get("watch") != "1":  # the LIST: any token
                body = json.dumps({"kind": "List", "metadata": {"resourceVersion": "10"}, "items": []}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            watch_auth.append(self.headers.get("Authorization", ""))
            if self.headers.get("Authorization") != "Bearer token-2":  # token-1 was revoked for watches
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.write(b"0\r\n\r\n")

    clock = Clock()
    plugin = Plugin(clock)
    credentials = Credentials(authenticator=_authenticator(plugin, clock))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cluster = Cluster(f"http://127.0.0.1:{server.server_address[1]}", RequestsTransport(credentials), credentials)
        crd = generate_crds(GeneratorParams(crd_count=1, group_count=1, property_count=3))[0]
        with ResourceServer(cluster, "watch", go_client=False) as rs:
            rs.serve(1, [resource_ref(crd)])
            deadline = time.monotonic() + 10
            while "Bearer token-2" not in watch_auth and time.monotonic() < deadline:
                time.sleep(0.05)
    finally:
        server.shutdown()
    assert watch_auth[:2] == ["Bearer token-1", "Bearer token-2"]
    assert len(plugin.calls) == 2
