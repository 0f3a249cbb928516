"""Where time series come from during a run.

- :class:`LocalPrometheus`: a real Prometheus started by crdscale, scraping
  kube-apiserver over TLS with the instance's credentials, and etcd.
- :class:`RemotePrometheus`: a user's Prometheus (``--prometheus-url``).
- :class:`DirectScraper`: no Prometheus binary: scrape ``/metrics`` ourselves at
  the same interval (the manifest records which source was used).

All three expose ``start()``, ``stop()``, ``series(start, end) -> DataFrame`` (tidy,
see :mod:`crdscale.collect.metrics`) and ``describe() -> dict``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import requests
import yaml

from crdscale.cluster import binaries
from crdscale.cluster.clients import Cluster
from crdscale.collect import metrics
from crdscale.errors import ClusterError
from crdscale.fsutil import write_atomic


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalPrometheus:
    """A Prometheus process on 127.0.0.1 with a throwaway TSDB in a temp directory.

    Parameters:
        apiserver_target: ``host:port`` of kube-apiserver.
        ca_file, token_file: the instance's CA and bare bearer-token file (never copied
            into a run directory; the generated config only points at them).
        etcd_target: ``host:port`` of etcd's client URL (serves ``/metrics``), or ``None``.
        interval_s: scrape interval (default 1 s).
    """

    kind = "prometheus"

    def __init__(self, apiserver_target: str, ca_file: Path, token_file: Path, etcd_target: str | None = None,
                 interval_s: float = 1.0, binary: str | None = None):
        self.binary = binaries.prometheus(binary)
        self.apiserver_target = apiserver_target
        self.etcd_target = etcd_target
        self.ca_file = ca_file
        self.token_file = token_file
        self.interval_s = interval_s
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workdir = Path(tempfile.mkdtemp(prefix="crdscale-prometheus-"))
        self.proc: subprocess.Popen | None = None

    def config(self) -> dict:
        interval = f"{self.interval_s:g}s"
        jobs = [{
            "job_name": "kube-apiserver",
            "scheme": "https",
            "tls_config": {"ca_file": str(self.ca_file)},
            "authorization": {"type": "Bearer", "credentials_file": str(self.token_file)},
            "static_configs": [{"targets": [self.apiserver_target]}],
        }]
        if self.etcd_target:
            jobs.append({"job_name": "etcd", "static_configs": [{"targets": [self.etcd_target]}]})
        return {"global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": "15s"},
                "scrape_configs": jobs}

    def start(self) -> "LocalPrometheus":
        config_path = write_atomic(self.workdir / "prometheus.yml", yaml.safe_dump(self.config(), sort_keys=False))
        log = open(self.workdir / "prometheus.log", "ab")
        self.proc = subprocess.Popen(
            [str(self.binary.path), f"--config.file={config_path}", f"--storage.tsdb.path={self.workdir / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1d",
             # Deliberately no remote access: the API is only for our own range queries.
             "--web.enable-lifecycle"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ClusterError(f"prometheus exited at start-up (exit {self.proc.returncode}); see {self.workdir}/prometheus.log")
            try:
                # Ready is not enough: the run window starts once every target was scraped.
                if requests.get(f"{self.url}/-/ready", timeout=2).status_code == 200 and self._all_scraped():
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise ClusterError(f"prometheus did not scrape its targets within 60 s; see {self.workdir}/prometheus.log")

    def _all_scraped(self) -> bool:
        targets = requests.get(f"{self.url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
        return bool(targets) and all(t.get("lastScrape", "").startswith("20") and t["health"] == "up" for t in targets)

    def targets_up(self) -> dict[str, bool]:
        """job -> whether its last scrape succeeded."""
        data = requests.get(f"{self.url}/api/v1/targets", timeout=5).json()["data"]["activeTargets"]
        return {t["labels"]["job"]: t["health"] == "up" for t in data}

    def series(self, start: datetime, end: datetime):
        return metrics.query_prometheus(self.url, start, end, self.interval_s)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def describe(self) -> dict:
        return {"source": self.kind, "prometheus_version": self.binary.version, "scrape_interval_s": self.interval_s}


class RemotePrometheus:
    """A Prometheus the user already runs; crdscale only range-queries it."""

    kind = "remote-prometheus"

    def __init__(self, url: str, interval_s: float = 1.0, job_labels: dict[str, str] | None = None):
        self.url = url.rstrip("/")
        self.interval_s = interval_s
        self.job_labels = job_labels or {}

    def start(self) -> "RemotePrometheus":
        try:
            requests.get(f"{self.url}/api/v1/status/buildinfo", timeout=5).raise_for_status()
        except requests.RequestException as err:
            raise ClusterError(f"cannot reach Prometheus at {self.url}: {err}") from err
        return self

    def series(self, start: datetime, end: datetime):
        return metrics.query_prometheus(self.url, start, end, self.interval_s, job_labels=self.job_labels)

    def stop(self) -> None:
        pass

    def describe(self) -> dict:
        version = "unknown"
        try:
            version = requests.get(f"{self.url}/api/v1/status/buildinfo", timeout=5).json()["data"]["version"]
        except (requests.RequestException, KeyError, ValueError):
            pass
        return {"source": self.kind, "prometheus_url": self.url, "prometheus_version": version,
                "scrape_interval_s": self.interval_s, "job_labels": self.job_labels}


class DirectScraper:
    """Scrape kube-apiserver's (and etcd's) ``/metrics`` every ``interval_s`` in a thread."""

    kind = "direct-scrape"

    def __init__(self, cluster: Cluster, etcd_metrics_url: str | None = None, interval_s: float = 1.0):
        self.cluster = cluster
        self.etcd_metrics_url = etcd_metrics_url
        self.interval_s = interval_s
        self.rows: list[dict] = []
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="crdscale-scraper", daemon=True)
        self._lock = threading.Lock()

    def start(self) -> "DirectScraper":
        self._thread.start()
        return self

    def scrape_once(self) -> None:
        now = datetime.now(timezone.utc)
        got = []
        try:
            resp = self.cluster.get("/metrics", timeout=max(5.0, self.interval_s * 5))
            if resp.status_code == 200:
                got += metrics.aggregate_scrape(resp.text, "kube-apiserver", now)
        except ClusterError:
            self.errors += 1
        if self.etcd_metrics_url:
            try:
                got += metrics.aggregate_scrape(requests.get(self.etcd_metrics_url, timeout=5).text, "etcd", now)
            except requests.RequestException:
                self.errors += 1
        with self._lock:
            self.rows += got

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.scrape_once()
            next_at += self.interval_s
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def series(self, start: datetime, end: datetime):
        with self._lock:
            rows = [r for r in self.rows if start <= r["timestamp"] <= end]
        return metrics.tidy_frame(rows)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def describe(self) -> dict:
        return {"source": self.kind, "scrape_interval_s": self.interval_s, "scrape_errors": self.errors}
