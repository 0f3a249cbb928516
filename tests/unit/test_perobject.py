"""The per-object estimator: increments of the steps that added one kind, over the objects they added."""

import math

import pandas as pd
import pytest

from crdscale.analysis import perobject


def _points(values: dict[int, dict[str, float]]) -> pd.DataFrame:
    rows = []
    for step, causes in values.items():
        for cause, value in causes.items():
            rows.append((step, "served", cause, "bytes", value))
        rows.append((step, "served", "total", "bytes", sum(causes.values())))
    return pd.DataFrame(rows, columns=["step", "phase", "cause", "metric", "value"])


STEPS = pd.DataFrame(
    [(2, "customresources", 1000), (3, "configmaps", 1000), (4, "customresources", 1000), (5, "configmaps", 1000)],
    columns=["step", "kind", "objects_in_step"],
)


def test_each_kind_from_its_own_increments():
    # custom resources add 10 kB each to the watch cache, ConfigMaps 2 kB; step 4 a little less.
    points = _points(
        {
            1: {"watch-cache": 1e6, "other": 5e5},
            2: {"watch-cache": 1e6 + 10e6, "other": 5e5},
            3: {"watch-cache": 1e6 + 12e6, "other": 5e5},
            4: {"watch-cache": 1e6 + 21e6, "other": 5e5 + 1e6},
            5: {"watch-cache": 1e6 + 23e6, "other": 5e5 + 1e6},
        }
    )
    fits = perobject.fit_per_object(points, STEPS)
    cr = fits[(fits["kind"] == "customresources")].set_index("cause")
    cm = fits[(fits["kind"] == "configmaps")].set_index("cause")
    assert cr.loc["watch-cache", "per_object"] == pytest.approx(9500)  # (10e6 + 9e6) / 2000
    assert cr.loc["total", "per_object"] == pytest.approx(10000)
    assert cr.loc["total", "increments"] == 2 and cr.loc["total", "objects"] == 2000
    assert cr.loc["watch-cache", "per_object_low"] < 9500 < cr.loc["watch-cache", "per_object_high"]
    assert cm.loc["watch-cache", "per_object"] == pytest.approx(2000)
    assert cm.loc["other", "per_object"] == 0
    assert fits.groupby("kind")["cause"].last().eq("total").all()  # total last
    assert perobject.ratio_between(fits, "customresources", "configmaps") == pytest.approx(5.0)


def test_a_step_without_its_neighbour_is_left_out():
    points = _points({1: {"a": 0.0}, 2: {"a": 1e6}, 4: {"a": 3e6}})
    inc = perobject.object_increments(points, STEPS)
    assert set(inc["step"]) == {2}
    fits = perobject.fit_per_object(points, STEPS)
    one = fits[(fits["kind"] == "customresources") & (fits["cause"] == "total")].iloc[0]
    assert one["per_object"] == pytest.approx(1000) and math.isnan(one["per_object_low"])


def test_amplification_divides_by_the_stored_json():
    per_object = pd.DataFrame(
        [("customresources", "bytes", "total", 8000.0, 7000.0, 9000.0, 1.0, 1.0, 2, 2000, 1.0)],
        columns=perobject.PER_OBJECT_COLUMNS,
    )
    sizes = {"customresources": {"sent_bytes": 1024, "stored_bytes": 1600}}
    amp = perobject.amplification(per_object, sizes, {"customresources": 1500.0}).iloc[0]
    assert amp["serialized_source"] == "stored JSON" and amp["amplification"] == pytest.approx(5.0)
    assert amp["amplification_low"] == pytest.approx(7000 / 1600) and amp["server_estimate_bytes"] == 1500.0
    amp = perobject.amplification(per_object, {"customresources": {"sent_bytes": 1024}}, {"customresources": 1500.0})
    assert amp.iloc[0]["serialized_source"] == "server estimate"


def test_size_estimate_per_object_from_the_last_value():
    t = pd.Timestamp("2026-11-24T04:00:00Z")
    series = pd.DataFrame(
        [
            (t + pd.Timedelta(seconds=s), "kube-apiserver", "apiserver_resource_size_estimate_bytes", lab, v)
            for s, lab, v in [
                (5, '{resource="configmaps"}', 10_000),
                (25, '{resource="configmaps"}', 1_500_000),
                (5, '{resource="widgets"}', 0),
                (25, '{resource="widgets"}', 0),  # v1.37.1 keeps no estimate for custom resources
                (5, '{resource="gadgets"}', 3_000_000),
            ]
        ],
        columns=["timestamp", "job", "metric", "labels", "value"],
    )
    got = perobject.size_estimate_per_object(
        series,
        {"customresources": 1000, "configmaps": 1000, "gadgets": 1000},
        {"customresources": ["widgets"], "configmaps": ["configmaps"], "gadgets": ["gadgets"]},
    )
    assert got == {"configmaps": pytest.approx(1500.0), "gadgets": pytest.approx(3000.0)}


def _list_rows(kind, resource, place, rows):
    # measure_targets' columns the per-kind summary reads: (LIST kind, p50, p95, max, apiserver CPU, etcd CPU)
    return [
        {
            "object_kind": kind,
            "resource": resource,
            "kind": request,
            "items": 2000,
            "bytes": 3.2e6,
            "latency_s": p50,
            "latency_p95_s": p95,
            "latency_max_s": top,
            "cpu_s": cpu,
            "etcd_cpu_s": etcd,
            "served_from": place,
            "repeats": 10,
        }
        for request, p50, p95, top, cpu, etcd in rows
    ]


def test_list_costs_mean_over_a_kinds_resources():
    lists = pd.DataFrame(
        _list_rows("customresources", "a.example", "etcd", [("consistent", 0.10, 0.12, 0.2, 0.05, 0.02)])
        + _list_rows("customresources", "b.example", "etcd", [("consistent", 0.20, 0.22, 0.3, 0.07, 0.04)])
        + _list_rows("configmaps", "configmaps", "cache", [("consistent", 0.03, 0.04, 0.05, 0.02, 0.0)])
    )
    costs = perobject.list_costs(lists).set_index("kind")
    cr = costs.loc["customresources"]
    assert cr["resources"] == 2 and cr["list"] == "consistent" and cr["served_from"] == "etcd"
    assert cr["latency_p50_s"] == pytest.approx(0.15) and cr["latency_max_s"] == pytest.approx(0.3)
    assert cr["etcd_cpu_s"] == pytest.approx(0.03) and cr["apiserver_cpu_s"] == pytest.approx(0.06)
    assert costs.loc["configmaps", "served_from"] == "cache"
    assert perobject.list_costs(pd.DataFrame()).empty


def test_cost_moved_puts_heap_beside_each_list():
    def fit(run, kind, value):
        return (run, kind, "bytes", "total", value, value - 1000, value + 1000, 1.0, 3.0, 4, 4000, 1.0)

    per_object = pd.DataFrame(
        [fit("cache", "customresources", 9000.0), fit("no cache", "customresources", 500.0)],
        columns=["run", *perobject.PER_OBJECT_COLUMNS],
    )
    lists = pd.DataFrame(
        _list_rows("customresources", "a.example", "etcd", [("consistent", 0.2, 0.3, 0.4, 0.05, 0.03)])
        + _list_rows("customresources", "a.example", "etcd", [("rv0", 0.2, 0.3, 0.4, 0.05, 0.03)])
    )
    costs = perobject.list_costs(lists).assign(run="no cache")
    table = perobject.cost_moved(per_object, costs)
    assert list(table.columns) == perobject.CELL_COLUMNS
    # The run without LISTs keeps its heap row; the other has one row per LIST kind.
    assert table[table["run"] == "cache"]["list"].isna().all()
    moved = table[table["run"] == "no cache"]
    assert list(moved["list"]) == ["consistent", "rv0"] and (moved["heap_per_object"] == 500.0).all()
    assert moved["etcd_cpu_s"].tolist() == pytest.approx([0.03, 0.03])


def test_a_consistency_check_in_flight_is_no_objects_cost():
    # Step 3 (ConfigMaps) caught the watch cache's consistency check LISTing the custom resources:
    # 9 MB of decoded copies, gone by step 4.
    points = _points(
        {
            1: {"unstructured": 0.0, "consistency-check": 0.0},
            2: {"unstructured": 10e6, "consistency-check": 0.0},
            3: {"unstructured": 10e6, "consistency-check": 9e6},
            4: {"unstructured": 20e6, "consistency-check": 0.0},
            5: {"unstructured": 20e6, "consistency-check": 0.0},
        }
    )
    fits = perobject.fit_per_object(points, STEPS).set_index(["kind", "cause"])
    assert fits.loc[("configmaps", "total"), "per_object"] == pytest.approx(0.0)
    assert fits.loc[("customresources", "total"), "per_object"] == pytest.approx(10000)
    assert fits.loc[("configmaps", "consistency-check"), "per_object"] == pytest.approx(4500)  # shown, apart


def test_a_transient_sorts_after_the_causes_held_with_no_share():
    # A ConfigMap step caught the check with 9 MB in flight while ConfigMaps held 300 B each: by size it
    # came first, at 1500 % of the total it is not in.
    points = _points(
        {
            1: {"unstructured": 0.0, "configmaps": 0.0, "consistency-check": 0.0},
            2: {"unstructured": 10e6, "configmaps": 0.0, "consistency-check": 0.0},
            3: {"unstructured": 10e6, "configmaps": 3e5, "consistency-check": 9e6},
            4: {"unstructured": 20e6, "configmaps": 3e5, "consistency-check": 0.0},
            5: {"unstructured": 20e6, "configmaps": 6e5, "consistency-check": 0.0},
        }
    )
    fits = perobject.fit_per_object(points, STEPS)
    cm = fits[(fits["kind"] == "configmaps") & (fits["metric"] == "bytes")]
    assert cm["cause"].tolist() == ["configmaps", "unstructured", "consistency-check", "total"]
    shares = cm.set_index("cause")["share"]
    assert shares["configmaps"] == pytest.approx(1.0) and shares["total"] == pytest.approx(1.0)
    assert math.isnan(shares["consistency-check"])

    text = perobject.text_lines({"per_object": fits})
    lines = [x for x in text if x.startswith("consistency-check")]
    assert len(lines) == 2  # one per kind
    assert all(x.endswith("transient, not in total") and "%" not in x for x in lines)
