"""A real S3-compatible server on loopback: versitygw serving a local directory.

Tests (and anyone trying ``--results s3://...`` without a bucket) start one with
:class:`LocalS3`; its :meth:`LocalS3.client_env` is the environment an S3 client of crdscale
reads (endpoint and a fresh random key pair), so the code under test takes the same path as
against AWS. versitygw's posix backend keeps each bucket as a directory and each object as a
file (metadata in extended attributes, or in a side directory where the file system has none).
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from crdscale.cluster import binaries
from crdscale.cluster.process import LOOPBACK, free_ports, port_open
from crdscale.errors import ClusterError
from crdscale.proc import stop_child

log = logging.getLogger(__name__)


def _has_xattrs(directory: Path) -> bool:
    probe = directory / ".xattr-probe"
    try:
        probe.touch()
        os.setxattr(probe, "user.crdscale", b"1")
        return True
    except OSError:
        return False
    finally:
        probe.unlink(missing_ok=True)


class LocalS3:
    """versitygw on ``127.0.0.1:<free port>`` (or ``host``) over ``root`` (default: a temporary directory),
    with a random root key pair. Use as a context manager, or ``start()``/``stop()``.

    Buckets are made with :meth:`make_bucket` (a directory under ``root``)."""

    def __init__(
        self,
        root: Path | None = None,
        *,
        binary: Path | None = None,
        region: str = "us-east-1",
        host: str = LOOPBACK,
    ):
        self.binary = Path(binary) if binary else binaries.versitygw().path
        self._own_root = root is None
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="crdscale-s3-"))
        self.data = self.root / "buckets"
        self.region = region
        # LOOPBACK, or an address other machines' clients reach (a test node's pods: its bridge's host address).
        self.host = host
        self.access_key = "crdscale" + secrets.token_hex(6)
        self.secret_key = secrets.token_urlsafe(30)
        (self.port,) = free_ports(1)
        self.proc: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def client_env(self) -> dict[str, str]:
        """Environment variables that point an S3 client at this server."""
        return {
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
        }

    def make_bucket(self, name: str) -> str:
        """Create bucket ``name`` (a directory of the posix backend); returns ``s3://name``."""
        (self.data / name).mkdir(parents=True, exist_ok=True)
        return f"s3://{name}"

    def start(self, timeout_s: float = 30.0) -> LocalS3:
        self.data.mkdir(parents=True, exist_ok=True)
        posix = ["posix"]
        if not _has_xattrs(self.data):  # e.g. some overlay or tmpfs mounts: metadata beside the data
            (self.root / "meta").mkdir(exist_ok=True)
            posix += ["--sidecar", str(self.root / "meta")]
        cmd = [str(self.binary), "--port", f"{self.host}:{self.port}", "--region", self.region, "--quiet", *posix]
        cmd.append(str(self.data))
        env = dict(os.environ, ROOT_ACCESS_KEY_ID=self.access_key, ROOT_SECRET_ACCESS_KEY=self.secret_key)
        log_path = self.root / "versitygw.log"
        with open(log_path, "ab") as out:  # the keys travel in the environment, not on the command line
            self.proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not port_open(self.port, self.host):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-2000:]
                self.stop()
                raise ClusterError(f"versitygw did not start on {self.endpoint}; log: {log_path}", details=tail)
            time.sleep(0.1)
        log.info("versitygw %s serving %s on %s", self.binary, self.data, self.endpoint)
        return self

    def stop(self) -> None:
        if self.proc is not None:
            stop_child(self.proc)
        self.proc = None
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalS3:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
