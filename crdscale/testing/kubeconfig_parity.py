"""The kubeconfig/auth cases: scenarios any kubeconfig loader can be run through.

Each scenario is one behaviour crdscale's kubeconfig and auth code must have (a ``$KUBECONFIG``
list merged as kubectl merges it, paths relative to the defining file, exec plugins renewed at
expiry and after a 401, token files re-read, private key files), played over loopback HTTP(S)
servers with real TLS, real exec-plugin processes and real token files, plus three kubeconfig
fields crdscale does not support (``tls-server-name``, ``proxy-url``, impersonation). A scenario
gives ``ok`` or the exact way it fails.

Two clients can be run through them: crdscale's own (``CrdscaleClient``; the parametrized test
tests/unit/test_kubeconfig_parity.py holds it to every case) and the official Python client's
``kubernetes.config`` (``KubernetesClient``; benchmarks/kubernetes_parity.py prints its column
where ``kubernetes`` is installed, which docs/dependencies.md records). Issue 22 asked whether
the second could replace the first.

Expiry is tested with a moved clock, not by waiting: crdscale's authenticators take a clock
(``ExecAuthenticator.now``, ``TokenFileAuthenticator.clock``); kubernetes' loader reads
``datetime.datetime.now`` in ``kubernetes.config.kube_config``, which the adapter shifts.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import logging
import os
import ssl
import stat
import sys
import tempfile
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from crdscale.cluster.clients import read_credentials
from crdscale.cluster.kubeconfig import KubeconfigFiles

V1 = "client.authentication.k8s.io/v1"
# A whole /version answer: kubernetes' VersionApi validates every field.
VERSION = {
    "major": "1",
    "minor": "37",
    "gitVersion": "v1.37.1",
    "gitCommit": "0" * 40,
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

# --------------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class Pki:
    """PEM files of a throw-away CA, two serving certificates and a client certificate."""

    ca: Path
    server: tuple[Path, Path]  # for 127.0.0.1 and localhost
    named_server: tuple[Path, Path]  # for apiserver.internal only (tls-server-name)
    client: tuple[Path, Path]

    def pem(self, path: Path) -> str:
        return path.read_text()


def _issue(ca_key, ca_name, subject: str, sans: list, usage, directory: Path, stem: str) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    crt, pem_key = directory / f"{stem}.crt", directory / f"{stem}.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem_key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    pem_key.chmod(0o600)
    return crt, pem_key


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "parity-ca")])
    now = dt.datetime.now(dt.timezone.utc)
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    (directory / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    local = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    return Pki(
        ca=directory / "ca.crt",
        server=_issue(ca_key, ca_name, "server", local, ExtendedKeyUsageOID.SERVER_AUTH, directory, "server"),
        named_server=_issue(
            ca_key,
            ca_name,
            "apiserver.internal",
            [x509.DNSName("apiserver.internal")],
            ExtendedKeyUsageOID.SERVER_AUTH,
            directory,
            "named",
        ),
        client=_issue(ca_key, ca_name, "parity-user", [], ExtendedKeyUsageOID.CLIENT_AUTH, directory, "client"),
    )


# --------------------------------------------------------------------------- a fake API server


class FakeServer:
    """A loopback API server answering ``GET /version``: 200 when ``accept(headers, client_cert)``
    holds, else 401. Records each request's headers. HTTPS when ``cert`` is given; requires a
    client certificate signed by ``client_ca`` when that is given."""

    def __init__(
        self,
        accept: Callable[[dict[str, str], bool], bool] = lambda h, c: True,
        *,
        cert: tuple[Path, Path] | None = None,
        client_ca: Path | None = None,
    ):
        self.accept = accept
        self.seen: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                headers = {k.lower(): v for k, v in self.headers.items()}
                headers["request-line"] = self.requestline
                outer.seen.append(headers)
                has_cert = isinstance(self.connection, ssl.SSLSocket) and bool(self.connection.getpeercert())
                ok = outer.accept(headers, has_cert)
                body = json.dumps(
                    VERSION if ok else {"kind": "Status", "code": 401, "message": "Unauthorized"}
                ).encode()
                self.send_response(200 if ok else 401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.scheme = "http"
        if cert:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(cert[0]), str(cert[1]))
            if client_ca:
                context.verify_mode = ssl.CERT_REQUIRED
                context.load_verify_locations(str(client_ca))
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
            self.scheme = "https"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.httpd.server_address[1]}"

    def authorizations(self) -> list[str]:
        return [h.get("authorization", "") for h in self.seen]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def bearer_in(*tokens: str) -> Callable[[dict[str, str], bool], bool]:
    return lambda headers, _cert: headers.get("authorization") in {f"Bearer {t}" for t in tokens}


# --------------------------------------------------------------------------- the two clients


class ClientUnderTest:
    """One kubeconfig loaded by one library: ``get()`` sends ``GET /version`` and returns the
    HTTP status (0 when the request could not be sent); ``advance(s)`` moves its clock."""

    def get(self) -> int: ...

    def advance(self, seconds: float) -> None: ...

    def key_file(self) -> str | None: ...

    def server_and_authorization(self) -> tuple[str, str]: ...


class CrdscaleClient(ClientUnderTest):
    def __init__(self, kubeconfig: str, context: str | None):
        self.server, self.credentials = read_credentials(KubeconfigFiles.parse(kubeconfig), context)
        self.session = self.credentials.session()
        self.offset = 0.0
        auth = self.credentials.authenticator
        if auth is not None and hasattr(auth, "now"):  # ExecAuthenticator: a UTC datetime clock
            real_now = auth.now
            auth.now = lambda: real_now() + dt.timedelta(seconds=self.offset)
        if auth is not None and hasattr(auth, "clock"):  # TokenFileAuthenticator: a monotonic clock
            real_clock = auth.clock
            auth.clock = lambda: real_clock() + self.offset

    def get(self) -> int:
        return self.session.get(self.server.rstrip("/") + "/version", timeout=10).status_code

    def advance(self, seconds: float) -> None:
        self.offset += seconds

    def key_file(self) -> str | None:
        cert = self.credentials.current_auth().cert
        return cert[1] if cert else None

    def server_and_authorization(self) -> tuple[str, str]:
        return self.server, self.credentials.current_auth().headers.get("Authorization", "")


class KubernetesClient(ClientUnderTest):
    _offset = 0.0
    _patched = False

    def __init__(self, kubeconfig: str, context: str | None):
        from kubernetes import client, config  # lazy: kubernetes is optional (kubernetes_available)

        self._patch_clock()
        type(self)._offset = 0.0
        self.configuration = client.Configuration()
        config.load_kube_config(
            config_file=kubeconfig, context=context, client_configuration=self.configuration, persist_config=False
        )
        self.api = client.ApiClient(self.configuration)
        self.version = client.VersionApi(self.api)

    @classmethod
    def _patch_clock(cls) -> None:
        """Shift the clock kubernetes.config.kube_config reads (``datetime.datetime.now``) by ``_offset``."""
        if cls._patched:
            return

        from kubernetes.config import kube_config  # lazy: kubernetes is optional

        class ShiftedDatetime(dt.datetime):
            @classmethod
            def now(cls_, tz=None):
                return dt.datetime.now(tz) + dt.timedelta(seconds=cls._offset)

        kube_config.datetime = types.SimpleNamespace(**{**vars(dt), "datetime": ShiftedDatetime})
        cls._patched = True

    def get(self) -> int:
        from kubernetes.client.exceptions import ApiException  # lazy: kubernetes is optional

        try:
            self.version.get_code()
            return 200
        except ApiException as err:
            return int(err.status or 0)

    def advance(self, seconds: float) -> None:
        type(self)._offset += seconds

    def key_file(self) -> str | None:
        return self.configuration.key_file

    def server_and_authorization(self) -> tuple[str, str]:
        # load_kube_config sets the api_key; get_api_key_with_prefix runs the refresh hook as a request would.
        return self.configuration.host, self.configuration.get_api_key_with_prefix("BearerToken") or ""


# --------------------------------------------------------------------------- scenarios


def write_kubeconfig(path: Path, *, clusters=(), users=(), contexts=(), current: str | None = None) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": c} for n, c in clusters],
        "users": [{"name": n, "user": u} for n, u in users],
        "contexts": [{"name": n, "context": c} for n, c in contexts],
    }
    if current is not None:
        doc["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def join(*paths: Path) -> str:
    return os.pathsep.join(str(p) for p in paths)


PLUGIN = """#!{python} -S
# A stand-in for `aws eks get-token`: token-<run number>, valid LIFETIME_S seconds from now, or
# a client certificate (MODE=cert), or a failure (MODE=fail). Records each run and its exec info.
import datetime, json, os, sys
state = os.environ["STATE_DIR"]
with open(os.path.join(state, "runs"), "a") as f:
    f.write(os.environ.get("KUBERNETES_EXEC_INFO", "") + "\\n")
runs = len(open(os.path.join(state, "runs")).read().splitlines())
if os.environ.get("MODE") == "fail":
    sys.exit("login expired")
status = {{}}
if os.environ.get("MODE") == "cert":
    status["clientCertificateData"] = open(os.environ["CERT"]).read()
    status["clientKeyData"] = open(os.environ["KEY"]).read()
else:
    status["token"] = "token-%d" % runs
if os.environ.get("LIFETIME_S"):
    expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=float(os.environ["LIFETIME_S"]))
    status["expirationTimestamp"] = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
print(json.dumps({{"apiVersion": "{api}", "kind": "ExecCredential", "status": status}}))
"""


class Fail(Exception):
    """A scenario's expectation did not hold; the message is the exact failing case."""


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise Fail(message)


@dataclass
class Workspace:
    root: Path
    pki: Pki
    servers: list[FakeServer] = field(default_factory=list)

    def server(self, *args, **kwargs) -> FakeServer:
        server = FakeServer(*args, **kwargs)
        self.servers.append(server)
        return server

    def plugin(self, name: str, **env: str) -> tuple[Path, dict[str, Any], Path]:
        """``(plugin file, its user.exec stanza, its state directory)``; the stanza's command is absolute."""
        state = self.root / name / "state"
        state.mkdir(parents=True)
        script = self.root / name / "bin" / "get-token"
        script.parent.mkdir(parents=True)
        script.write_text(PLUGIN.format(python=sys.executable, api=V1))
        script.chmod(0o755)
        stanza = {
            "apiVersion": V1,
            "command": str(script),
            "interactiveMode": "Never",
            "env": [{"name": "STATE_DIR", "value": str(state)}, *({"name": k, "value": v} for k, v in env.items())],
        }
        return script, stanza, state

    @staticmethod
    def runs(state: Path) -> int:
        path = state / "runs"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def single(self, name: str, cluster: dict, user: dict) -> str:
        return str(
            write_kubeconfig(
                self.root / name / "config",
                clusters=[("c", cluster)],
                users=[("u", user)],
                contexts=[("ctx", {"cluster": "c", "user": "u"})],
                current="ctx",
            )
        )


Connect = Callable[[str, "str | None"], ClientUnderTest]
SCENARIOS: list[tuple[str, str, Callable[[Workspace, Connect], None]]] = []


def scenario(name: str, what: str):
    def register(fn):
        SCENARIOS.append((name, what, fn))
        return fn

    return register


# The merge cases of tests/unit/test_kubeconfig.py (MERGE_CASES): files as (dir, clusters, users,
# contexts, current-context), the context asked for, and the (server, token) kubectl would use.
A = (
    "a",
    [("c1", {"server": "https://a1"}), ("shared", {"server": "https://a-shared"})],
    [("u1", {"token": "ta"}), ("shared", {"token": "a-shared"})],
    [("ctx-a", {"cluster": "shared", "user": "shared"})],
    None,
)
B = (
    "b",
    [("shared", {"server": "https://b-shared"}), ("c2", {"server": "https://b2"})],
    [("shared", {"token": "b-shared"}), ("u2", {"token": "tb"})],
    [("ctx-a", {"cluster": "c2", "user": "u2"}), ("ctx-b", {"cluster": "c2", "user": "u2"})],
    "ctx-b",
)
C = ("c", [], [], [("ctx-c", {"cluster": "c1", "user": "u1"})], "ctx-c")
MERGE_CASES = {
    "first-name-wins": ([A, B], "ctx-a", ("https://a-shared", "a-shared")),
    "current-context-from-first-setting-it": ([A, B], None, ("https://b2", "tb")),
    "later-current-context-ignored": ([A, B, C], None, ("https://b2", "tb")),
    "entries-combine-across-files": ([C, A], None, ("https://a1", "ta")),
    "order-decides": ([B, A], "ctx-a", ("https://b2", "tb")),
}


def _merge_scenario(case: str):
    specs, context, (server, token) = MERGE_CASES[case]

    def run(ws: Workspace, connect: Connect) -> None:
        paths = [
            write_kubeconfig(ws.root / d / "config", clusters=cl, users=us, contexts=cx, current=cur)
            for d, cl, us, cx, cur in specs
        ]
        got = connect(join(*paths), context).server_and_authorization()
        expect(
            got == (server, f"Bearer {token}"),
            f"files {'+'.join(s[0] for s in specs)}, context {context or '(current)'}: "
            f"got {got[0]} with {got[1]!r}, kubectl uses {server} with 'Bearer {token}'",
        )

    return run


for _case in MERGE_CASES:
    scenario(f"merge: {_case}", "a $KUBECONFIG list merged as kubectl merges it")(_merge_scenario(_case))


@scenario("merge: missing files skipped", "a missing file in a list is skipped")
def _missing_skipped(ws: Workspace, connect: Connect) -> None:
    server = ws.server(bearer_in("t"))
    real = ws.single("real", {"server": server.url}, {"token": "t"})
    expect(connect(join(ws.root / "missing", Path(real)), None).get() == 200, "request with [missing, real] failed")


@scenario("merge: explicit missing file refused", "one named file that does not exist is an error")
def _explicit_missing(ws: Workspace, connect: Connect) -> None:
    try:
        connect(str(ws.root / "missing"), None)
    except Exception:
        return
    raise Fail("loading a kubeconfig that does not exist raised nothing")


@scenario(
    "paths: relative to the defining file",
    "CA relative to the cluster's file, client certificate relative to the user's file (mTLS)",
)
def _relative_paths(ws: Workspace, connect: Connect) -> None:
    server = ws.server(lambda h, cert: cert, cert=ws.pki.server, client_ca=ws.pki.ca)
    clusters = ws.root / "clusters"
    users = ws.root / "users" / "sub"
    (users / "pki").mkdir(parents=True)
    clusters.mkdir(parents=True)
    (clusters / "ca.crt").write_bytes(ws.pki.ca.read_bytes())
    (users / "pki" / "u.crt").write_bytes(ws.pki.client[0].read_bytes())
    (users / "pki" / "u.key").write_bytes(ws.pki.client[1].read_bytes())
    first = write_kubeconfig(
        clusters / "config", clusters=[("c", {"server": server.url, "certificate-authority": "ca.crt"})]
    )
    second = write_kubeconfig(
        users / "config",
        users=[("u", {"client-certificate": "pki/u.crt", "client-key": "pki/u.key"})],
        contexts=[("ctx", {"cluster": "c", "user": "u"})],
        current="ctx",
    )
    try:
        status = connect(join(first, second), None).get()
    except Exception as err:
        raise Fail(f"client-certificate 'pki/u.crt' in {second.parent.name}/config: {_one_line(err)}") from None
    expect(status == 200, f"HTTP {status}")


@scenario("exec: relative command", "an exec command './bin/get-token' resolved against the user's file")
def _exec_relative(ws: Workspace, connect: Connect) -> None:
    server = ws.server(bearer_in("token-1"))
    _script, stanza, state = ws.plugin("users")
    first = write_kubeconfig(ws.root / "clusters" / "config", clusters=[("c", {"server": server.url})])
    second = write_kubeconfig(
        ws.root / "users" / "config",
        users=[("u", {"exec": {**stanza, "command": "./bin/get-token"}})],
        contexts=[("ctx", {"cluster": "c", "user": "u"})],
        current="ctx",
    )
    status = connect(join(first, second), None).get()
    expect(
        status == 200 and ws.runs(state) == 1,
        f"cluster in clusters/config, exec user in users/config: HTTP {status}, plugin ran {ws.runs(state)} times "
        f"(sent {server.authorizations()})",
    )


@scenario("exec: kept until expiry", "a 15-minute token: one plugin run for 5 requests")
def _exec_kept(ws: Workspace, connect: Connect) -> None:
    server = ws.server(bearer_in("token-1"))
    _s, stanza, state = ws.plugin("p", LIFETIME_S="900")
    client = connect(ws.single("k", {"server": server.url}, {"exec": stanza}), None)
    statuses = [client.get() for _ in range(5)]
    expect(statuses == [200] * 5 and ws.runs(state) == 1, f"HTTP {statuses}, {ws.runs(state)} plugin runs")


@scenario("exec: a 4-minute token is kept", "a token valid 4 minutes: one plugin run for 5 requests, as client-go")
def _exec_short(ws: Workspace, connect: Connect) -> None:
    server = ws.server(bearer_in("token-1"))
    _s, stanza, state = ws.plugin("p", LIFETIME_S="240")
    client = connect(ws.single("k", {"server": server.url}, {"exec": stanza}), None)
    statuses = [client.get() for _ in range(5)]
    expect(
        ws.runs(state) == 1,
        f"HTTP {statuses}, {ws.runs(state)} plugin runs for 5 requests (sent {sorted(set(server.authorizations()))})",
    )


@scenario("exec: run again at expiry", "16 minutes later the 15-minute token is renewed before the request")
def _exec_expiry(ws: Workspace, connect: Connect) -> None:
    server = ws.server(bearer_in("token-1", "token-2"))
    _s, stanza, state = ws.plugin("p", LIFETIME_S="900")
    client = connect(ws.single("k", {"server": server.url}, {"exec": stanza}), None)
    client.get()
    client.advance(16 * 60)
    status = client.get()
    expect(
        status == 200 and server.authorizations()[-1] == "Bearer token-2",
        f"after the expiry: HTTP {status}, sent {server.authorizations()}, {ws.runs(state)} plugin runs",
    )


@scenario("exec: 401 runs it again", "a token revoked before its expiry: 401, one plugin run, the request resent")
def _exec_401(ws: Workspace, connect: Connect) -> None:
    server = ws.server(bearer_in("token-2"))  # token-1 was revoked
    _s, stanza, state = ws.plugin("p", LIFETIME_S="900")
    client = connect(ws.single("k", {"server": server.url}, {"exec": stanza}), None)
    status = client.get()
    expect(
        status == 200 and ws.runs(state) == 2,
        f"first token refused: HTTP {status}, sent {server.authorizations()}, {ws.runs(state)} plugin runs",
    )


@scenario("exec: no loop on a second 401", "a server refusing every token: one resend, then the 401")
def _exec_no_loop(ws: Workspace, connect: Connect) -> None:
    server = ws.server(bearer_in())
    _s, stanza, state = ws.plugin("p", LIFETIME_S="900")
    client = connect(ws.single("k", {"server": server.url}, {"exec": stanza}), None)
    status = client.get()
    expect(
        status == 401 and ws.runs(state) == 2 and len(server.seen) == 2,
        f"HTTP {status}, {len(server.seen)} requests sent, {ws.runs(state)} plugin runs (want 401, 2, 2)",
    )


@scenario("exec: a failing plugin is an error", "a plugin exiting 1 stops the request with an error")
def _exec_fails(ws: Workspace, connect: Connect) -> None:
    server = ws.server()
    _s, stanza, state = ws.plugin("p", MODE="fail")
    try:
        status = connect(ws.single("k", {"server": server.url}, {"exec": stanza}), None).get()
    except Exception:
        status = None
    expect(
        not server.seen,
        f"plugin exited 1; the request was sent anyway with {server.authorizations()} -> HTTP {status}",
    )


@scenario("exec: cluster info", "provideClusterInfo: $KUBERNETES_EXEC_INFO carries spec.cluster.server")
def _exec_info(ws: Workspace, connect: Connect) -> None:
    server = ws.server()
    _s, stanza, state = ws.plugin("p")
    connect(ws.single("k", {"server": server.url}, {"exec": {**stanza, "provideClusterInfo": True}}), None).get()
    info = json.loads((state / "runs").read_text().splitlines()[0])
    expect(
        info.get("spec", {}).get("cluster", {}).get("server") == server.url
        and info.get("spec", {}).get("interactive") is False,
        f"KUBERNETES_EXEC_INFO was {info}",
    )


@scenario("exec: client certificate", "a plugin answering clientCertificateData/clientKeyData (mTLS)")
def _exec_cert(ws: Workspace, connect: Connect) -> None:
    server = ws.server(lambda h, cert: cert, cert=ws.pki.server, client_ca=ws.pki.ca)
    _s, stanza, state = ws.plugin("p", MODE="cert", CERT=str(ws.pki.client[0]), KEY=str(ws.pki.client[1]))
    cluster = {"server": server.url, "certificate-authority": str(ws.pki.ca)}
    try:
        status = connect(ws.single("k", cluster, {"exec": stanza}), None).get()
    except Exception as err:
        raise Fail(_one_line(err)) from None
    expect(status == 200, f"HTTP {status}")


@scenario("token file: read", "user.tokenFile (ending in a newline, as `echo` writes it) is sent as a bearer token")
def _token_file(ws: Workspace, connect: Connect) -> None:
    server = ws.server(bearer_in("one"))
    (ws.root / "token").write_text("one\n")
    status = connect(ws.single("k", {"server": server.url}, {"tokenFile": str(ws.root / "token")}), None).get()
    expect(status == 200, f"HTTP {status}, sent {server.authorizations()}")


@scenario("token file: re-read after a 401", "the file was rewritten and the old token revoked")
def _token_file_401(ws: Workspace, connect: Connect) -> None:
    server = ws.server(bearer_in("one"))
    token = ws.root / "token"
    token.write_text("one")  # no newline: this case is about re-reading
    client = connect(ws.single("k", {"server": server.url}, {"tokenFile": str(token)}), None)
    client.get()
    token.write_text("two")
    server.accept = bearer_in("two")
    status = client.get()
    expect(status == 200, f"after rewriting the file: HTTP {status}, sent {server.authorizations()}")


@scenario("token file: re-read every minute", "the file was rewritten; 61 s later the new token is sent")
def _token_file_minute(ws: Workspace, connect: Connect) -> None:
    server = ws.server()
    token = ws.root / "token"
    token.write_text("one")  # no newline: this case is about re-reading
    client = connect(ws.single("k", {"server": server.url}, {"tokenFile": str(token)}), None)
    client.get()
    token.write_text("two")
    client.advance(61)
    client.get()
    expect(
        server.authorizations()[-1] == "Bearer two", f"61 s after rewriting the file: sent {server.authorizations()}"
    )


@scenario("certs: *-data fields", "certificate-authority-data, client-certificate-data, client-key-data (mTLS)")
def _cert_data(ws: Workspace, connect: Connect) -> None:
    server = ws.server(lambda h, cert: cert, cert=ws.pki.server, client_ca=ws.pki.ca)

    def b64(path: Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()

    client = connect(
        ws.single(
            "k",
            {"server": server.url, "certificate-authority-data": b64(ws.pki.ca)},
            {"client-certificate-data": b64(ws.pki.client[0]), "client-key-data": b64(ws.pki.client[1])},
        ),
        None,
    )
    status = client.get()
    expect(status == 200, f"HTTP {status}")


@scenario("certs: key written privately", "a *-data key lands in a 0600 file inside a 0700 directory")
def _key_private(ws: Workspace, connect: Connect) -> None:
    key = base64.b64encode(ws.pki.client[1].read_bytes() + b"\n# parity-private\n").decode()
    client = connect(
        ws.single(
            "k",
            {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True},
            {
                "client-certificate-data": base64.b64encode(ws.pki.client[0].read_bytes()).decode(),
                "client-key-data": key,
            },
        ),
        None,
    )
    path = client.key_file()
    expect(path is not None, "no key file")
    mode, parent = stat.S_IMODE(os.stat(path).st_mode), stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode)
    expect(
        mode == 0o600 and parent & 0o077 == 0,
        f"key at {os.path.dirname(path)}/ (directory mode {parent:o}), file mode {mode:o}",
    )


@scenario("new: tls-server-name", "the server's certificate names apiserver.internal; the URL is 127.0.0.1")
def _tls_server_name(ws: Workspace, connect: Connect) -> None:
    server = ws.server(bearer_in("t"), cert=ws.pki.named_server)
    cluster = {"server": server.url, "certificate-authority": str(ws.pki.ca), "tls-server-name": "apiserver.internal"}
    try:
        status = connect(ws.single("k", cluster, {"token": "t"}), None).get()
    except Exception as err:
        raise Fail(_one_line(err)) from None
    expect(status == 200, f"HTTP {status}")


@scenario("new: proxy-url", "cluster.proxy-url names an HTTP proxy; the server's name resolves nowhere")
def _proxy_url(ws: Workspace, connect: Connect) -> None:
    proxy = ws.server(bearer_in("t"))  # answers as if it had forwarded the request
    cluster = {"server": "http://apiserver.invalid", "proxy-url": proxy.url}
    try:
        status = connect(ws.single("k", cluster, {"token": "t"}), None).get()
    except Exception as err:
        raise Fail(_one_line(err)) from None
    expect(status == 200 and bool(proxy.seen), f"HTTP {status}, proxy saw {len(proxy.seen)} requests")


@scenario("new: impersonation", "user.as / as-groups become Impersonate-User / Impersonate-Group")
def _impersonation(ws: Workspace, connect: Connect) -> None:
    server = ws.server()
    connect(ws.single("k", {"server": server.url}, {"token": "t", "as": "alice", "as-groups": ["dev"]}), None).get()
    got = server.seen[-1]
    expect(
        got.get("impersonate-user") == "alice" and got.get("impersonate-group") == "dev",
        f"headers sent: {sorted(k for k in got if k != 'request-line')}",
    )


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text[-240:]}"


# --------------------------------------------------------------------------- running

# Each client under test by name: how it loads a kubeconfig (``Connect``).
CLIENTS: dict[str, Connect] = {"crdscale": CrdscaleClient, "kubernetes": KubernetesClient}


def scenario_names() -> list[str]:
    """Every scenario's name, in order."""
    return [name for name, _what, _fn in SCENARIOS]


def run_scenario(name: str, connect: Connect, *, root: Path, pki: Pki) -> str:
    """``"ok"``, ``"FAIL: ..."`` (an expectation did not hold) or ``"ERROR: ..."`` (the library
    raised where an answer was expected) for scenario ``name`` and one client; its files go
    under ``root`` (created), its servers are closed before returning."""
    fn = next(fn for n, _what, fn in SCENARIOS if n == name)
    ws = Workspace(root, pki)
    ws.root.mkdir(parents=True)
    try:
        fn(ws, connect)
        return "ok"
    except Fail as err:
        return f"FAIL: {err}"
    except Exception as err:
        return f"ERROR: {_one_line(err)}"
    finally:
        for server in ws.servers:
            server.close()


def run_all(connect: Connect, *, root: Path, pki: Pki) -> dict[str, str]:
    """``{scenario: "ok" | "FAIL: ..." | "ERROR: ..."}`` for one client."""
    return {
        name: run_scenario(name, connect, root=root / f"{i:02d}", pki=pki) for i, name in enumerate(scenario_names())
    }


def quiet_kubernetes_logs() -> None:
    """kubernetes logs exec failures on the root logger: keep a report's table readable."""
    logging.getLogger("kubernetes").setLevel(logging.CRITICAL)
    logging.getLogger().setLevel(logging.CRITICAL)


def kubernetes_available() -> str | None:
    """kubernetes' version when it is importable, else ``None``."""
    try:
        import kubernetes  # lazy: optional; its absence is a None here
    except ImportError:
        return None
    return kubernetes.__version__


def measure(clients: list[str]) -> dict[str, Any]:
    """``{"scenarios": {name: what}, "kubernetes_version": ..., "results": {client: {name: outcome}}}``
    for each client named (``CLIENTS``); kubernetes' only where it is importable."""
    out: dict[str, Any] = {"scenarios": {name: what for name, what, _ in SCENARIOS}, "results": {}}
    out["kubernetes_version"] = kubernetes_available()
    with tempfile.TemporaryDirectory(prefix="k8s-parity-") as tmp:
        root = Path(tmp)
        pki = make_pki(root / "pki")
        for client in clients:
            if client != "kubernetes" or out["kubernetes_version"]:
                out["results"][client] = run_all(CLIENTS[client], root=root / client, pki=pki)
    return out
