"""The /metrics cadence ladder: a job whose scrapes outlast its interval moves to a longer one."""

import pytest

from crdscale.collect.sources import CADENCE_LADDER_S, next_cadence


@pytest.mark.parametrize("interval,duration,up,expected", [
    (1.0, 0.2, True, 1.0),     # fits with headroom: unchanged
    (1.0, 0.7, True, 2.0),     # close to the timeout: the first rung >= 2 x 0.7 s
    (1.0, 1.0, False, 2.0),    # timed out at 1 s: twice the interval
    (2.0, 1.9, False, 5.0),    # timed out at 2 s: >= 4 s
    (5.0, 4.0, True, 10.0),
    (5.0, 1.0, True, 5.0),     # never moves down
    (30.0, 40.0, False, 60.0),  # the top rung caps it
    (60.0, 60.0, False, 60.0),
])
def test_next_cadence(interval, duration, up, expected):
    assert next_cadence(interval, duration, up) == expected


def test_the_ladder_starts_at_one_second_and_rises():
    assert CADENCE_LADDER_S[0] == 1.0 and list(CADENCE_LADDER_S) == sorted(CADENCE_LADDER_S)


def test_adapt_rewrites_the_job_interval_and_reports_the_change(tmp_path, monkeypatch):
    """adapt() reads each job's last scrape from Prometheus, rewrites prometheus.yml and reloads it."""
    import yaml

    from crdscale.collect import sources

    monkeypatch.setattr(sources.binaries, "prometheus", lambda _b=None: type("B", (), {"path": "prometheus", "version": "x"})())
    reported = []
    prom = sources.LocalPrometheus("127.0.0.1:1", tmp_path / "ca", tmp_path / "token", "127.0.0.1:2",
                                   on_cadence=reported.append)
    last = {'scrape_duration_seconds{job="kube-apiserver"}': 1.0, 'up{job="kube-apiserver"}': 0.0,
            'scrape_duration_seconds{job="etcd"}': 0.01, 'up{job="etcd"}': 1.0}
    monkeypatch.setattr(prom, "_instant", last.get)
    reloads = []
    monkeypatch.setattr(sources.requests, "post", lambda url, timeout: reloads.append(url) or type(
        "R", (), {"raise_for_status": lambda self: None})())
    try:
        assert prom.adapt() == [{"job": "kube-apiserver", "interval_s": 2.0, "previous_s": 1.0,
                                 "scrape_duration_s": 1.0, "up": False}]
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

    monkeypatch.setattr(sources.binaries, "prometheus", lambda _b=None: type("B", (), {"path": "prometheus", "version": "x"})())
    prom = sources.LocalPrometheus("127.0.0.1:1", tmp_path / "ca", tmp_path / "token", "127.0.0.1:2")
    jobs = {job["job_name"]: job for job in prom.config()["scrape_configs"]}
    assert jobs["kube-apiserver"]["params"] == {"name[]": metrics.exposed_families("kube-apiserver")}
    assert jobs["etcd"]["params"] == {"name[]": metrics.exposed_families("etcd")}
    assert jobs["kube-apiserver"]["metric_relabel_configs"][0]["action"] == "keep"
