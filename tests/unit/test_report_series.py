"""Pure computations behind the notebooks: phases and CRD steps from events, rates,
derived memory, values at profile marks, the Go release advice, the icicle layout."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crdscale.report import series
from crdscale.report.flame import icicle_layout, short_name, stack_causes
from crdscale.rundir import events_frame, read_run

T0 = pd.Timestamp("2026-11-22T03:00:00Z")
REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference-run"


def _events(rows):
    return events_frame([{"ts": (T0 + pd.Timedelta(seconds=t)).isoformat(), "kind": k, **f} for t, k, f in rows])


EVENTS = _events(
    [
        (0, "run.start", {}),
        (2, "metrics.start", {}),
        (3, "settle.start", {"label": "baseline", "seconds": 5}),
        (10, "step.start", {"step": 1, "crds_before": 0, "crds_in_step": 40}),
        (10.5, "install.start", {"step": 1, "crds": 40}),
        (12, "install.end", {"step": 1}),
        (13, "established", {"step": 1}),
        (14, "serve.start", {"step": 1}),
        (15, "serve.end", {"step": 1}),
        (15, "settle.start", {"label": "step 1", "seconds": 5}),
        (21, "step.end", {"step": 1, "crds": 40}),
        (22, "step.start", {"step": 2, "crds_before": 40, "crds_in_step": 40}),
        (22, "install.start", {"step": 2, "crds": 40}),
        (30, "run.end", {"status": "interrupted"}),  # step 2 never finished installing
    ]
)


def test_run_start_is_when_metrics_started():
    assert series.run_start(EVENTS) == T0 + pd.Timedelta(seconds=2)


def test_phase_intervals_close_on_established_settle_seconds_and_crash():
    phases = series.phase_intervals(EVENTS)
    got = [(r.phase, r.step, round(r.start_s, 3), round(r.end_s, 3)) for r in phases.itertuples()]
    assert got == [
        ("settle", 0, 1.0, 6.0),
        ("install", 1, 8.5, 11.0),  # until Established, not install.end
        ("serve", 1, 12.0, 13.0),
        ("settle", 1, 13.0, 18.0),
        ("install", 2, 20.0, 28.0),  # left open by the interruption: ends at the last event
    ]


def test_settle_phase_lasts_until_its_queue_wait_ended():
    rows = [
        (0, "run.start", {}),
        (2, "metrics.start", {}),
        (3, "settle.start", {"label": "baseline", "seconds": 5}),
        (8.5, "settle.drained", {"label": "baseline", "drained": True, "seconds": 0.5}),
        (10, "step.start", {"step": 1, "crds_before": 0, "crds_in_step": 40}),
        (15, "settle.start", {"label": "step 1", "seconds": 5}),
        (62, "settle.drained", {"label": "step 1", "drained": True, "seconds": 42}),
        (63, "step.end", {"step": 1, "crds": 40}),
    ]
    phases = series.phase_intervals(_events(rows))
    assert [(r.step, r.start_s, r.end_s) for r in phases.itertuples()] == [(0, 1.0, 6.5), (1, 13.0, 60.0)]


def test_crd_count_steps_jumps_when_a_step_is_created_and_reaches_the_end():
    steps = series.crd_count_steps(EVENTS)
    assert steps["crds"].tolist() == [0, 40, 40]
    assert steps["elapsed_s"].tolist() == [0.0, 10.0, 28.0]
    at = series.crds_at(pd.Series([T0 + pd.Timedelta(seconds=s) for s in (5, 12, 13, 29)]), steps)
    assert at.tolist() == [0, 40, 40, 40]


def test_counter_rate_handles_resets_like_promql():
    idx = pd.DatetimeIndex([T0 + pd.Timedelta(seconds=s) for s in (0, 1, 2, 4)])
    rate = series.counter_rate(pd.Series([10.0, 12.0, 1.0, 5.0], index=idx))
    assert np.isnan(rate.iloc[0])
    assert rate.iloc[1:].tolist() == [2.0, 1.0, 2.0]  # reset: 1.0 counted from zero


def _tidy(values: dict[str, list[float]], job="kube-apiserver"):
    rows = []
    for metric, vals in values.items():
        for i, v in enumerate(vals):
            rows.append(
                {"timestamp": T0 + pd.Timedelta(seconds=i), "job": job, "metric": metric, "labels": "{}", "value": v}
            )
    return pd.DataFrame(rows)


def test_memory_frame_derives_gap_and_retained_idle():
    tidy = _tidy(
        {
            "process_resident_memory_bytes": [500, 600],
            "go_memstats_heap_inuse_bytes": [200, 250],
            "go_memstats_stack_inuse_bytes": [10, 20],
            "go_memstats_heap_idle_bytes": [100, 90],
            "go_memstats_heap_released_bytes": [40, 80],
        }
    )
    # etcd's RSS must not leak into kube-apiserver's frame
    tidy = pd.concat([tidy, _tidy({"process_resident_memory_bytes": [9e9, 9e9]}, job="etcd")])
    mem = series.memory_frame(tidy, T0)
    assert mem["rss"].tolist() == [500, 600]
    assert mem["heap_plus_stack"].tolist() == [210, 270]
    assert mem["rss_minus_heap_stack"].tolist() == [290, 330]
    assert mem["idle_retained"].tolist() == [60, 10]
    assert mem["elapsed_s"].tolist() == [0.0, 1.0]


def test_activity_frame_rates_and_gauges():
    tidy = _tidy(
        {
            "process_cpu_seconds_total": [0, 0.5, 1.5],
            "go_goroutines": [10, 20, 30],
            "go_gc_duration_seconds_count": [1, 1, 3],
        }
    )
    act = series.activity_frame(tidy, T0)
    assert act["cpu_cores"].tolist()[1:] == [0.5, 1.0]
    assert act["gc_per_s"].tolist()[1:] == [0.0, 2.0]
    assert act["goroutines"].tolist() == [10, 20, 30]


def test_at_marks_takes_last_sample_at_or_before_each_mark():
    table = series.memory_frame(_tidy({"process_resident_memory_bytes": [1, 2, 3, 4]}), T0)
    marks = pd.DataFrame(
        {
            "timestamp": [T0 + pd.Timedelta(seconds=s) for s in (-1, 0.5, 3, 2)],
            "crds": [0, 0, 80, 40],
            "phase": ["served", "served", "served", "installed"],
        }
    )
    got = series.at_marks(table, marks)
    assert got[["crds", "phase", "rss"]].values.tolist() == [[0, "served", 1], [40, "installed", 3], [80, "served", 4]]


@pytest.mark.parametrize(
    "go, env, lazy",
    [
        ("go1.15.15", {}, True),
        ("go1.12.1", {}, True),
        ("go1.15.2", {"GODEBUG": "madvdontneed=1"}, False),
        ("go1.16", {}, False),
        ("go1.26.8", {}, False),
        ("go1.26.8", {"GODEBUG": "madvdontneed=0"}, True),
    ],
)
def test_release_advice_names_the_madvise_the_runtime_uses(go, env, lazy):
    text = series.release_advice(go, env)
    assert go in text
    assert ("releases memory with `MADV_FREE`" in text) == lazy


def test_release_advice_unknown_version():
    assert "unknown" in series.release_advice(None)


@pytest.mark.parametrize(
    "name, short",
    [
        ("k8s.io/apiserver/pkg/storage/cacher.(*Cacher).Watch", "cacher.(*Cacher).Watch"),
        ("runtime.malg", "runtime.malg"),
        ("slices.Grow[go.shape.[]uint8,go.shape.uint8]", "slices.Grow"),
    ],
)
def test_short_name(name, short):
    assert short_name(name) == short


def test_icicle_layout_nests_children_under_parents():
    folded = pd.DataFrame({"stack": ["main;a;x", "main;a;y", "main;b", "other"], "value": [30, 10, 50, 10]})
    rects = icicle_layout(folded, pd.Series(["c1", "c2", "c3", "c1"]), min_fraction=0)
    assert rects.attrs["total"] == 100
    top = rects[rects["depth"] == 0]
    assert top["name"].tolist() == ["main", "other"] and top["width"].tolist() == [0.9, 0.1]
    b = rects[rects["name"] == "b"].iloc[0]
    a = rects[rects["name"] == "a"].iloc[0]
    assert (b.x0, b.width, b.cause) == (0.0, 0.5, "c3")  # larger child first
    assert (a.x0, a.width, a.cause) == (0.5, 0.4, "c1")  # dominant cause of x (30) over y (10)
    x = rects[rects["name"] == "x"].iloc[0]
    assert x.x0 == pytest.approx(0.5) and x.depth == 2
    # small nodes are dropped, their parent keeps its width
    small = icicle_layout(folded, min_fraction=0.2)
    assert "y" not in set(small["name"]) and small[small["name"] == "a"]["width"].iloc[0] == 0.4


def test_stack_causes_uses_the_attribution_rules():
    folded = pd.DataFrame(
        {"stack": ["main.main;go.uber.org/zap/zapcore.newCounters", "main.main;main.mystery"], "value": [1, 1]}
    )
    assert stack_causes(folded).tolist() == ["zap-counters", "other"]


def test_reference_run_phases_and_steps_match_its_events():
    data = read_run(REFERENCE)
    steps = series.crd_count_steps(data.events, data.start)
    manifest = json.loads((REFERENCE / "manifest.json").read_text())
    assert steps["crds"].iloc[-1] == manifest["crds"]["count"]
    phases = series.phase_intervals(data.events, data.start)
    assert set(phases["phase"]) == {"install", "serve", "settle"}
    assert (phases["end_s"] >= phases["start_s"]).all()
    mem = series.memory_frame(data.series, data.start)
    assert {"rss", "heap_alloc", "gc_goal", "idle_retained", "rss_minus_heap_stack"} <= set(mem)


def test_hold_after_the_last_step_is_a_phase():
    events = events_frame(
        [
            {"ts": "2026-11-23T10:00:00Z", "kind": "metrics.start", "source": "prometheus"},
            {"ts": "2026-11-23T10:00:01Z", "kind": "step.start", "step": 1, "crds_before": 0, "crds_in_step": 10},
            {"ts": "2026-11-23T10:00:05Z", "kind": "hold.start", "seconds": 30, "crds": 10},
            {"ts": "2026-11-23T10:00:35Z", "kind": "hold.end", "seconds": 30, "crds": 10},
        ]
    )
    hold = series.phase_intervals(events).set_index("phase").loc["hold"]
    assert hold["start_s"] == 5 and hold["end_s"] == 35


def test_a_zero_second_settle_opens_its_queue_wait():
    rows = [
        (0, "run.start", {}),
        (2, "metrics.start", {}),
        (3, "settle.start", {"label": "baseline", "seconds": 0}),
        (4, "settle.drained", {"label": "baseline", "drained": True, "seconds": 1}),
        (10, "step.start", {"step": 1, "crds_before": 0, "crds_in_step": 40}),
        (15, "settle.start", {"label": "step 1", "seconds": 0}),
        (15, "step.end", {"step": 1, "crds": 40}),  # settle_queues = false: nothing after the mark
    ]
    phases = series.phase_intervals(_events(rows))
    assert [(r.step, r.start_s, r.end_s) for r in phases.itertuples()] == [(0, 1.0, 2.0), (1, 13.0, 13.0)]


def test_a_queue_wait_recorded_without_its_settle_start_is_still_settling():
    # Runs recorded before settle.start was written for settle_seconds = 0 have the wait only.
    rows = [
        (0, "run.start", {}),
        (2, "metrics.start", {}),
        (4, "settle.drained", {"label": "baseline", "drained": True, "seconds": 1}),
        (10, "step.start", {"step": 1, "crds_before": 0, "crds_in_step": 40}),
        (15, "settle.start", {"label": "step 1", "seconds": 5}),
        (62, "settle.drained", {"label": "step 1", "drained": True, "seconds": 42}),
    ]
    phases = series.phase_intervals(_events(rows))
    assert [(r.step, r.start_s, r.end_s) for r in phases.itertuples()] == [(0, 1.0, 2.0), (1, 13.0, 60.0)]
