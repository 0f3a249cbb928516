"""shape_findings: the memory ratio of many-small over few-large LISTs, beside the ratios of objects and bytes."""

import pandas as pd
import pytest

from crdscale.models.probecosts import shape_findings


def _row(shape, objects, level, heap_growth, *, kind="rv0", requests=10, response_bytes=40_000_000, cpu_s=1.0):
    return {
        "kind": kind,
        "shape": shape,
        "objects": objects,
        "concurrency": level,
        "requests": requests,
        "bytes": requests * response_bytes,
        "heap_inuse_growth_bytes": heap_growth,
        "rss_growth_bytes": heap_growth,
        "cpu_s": cpu_s,
        "latency_p50_s": 0.1,
    }


def test_memory_that_tracks_bytes_is_named_so():
    load = pd.DataFrame(
        [_row("40x1000000", 40, 4, 200e6), _row("4000x10000", 4000, 4, 260e6, response_bytes=44_000_000, cpu_s=3.0)]
    )
    [finding] = shape_findings(load).to_dict("records")
    assert finding["baseline_shape"] == "40x1000000" and finding["shape"] == "4000x10000"
    assert finding["objects_ratio"] == 100
    assert finding["bytes_ratio"] == pytest.approx(1.1)
    assert finding["heap_growth_ratio"] == pytest.approx(1.3)
    assert finding["cpu_per_request_ratio"] == pytest.approx(3.0)
    assert finding["heap_follows"] == "bytes"


def test_memory_that_tracks_object_count_is_named_so():
    load = pd.DataFrame([_row("40x1000000", 40, 1, 1e6), _row("4000x10000", 4000, 1, 60e6)])
    assert shape_findings(load)["heap_follows"].tolist() == ["objects"]


def test_one_row_per_kind_level_and_other_shape_and_unknown_without_growth():
    load = pd.DataFrame(
        [
            _row(s, n, level, g, kind=k)
            for k in ("rv0", "consistent")
            for level in (1, 16)
            for s, n, g in (("40x1000000", 40, 0.0), ("400x100000", 400, 5e6), ("4000x10000", 4000, 9e6))
        ]
    )
    findings = shape_findings(load)
    assert len(findings) == 2 * 2 * 2
    assert set(findings["baseline_shape"]) == {"40x1000000"}
    assert (findings["heap_follows"] == "unknown").all()  # the baseline grew by 0: no ratio


def test_empty_load_gives_an_empty_table():
    assert shape_findings(pd.DataFrame()).empty
