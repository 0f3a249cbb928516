"""Push an OCI archive to a registry over the distribution API (no docker, no skopeo).

The requests are those of the OCI distribution spec: ``HEAD`` each blob and upload only the
missing ones (``POST /v2/<name>/blobs/uploads/`` then one monolithic ``PUT ...?digest=``),
then ``PUT /v2/<name>/manifests/<tag>``. A 401 is answered once with the scheme the registry
asks for: a bearer token from its realm (``Bearer realm=...,service=...,scope=...``) or basic
credentials.

Credentials are never flags. They come from, in order:
``$CRDSCALE_REGISTRY_USERNAME``/``$CRDSCALE_REGISTRY_PASSWORD``; the auth file
``$REGISTRY_AUTH_FILE`` (podman, skopeo); ``$DOCKER_CONFIG/config.json`` or
``~/.docker/config.json``: an ``auths`` entry, or a credential helper (``credHelpers`` or
``credsStore``: ``docker-credential-<name> get``, as for ECR, GCR and ACR).
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import subprocess
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

import requests

from crdscale.errors import ClusterError, UsageError
from crdscale.image import oci

log = logging.getLogger(__name__)

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
DOCKER_HUB_CONFIG_KEY = "https://index.docker.io/v1/"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


@dataclass(frozen=True)
class Target:
    """Where a reference points: the registry host, repository and tag."""

    registry: str  # as written in the reference (docker.io, localhost:5000, ghcr.io)
    repository: str
    tag: str

    @classmethod
    def parse(cls, ref: str) -> Target:
        name, tag = oci.split_ref(ref)
        registry, _, repository = name.partition("/")
        return cls(registry, repository, tag)

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def base_url(self) -> str:
        # Plain HTTP only for a registry on this machine (a test registry); TLS everywhere else.
        host = (
            self.api_host.rsplit(":", 1)[0] if not self.api_host.startswith("[") else self.api_host.split("]")[0] + "]"
        )
        scheme = "http" if host in LOOPBACK_HOSTS else "https"
        return f"{scheme}://{self.api_host}"


def _docker_config(env: Mapping[str, str]) -> dict:
    paths = []
    if env.get("REGISTRY_AUTH_FILE"):
        paths.append(Path(env["REGISTRY_AUTH_FILE"]))
    paths.append(Path(env.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json")
    merged: dict = {"auths": {}, "credHelpers": {}}
    for path in reversed(paths):  # the first file named wins
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        merged["auths"].update(doc.get("auths") or {})
        merged["credHelpers"].update(doc.get("credHelpers") or {})
        if doc.get("credsStore"):
            merged["credsStore"] = doc["credsStore"]
    return merged


def _config_keys(registry: str) -> list[str]:
    if registry == DOCKER_HUB:
        return [DOCKER_HUB_CONFIG_KEY, DOCKER_HUB, DOCKER_HUB_API]
    return [registry, f"https://{registry}", f"http://{registry}"]


def credentials(registry: str, env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """``(username, password)`` for ``registry`` from the places in the module doc, or ``None``."""
    env = os.environ if env is None else env
    if env.get("CRDSCALE_REGISTRY_USERNAME"):
        return env["CRDSCALE_REGISTRY_USERNAME"], env.get("CRDSCALE_REGISTRY_PASSWORD", "")
    config = _docker_config(env)
    for key in _config_keys(registry):
        entry = config["auths"].get(key)
        if entry and entry.get("auth"):
            user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
            return user, password
        if entry and entry.get("username"):
            return entry["username"], entry.get("password", "")
    helper = next((config["credHelpers"][k] for k in _config_keys(registry) if k in config["credHelpers"]), None)
    helper = helper or config.get("credsStore")
    if helper:
        server = _config_keys(registry)[0]
        try:
            proc = subprocess.run(
                [f"docker-credential-{helper}", "get"], input=server, capture_output=True, text=True, timeout=60
            )
        except OSError as err:
            raise UsageError(f"credential helper docker-credential-{helper} for {registry}: {err}") from None
        if proc.returncode == 0:
            doc = json.loads(proc.stdout)
            return doc.get("Username", ""), doc.get("Secret", "")
    return None


_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')


class Registry:
    """The distribution API of one registry. ``session`` is the transport (tests pass a fake)."""

    def __init__(
        self, target: Target, *, session: requests.Session | None = None, env: Mapping[str, str] | None = None
    ):
        self.target = target
        self.session = session or requests.Session()
        self._credentials = credentials(target.registry, env)
        self._authorization: str | None = None

    def _url(self, path: str) -> str:
        return f"{self.target.base_url}/v2/{self.target.repository}/{path}"

    def request(self, method: str, url: str, *, expect: tuple[int, ...], **kwargs) -> requests.Response:
        for attempt in range(2):
            headers = dict(kwargs.pop("headers", {}) or {})
            if self._authorization:
                headers["Authorization"] = self._authorization
            body = kwargs.get("data")
            if attempt and hasattr(body, "seek"):
                body.seek(0)
            try:
                resp = self.session.request(method, url, headers=headers, timeout=300, **kwargs)
            except requests.RequestException as err:
                raise ClusterError(f"registry {self.target.registry}: {method} {url}: {err}") from None
            kwargs["headers"] = headers
            if resp.status_code == 401 and attempt == 0 and self._authenticate(resp):
                continue
            if resp.status_code == 401:
                raise ClusterError(
                    f"registry {self.target.registry} refused {'the' if self._credentials else 'anonymous'} "
                    f"access to {self.target.repository} (HTTP 401); credentials come from "
                    "$CRDSCALE_REGISTRY_USERNAME/_PASSWORD, $REGISTRY_AUTH_FILE or ~/.docker/config.json"
                )
            if resp.status_code not in expect:
                raise ClusterError(
                    f"registry {self.target.registry}: {method} {url.split('?')[0]}: HTTP {resp.status_code} "
                    f"{_error_text(resp)}"
                )
            return resp
        raise AssertionError("unreachable")

    def _authenticate(self, resp: requests.Response) -> bool:
        challenge = resp.headers.get("WWW-Authenticate", "")
        scheme = challenge.split(" ", 1)[0].lower()
        if scheme == "basic":
            if not self._credentials:
                return False
            user, password = self._credentials
            self._authorization = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
            return True
        if scheme == "bearer":
            params = dict(_CHALLENGE.findall(challenge))
            if "realm" not in params:
                return False
            query = {"service": params.get("service", "")}
            query["scope"] = f"repository:{self.target.repository}:pull,push"
            try:
                token_resp = self.session.get(params["realm"], params=query, auth=self._credentials, timeout=60)
            except requests.RequestException as err:
                raise ClusterError(f"registry {self.target.registry}: token from {params['realm']}: {err}") from None
            if token_resp.status_code != 200:
                raise ClusterError(
                    f"registry {self.target.registry} refused a token for {self.target.repository} "
                    f"(HTTP {token_resp.status_code}); credentials come from $CRDSCALE_REGISTRY_USERNAME/"
                    "_PASSWORD, $REGISTRY_AUTH_FILE or ~/.docker/config.json"
                )
            doc = token_resp.json()
            token = doc.get("token") or doc.get("access_token")
            if not token:
                return False
            self._authorization = f"Bearer {token}"
            return True
        return False

    def has_blob(self, digest: str) -> bool:
        return self.request("HEAD", self._url(f"blobs/{digest}"), expect=(200, 404)).status_code == 200

    def upload_blob(self, digest: str, size: int, body) -> None:
        start = self.request("POST", self._url("blobs/uploads/"), expect=(202,))
        location = start.headers.get("Location")
        if not location:
            raise ClusterError(f"registry {self.target.registry} started an upload without a Location")
        url = urljoin(self.target.base_url + "/", location)
        url += ("&" if "?" in url else "?") + f"digest={digest}"
        self.request(
            "PUT",
            url,
            expect=(201,),
            data=body,
            headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)},
        )

    def put_manifest(self, tag: str, media_type: str, body: bytes) -> str:
        resp = self.request(
            "PUT", self._url(f"manifests/{tag}"), expect=(201,), data=body, headers={"Content-Type": media_type}
        )
        return resp.headers.get("Docker-Content-Digest", "")


def _error_text(resp: requests.Response) -> str:
    try:
        errors = resp.json().get("errors") or []
        return "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors) or resp.reason
    except ValueError:
        return resp.reason or ""


def push_archive(archive: Path, ref: str, *, session: requests.Session | None = None, env=None) -> str:
    """Push the OCI archive (from :func:`crdscale.image.oci.write_oci_archive`) as ``ref``;
    returns the manifest digest, the same as the archive's."""
    target = Target.parse(ref)
    image = oci.read_oci_archive(archive)
    registry = Registry(target, session=session, env=env)
    manifest_bytes = image.blob(image.manifest_digest)
    blobs = [image.manifest["config"], *image.manifest["layers"]]
    with tarfile.open(archive) as tar:
        for desc in blobs:
            digest, size = desc["digest"], desc["size"]
            if registry.has_blob(digest):
                log.info("%s: %s already there", target.registry, digest[:19])
                continue
            body = tar.extractfile(f"blobs/sha256/{digest[7:]}")
            log.info("%s: uploading %s (%.1f MiB)", target.registry, digest[:19], size / 2**20)
            registry.upload_blob(digest, size, body)
    pushed = registry.put_manifest(target.tag, image.manifest["mediaType"], manifest_bytes)
    if pushed and pushed != image.manifest_digest:
        raise ClusterError(f"registry {target.registry} stored the manifest as {pushed}, not {image.manifest_digest}")
    return image.manifest_digest
