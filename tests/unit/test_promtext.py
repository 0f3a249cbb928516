"""crdscale's one exposition parser against prometheus_client's on the same text.

``kube-apiserver-v1.37.1.txt`` is a real ``/metrics`` body of a local control
plane (recorded with ``scripts/record_metrics_body.py``) and ``escapes.txt``
holds hand-written lines with every escape and non-ASCII label values.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from crdscale.collect.promtext import parse_exposition, samples_by_name

DATA = Path(__file__).parent.parent / "data" / "metrics"
BODIES = sorted(DATA.glob("*.txt"))
_COUNTER_RE = re.compile(r"^# TYPE (\S+) counter$", re.MULTILINE)


def _key(name: str, labels: dict[str, str], value: float) -> tuple:
    return name, tuple(sorted(labels.items())), "nan" if math.isnan(value) else value


def _reference(text: str) -> Counter:
    """prometheus_client's samples, with its OpenMetrics ``_total`` renaming of counters undone."""
    renamed = {name for name in _COUNTER_RE.findall(text) if not name.endswith("_total")}
    out: Counter = Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if family.type == "counter" and name.endswith("_total") and name[:-6] in renamed:
                name = name[:-6]
            out[_key(name, sample.labels, float(sample.value))] += 1
    return out


@pytest.mark.parametrize("path", BODIES, ids=[p.name for p in BODIES])
def test_every_sample_agrees_with_prometheus_client(path):
    text = path.read_text(encoding="utf-8")
    ours = Counter(_key(*sample) for sample in parse_exposition(text))
    assert ours == _reference(text)
    assert sum(ours.values()) > 5


def test_the_recorded_body_is_real_and_varied():
    text = (DATA / "kube-apiserver-v1.37.1.txt").read_text(encoding="utf-8")
    assert len(text.encode()) < 300_000
    kinds = set(re.findall(r"^# TYPE \S+ (\w+)$", text, re.MULTILINE))
    assert {"counter", "gauge", "histogram", "summary"} <= kinds
    assert len(samples_by_name(text)) > 250  # kube-apiserver v1.37.1 does not escape anything: escapes.txt does


def test_label_values_are_unescaped_and_utf8_kept():
    samples = samples_by_name((DATA / "escapes.txt").read_text(encoding="utf-8"))
    labels = [labels for labels, _ in samples["crdscale_test_escapes"]]
    assert labels[0] == {"path": 'a "quoted" value', "dir": "C:\\temp\\new", "text": "line one\nline two"}
    assert labels[1] == {"name": "Größe", "emoji": "🚀 launch", "cjk": "日本語"}
    assert labels[2] == {"odd": "brace } and comma, inside", "trailing": "x"}
    assert labels[3] == {"unknown": "tab \\t stays as written"}


@pytest.mark.parametrize("path", BODIES, ids=[p.name for p in BODIES])
def test_name_filter_keeps_exactly_the_named_samples(path):
    text = path.read_text(encoding="utf-8")
    everything = list(parse_exposition(text))
    names = {name for name, _, _ in everything[::7]}
    filtered = list(parse_exposition(text, names))
    assert [_key(*s) for s in filtered] == [_key(*s) for s in everything if s[0] in names]
    prefixes = ("process_", "go_gc")
    by_prefix = list(parse_exposition(text, prefixes, prefixes=True))
    assert [_key(*s) for s in by_prefix] == [_key(*s) for s in everything if s[0].startswith(prefixes)]


def test_values_special_floats_and_timestamps():
    text = 'a 1\nb +Inf\nc -Inf\nd NaN\ne 2.5e+08 1700000000000\nf{x="y"}\t7\n  g 8\nbad line\nh notanumber\n'
    got = {name: value for name, _, value in parse_exposition(text)}
    assert got["a"] == 1 and got["b"] == math.inf and got["c"] == -math.inf and math.isnan(got["d"])
    assert got["e"] == 2.5e8 and got["f"] == 7 and got["g"] == 8
    assert "bad" not in got and "h" not in got
