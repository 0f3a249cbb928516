"""Pushing an OCI archive over the distribution API, against a fake registry transport.

The fake keeps blobs and manifests in memory and answers as the distribution spec says
(including a bearer-token challenge), so the request sequence and the bytes are checked
without a registry process.
"""

from __future__ import annotations

import base64
import hashlib
import json
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from crdscale.errors import ClusterError
from crdscale.image import oci
from crdscale.image.push import Registry, Target, credentials, push_archive


class FakeRegistry(requests.Session):
    def __init__(self, *, token_user: tuple[str, str] | None = None, present: set[str] = frozenset()):
        super().__init__()
        self.calls: list[tuple[str, str]] = []
        self.blobs: dict[str, bytes] = {d: b"" for d in present}
        self.manifests: dict[str, tuple[str, bytes]] = {}
        self.token_user = token_user
        self.uploads = 0

    def _response(self, status: int, headers=None, body: bytes = b"") -> requests.Response:
        resp = requests.Response()
        resp.status_code, resp._content = status, body
        resp.headers.update(headers or {})
        return resp

    def get(self, url, params=None, auth=None, **kwargs):  # the token realm
        self.calls.append(("GET", urlsplit(url).path))
        if auth != self.token_user or params["scope"] != "repository:team/crdscale:pull,push":
            return self._response(401)
        return self._response(200, body=json.dumps({"token": "t0k"}).encode())

    def request(self, method, url, headers=None, data=None, timeout=None, **kwargs):
        parts = urlsplit(url)
        self.calls.append((method, parts.path))
        assert parts.scheme == "http" and parts.netloc == "localhost:5000"
        if self.token_user and (headers or {}).get("Authorization") != "Bearer t0k":
            challenge = 'Bearer realm="http://localhost:5000/token",service="reg",scope="x"'
            return self._response(401, {"WWW-Authenticate": challenge})
        path = parts.path
        if method == "HEAD" and "/blobs/" in path:
            return self._response(200 if path.rsplit("/", 1)[1] in self.blobs else 404)
        if method == "POST" and path.endswith("/blobs/uploads/"):
            self.uploads += 1
            return self._response(202, {"Location": f"/v2/team/crdscale/blobs/uploads/u{self.uploads}?state=s"})
        if method == "PUT" and "/blobs/uploads/" in path:
            body = data.read() if hasattr(data, "read") else data
            digest = parse_qs(parts.query)["digest"][0]
            assert parse_qs(parts.query)["state"] == ["s"]
            assert "sha256:" + hashlib.sha256(body).hexdigest() == digest
            assert int(headers["Content-Length"]) == len(body)
            self.blobs[digest] = body
            return self._response(201)
        if method == "PUT" and "/manifests/" in path:
            manifest = json.loads(data)
            for desc in [manifest["config"], *manifest["layers"]]:
                if desc["digest"] not in self.blobs:
                    return self._response(400, body=b'{"errors":[{"code":"MANIFEST_BLOB_UNKNOWN","message":"x"}]}')
            digest = "sha256:" + hashlib.sha256(data).hexdigest()
            self.manifests[path.rsplit("/", 1)[1]] = (headers["Content-Type"], data)
            return self._response(201, {"Docker-Content-Digest": digest})
        return self._response(405)


@pytest.fixture
def archive(tmp_path):
    out = tmp_path / "img.tar"
    layers = [oci.tar_layer({"a": b"1"}), oci.tar_layer({"b": b"2" * 5000})]
    digest = oci.write_oci_archive(out, layers, config=oci.ImageConfig(entrypoint=["/b"]), ref="crdscale:t")
    return out, digest


def test_push_uploads_every_blob_then_the_manifest(archive):
    path, digest = archive
    fake = FakeRegistry()
    assert push_archive(path, "localhost:5000/team/crdscale:v1", session=fake, env={}) == digest
    image = oci.read_oci_archive(path)
    assert set(fake.blobs) == {
        image.manifest["config"]["digest"],
        *(layer["digest"] for layer in image.manifest["layers"]),
    }
    assert fake.manifests["v1"] == (oci.MEDIA_MANIFEST, image.blob(digest))
    methods = [m for m, _ in fake.calls]
    assert methods == ["HEAD", "POST", "PUT"] * 3 + ["PUT"]
    assert fake.calls[-1] == ("PUT", "/v2/team/crdscale/manifests/v1")


def test_blobs_already_there_are_not_uploaded_again(archive):
    path, _ = archive
    layers = oci.read_oci_archive(path).manifest["layers"]
    fake = FakeRegistry(present={layer["digest"] for layer in layers})
    push_archive(path, "localhost:5000/team/crdscale:v1", session=fake, env={})
    assert fake.uploads == 1  # the config only


def test_bearer_challenge_gets_a_token_with_the_configured_credentials(archive, tmp_path):
    path, digest = archive
    config = tmp_path / "docker"
    config.mkdir()
    auth = base64.b64encode(b"me:pw").decode()
    (config / "config.json").write_text(json.dumps({"auths": {"localhost:5000": {"auth": auth}}}))
    fake = FakeRegistry(token_user=("me", "pw"))
    assert (
        push_archive(path, "localhost:5000/team/crdscale:v1", session=fake, env={"DOCKER_CONFIG": str(config)})
        == digest
    )
    assert fake.calls[:3] == [
        ("HEAD", f"/v2/team/crdscale/blobs/{oci.read_oci_archive(path).manifest['config']['digest']}"),
        ("GET", "/token"),
        ("HEAD", f"/v2/team/crdscale/blobs/{oci.read_oci_archive(path).manifest['config']['digest']}"),
    ]
    assert sum(1 for m, _ in fake.calls if m == "GET") == 1  # one token for the whole push


def test_refused_credentials_are_one_line(archive):
    path, _ = archive
    fake = FakeRegistry(token_user=("me", "pw"))
    with pytest.raises(ClusterError, match="refused a token for team/crdscale"):
        push_archive(path, "localhost:5000/team/crdscale:v1", session=fake, env={"CRDSCALE_REGISTRY_USERNAME": "me"})


def test_credentials_sources(tmp_path):
    auth_file = tmp_path / "auth.json"
    auth_file.write_text(json.dumps({"auths": {"ghcr.io": {"auth": base64.b64encode(b"a:b").decode()}}}))
    docker = tmp_path / "d"
    docker.mkdir()
    (docker / "config.json").write_text(
        json.dumps({"auths": {"https://index.docker.io/v1/": {"auth": base64.b64encode(b"hub:pw").decode()}}})
    )
    env = {"REGISTRY_AUTH_FILE": str(auth_file), "DOCKER_CONFIG": str(docker)}
    assert credentials("ghcr.io", env) == ("a", "b")
    assert credentials("docker.io", env) == ("hub", "pw")
    assert credentials("quay.io", env) is None
    assert credentials("quay.io", {**env, "CRDSCALE_REGISTRY_USERNAME": "u", "CRDSCALE_REGISTRY_PASSWORD": "p"}) == (
        "u",
        "p",
    )


@pytest.mark.parametrize(
    "ref, base, repo",
    [
        ("localhost:5000/crdscale:1", "http://localhost:5000", "crdscale"),
        ("127.0.0.1:5000/a/b:1", "http://127.0.0.1:5000", "a/b"),
        ("ghcr.io/me/crdscale:1", "https://ghcr.io", "me/crdscale"),
        ("crdscale:1", "https://registry-1.docker.io", "library/crdscale"),
    ],
)
def test_targets(ref, base, repo):
    target = Target.parse(ref)
    assert (target.base_url, target.repository) == (base, repo)
    assert Registry(target, session=FakeRegistry(), env={})._url("x") == f"{base}/v2/{repo}/x"
