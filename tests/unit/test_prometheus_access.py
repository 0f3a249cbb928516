"""A user's Prometheus: credentials from files, TLS choices, one-line errors, queries through the session seam."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
import requests

from crdscale.cli.main import main
from crdscale.collect import metrics
from crdscale.collect.prometheus import PASSWORD_ENV, TOKEN_ENV, PrometheusAccess, PrometheusClient
from crdscale.collect.sources import RemotePrometheus
from crdscale.errors import ClusterError, UsageError
from crdscale.scenario.config import load_scenario, parse_scenario

URL = "https://prom.example:9090"
T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def secrets(tmp_path, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    (tmp_path / "token").write_text("s3cret-token\n")
    (tmp_path / "password").write_text("s3cret-password\n")
    # A real certificate: the check reads the CA file as the first scrape would.
    (tmp_path / "ca.crt").write_bytes(_CA_PEM)
    return tmp_path


def _self_signed_pem() -> bytes:
    import tempfile
    from pathlib import Path

    from crdscale.cluster.pki import create_credentials

    with tempfile.TemporaryDirectory() as tmp:
        return create_credentials(Path(tmp) / "pki").ca_cert.read_bytes()


_CA_PEM = _self_signed_pem()


def test_a_bearer_token_file_and_a_ca_file(secrets):
    access = PrometheusAccess.from_target(
        {
            "prometheus_url": URL,
            "prometheus_bearer_token_file": str(secrets / "token"),
            "prometheus_ca_file": str(secrets / "ca.crt"),
        }
    )
    session = access.session()
    assert session.headers["Authorization"] == "Bearer s3cret-token"
    assert session.auth is None and session.verify == str(secrets / "ca.crt")


def test_basic_auth_from_a_file_or_the_environment(secrets, monkeypatch):
    target = {
        "prometheus_url": URL,
        "prometheus_username": "crdscale",
        "prometheus_password_file": str(secrets / "password"),
    }
    session = PrometheusAccess.from_target(target).session()
    assert session.auth == ("crdscale", "s3cret-password") and "Authorization" not in session.headers
    assert session.verify is True
    monkeypatch.setenv(PASSWORD_ENV, "from-env")
    session = PrometheusAccess.from_target(
        {"prometheus_url": URL, "prometheus_username": "crdscale", "prometheus_insecure_skip_tls_verify": True}
    ).session()
    assert session.auth == ("crdscale", "from-env") and session.verify is False


def test_a_token_from_the_environment(secrets, monkeypatch):
    monkeypatch.setenv(TOKEN_ENV, "env-token")
    access = PrometheusAccess.from_target({"prometheus_url": URL})
    assert access.session().headers["Authorization"] == "Bearer env-token"
    assert access.describe()["prometheus_token_from"] == f"${TOKEN_ENV}"


def test_the_manifest_description_names_files_never_secrets(secrets, monkeypatch):
    for target in (
        {"prometheus_url": URL, "prometheus_bearer_token_file": str(secrets / "token")},
        {
            "prometheus_url": URL,
            "prometheus_username": "u",
            "prometheus_password_file": str(secrets / "password"),
            "prometheus_ca_file": str(secrets / "ca.crt"),
        },
    ):
        prom = RemotePrometheus(PrometheusAccess.from_target(target))
        text = json.dumps(prom.describe())
        assert "s3cret" not in text and str(secrets) in text


@pytest.mark.parametrize(
    "target,message",
    [
        ({"prometheus_bearer_token_file": "{d}/missing"}, "bearer token file not found: .*/missing"),
        ({"prometheus_username": "u", "prometheus_password_file": "{d}/missing"}, "password file not found"),
        ({"prometheus_username": "u"}, f"needs --prometheus-password-file or \\${PASSWORD_ENV}"),
        ({"prometheus_password_file": "{d}/password"}, "needs --prometheus-username"),
        (
            {
                "prometheus_username": "u",
                "prometheus_password_file": "{d}/password",
                "prometheus_bearer_token_file": "{d}/token",
            },
            "not both",
        ),
        ({"prometheus_ca_file": "{d}/ca.crt", "prometheus_insecure_skip_tls_verify": True}, "not both"),
        ({"prometheus_url": "https://u:pw@prom.example"}, "no credentials in the prometheus URL"),
        ({"prometheus_url": "prom.example:9090"}, "must look like https://HOST:PORT"),
        ({"prometheus_url": None, "prometheus_ca_file": "{d}/ca.crt"}, "need target.prometheus_url"),
    ],
)
def test_bad_prometheus_settings_are_one_line_usage_errors(secrets, target, message):
    target = {"prometheus_url": URL, **{k: v.format(d=secrets) if isinstance(v, str) else v for k, v in target.items()}}
    with pytest.raises(UsageError, match=message) as err:
        PrometheusAccess.from_target(target)
    assert "\n" not in str(err.value) and "pw" not in str(err.value)


def test_scenario_files_take_relative_secret_files_from_their_directory(secrets):
    scenario = secrets / "remote.toml"
    scenario.write_text(
        '[target]\nkind = "kubeconfig"\nkubeconfig = "kc"\n'
        f'prometheus_url = "{URL}"\nprometheus_bearer_token_file = "token"\n'
    )
    loaded = load_scenario(scenario)
    assert loaded.target.prometheus_bearer_token_file == str(secrets / "token")
    with pytest.raises(UsageError, match="not found"):  # from the command line: relative to the current directory
        parse_scenario(None, overrides={"target.prometheus_url": URL, "target.prometheus_bearer_token_file": "nowhere"})


def test_the_cli_refuses_a_missing_token_file_before_starting_anything(secrets, capsys):
    code = main(
        [
            "run",
            "--kubeconfig",
            str(secrets / "kc"),
            "--prometheus-url",
            URL,
            "--prometheus-bearer-token-file",
            str(secrets / "missing"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "bearer token file not found" in err


class FakeSession:
    """A requests.Session stand-in answering Prometheus API paths from a table."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def get(self, url, params=None, timeout=None):
        self.calls.append((url, dict(params or {})))
        status, body = self.answers[url.split("9090", 1)[1]]
        resp = requests.Response()
        resp.status_code, resp.reason = status, {200: "OK", 401: "Unauthorized"}.get(status, "")
        resp._content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        return resp

    def close(self):
        pass


def _ok(data):
    return 200, {"status": "success", "data": data}


def test_401_is_a_one_line_error_naming_prometheus():
    client = PrometheusClient(URL, session=FakeSession({"/api/v1/status/buildinfo": (401, "Unauthorized\n")}))
    with pytest.raises(ClusterError, match=f"Prometheus at {URL} refused the credentials: HTTP 401 Unauthorized"):
        client.buildinfo()


def test_query_prometheus_goes_through_the_client():
    raw = {
        "resultType": "matrix",
        "result": [
            {
                "metric": {"__name__": "process_resident_memory_bytes", "job": "apiserver", "instance": "x"},
                "values": [[T0.timestamp(), "100"], [T0.timestamp() + 5, "200"]],
            }
        ],
    }
    ranged = {
        "resultType": "matrix",
        "result": [{"metric": {"verb": "LIST", "code": "200"}, "values": [[T0.timestamp(), "3"]]}],
    }
    session = FakeSession({"/api/v1/query": _ok(raw), "/api/v1/query_range": _ok(ranged)})
    rss = metrics.Series("process_resident_memory_bytes")
    requests_total = metrics.Series("apiserver_request_total", by=("verb", "code"))
    frame = metrics.query_prometheus(
        PrometheusClient(URL, session=session),
        T0,
        T0 + timedelta(seconds=10),
        5.0,
        series=[rss, requests_total],
        job_labels={"kube-apiserver": "apiserver"},
    )
    assert list(frame["value"]) == [3.0, 100.0, 200.0]
    assert set(frame["labels"]) == {"{}", json.dumps({"code": "200", "verb": "LIST"})}
    (url, instant), (url2, ranged_params) = session.calls
    assert instant["query"] == 'process_resident_memory_bytes{job="apiserver"}[10001ms]'
    assert ranged_params["query"] == 'sum by (verb, code) (apiserver_request_total{job="apiserver"})'
    assert ranged_params["step"] == "5s"
