"""The /metrics cadence ladder: a job whose scrapes outlast its interval moves to a longer one."""

import pytest

from crdscale.collect.sources import CADENCE_LADDER_S, SCRAPE_CPU_PER_SECOND, budget_cadence, next_cadence


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


def test_adapt_rewrites_the_job_interval_and_reports_the_change(tmp_path, monkeypatch):
    """adapt() reads each job's last scrape from Prometheus, rewrites prometheus.yml and reloads it."""
    import yaml

    from crdscale.collect import sources

    monkeypatch.setattr(
        sources.binaries, "prometheus", lambda _b=None: type("B", (), {"path": "prometheus", "version": "x"})()
    )
    reported = []
    prom = sources.LocalPrometheus(
        "127.0.0.1:1", tmp_path / "ca", tmp_path / "token", "127.0.0.1:2", on_cadence=reported.append
    )
    last = {
        'scrape_duration_seconds{job="kube-apiserver"}': 1.0,
        'up{job="kube-apiserver"}': 0.0,
        'scrape_duration_seconds{job="etcd"}': 0.01,
        'up{job="etcd"}': 1.0,
    }
    monkeypatch.setattr(prom, "_instant", last.get)
    reloads = []
    monkeypatch.setattr(
        sources.requests,
        "post",
        lambda url, timeout: reloads.append(url) or type("R", (), {"raise_for_status": lambda self: None})(),
    )
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
        "127.0.0.1:1", tmp_path / "ca", tmp_path / "token", "127.0.0.1:2", apiserver_interval_s=20, cpu_budget=0.05
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
    monkeypatch.setattr(
        sources.requests, "post", lambda url, timeout: type("R", (), {"raise_for_status": lambda self: None})()
    )
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


def test_scrape_cost_splits_the_servers_cpu_into_our_scrapes_and_its_own_work():
    from crdscale.collect.sources import scrape_cost

    cost, own = scrape_cost(16.0, 1.2)
    assert cost == pytest.approx(SCRAPE_CPU_PER_SECOND * 1.2) and own == pytest.approx(16.0 - cost)
