"""Results in an S3-compatible bucket: ``s3://bucket/prefix``.

The requests are the MinIO client's (``pip install 'crdscale[s3]'``; docs/dependencies.md
says why not boto3). Everything about where and as whom comes from the environment and the
files AWS tools read, never from a command line or a manifest, so no secret lands in a shell
history or a run directory:

- credentials: ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (/ ``AWS_SESSION_TOKEN``),
  else the profile ``AWS_PROFILE`` (default ``default``) of ``AWS_SHARED_CREDENTIALS_FILE``
  (default ``~/.aws/credentials``), else, in a pod, a web-identity token
  (``AWS_WEB_IDENTITY_TOKEN_FILE``: EKS IRSA) or container credentials
  (``AWS_CONTAINER_CREDENTIALS_FULL_URI``/``..._RELATIVE_URI``: EKS Pod Identity, ECS), else
  the node's instance role from the EC2 metadata service (only in a pod, where
  ``KUBERNETES_SERVICE_HOST`` is set; on your machine it is not asked);
- endpoint: ``AWS_ENDPOINT_URL_S3``, else ``AWS_ENDPOINT_URL``, else AWS
  (``https://s3.amazonaws.com``); ``http://`` endpoints for local S3-compatible servers;
- region: ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` (else asked from the bucket);
- CA bundle for a private endpoint: ``AWS_CA_BUNDLE``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import urllib3

from crdscale.errors import UsageError
from crdscale.results.store import ResultStore, _clean_prefix

log = logging.getLogger(__name__)

DEFAULT_ENDPOINT = "https://s3.amazonaws.com"
ENDPOINT_ENVS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
# In a pod these name where IamAwsProvider finds credentials; without one it would ask the EC2
# metadata service, which outside AWS only times out.
POD_IDENTITY_ENVS = (
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
)


@dataclass(frozen=True)
class S3Location:
    """``s3://bucket/prefix`` taken apart."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> S3Location:
        parts = urlsplit(url)
        if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
            raise UsageError(f"an S3 results URL is s3://BUCKET[/PREFIX], not {url!r}")
        bucket = parts.netloc
        if "@" in bucket or ":" in bucket:
            raise UsageError(
                f"{url!r}: credentials and endpoints do not go in the URL; "
                "set AWS_ENDPOINT_URL_S3 and AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (or ~/.aws/credentials)"
            )
        return cls(bucket, parts.path.strip("/"))

    def key(self, *parts: str) -> str:
        """The object key of ``parts`` under the URL's prefix (single slashes, none leading or trailing)."""
        return "/".join(p.strip("/") for p in (self.prefix, *parts) if p.strip("/"))


@dataclass(frozen=True)
class Endpoint:
    """Where the S3 API answers: ``host[:port]`` and whether it speaks TLS."""

    host: str
    secure: bool

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Endpoint:
        env = os.environ if env is None else env
        name = next((e for e in ENDPOINT_ENVS if env.get(e)), None)
        url = env[name] if name else DEFAULT_ENDPOINT
        parts = urlsplit(url if "://" in url else "https://" + url)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.path.strip("/"):
            raise UsageError(f"${name} must be http(s)://HOST[:PORT], not {url!r}")
        return cls(parts.netloc, parts.scheme == "https")


def credential_provider(env: Mapping[str, str] | None = None):
    """The MinIO credential chain for the environment variables and files named in the module doc."""
    # lazy: minio is the optional s3 extra (see _import_minio)
    from minio.credentials import AWSConfigProvider, ChainedProvider, EnvAWSProvider, IamAwsProvider

    env = os.environ if env is None else env
    providers = [EnvAWSProvider(), AWSConfigProvider()]
    # In a pod also the node's instance role (EC2 metadata); elsewhere that would only time out.
    if any(env.get(e) for e in (*POD_IDENTITY_ENVS, "KUBERNETES_SERVICE_HOST")):
        providers.append(IamAwsProvider())
    return ChainedProvider(providers)


def _import_minio():
    try:
        import minio  # lazy: the optional s3 extra; without it, s3:// is one line naming it
    except ImportError:
        raise UsageError("s3:// results need the MinIO client: pip install 'crdscale[s3]'") from None
    return minio


class S3Store(ResultStore):
    """A :class:`~crdscale.results.store.ResultStore` in an S3 bucket. Failures (no credentials,
    no bucket, refused, unreachable) are one-line :class:`UsageError` naming the URL, as for
    every store.

    ``client`` (a ``minio.Minio``) is for tests; by default one is made from the environment.
    """

    def __init__(self, url: str, *, client=None):
        self.url = url
        self.location = S3Location.parse(url)  # a bad URL fails before anything is asked
        if client is None:
            client = self._client_from_env()
        self._client = client

    @staticmethod
    def _client_from_env():
        minio = _import_minio()
        endpoint = Endpoint.from_env()
        provider = credential_provider()
        try:
            provider.retrieve()  # no credentials at all: say so now, not at the first upload
        except Exception:  # ValueError from the files and environment; network errors from the metadata service
            raise UsageError(
                "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a profile in "
                "~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE)"
            ) from None
        http_client = None
        if os.environ.get("AWS_CA_BUNDLE"):
            http_client = urllib3.PoolManager(
                cert_reqs="CERT_REQUIRED",
                ca_certs=os.environ["AWS_CA_BUNDLE"],
                retries=urllib3.Retry(total=5, backoff_factor=0.2, status_forcelist=[500, 502, 503, 504]),
            )
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
        return minio.Minio(
            endpoint.host, secure=endpoint.secure, region=region, credentials=provider, http_client=http_client
        )

    def _call(self, what: str, fn, *args, **kwargs):
        """One request, its failure turned into a one-line :class:`UsageError`."""
        from minio.error import MinioException  # lazy: the optional s3 extra (see _import_minio)

        try:
            return fn(*args, **kwargs)
        except MinioException as err:
            code = getattr(err, "code", "") or type(err).__name__
            message = getattr(err, "message", "") or str(err)
            raise UsageError(f"{self.url}: {what}: {code}: {message}") from None
        except (OSError, ValueError) as err:  # refused connection, DNS, TLS (urllib3's are OSErrors)
            raise UsageError(f"{self.url}: {what}: {err}") from None
        except Exception as err:
            if isinstance(err, urllib3.exceptions.HTTPError):
                raise UsageError(f"{self.url}: {what}: {err}") from None
            raise

    def put_tree(self, local_dir: Path, prefix: str) -> None:
        """Upload every regular file under ``local_dir`` to ``<url prefix>/prefix/<relative path>``
        (symbolic links are followed; the files are uploaded in sorted order)."""
        local_dir = Path(local_dir)
        if not local_dir.is_dir():
            raise UsageError(f"{local_dir} is not a directory")
        clean = str(_clean_prefix(prefix)) if prefix.strip("/") else ""
        files = sorted(p for p in local_dir.rglob("*") if p.is_file())
        total = 0
        for path in files:
            rel = path.relative_to(local_dir).as_posix()
            key = self.location.key(clean, rel)
            self._call(f"uploading {rel}", self._client.fput_object, self.location.bucket, key, str(path))
            total += path.stat().st_size
        log.info("uploaded %d files (%.1f MiB) to %s", len(files), total / 2**20, self._describe(prefix))

    def get_tree(self, prefix: str, local_dir: Path) -> None:
        """Download every object under ``<url prefix>/prefix/`` into ``local_dir``."""
        base = self.location.key(str(_clean_prefix(prefix)) if prefix.strip("/") else "")
        base = base + "/" if base else ""
        objects = self._call(
            f"listing {base or '/'}",
            lambda: list(self._client.list_objects(self.location.bucket, prefix=base, recursive=True)),
        )
        local_dir = Path(local_dir)
        count = 0
        for obj in objects:
            rel = obj.object_name[len(base) :]
            if obj.is_dir or not rel or rel.endswith("/"):
                continue
            parts = PurePosixPath(rel).parts
            if ".." in parts or rel.startswith("/"):  # a key must not write outside local_dir
                raise UsageError(f"{self.url}: refusing object {obj.object_name!r}: it leaves the directory")
            dest = local_dir.joinpath(*parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            partial = dest.with_name(dest.name + ".partial")
            self._call(
                f"downloading {rel}", self._client.fget_object, self.location.bucket, obj.object_name, str(partial)
            )
            os.replace(partial, dest)
            count += 1
        if count == 0:
            raise UsageError(f"nothing under {self._describe(prefix)}")
        log.info("downloaded %d files from %s to %s", count, self._describe(prefix), local_dir)

    def list_prefixes(self, prefix: str) -> list[str]:
        base = self.location.key(str(_clean_prefix(prefix)) if prefix.strip("/") else "")
        base = base + "/" if base else ""
        found = self._call(
            f"listing {base or '/'}",
            lambda: list(self._client.list_objects(self.location.bucket, prefix=base, recursive=False)),
        )
        return sorted(o.object_name[len(base) :].rstrip("/") for o in found if o.is_dir)

    def _describe(self, prefix: str) -> str:
        return f"s3://{self.location.bucket}/{self.location.key(prefix)}"
