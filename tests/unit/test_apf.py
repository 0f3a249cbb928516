"""Both APF LIST work estimators, against upstream's TestListWorkEstimator rows and the seed's sizes."""

from __future__ import annotations

import pytest

from crdscale.models import apf

# (total size, object count, limit, selector, from cache, expected object-count seats (unclamped),
#  expected size-based seats (unclamped)) -- the rows of list_work_estimator_test.go.
UPSTREAM_ROWS = [
    (100_000 - 1, 99, 0, False, False, 2, 1),
    (100_000 - 1, 10, 0, False, False, 1, 1),
    (100_000 - 1, 99, 0, False, True, 1, 1),
    (100_000 - 1, 10, 0, False, True, 1, 1),
    (1_000_000 - 1, 1000, 0, False, False, 20, 10),
    (1_000_000 - 1, 1000, 100, False, False, 2, 1),
    (1_000_000 - 1, 1000, 100, True, False, 11, 5),
    (1_000_000 - 1, 1000, 0, False, True, 10, 10),
    (1_000_000 - 1, 1000, 100, False, True, 10, 1),
    (1_000_000 - 1, 1000, 100, True, True, 10, 1),
    (1_000_000 - 1, 99, 0, False, False, 2, 10),
    (1_000_000 - 1, 99, 10, False, False, 1, 2),
    (1_000_000 - 1, 99, 10, True, False, 2, 5),
    (1_000_000 - 1, 99, 0, False, True, 1, 10),
    (10_000_000 - 1, 1000, 0, False, False, 20, 100),
    (10_000_000 - 1, 1000, 100, False, False, 2, 10),
    (10_000_000 - 1, 1000, 100, True, False, 11, 50),
    (10_000_000 - 1, 1000, 0, False, True, 10, 10),
    (10_000_000 - 1, 1000, 100, False, True, 10, 10),
    (10_000_000 - 1, 1000, 100, True, True, 10, 10),
    (10_000_000 - 1, 99, 0, False, False, 2, 100),
    (10_000_000 - 1, 99, 10, False, False, 1, 11),
    (10_000_000 - 1, 99, 10, True, False, 2, 50),
    (10_000_000 - 1, 99, 0, False, True, 1, 10),
    (10_000_000 - 1, 99, 10, False, True, 1, 10),
    (10_000_000 - 1, 99, 10, True, True, 1, 10),
]


@pytest.mark.parametrize("total, count, limit, selector, cache, want_count, want_size", UPSTREAM_ROWS)
def test_estimators_match_upstream_rows(total, count, limit, selector, cache, want_count, want_size):
    shape = apf.ListShape(
        object_count=count,
        avg_object_size_bytes=total // count,
        limit=limit,
        has_selector=selector,
        from_cache=cache,
    )
    assert apf.object_count_seats_unclamped(shape) == want_count
    assert apf.size_based_seats_unclamped(shape) == want_size


@pytest.mark.parametrize(
    "response_bytes, objects, from_cache, count_seats, size_seats",
    [
        # 100 KB responses: one seat either way.
        (100_000, 10, False, 1, 1),
        (100_000, 10, True, 1, 1),
        # 1 MB: from etcd 10 seats by size; object count gives 2*1000/100 = 20 -> clamped to 10.
        (1_000_000, 1000, False, 10, 10),
        (1_000_000, 10, False, 1, 10),
        (1_000_000, 1000, True, 10, 10),
        (1_000_000, 10, True, 1, 10),
        # 10 MB: from etcd 100 seats (the new global maximum); from cache streamed, capped at 10.
        (10_000_000, 10, False, 1, 100),
        (10_000_000, 10000, False, 10, 100),
        (10_000_000, 10, True, 1, 10),
        (10_000_000, 1000, True, 10, 10),
    ],
)
def test_seed_response_sizes(response_bytes, objects, from_cache, count_seats, size_seats):
    shape = apf.ListShape(object_count=objects, avg_object_size_bytes=response_bytes // objects, from_cache=from_cache)
    assert apf.object_count_seats(shape) == count_seats
    assert apf.size_based_seats(shape) == size_seats


def test_unstreamed_cache_response_is_not_capped():
    shape = apf.ListShape(object_count=10, avg_object_size_bytes=1_000_000, from_cache=True, streamed=False)
    assert apf.size_based_seats(shape) == 100


def test_single_object_costs_one_seat():
    shape = apf.ListShape(object_count=100_000, avg_object_size_bytes=10_000, from_cache=False, matches_single=True)
    assert apf.object_count_seats(shape) == 1
    assert apf.size_based_seats(shape) == 1


def test_priority_level_max_seats_lowers_the_cap():
    shape = apf.ListShape(object_count=10, avg_object_size_bytes=1_000_000, from_cache=False)
    assert apf.size_based_seats(shape) == 100
    assert apf.size_based_seats(shape, priority_level_max_seats=40) == 40
    assert apf.object_count_seats(apf.ListShape(5000, 1000, from_cache=True), priority_level_max_seats=4) == 4


def test_missing_size_stats_assume_the_etcd_object_limit():
    shape = apf.ListShape(object_count=2, avg_object_size_bytes=0, from_cache=False)
    assert apf.size_based_seats_unclamped(shape) == 30  # 2 * 1.5 MB / 100 KB


@pytest.mark.parametrize(
    "params, consistent_from_cache, expected",
    [
        ({"resourceVersion": "0"}, True, True),
        ({"resourceVersion": "0", "limit": "500"}, True, True),
        ({}, True, True),
        ({}, False, False),
        ({"resourceVersion": "123", "resourceVersionMatch": "Exact"}, True, False),
        ({"resourceVersion": "123", "resourceVersionMatch": "NotOlderThan"}, True, True),
        ({"limit": "500", "continue": "tok"}, True, False),
        ({"limit": "500", "resourceVersion": "123"}, True, False),
        ({"resourceVersion": "123"}, True, True),
        ({"resourceVersionMatch": "Bogus"}, True, False),
    ],
)
def test_served_from_cache(params, consistent_from_cache, expected):
    assert apf.served_from_cache(params, consistent_reads_from_cache=consistent_from_cache) is expected


def test_matches_single_object():
    assert apf.matches_single_object({"fieldSelector": "metadata.name=foo"})
    assert apf.matches_single_object({"fieldSelector": "metadata.namespace=a,metadata.name=foo"})
    assert not apf.matches_single_object({"fieldSelector": "metadata.namespace=a"})
    assert not apf.matches_single_object({"fieldSelector": "metadata.name!=foo"})
    assert not apf.matches_single_object({})


def test_seed_table_has_both_places_for_each_size():
    table = apf.seed_table()
    assert set(table["served_from"]) == {"cache", "etcd"}
    ten_mb = table[(table.response == "10MB") & (table.objects == 10)].set_index("served_from")
    assert ten_mb.loc["etcd", "size_based_seats"] == 100
    assert ten_mb.loc["cache", "size_based_seats"] == 10


def test_estimate_measured_lists():
    import pandas as pd

    lists = pd.DataFrame(
        [
            {"resource": "secrets", "params": {"resourceVersion": "0"}, "served_from": "cache"},
            {
                "resource": "secrets",
                "params": '{"resourceVersion": "1", "resourceVersionMatch": "Exact"}',
                "served_from": "etcd",
            },
        ]
    )
    out = apf.estimate_measured_lists(lists, object_counts={"secrets": 100}, avg_sizes={"secrets": 100_000})
    assert list(out["estimator_assumes"]) == ["cache", "etcd"]
    assert list(out["size_based_seats"]) == [10, 100]
    assert list(out["object_count_seats"]) == [1, 2]
    # v1.34+ serves that Exact LIST from cache snapshots: by its real place it costs 10 seats.
    lists.loc[1, "served_from"] = "cache"
    out = apf.estimate_measured_lists(lists, object_counts={"secrets": 100}, avg_sizes={"secrets": 100_000})
    assert list(out["size_based_seats"]) == [10, 100]
    assert list(out["size_based_seats_measured_place"]) == [10, 10]


def test_compare_infers_the_priority_level_cap():
    import pandas as pd

    from crdscale.collect.probes.apfseats import NOMINAL_LIMIT, compare, level_limits_from

    lists = pd.DataFrame(
        [
            {
                "resource": "secrets",
                "kind": "rv0",
                "params": '{"resourceVersion": "0"}',
                "items": 100,
                "bytes": 13_400_000,
                "served_from": "cache",
            },
            {
                "resource": "secrets",
                "kind": "paged",
                "params": '{"limit": "5"}',
                "items": 100,
                "bytes": 13_400_000,
                "served_from": "cache",
            },
        ]
    )
    observed = pd.DataFrame(
        [
            {"resource": "secrets", "kind": "rv0", "observed_seats": 8.0, "priority_level": "global-default"},
            {"resource": "secrets", "kind": "paged", "observed_seats": 7.0, "priority_level": "global-default"},
        ]
    )
    # global-default on a single kube-apiserver v1.37.1 with default flags: nominal 49 seats, hand size 6.
    limits = level_limits_from(
        {NOMINAL_LIMIT: [({"priority_level": "global-default"}, 49.0), ({"priority_level": "exempt"}, 0.0)]},
        [
            {
                "metadata": {"name": "global-default"},
                "spec": {"limited": {"limitResponse": {"queuing": {"handSize": 6}}}},
            },
            {"metadata": {"name": "exempt"}, "spec": {"type": "Exempt"}},
        ],
    )
    assert dict(zip(limits.priority_level, limits.max_seats)) == {"global-default": 8, "exempt": 0}
    table = compare(lists, None, observed, limits).set_index("kind")
    assert table.loc["rv0", "size_based_seats"] == 10  # streamed from cache: capped at 10
    assert table.loc["rv0", "level_max_seats"] == 8
    assert table.loc["rv0", "observed_matches"] == "size-based"
    assert table.loc["paged", "size_based_seats"] == 7  # 5 x 134 KB
    assert table.loc["paged", "observed_matches"] == "size-based"


@pytest.mark.parametrize(
    "nominal,hand,expected",
    [
        # k8s.io/apiserver v0.37.1 pkg/util/flowcontrol/max_seats_test.go, case by case
        (5, 6, 1),
        (10, 6, 1),
        (15, 6, 2),
        (20, 6, 3),
        (35, 6, 5),
        (100, 6, 15),
        (200, 6, 30),
        (10, 1, 2),
        (100, 20, 5),
    ],
)
def test_priority_level_max_seats_as_kube_apiserver_derives_it(nominal, hand, expected):
    assert apf.priority_level_max_seats(nominal, hand) == expected


def test_a_level_without_queuing_does_not_limit():
    assert apf.priority_level_max_seats(30, None) == 0


@pytest.mark.parametrize(
    "count,size,stored,current",
    [
        (300.0, 600_000.0, 300, True),
        (0.0, 0.0, 300, False),  # the refresh at the CRD's creation, before its objects
        (120.0, 240_000.0, 300, False),  # a refresh in the middle of the creates
        (300.0, -1.0, 300, False),  # the size estimate failed
        (300.0, float("nan"), 300, True),  # a server without a size estimate (v1.24): the count decides
        (float("nan"), float("nan"), 300, False),  # no count exposed: cannot tell
        (5.0, 0.0, None, True),  # nothing to compare with
    ],
)
def test_estimator_statistics_are_current_when_they_count_the_stored_objects(count, size, stored, current):
    from crdscale.collect.probes.apfseats import stats_current

    assert stats_current(count, size, stored) is current


def _samples(count: float, size: float):
    labels = {"group": "g.example.io", "resource": "things"}
    return {
        "apiserver_resource_objects": [(labels, count)],
        "apiserver_resource_size_estimate_bytes": [(labels, size)],
    }


def _fake_clock():
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    return now, sleep, lambda: now[0]


def test_the_probe_waits_for_the_refresh_that_counts_its_objects(monkeypatch):
    from crdscale.collect.probes import apfseats
    from crdscale.collect.probes.requests import ListTarget

    # The server's refreshes: the CRD's creation (0 objects), then one after all 300.
    scrapes = iter([_samples(0, 0), _samples(0, 0), _samples(300, 600_000)])
    monkeypatch.setattr(apfseats.requestcost, "scrape", lambda cluster, names=None: next(scrapes))
    monkeypatch.setattr(apfseats, "stored_counts", lambda cluster, targets: {"things.g.example.io": 300})
    now, sleep, clock = _fake_clock()
    target = ListTarget("things", "g.example.io")
    stats = apfseats.wait_for_estimator_stats(None, [target], timeout_s=150, poll_s=5, sleep=sleep, clock=clock)
    assert stats["stats_current"].all() and now[0] == 10
    assert stats.loc[0, "avg_size_bytes"] == 2000


def test_stale_statistics_after_the_bounded_wait_are_labelled_not_compared(monkeypatch, caplog):
    import pandas as pd

    from crdscale.collect.probes import apfseats
    from crdscale.collect.probes.requests import ListTarget

    monkeypatch.setattr(apfseats.requestcost, "scrape", lambda cluster, names=None: _samples(0, 0))
    monkeypatch.setattr(apfseats, "stored_counts", lambda cluster, targets: {"things.g.example.io": 300})
    now, sleep, clock = _fake_clock()
    with caplog.at_level("WARNING", logger="crdscale.collect.probes.apfseats"):
        stats = apfseats.wait_for_estimator_stats(
            None, [ListTarget("things", "g.example.io")], timeout_s=150, poll_s=5, sleep=sleep, clock=clock
        )
    assert not stats["stats_current"].any() and now[0] == 150
    assert "0 counted, 300 stored" in caplog.text

    lists = pd.DataFrame(
        [
            {
                "resource": "things.g.example.io",
                "kind": kind,
                "params": '{"resourceVersion": "0"}',
                "items": 300,
                "bytes": 780_000,
                "served_from": "cache",
            }
            for kind in ("rv0", "consistent")
        ]
    )
    observed = pd.DataFrame(
        [
            {
                "resource": "things.g.example.io",
                "kind": "rv0",
                "observed_seats": 1.0,
                "priority_level": "global-default",
            },
            {"resource": "things.g.example.io", "kind": "consistent", "observed_seats": 8.0, "priority_level": "x"},
        ]
    ).assign(stats_current=[False, True])
    table = apfseats.compare(lists, None, observed).set_index("kind")
    # The 1-seat observation came from a 0-object count: labelled, never "neither" or a match.
    assert table.loc["rv0", "observed_matches"] == apfseats.STATS_NOT_CURRENT
    assert table.loc["consistent", "observed_matches"] == "size-based"


def test_seats_are_observed_beside_the_controller_managers_own_requests(monkeypatch):
    """kube-controller-manager's controllers are estimated in the same scrape window (workload-high):
    the probe's request is the one of its own level, global-default, not "the only one that moved"."""
    import pandas as pd

    from crdscale.collect.probes import apfseats

    windows = iter(
        [
            {"global-default": {"count": 1, "sum": 8.0}, "workload-high": {"count": 3, "sum": 3.0}},
            {"global-default": {"count": 1, "sum": 8.0}, "kube-controller-manager": {"count": 3, "sum": 3.0}},
        ]
    )
    current = {}

    def delta_by(before, after, name, label):
        if label == "priority_level":
            current["window"] = next(windows)
        return current["window"]

    class Response:
        status = 200

    sent = []

    class Transport:
        def fresh(self, pool_size=16):
            return self

        def close(self):
            pass

    class Cluster:
        transport = Transport()

        def post(self, path, body, timeout=None):
            return None

        def url(self, path):
            return path

        def delete(self, path, timeout=None):
            return type("Deleted", (), {"status_code": 200})()

    monkeypatch.setattr(apfseats, "check", lambda response, what, ok=None: None)

    def timed_get(transport, url, *, params=None, headers=None, timeout=120.0):
        sent.append(headers)
        return Response()

    monkeypatch.setattr(apfseats, "timed_get", timed_get)
    monkeypatch.setattr(apfseats.requestcost, "scrape", lambda cluster, names=None: None)
    monkeypatch.setattr(apfseats.requestcost, "histogram_delta_by", delta_by)
    monkeypatch.setattr(
        apfseats.requestcost,
        "object_stats",
        lambda samples, group, resource: {"object_count": 300, "total_size_bytes": 6e5},
    )
    lists = pd.DataFrame(
        [{"resource": "things.g.example.io", "kind": "rv0", "path": "/apis/g.example.io/v1/things",
          "params": "{}", "accept": "application/json"}]
    )  # fmt: skip
    out = apfseats.observe_seats(Cluster(), lists, run_id="r", stored={"things.g.example.io": 300})
    assert out.loc[0, "observed_seats"] == 8 and out.loc[0, "priority_level"] == "global-default"
    assert out.loc[0, "flow_schema"] == "global-default"
    assert sent and all(h["Impersonate-User"] == apfseats.PROBE_USER for h in sent)  # replayed as the probe user
