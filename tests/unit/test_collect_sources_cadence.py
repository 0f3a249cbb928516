"""The /metrics cadence ladder: a job whose scrapes outlast its interval moves to a longer one."""

import json

import pytest
import requests

from crdscale.analysis.harness import SCRAPE_CPU_PER_SECOND
from crdscale.collect.sources import CADENCE_LADDER_S, budget_cadence, next_cadence


@pytest.mark.parametrize(
    "interval,duration,up,expected",
    [
        (1.0, 0.2, True, 1.0),  # fits with headroom: unchanged
        (1.0, 0.7, True, 2.0),  # close to the timeout: the first rung >= 2 x 0.7 s
        (1.0, 1.0, False, 2.0),  # timed out at 1 s: twice the interval
        (2.0, 1.9, False, 5.0),  # timed out at 2 s: >= 4 s
        (5.0, 4.0, True, 10.0),
        (5.0, 1.0, True, 5.0),  # never moves down
        (30.0, 40.0, False, 60.0),  # the top rung caps it
        (60.0, 60.0, False, 60.0),
    ],
)
def test_next_cadence(interval, duration, up, expected):
    assert next_cadence(interval, duration, up) == expected


def test_the_ladder_starts_at_one_second_and_rises():
    assert CADENCE_LADDER_S[0] == 1.0 and list(CADENCE_LADDER_S) == sorted(CADENCE_LADDER_S)


class FakePrometheus:
    """A requests.Session stand-in for the Prometheus crdscale starts: instant queries answered from
    ``values`` (PromQL -> number), targets from ``targets``, ``/-/ready`` while ``is_ready``;
    reloads recorded in ``posts``."""

    def __init__(self, values=None, targets=(), is_ready=True):
        self.values = dict(values or {})
        self.targets = list(targets)
        self.is_ready = is_ready
        self.gets, self.posts = [], []

    @staticmethod
    def _answer(status, body):
        resp = requests.Response()
        resp.status_code = status
        resp._content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        return resp

    def get(self, url, params=None, timeout=None):
        path = url.split("/", 3)[3]
        self.gets.append((path, dict(params or {})))
        if path == "-/ready":
            return self._answer(200 if self.is_ready else 503, "Prometheus Server is Ready.\n")
        if path == "api/v1/targets":
            return self._answer(200, {"status": "success", "data": {"activeTargets": self.targets}})
        if path == "api/v1/query":
            value = self.values.get(params["query"])
            result = [] if value is None else [{"metric": {}, "value": [0, str(value)]}]
            return self._answer(200, {"status": "success", "data": {"resultType": "vector", "result": result}})
        return self._answer(404, "404 page not found\n")

    def post(self, url, params=None, timeout=None):
        self.posts.append(url)
        return self._answer(200, "")

    def close(self):
        pass


def _local_prometheus(tmp_path, monkeypatch, **kwargs):
    from crdscale.collect import sources

    monkeypatch.setattr(
        sources.binaries, "prometheus", lambda _b=None: type("B", (), {"path": "prometheus", "version": "x"})()
    )
    return sources.LocalPrometheus("127.0.0.1:1", tmp_path / "ca", tmp_path / "token", "127.0.0.1:2", **kwargs)


def test_every_call_to_the_local_prometheus_goes_through_its_client(tmp_path, monkeypatch):
    """Readiness, targets, instant queries and reloads use the injected transport (no server)."""
    fake = FakePrometheus(
        values={'up{job="etcd"}': 1.0},
        targets=[{"health": "up", "lastScrape": "2026-01-01T00:00:00Z"}, {"health": "up", "lastScrape": "20"}],
    )
    prom = _local_prometheus(tmp_path, monkeypatch, session=fake)
    try:
        assert prom._api.ready() and prom._all_scraped()
        assert prom._instant('up{job="etcd"}') == 1.0 and prom._instant("nothing") is None
        prom._api.reload()
        assert fake.posts == [f"{prom.url}/-/reload"]
        assert [path for path, _ in fake.gets] == ["-/ready", "api/v1/targets", "api/v1/query", "api/v1/query"]
        fake.targets[1]["health"] = "down"
        assert not prom._all_scraped()
        fake.is_ready = False
        assert not prom._api.ready()
        assert prom.client().session is fake
    finally:
        prom.stop()


def test_an_unreachable_prometheus_is_not_ready_and_its_reload_is_a_one_line_error():
    from crdscale.collect.prometheus import PrometheusClient
    from crdscale.errors import ClusterError

    class Refusing:
        def get(self, url, params=None, timeout=None):
            raise requests.ConnectionError("Connection refused")

        post = get

    client = PrometheusClient("http://127.0.0.1:9", session=Refusing())
    assert client.ready() is False
    with pytest.raises(ClusterError, match="cannot reach Prometheus at http://127.0.0.1:9: Connection refused"):
        client.reload()


def test_a_failed_reload_names_the_status():
    from crdscale.collect.prometheus import PrometheusClient
    from crdscale.errors import ClusterError

    class NoLifecycle(FakePrometheus):
        def post(self, url, params=None, timeout=None):
            return self._answer(500, "failed to reload config")

    with pytest.raises(ClusterError, match="refused /-/reload: HTTP 500: failed to reload config"):
        PrometheusClient("http://127.0.0.1:9", session=NoLifecycle()).reload()


def test_adapt_rewrites_the_job_interval_and_reports_the_change(tmp_path, monkeypatch):
    """adapt() reads each job's last scrape from Prometheus, rewrites prometheus.yml and reloads it."""
    import yaml

    from crdscale.collect import sources

    monkeypatch.setattr(
        sources.binaries, "prometheus", lambda _b=None: type("B", (), {"path": "prometheus", "version": "x"})()
    )
    reported = []
    prom = sources.LocalPrometheus(
        "127.0.0.1:1",
        tmp_path / "ca",
        tmp_path / "token",
        "127.0.0.1:2",
        on_cadence=reported.append,
        session=FakePrometheus(),
    )
    last = {
        'scrape_duration_seconds{job="kube-apiserver"}': 1.0,
        'up{job="kube-apiserver"}': 0.0,
        'scrape_duration_seconds{job="etcd"}': 0.01,
        'up{job="etcd"}': 1.0,
    }
    monkeypatch.setattr(prom, "_instant", last.get)
    reloads = prom._session.posts
    try:
        assert prom.adapt() == [
            {
                "job": "kube-apiserver",
                "interval_s": 2.0,
                "previous_s": 1.0,
                "scrape_duration_s": 1.0,
                "up": False,
                "reason": "scrape duration",
            }
        ]
        assert reported == prom.cadence_changes and reloads == [f"{prom.url}/-/reload"]
        config = yaml.safe_load((prom.workdir / "prometheus.yml").read_text())
        jobs = {j["job_name"]: j for j in config["scrape_configs"]}
        assert jobs["kube-apiserver"]["scrape_interval"] == jobs["kube-apiserver"]["scrape_timeout"] == "2s"
        assert jobs["etcd"]["scrape_interval"] == "1s"
        last['scrape_duration_seconds{job="kube-apiserver"}'] = 2.0  # still the old scrape, timed out
        assert prom.adapt() == []  # no scrape at the new interval yet: wait for one
        prom._changed_at["kube-apiserver"] -= 10
        last['up{job="kube-apiserver"}'] = 1.0
        last['scrape_duration_seconds{job="kube-apiserver"}'] = 1.1
        assert prom.adapt() == []  # 1.1 s of a 2 s interval: fits now
    finally:
        prom.stop()


def test_the_scrape_config_asks_for_the_recorded_families_only(tmp_path, monkeypatch):
    """kube-apiserver >= 1.37 encodes only the families named by name[] (a third of a full
    scrape's CPU at 300 CRDs); the keep rule still drops the rest on servers that ignore it."""
    from crdscale.collect import metrics, sources

    monkeypatch.setattr(
        sources.binaries, "prometheus", lambda _b=None: type("B", (), {"path": "prometheus", "version": "x"})()
    )
    prom = sources.LocalPrometheus("127.0.0.1:1", tmp_path / "ca", tmp_path / "token", "127.0.0.1:2")
    jobs = {job["job_name"]: job for job in prom.config()["scrape_configs"]}
    assert jobs["kube-apiserver"]["params"] == {"name[]": metrics.exposed_families("kube-apiserver")}
    assert jobs["etcd"]["params"] == {"name[]": metrics.exposed_families("etcd")}
    assert jobs["kube-apiserver"]["metric_relabel_configs"][0]["action"] == "keep"


@pytest.mark.parametrize(
    "interval,scrape,cores,budget,expected",
    [
        (20.0, 0.2, 2.0, 0.05, 20.0),  # a busy server: 0.26 CPU-s every 20 s is 0.65 % of 2 cores
        (20.0, 0.16, 0.13, 0.05, 45.0),  # the 300-CRD run settling: needs >= 32 s
        (20.0, 0.2, 0.01, 0.05, 60.0),  # an idle server: the top rung caps it
        (45.0, 0.2, 2.0, 0.05, 45.0),  # never moves down
        (20.0, 0.2, 0.1, 0.0, 20.0),  # no budget
        (20.0, 0.2, 0.0, 0.05, 20.0),  # nothing known of the server yet
    ],
)
def test_budget_cadence(interval, scrape, cores, budget, expected):
    assert budget_cadence(interval, scrape, cores, budget) == expected


def test_budget_cadence_keeps_the_cost_within_the_budget():
    for scrape in (0.05, 0.2, 1.0):
        for cores in (0.1, 0.5, 1.5):
            interval = budget_cadence(5.0, scrape, cores, 0.05)
            assert interval == CADENCE_LADDER_S[-1] or SCRAPE_CPU_PER_SECOND * scrape / interval <= 0.05 * cores


def test_adapt_moves_kube_apiserver_within_its_cpu_budget(tmp_path, monkeypatch):
    """The server's own CPU rate comes from its process_cpu_seconds_total over the run so far,
    less what the scrapes themselves cost (their durations); the interval then moves up so that
    the scrapes stay within the budget, and the change says why."""
    from crdscale.collect import sources

    monkeypatch.setattr(
        sources.binaries, "prometheus", lambda _b=None: type("B", (), {"path": "prometheus", "version": "x"})()
    )
    clock = [1000.0]
    monkeypatch.setattr(sources.time, "monotonic", lambda: clock[0])
    prom = sources.LocalPrometheus(
        "127.0.0.1:1",
        tmp_path / "ca",
        tmp_path / "token",
        "127.0.0.1:2",
        apiserver_interval_s=20,
        cpu_budget=0.05,
        session=FakePrometheus(),
    )
    window = f"{sources.BUDGET_WARMUP_S + 60:.0f}s"
    last = {
        'scrape_duration_seconds{job="kube-apiserver"}': 0.2,
        'up{job="kube-apiserver"}': 1.0,
        'scrape_duration_seconds{job="etcd"}': 0.01,
        'up{job="etcd"}': 1.0,
        'process_cpu_seconds_total{job="kube-apiserver"}': 50.0,
        f'sum_over_time(scrape_duration_seconds{{job="kube-apiserver"}}[{window}])': 6 * 0.2,
    }
    monkeypatch.setattr(prom, "_instant", last.get)
    try:
        assert prom.adapt() == []  # the first look: where the server's CPU starts
        clock[0] += 30
        assert prom.adapt() == []  # not enough of the run yet
        clock[0] += sources.BUDGET_WARMUP_S + 30
        # 120 s: 16 CPU-s in all, 1.56 of them our six scrapes: 0.12 cores of its own work.
        last['process_cpu_seconds_total{job="kube-apiserver"}'] = 66.0
        cost = SCRAPE_CPU_PER_SECOND * 1.2
        (change,) = prom.adapt()
        assert change == {
            "job": "kube-apiserver",
            "previous_s": 20.0,
            "interval_s": 45.0,
            "reason": "cpu budget",
            "scrape_duration_s": 0.2,
            "up": True,
            "server_cores": round((16 - cost) / 120, 4),
            "scrape_share": round(cost / (16 - cost), 4),
        }
        assert prom.job_interval_s == {"kube-apiserver": 45.0, "etcd": 1.0}
    finally:
        prom.stop()
