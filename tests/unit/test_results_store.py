"""The S3 results store: its URL and its configuration from the environment (no server:
tests/integration/test_results_s3.py talks to a real one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscale.errors import UsageError
from crdscale.results.s3 import Endpoint, S3Location, S3Store
from crdscale.results.store import open_store, scheme_of


def test_s3_is_a_known_scheme(monkeypatch, tmp_path):
    assert scheme_of("s3://bucket/x") == "s3"
    pytest.importorskip("minio")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "b")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")
    store = open_store("s3://bucket/team")
    assert isinstance(store, S3Store) and store.location == S3Location("bucket", "team")


@pytest.mark.parametrize(
    "url, bucket, prefix",
    [("s3://b", "b", ""), ("s3://b/", "b", ""), ("s3://b/team/exp/", "b", "team/exp")],
)
def test_s3_urls(url, bucket, prefix):
    assert S3Location.parse(url) == S3Location(bucket, prefix)


@pytest.mark.parametrize("url", ["s3://", "s3:///x", "s3://k:s@b/x", "s3://b/x?versionId=1", "http://b/x"])
def test_bad_s3_urls(url):
    with pytest.raises(UsageError):
        S3Location.parse(url)


def test_keys_join_without_doubled_slashes():
    assert S3Location("b", "team/").key("/exp/", "c/f.json") == "team/exp/c/f.json"
    assert S3Location("b", "").key("", "a", "") == "a"


@pytest.mark.parametrize(
    "env, endpoint",
    [
        ({}, Endpoint("s3.amazonaws.com", True)),
        ({"AWS_ENDPOINT_URL": "http://127.0.0.1:7070"}, Endpoint("127.0.0.1:7070", False)),
        (
            {"AWS_ENDPOINT_URL": "http://other:1", "AWS_ENDPOINT_URL_S3": "https://s3.example:8443/"},
            Endpoint("s3.example:8443", True),
        ),
    ],
)
def test_endpoint_from_env(env, endpoint):
    assert Endpoint.from_env(env) == endpoint


def test_bad_endpoint():
    with pytest.raises(UsageError, match="AWS_ENDPOINT_URL_S3"):
        Endpoint.from_env({"AWS_ENDPOINT_URL_S3": "ftp://x/y"})


def _no_credentials(monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # in a pod the metadata service would be asked
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:9")


def test_missing_credentials_fail_before_any_request(monkeypatch, tmp_path):
    pytest.importorskip("minio")
    _no_credentials(monkeypatch, tmp_path)
    with pytest.raises(UsageError, match="no S3 credentials"):
        S3Store("s3://bucket/x")


def test_credentials_from_the_shared_file_profile(monkeypatch, tmp_path):
    pytest.importorskip("minio")
    _no_credentials(monkeypatch, tmp_path)
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = d\naws_secret_access_key = ds\n"
        "[lab]\naws_access_key_id = AKLAB\naws_secret_access_key = secret\n"
    )
    monkeypatch.setenv("AWS_PROFILE", "lab")
    store = S3Store("s3://bucket/x")
    assert store._client._provider.retrieve().access_key == "AKLAB"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKENV")  # the environment wins over the file
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    assert S3Store("s3://bucket/x")._client._provider.retrieve().access_key == "AKENV"


def test_versitygw_is_built_from_its_modules_own_main(tmp_path, monkeypatch):
    from crdscale.cluster import binaries

    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path))
    program = binaries.versitygw_program("v1.8.0")
    assert program.binary == tmp_path / "versitygw" / "v1.8.0" / "versitygw"
    assert program.package("versitygw") == "github.com/versity/versitygw/cmd/versitygw"
    # The generated file only keeps the requirement through `go mod tidy`; it is never compiled.
    assert program.source_files()["main.go"].startswith("//go:build tools\n")
    assert "\tgithub.com/versity/versitygw v1.8.0\n" in program.go_mod()


def test_the_metadata_service_is_asked_only_in_a_pod():
    pytest.importorskip("minio")
    from minio.credentials import IamAwsProvider

    from crdscale.results.s3 import credential_provider

    def kinds(env):
        return [type(p).__name__ for p in credential_provider(env)._providers]

    assert IamAwsProvider.__name__ not in kinds({})
    assert kinds({"KUBERNETES_SERVICE_HOST": "10.0.0.1"})[-1] == IamAwsProvider.__name__
    assert kinds({"AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token"})[-1] == IamAwsProvider.__name__


def test_local_s3_listens_where_it_is_told():
    """A test node's pods reach the host only at its bridge address: the server listens and is addressed there."""
    from crdscale.results.versitygw import LocalS3

    s3 = LocalS3(binary=Path("/nonexistent/versitygw"), host="10.213.1.1")
    try:
        assert s3.endpoint == f"http://10.213.1.1:{s3.port}"
        assert s3.client_env()["AWS_ENDPOINT_URL_S3"] == s3.endpoint
    finally:
        s3.stop()
    local = LocalS3(binary=Path("/nonexistent/versitygw"))
    local.stop()  # removes its temporary root
    assert local.endpoint.startswith("http://127.0.0.1:")
