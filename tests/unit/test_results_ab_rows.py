"""Results rows rendered from committed A/B summaries (docs/results/changes-2026.toml): the summary
scripts/make_ab_summary.py keeps of a recorded A/B, and the cell the docs generator renders from it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import tomllib

from crdscale import docs_reference

ROOT = Path(__file__).resolve().parents[2]

SUMMARY = {
    "name": "fieldsv1string",
    "change": "-tags fieldsv1string",
    "pairs": 3,
    "run_seconds": [300.0] * 6,
    "per_object": [
        {"kind": "customresources", "cause": "total", "base": 20480.0, "changed": 20000.0, "difference": -480.0,
         "low": -1500.0, "high": 540.0},
        {"kind": "customresources", "cause": "managed-fields", "base": 2048.0, "changed": 2000.0,
         "difference": -48.0, "low": -300.0, "high": 204.0},
        {"kind": "configmaps", "cause": "total", "base": 8192.0, "changed": 7168.0, "difference": -1024.0,
         "low": -1536.0, "high": -512.0},
        {"kind": "configmaps", "cause": "managed-fields", "base": 1024.0, "changed": 100.0, "difference": -924.0,
         "low": -1100.0, "high": -748.0},
    ],
    "per_crd": [],
    "lists": [
        {"side": "base", "kind": "customresources", "list": "rv0", "runs": 3, "latency_p50_s": 0.010,
         "latency_p95_s": 0.02, "apiserver_cpu_s": 0.004, "etcd_cpu_s": 0.0, "items": 100.0, "bytes": 1.0,
         "served_from": "cache"},
        {"side": "changed", "kind": "customresources", "list": "rv0", "runs": 3, "latency_p50_s": 0.030,
         "latency_p95_s": 0.05, "apiserver_cpu_s": 0.009, "etcd_cpu_s": 0.002, "items": 100.0, "bytes": 1.0,
         "served_from": "etcd"},
    ],
}  # fmt: skip


def test_a_row_is_rendered_from_its_summary(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(SUMMARY))
    cell = docs_reference.ab_value(tmp_path, causes=["managed-fields"])
    assert cell == (
        "heap per object of customresources -0.5 KiB [-1.5 KiB, +0.5 KiB] (contains 0) (base 20.0 KiB); "
        "customresources managed-fields -48 B [-300 B, +204 B] (contains 0); "
        "heap per object of configmaps -1.0 KiB [-1.5 KiB, -0.5 KiB] (base 8.0 KiB); "
        "configmaps managed-fields -0.9 KiB [-1.1 KiB, -0.7 KiB]; "
        "rv0 LIST of customresources p50 10.0 -> 30.0 ms, kube-apiserver CPU 4.0 -> 9.0 ms per LIST, "
        "from cache -> etcd (3 pairs)"
    )


def test_rows_not_measured_say_so_and_rows_with_a_summary_render_it(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "summary.json").write_text(json.dumps(SUMMARY))
    monkeypatch.setattr(docs_reference, "ROOT", tmp_path)
    assert docs_reference._headline({"measured": False}) == docs_reference.NOT_MEASURED
    assert docs_reference._headline({"ab": "data"}).endswith("(3 pairs)")
    assert docs_reference._headline({"value": "1 KiB", "ab": "data"}) == "1 KiB"  # a value written wins


def test_summary_of_the_recorded_known_cost_ab(tmp_path):
    """scripts/make_ab_summary.py on data/ab-known-cost (3 pairs, 2 MiB more per served CRD version)."""
    out = tmp_path / "summary"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_ab_summary.py"), str(ROOT / "data" / "ab-known-cost"), str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert {p.name for p in out.iterdir()} >= {"ab.json", "summary.json"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["pairs"] == 3 and summary["per_object"] == [] and summary["lists"] == []
    total = next(r for r in summary["per_crd"] if r["cause"] == "total")
    assert total["low"] <= 2 << 20 <= total["high"]
    assert "heap per CRD +" in docs_reference.ab_value(out)


ROWS = '''title = "t"

[[row]]
quantity = "ListFromCacheSnapshot (beta, on in v1.37.1) set to false"
measured = false
command = """
crdscale ab scenarios/gates.toml --feature-gate ListFromCacheSnapshot=false --min-pairs 3
"""
'''


def test_rows_from_an_ab_with_arms_one_per_arm_leaving_the_rows_there(tmp_path):
    """scripts/make_ab_summary.py on tests/data/ab-arms (a base and two gates as arms): a summary per arm, and a
    row per arm appended, the file's rows before it untouched; run again, nothing more appended."""
    rows = tmp_path / "rows.toml"
    rows.write_text(ROWS)
    out = tmp_path / "gates-arms"
    script = [sys.executable, str(ROOT / "scripts" / "make_ab_summary.py"), str(ROOT / "tests" / "data" / "ab-arms")]
    done = subprocess.run([*script, str(out), "--rows", str(rows)], check=True, capture_output=True, text=True)
    assert "not measured yet, answered by a new row (delete it by hand): ListFromCacheSnapshot" in done.stdout
    text = rows.read_text()
    assert text.startswith(ROWS)
    added = tomllib.loads(text)["row"][1:]
    assert [r["ab"] for r in added] == [str(out / "CBORServingAndStorage"), str(out / "ListFromCacheSnapshot")]
    assert added[1]["quantity"].startswith("ListFromCacheSnapshot (beta, on in v1.37.1) set to false")
    assert added[0]["command"].strip() == (
        "crdscale ab scenarios/gates.toml \\\n    --each \\\n    --feature-gate CBORServingAndStorage=true \\\n"
        "    --feature-gate ListFromCacheSnapshot=false \\\n    --min-pairs 3"
    )
    summary = json.loads((out / "ListFromCacheSnapshot" / "summary.json").read_text())
    assert summary["pairs"] == 1 and summary["rounds"] == 3 and summary["spread"] == "pooled"
    assert {r["side"] for r in summary["lists"]} == {"base", "changed"}
    cell = docs_reference.ab_value(out / "ListFromCacheSnapshot")
    assert cell.startswith("heap per object of customresources +0.2 KiB [")
    assert cell.endswith("(1 run(s) of the arm, 3 rounds of 3 configurations, intervals from their pooled spread)")
    subprocess.run([*script, str(out), "--rows", str(rows)], check=True, capture_output=True)
    assert rows.read_text() == text
