"""Where time series come from during a run.

- :class:`LocalPrometheus`: a real Prometheus started by crdscale, scraping
  kube-apiserver over TLS with the instance's credentials, etcd, and
  kube-controller-manager (HTTPS, its ``/metrics`` open to anyone on loopback). Its
  database lives in the run directory (``tsdb_dir``), so a runner killed
  mid-run loses no sample (``crdscale recover`` exports them), and it keeps only
  the series crdscale records (less disk and less Prometheus CPU beside the
  server being measured).
- :class:`RemotePrometheus`: a user's Prometheus (``--prometheus-url``, with
  TLS and credentials from :class:`crdscale.collect.prometheus.PrometheusAccess`).
- :class:`DirectScraper`: no Prometheus binary: scrape ``/metrics`` ourselves at
  the same interval (the manifest records which source was used); samples are
  handed to a ``sink`` every few seconds (the runner writes them as chunks).

Both local sources record how long each scrape of a job took and how large its
body was (``scrape_duration_seconds``, ``scrape_body_size_bytes``): at
thousands of CRDs kube-apiserver's ``/metrics`` grows, and a scrape slower than
the interval is a gap in the series.

All three are a :class:`MetricsSource`: ``start()``, ``stop()``, ``series(start, end) -> DataFrame``
(tidy, see :mod:`crdscale.collect.metrics`), ``describe() -> dict``, and what the harness itself costs
(``harness_pid``, ``harness_cpu_seconds``). :func:`open_metrics_source` chooses one for a run.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

import pandas as pd
import requests
import yaml

from crdscale.cluster import binaries
from crdscale.cluster.clients import Cluster
from crdscale.cluster.local import free_ports
from crdscale.collect import metrics
from crdscale.collect.prometheus import PrometheusAccess, PrometheusClient
from crdscale.errors import BinaryError, ClusterError
from crdscale.fsutil import write_atomic
from crdscale.models.scrapecost import SCRAPE_CPU_PER_SECOND, scrape_cost
from crdscale.proc import cpu_seconds, rss_bytes, stat_fields, thread_count
from crdscale.rundir import layout

CONTROLLER_MANAGER_JOB = "kube-controller-manager"


class MetricsSource(Protocol):
    """Where a run's time series come from (:class:`LocalPrometheus`, :class:`RemotePrometheus`,
    :class:`DirectScraper`): started once the target is up, stopped at the run's end, queried once
    for the whole window."""

    kind: str

    def start(self) -> MetricsSource: ...

    def stop(self) -> None: ...

    def series(self, start: datetime, end: datetime) -> pd.DataFrame:
        """Tidy rows (``timestamp, job, metric, labels, value``) between ``start`` and ``end``."""
        ...

    def describe(self) -> dict:
        """What the run manifest records of it (``metrics``); never a secret."""
        ...

    @property
    def harness_pid(self) -> int | None:
        """A process it started beside the measured server (local Prometheus), else ``None``."""
        ...

    @property
    def harness_cpu_seconds(self) -> float | None:
        """CPU seconds that process spent (known after :meth:`stop`), else ``None``."""
        ...


def _keep_recorded(job: str) -> dict:
    """A ``metric_relabel_configs`` rule keeping only the series crdscale records for ``job``."""
    names = sorted({s.metric for s in metrics.SERIES if s.job == job})
    return {"source_labels": ["__name__"], "regex": "|".join(re.escape(n) for n in names), "action": "keep"}


def _scrape_facts(job: str, when: datetime, seconds: float, body_bytes: int) -> list[dict]:
    """The rows Prometheus itself records about a scrape, for the direct scraper."""
    return [
        {"timestamp": when, "job": job, "metric": "scrape_duration_seconds", "labels": "{}", "value": seconds},
        {"timestamp": when, "job": job, "metric": "scrape_body_size_bytes", "labels": "{}", "value": float(body_bytes)},
    ]


# kube-apiserver's /metrics grows with every CRD (request and storage families per resource:
# a 38 MB body at 2,000 provider-like CRDs). Once one scrape outlasts the interval, every scrape
# times out and the series stop. The /metrics jobs then move up this ladder to the first
# interval at least twice the last scrape's duration (measured: benchmarks/completeness.py);
# RSS, CPU, fds and threads stay at the run's interval through /proc (ProcSampler).
CADENCE_LADDER_S = (1.0, 2.0, 3.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0)
# Above this share of the interval a scrape is close enough to timing out to move up a rung.
CADENCE_HEADROOM = 0.6
CADENCE_CHECK_EVERY_S = 5.0


def next_cadence(interval_s: float, last_duration_s: float, up: bool) -> float:
    """The scrape interval a job should move to after a scrape that took ``last_duration_s``
    (``up`` False: it failed, e.g. timed out at the interval): unchanged while the scrape fits
    with headroom, else the first rung of :data:`CADENCE_LADDER_S` at least twice the duration
    (twice the interval after a failure). Never moves down: /metrics only grows during a run."""
    if up and last_duration_s <= CADENCE_HEADROOM * interval_s:
        return interval_s
    return _rung_for(interval_s, 2 * max(last_duration_s, interval_s if not up else 0.0))


def _rung_for(interval_s: float, need_s: float) -> float:
    """The first rung of :data:`CADENCE_LADDER_S` at least ``need_s`` (the top rung at most),
    never below the current ``interval_s``."""
    return max(interval_s, next((v for v in CADENCE_LADDER_S if v >= need_s), CADENCE_LADDER_S[-1]))


# The budget is judged on this much of the run (cumulative from the first scrape): a few scrapes,
# and the server's own work averaged over more than one GC cycle or OpenAPI rebuild.
BUDGET_WARMUP_S = 60.0


def budget_cadence(interval_s: float, scrape_s: float, server_cores: float, budget: float) -> float:
    """The interval at which scrapes of ``scrape_s`` seconds cost kube-apiserver at most ``budget``
    (a fraction) of the CPU it spends on its own work (``server_cores``, its average CPU rate
    without our scrapes): unchanged if the current one does, else the first rung of
    :data:`CADENCE_LADDER_S` that does (the top rung at most). Never moves down."""
    if budget <= 0 or server_cores <= 0 or scrape_s <= 0:
        return interval_s
    need = SCRAPE_CPU_PER_SECOND * scrape_s / (budget * server_cores)
    return interval_s if need <= interval_s else _rung_for(interval_s, need)


class LocalPrometheus:
    """A Prometheus process on 127.0.0.1 with a throwaway TSDB in a temp directory.

    Parameters:
        apiserver_target: ``host:port`` of kube-apiserver.
        ca_file, token_file: the instance's CA and bare bearer-token file (never copied
            into a run directory; the generated config only points at them).
        etcd_target: ``host:port`` of etcd's client URL (serves ``/metrics``), or ``None``.
        controller_manager_target: ``host:port`` of kube-controller-manager's secure port (its
            certificate is signed by ``ca_file``), or ``None``.
        interval_s: scrape interval (default 1 s); each job's interval grows when its scrapes
            outlast it (:func:`next_cadence`, checked every few seconds while it runs).
        apiserver_interval_s: kube-apiserver's ``/metrics`` interval when longer than ``interval_s``
            (its scrapes cost the server CPU that grows with every CRD).
        cpu_budget: the share of kube-apiserver's CPU its ``/metrics`` scrapes may cost (0.05 =
            5 %; 0: no budget). Judged over the run so far from ``process_cpu_seconds_total`` and
            ``scrape_duration_seconds`` (:func:`budget_cadence`); a light, settling server gets
            a longer interval than a busy one.
        workdir: where its config and log go (default: a temp directory).
        on_cadence: called with each change, ``{"job", "interval_s", "previous_s", "reason",
            "scrape_duration_s", "up"}`` (and ``server_cores``, ``scrape_share`` for the budget).
        session: the HTTP transport to it (default: a plain ``requests.Session``); every call
            goes through :class:`~crdscale.collect.prometheus.PrometheusClient` over it, so unit
            tests pass a fake one.
    """

    kind = "prometheus"

    def __init__(
        self,
        apiserver_target: str,
        ca_file: Path,
        token_file: Path,
        etcd_target: str | None = None,
        interval_s: float = 1.0,
        binary: str | None = None,
        *,
        tsdb_dir: Path | None = None,
        on_spawn: Callable[[int, Path], None] | None = None,
        on_cadence: Callable[[dict], None] | None = None,
        apiserver_interval_s: float | None = None,
        cpu_budget: float = 0.0,
        workdir: Path | None = None,
        controller_manager_target: str | None = None,
        session: requests.Session | None = None,
    ):
        self.binary = binaries.prometheus(binary)
        self.apiserver_target = apiserver_target
        self.etcd_target = etcd_target
        self.controller_manager_target = controller_manager_target
        self.ca_file = ca_file
        self.token_file = token_file
        self.interval_s = interval_s
        (self.port,) = free_ports(1)
        self.url = f"http://127.0.0.1:{self.port}"
        # Start-up checks, the cadence loop and the export share one client; control calls wait 5 s
        # at most, so a busy Prometheus delays a cadence check, not the run.
        self._session = session or requests.Session()
        self._api = PrometheusClient(self.url, session=self._session, timeout_s=5.0)
        self._workdir: Path | None = Path(workdir) if workdir else None
        self._tsdb_dir = Path(tsdb_dir) if tsdb_dir else None
        self.scrapes = True
        self.cpu_seconds: float | None = None
        self.on_spawn = on_spawn
        self.on_cadence = on_cadence
        self.job_interval_s = {
            "kube-apiserver": max(interval_s, apiserver_interval_s or interval_s),
            **({"etcd": interval_s} if etcd_target else {}),
            **({CONTROLLER_MANAGER_JOB: interval_s} if controller_manager_target else {}),
        }
        self.cadence_changes: list[dict] = []
        self.cpu_budget = cpu_budget
        self._cpu_origin: tuple[float, float] | None = None  # (monotonic time, server CPU s) at the first look
        self._changed_at: dict[str, float] = {}
        self._adapting = threading.Event()
        self._adapter: threading.Thread | None = None
        self.proc: subprocess.Popen | None = None

    @property
    def harness_pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def harness_cpu_seconds(self) -> float | None:
        return self.cpu_seconds

    @property
    def workdir(self) -> Path:
        """Its config and log: the ``workdir`` given (e.g. inside a local instance's directory,
        which ``crdscale down`` removes even after the runner was killed), else a temp
        directory; made on first use, removed by ``stop()``."""
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix="crdscale-prometheus-"))
        self._workdir.mkdir(mode=0o700, parents=True, exist_ok=True)
        return self._workdir

    @property
    def tsdb_dir(self) -> Path:
        return self._tsdb_dir if self._tsdb_dir is not None else self.workdir / "data"

    def config(self) -> dict:
        interval = f"{self.interval_s:g}s"

        def cadence(job: str) -> dict:
            every = f"{self.job_interval_s.get(job, self.interval_s):g}s"
            return {"scrape_interval": every, "scrape_timeout": every}

        jobs = [
            {
                "job_name": "kube-apiserver",
                **cadence("kube-apiserver"),
                "scheme": "https",
                "tls_config": {"ca_file": str(self.ca_file)},
                "authorization": {"type": "Bearer", "credentials_file": str(self.token_file)},
                "static_configs": [{"targets": [self.apiserver_target]}],
                # Only the families we record are encoded (where the server supports name[]), and
                # the relabelling keeps only the recorded series (where it does not).
                "params": {"name[]": metrics.exposed_families("kube-apiserver")},
                "metric_relabel_configs": [_keep_recorded("kube-apiserver")],
            }
        ]
        if self.etcd_target:
            jobs.append(
                {
                    "job_name": "etcd",
                    **cadence("etcd"),
                    "static_configs": [{"targets": [self.etcd_target]}],
                    "params": {"name[]": metrics.exposed_families("etcd")},
                    "metric_relabel_configs": [_keep_recorded("etcd")],
                }
            )
        if self.controller_manager_target:
            jobs.append(
                {
                    "job_name": CONTROLLER_MANAGER_JOB,
                    **cadence(CONTROLLER_MANAGER_JOB),
                    "scheme": "https",
                    "tls_config": {"ca_file": str(self.ca_file)},
                    "static_configs": [{"targets": [self.controller_manager_target]}],
                    "params": {"name[]": metrics.exposed_families(CONTROLLER_MANAGER_JOB)},
                    "metric_relabel_configs": [_keep_recorded(CONTROLLER_MANAGER_JOB)],
                }
            )
        return {
            "global": {"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": "15s"},
            "scrape_configs": jobs if self.scrapes else [],
        }

    def start(self) -> LocalPrometheus:
        config_path = write_atomic(self.workdir / "prometheus.yml", yaml.safe_dump(self.config(), sort_keys=False))
        log = open(self.workdir / "prometheus.log", "ab")
        self.proc = subprocess.Popen(
            [
                str(self.binary.path),
                f"--config.file={config_path}",
                f"--storage.tsdb.path={self.tsdb_dir}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=100y",
                # scrape_body_size_bytes per job, beside scrape_duration_seconds. Not native-histograms,
                # although the protobuf exposition it negotiates costs kube-apiserver less CPU than
                # text: v1.37 then sends native histograms, and Prometheus 2.42 drops their classic
                # _bucket/_count/_sum series, which is what crdscale records.
                "--enable-feature=extra-scrape-metrics",
                # Unaggregated series are exported as raw samples (a missed scrape stays a gap);
                # aggregated ones by range query, which must bridge the longest cadence.
                f"--query.lookback-delta={2 * max(CADENCE_LADDER_S[-1], self.interval_s):g}s",
                # Deliberately no remote access: the API is only for our own range queries.
                "--web.enable-lifecycle",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        if self.on_spawn is not None:  # recorded at once: a runner killed now must not orphan it
            self.on_spawn(self.proc.pid, self.workdir / "prometheus.log")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ClusterError(
                    f"prometheus exited at start-up (exit {self.proc.returncode}); see {self.workdir}/prometheus.log"
                )
            try:
                # Ready is not enough: the run window starts once every target was scraped.
                if self._api.ready() and self._all_scraped():
                    if self.scrapes:
                        self._adapter = threading.Thread(target=self._adapt_loop, name="crdscale-cadence", daemon=True)
                        self._adapter.start()
                    return self
            except ClusterError:
                pass  # up, but its API not answering yet
            time.sleep(0.3)
        raise ClusterError(f"prometheus did not scrape its targets within 60 s; see {self.workdir}/prometheus.log")

    @classmethod
    def reopen(cls, tsdb_dir: Path, binary: str | None = None) -> LocalPrometheus:
        """A Prometheus serving an existing database and scraping nothing (to export a run
        whose runner died; ``start()`` returns once it answers)."""
        prom = cls("", Path(), Path(), binary=binary, tsdb_dir=tsdb_dir)
        prom.scrapes = False
        return prom

    def _all_scraped(self) -> bool:
        if not self.scrapes:
            return True
        targets = self._api.targets()
        return bool(targets) and all(t.get("lastScrape", "").startswith("20") and t["health"] == "up" for t in targets)

    def _instant(self, query: str) -> float | None:
        result = self._api.query(query)
        return float(result[0]["value"][1]) if result else None

    def adapt(self) -> list[dict]:
        """Move each job whose last scrape failed or came close to its timeout to a longer
        interval (:func:`next_cadence`), and kube-apiserver's to one within the CPU budget
        (:func:`budget_cadence`); reload Prometheus; returns the changes."""
        changes = []
        now = time.monotonic()
        budget = self._budget_facts(now) if self.cpu_budget > 0 and "kube-apiserver" in self.job_interval_s else None
        for job, interval in list(self.job_interval_s.items()):
            if now - self._changed_at.get(job, float("-inf")) < 2 * interval:
                continue  # the last scrape may still be one at the old interval
            duration = self._instant(f'scrape_duration_seconds{{job="{job}"}}')
            up = self._instant(f'up{{job="{job}"}}')
            if duration is None or up is None:
                continue
            change = {"job": job, "previous_s": interval, "scrape_duration_s": round(duration, 3), "up": up == 1.0}
            new = next_cadence(interval, duration, up == 1.0)
            if new != interval:
                change["reason"] = "scrape duration"
            elif job == "kube-apiserver" and budget is not None:
                new = budget_cadence(interval, duration, budget["server_cores"], self.cpu_budget)
                change.update(reason="cpu budget", **budget)
            if new != interval:
                self.job_interval_s[job] = new
                self._changed_at[job] = now
                changes.append({**change, "interval_s": new})
        if changes:
            write_atomic(self.workdir / "prometheus.yml", yaml.safe_dump(self.config(), sort_keys=False))
            self._api.reload()
            self.cadence_changes.extend(changes)
            for change in changes:
                if self.on_cadence is not None:
                    self.on_cadence(change)
        return changes

    def _budget_facts(self, now: float) -> dict | None:
        """kube-apiserver's own CPU rate (cores, our scrapes' estimated cost taken out) and the
        share its scrapes took, over the run since the first look; None until there is enough."""
        cpu = self._instant('process_cpu_seconds_total{job="kube-apiserver"}')
        if cpu is None:
            return None
        if self._cpu_origin is None or cpu < self._cpu_origin[1]:  # first look, or the server restarted
            self._cpu_origin = (now, cpu)
            return None
        since, cpu_then = self._cpu_origin
        elapsed = now - since
        if elapsed < BUDGET_WARMUP_S:
            return None
        scraped = self._instant(f'sum_over_time(scrape_duration_seconds{{job="kube-apiserver"}}[{elapsed:.0f}s])')
        cost, own = scrape_cost(cpu - cpu_then, scraped or 0.0)
        if own <= 0:
            return None
        return {"server_cores": round(own / elapsed, 4), "scrape_share": round(cost / own, 4)}

    def _adapt_loop(self) -> None:
        while not self._adapting.wait(CADENCE_CHECK_EVERY_S):
            try:
                self.adapt()
            except (ClusterError, KeyError, ValueError):
                pass  # Prometheus busy or stopping: try again at the next check

    def client(self) -> PrometheusClient:
        """Its HTTP API (local, plain HTTP, no credentials; range queries may take a minute)."""
        return PrometheusClient(self.url, session=self._session)

    def series(self, start: datetime, end: datetime):
        return metrics.query_prometheus(self.client(), start, end, self.interval_s)

    def stop(self) -> None:
        self._adapting.set()
        if self._adapter is not None:
            self._adapter.join(timeout=15)
        if self.proc and self.proc.poll() is None:
            # What Prometheus cost beside the server being measured (the report's harness overhead).
            self.cpu_seconds = cpu_seconds(self.proc.pid)
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        self._session.close()

    def describe(self) -> dict:
        return {
            "source": self.kind,
            "prometheus_version": self.binary.version,
            "scrape_interval_s": self.interval_s,
            "prometheus_cpu_seconds": self.cpu_seconds,
            "job_interval_s": dict(self.job_interval_s),
            "apiserver_cpu_budget": self.cpu_budget,
            "cadence_changes": list(self.cadence_changes),
        }


class RemotePrometheus:
    """A Prometheus the user already runs; crdscale only queries it, with the TLS trust and
    credentials of ``access`` (a CA file, a bearer token or basic auth from files)."""

    kind = "remote-prometheus"
    harness_pid: int | None = None  # it runs elsewhere: no process and no CPU of ours
    harness_cpu_seconds: float | None = None

    def __init__(
        self, access: PrometheusAccess | str, interval_s: float = 1.0, job_labels: dict[str, str] | None = None
    ):
        self.access = access if isinstance(access, PrometheusAccess) else PrometheusAccess(access)
        self.url = self.access.url.rstrip("/")
        self.interval_s = interval_s
        self.job_labels = job_labels or {}
        self._client: PrometheusClient | None = None
        self.version = "unknown"

    def start(self) -> RemotePrometheus:
        """Check it answers with these credentials (raises :class:`ClusterError` with one line)."""
        self._client = self.access.client()
        self.version = str(self._client.buildinfo().get("version", "unknown"))
        return self

    def series(self, start: datetime, end: datetime):
        client = self._client or self.access.client()
        return metrics.query_prometheus(client, start, end, self.interval_s, job_labels=self.job_labels)

    def stop(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def describe(self) -> dict:
        # File names and the kind of auth only: the manifest never holds a secret.
        return {
            "source": self.kind,
            **self.access.describe(),
            "prometheus_version": self.version,
            "scrape_interval_s": self.interval_s,
            "job_labels": self.job_labels,
        }


class _Sampler:
    """A thread that calls :meth:`sample` every ``interval_s`` and keeps the tidy rows it returns;
    every ``flush_s`` the new rows go to ``sink`` (the runner writes them into the run directory)."""

    kind = "sampler"
    harness_pid: int | None = None  # a thread of crdscale's own: its CPU is crdscale's
    harness_cpu_seconds: float | None = None

    def __init__(self, interval_s: float, *, sink: Callable[[pd.DataFrame], None] | None = None, flush_s: float = 10.0):
        self.interval_s = interval_s
        self.sink = sink
        self.flush_s = flush_s
        self.rows: list[dict] = []
        self._flushed = 0  # rows already handed to the sink
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"crdscale-{self.kind}", daemon=True)
        self._lock = threading.Lock()

    def sample(self, now: datetime) -> list[dict]:
        raise NotImplementedError

    def start(self):
        self._thread.start()
        return self

    def scrape_once(self) -> None:
        got = self.sample(datetime.now(timezone.utc))
        with self._lock:
            self.rows += got

    def _loop(self) -> None:
        next_at = time.monotonic()
        flush_at = time.monotonic() + self.flush_s
        while not self._stop.is_set():
            self.scrape_once()
            if self.sink is not None and time.monotonic() >= flush_at:
                self.flush()
                flush_at = time.monotonic() + self.flush_s
            next_at += self.interval_s
            # A sample slower than the interval is not made up for with a burst of samples.
            next_at = max(next_at, time.monotonic())
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def flush(self) -> None:
        """Hand the rows collected since the last flush to the sink (errors are counted, not raised)."""
        with self._lock:
            new, self._flushed = self.rows[self._flushed :], len(self.rows)
        if new and self.sink is not None:
            try:
                self.sink(metrics.tidy_frame(new))
            except Exception:  # a full disk must not stop the run; the final export still has them
                self.errors += 1

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


class DirectScraper(_Sampler):
    """Scrape kube-apiserver's (and etcd's, and kube-controller-manager's) ``/metrics`` every
    ``interval_s`` in a thread. ``ca_file`` verifies kube-controller-manager's certificate."""

    kind = "direct-scrape"

    def __init__(
        self,
        cluster: Cluster,
        etcd_metrics_url: str | None = None,
        interval_s: float = 1.0,
        *,
        controller_manager_metrics_url: str | None = None,
        ca_file: Path | None = None,
        **kwargs,
    ):
        super().__init__(interval_s, **kwargs)
        self.cluster = cluster
        self.etcd_metrics_url = etcd_metrics_url
        self.controller_manager_metrics_url = controller_manager_metrics_url
        self.ca_file = ca_file
        self._families = metrics.exposed_families("kube-apiserver")
        self._session = requests.Session()

    def sample(self, now: datetime) -> list[dict]:
        got = []
        t0 = time.monotonic()
        try:
            resp = self.cluster.get(
                "/metrics", params={"name[]": self._families}, timeout=max(5.0, self.interval_s * 5)
            )
            if resp.status_code == 200:
                got += metrics.aggregate_scrape(resp.text, "kube-apiserver", now)
                got += _scrape_facts("kube-apiserver", now, time.monotonic() - t0, len(resp.content))
        except ClusterError:
            self.errors += 1
        if self.etcd_metrics_url:
            got += self._scrape("etcd", self.etcd_metrics_url, now)
        if self.controller_manager_metrics_url:
            got += self._scrape(
                CONTROLLER_MANAGER_JOB,
                self.controller_manager_metrics_url,
                now,
                params={"name[]": metrics.exposed_families(CONTROLLER_MANAGER_JOB)},
                verify=str(self.ca_file) if self.ca_file else True,
            )
        return got

    def _scrape(self, job: str, url: str, now: datetime, **kwargs) -> list[dict]:
        t0 = time.monotonic()
        try:
            resp = self._session.get(url, timeout=5, **kwargs)
            resp.raise_for_status()
        except requests.RequestException:
            self.errors += 1
            return []
        return [
            *metrics.aggregate_scrape(resp.text, job, now),
            *_scrape_facts(job, now, time.monotonic() - t0, len(resp.content)),
        ]

    def stop(self) -> None:
        super().stop()
        self._session.close()


class ProcSampler(_Sampler):
    """RSS, CPU seconds, open fds and threads of a local process read from /proc every ``interval_s``.

    The same numbers client_golang's process collector puts in ``/metrics`` (it
    reads the same files), but costing the server nothing: at thousands of CRDs a
    ``/metrics`` scrape can take longer than the interval, and these series stay
    complete regardless. Recorded as job ``job``: ``kube-apiserver-proc`` by default
    (:data:`crdscale.rundir.layout.PROC_JOBS` names one per component).
    """

    kind = "proc"
    JOB = layout.PROC_JOB

    def __init__(self, pid: int, interval_s: float = 1.0, *, job: str = layout.PROC_JOB, **kwargs):
        super().__init__(interval_s, **kwargs)
        self.pid = pid
        self.job = job

    def sample(self, now: datetime) -> list[dict]:
        rss = rss_bytes(self.pid)
        try:
            fds = len(os.listdir(f"/proc/{self.pid}/fd"))
        except OSError:
            fds = None
        if rss is None or fds is None:  # the process is gone: the watchdog reports that
            self.errors += 1
            return []
        fields = stat_fields(self.pid)
        if fields is None:
            self.errors += 1
            return []
        values = {
            "process_resident_memory_bytes": rss,
            "process_cpu_seconds_total": cpu_seconds(self.pid, fields),
            "process_open_fds": fds,
            "process_threads": thread_count(fields),
        }
        return [
            {"timestamp": now, "job": self.job, "metric": name, "labels": "{}", "value": float(value)}
            for name, value in values.items()
        ]


@dataclass(frozen=True)
class LocalEndpoints:
    """What a local control plane offers a metrics source: ``host:port`` targets for Prometheus, the
    URLs a direct scrape reads, the credentials, and the instance directory Prometheus works in."""

    apiserver: str
    etcd_client: str
    ca_cert: Path
    token_file: Path
    etcd_metrics_url: str | None
    controller_manager: str | None  # host:port, when it serves /metrics
    controller_manager_metrics_url: str | None
    workdir: Path


def open_metrics_source(
    wanted: str,
    interval_s: float,
    *,
    cluster: Cluster,
    local: LocalEndpoints | None = None,
    remote: PrometheusAccess | None = None,
    job_labels: dict[str, str] | None = None,
    apiserver_interval_s: float | None = None,
    cpu_budget: float = 0.0,
    tsdb_dir: Path | None = None,
    on_spawn: Callable[[int, Path], None] | None = None,
    on_cadence: Callable[[dict], None] | None = None,
    sink: Callable[[pd.DataFrame], None] | None = None,
    on_fallback: Callable[[str], None] | None = None,
) -> MetricsSource:
    """The metrics source of a run (not started), as ``metrics.source`` (``wanted``) asks.

    A user's Prometheus (``remote``) wins; else a local Prometheus beside a local target with
    ``auto``/``prometheus`` (``auto`` falls back to direct scrapes, telling ``on_fallback``, when
    no prometheus binary is there; ``prometheus`` raises :class:`BinaryError`); else crdscale
    scrapes ``/metrics`` itself, handing rows to ``sink`` as it goes.
    """
    if remote is not None:
        return RemotePrometheus(remote, interval_s, job_labels=job_labels)
    if wanted in ("auto", "prometheus") and local is not None:
        try:
            return LocalPrometheus(
                local.apiserver,
                local.ca_cert,
                local.token_file,
                local.etcd_client,
                interval_s=interval_s,
                tsdb_dir=tsdb_dir,
                on_spawn=on_spawn,
                on_cadence=on_cadence,
                apiserver_interval_s=apiserver_interval_s,
                cpu_budget=cpu_budget,
                # in the instance's directory: `crdscale down` removes it after a kill -9
                workdir=local.workdir,
                controller_manager_target=local.controller_manager,
            )
        except BinaryError:
            if wanted == "prometheus":
                raise
            if on_fallback is not None:
                on_fallback("no prometheus binary: scraping /metrics directly")
    return DirectScraper(
        cluster,
        local.etcd_metrics_url if local else None,
        interval_s,
        controller_manager_metrics_url=local.controller_manager_metrics_url if local else None,
        ca_file=local.ca_cert if local else None,
        sink=sink,
    )
