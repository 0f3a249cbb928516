"""The key numbers of findings.md are the analysis functions' own numbers."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from crdscale.analysis.percrd import unattributed_share
from crdscale.analysis.registry import table
from crdscale.analysis.run import analyze_run
from crdscale.report import series
from crdscale.report.findings import (
    compute_findings,
    findings_markdown,
    headline,
    key_numbers,
    per_crd_table,
    provenance,
)
from crdscale.rundir import read_run
from crdscale.units import fmt_value

REFERENCE = Path(__file__).resolve().parents[2] / "data" / "reference-run"


@pytest.fixture(scope="module")
def reference():
    data = read_run(REFERENCE)
    return data, analyze_run(data), series.memory_frame(data.series, data.start)


def test_numbers_equal_the_analysis(reference):
    data, analysis, memory = reference
    numbers = key_numbers(analysis, memory).set_index("key")
    fits = analysis.fits
    served = fits[(fits["phase"] == "served") & (fits["metric"] == "bytes")].set_index("cause")
    total = served.loc["total"]
    assert numbers.loc["heap_per_crd", ["value", "low", "high"]].tolist() == [
        total["per_crd"],
        total["per_crd_low"],
        total["per_crd_high"],
    ]
    installed = fits[(fits["phase"] == "installed") & (fits["metric"] == "bytes") & (fits["cause"] == "total")].iloc[0]
    assert numbers.loc["heap_per_crd_installed", "value"] == installed["per_crd"]
    assert numbers.loc["unattributed_share", "value"] == unattributed_share(fits, "served", "bytes")
    assert numbers.loc["crds", "value"] == analysis.points["crds"].max() == 160
    # the biggest causes, in order, with their own intervals
    causes = numbers[numbers.index.str.startswith("cause:")]
    expected = served.drop(index=["total", "other"]).sort_values("per_crd", ascending=False).head(len(causes))
    assert [k.split(":", 1)[1] for k in causes.index] == expected.index.tolist()
    assert causes["value"].tolist() == expected["per_crd"].tolist()
    assert causes["low"].tolist() == expected["per_crd_low"].tolist()
    # series: per CRD and at the first/last profile
    sfit = analysis.series_fits.set_index(["phase", "metric"]).loc[("served", "rss_bytes")]
    assert numbers.loc["rss_bytes_per_crd", "value"] == sfit["per_crd"]
    sp = analysis.series_points
    assert (
        numbers.loc["rss_bytes_baseline", "value"] == sp[(sp.metric == "rss_bytes") & (sp.crds == 0)]["value"].iloc[-1]
    )
    assert (
        numbers.loc["rss_bytes_final", "value"]
        == sp[(sp.metric == "rss_bytes") & (sp.crds == 160) & (sp.phase == "served")]["value"].iloc[-1]
    )
    # peak RSS from the most complete record of it (here /proc, read every second), which it names
    rss = table(analysis.results, "process").set_index("metric").loc["process_resident_memory_bytes"]
    assert rss["source"] == "kube-apiserver-proc"
    assert (
        numbers.loc["rss_bytes_peak", "value"]
        == rss["peak"]
        == data.series.query("job == 'kube-apiserver-proc' and metric == 'process_resident_memory_bytes'")[
            "value"
        ].max()
    )
    assert numbers.loc["rss_bytes_peak", "source"].startswith("/proc (job kube-apiserver-proc)")


def test_markdown_shows_every_number_formatted(reference):
    data, analysis, memory = reference
    findings = compute_findings(data.manifest, analysis, memory)
    md = findings_markdown(findings, [("Memory", "memory.png")])
    for row in findings.numbers.itertuples():
        assert fmt_value(row.value, row.unit) in md, row.finding
    assert "| **kube-apiserver** | v1.37.1 |" in md
    assert "| **etcd** | v3.6.16 |" in md
    assert data.manifest["crds"]["sha256"] in md
    assert "![Memory](memory.png)" in md and "(memory.svg)" in md
    assert headline(findings.numbers) in md


def test_provenance_of_a_sparse_manifest():
    prov = provenance({})
    assert prov["kube-apiserver"] == "unknown" and prov["CRD set sha256"] == "unknown"
    prov = provenance(
        {
            "versions": {"kube-apiserver": "v1.30.0", "kube-apiserver-go": "go1.22.1", "go-toolchain": "go1.23.0"},
            "scenario": {"name": "x", "description": "d", "target": {"env": {"GOGC": "50"}}},
        }
    )
    assert prov["Go"] == "go1.22.1 (toolchain go1.23.0)"
    assert prov["kube-apiserver"] == "v1.30.0 (env GOGC=50)"
    assert prov["scenario"] == "x: d"
    assert "metrics resolution" not in prov and "harness cost" not in prov


def test_provenance_states_resolution_and_harness_cost():
    prov = provenance(
        {
            "metrics": {
                "resolution": {
                    "metric": "process_resident_memory_bytes",
                    "samples": 300,
                    "median_gap_s": 1.0,
                    "max_gap_s": 2.0,
                    "end_gap_s": 0.4,
                }
            },
            "harness": {
                "crdscale_cpu_seconds": 3.0,
                "prometheus_cpu_seconds": 1.0,
                "kube_apiserver_cpu_seconds": 100.0,
                "harness_share_of_apiserver_cpu": 0.04,
            },
        }
    )
    assert prov["metrics resolution"].startswith("process figures (RSS, CPU, fds, threads) from /metrics")
    assert "300 samples" in prov["metrics resolution"] and "largest 2 s" in prov["metrics resolution"]
    assert prov["harness cost"] == "crdscale 3.0 s + Prometheus 1.0 s CPU = 4.0% of kube-apiserver's 100.0 s"


def test_per_crd_table_units(reference):
    _, analysis, _ = reference
    table = per_crd_table(analysis.fits, "served").set_index("cause")
    total = analysis.fits[
        (analysis.fits.phase == "served") & (analysis.fits.metric == "bytes") & (analysis.fits.cause == "total")
    ].iloc[0]
    assert table.loc["total", "per CRD (KiB)"] == round(total["per_crd"] / 1024, 1)
    assert table.index[-1] == "total"


def test_headline_without_fits():
    assert "fewer than two" in headline(pd.DataFrame(columns=["key", "value", "low", "high"]))


def test_provenance_states_what_the_scrapes_cost_the_server():
    prov = provenance(
        {
            "harness": {
                "crdscale_cpu_seconds": 3.0,
                "prometheus_cpu_seconds": 1.0,
                "kube_apiserver_cpu_seconds": 100.0,
                "harness_share_of_apiserver_cpu": 0.04,
                "apiserver_scrapes": {"count": 12, "cpu_seconds_estimate": 2.5},
                "scrape_share_of_apiserver_cpu": 0.0256,
            }
        }
    )
    assert prov["harness cost"].endswith(
        "; its 12 /metrics scrapes cost kube-apiserver at most ~2.5 CPU-s "
        "= 2.6% of its own work (their wall time x 1.3, which counts waiting "
        "for a CPU on a busy machine)"
    )


def test_findings_of_a_run_that_timed_its_object_lists(reference):
    import dataclasses

    from crdscale.analysis import perobject
    from crdscale.analysis.perobject import LIST_COST_COLUMNS

    data, analysis, memory = reference
    costs = pd.DataFrame(
        [("customresources", "consistent", 2, 2000.0, 3.2e6, 0.15, 0.2, 0.3, 0.05, 0.03, "etcd", 10)],
        columns=LIST_COST_COLUMNS,
    )
    sections = perobject.report_sections({"object_lists": costs})  # the registry's per-object entry
    findings = dataclasses.replace(compute_findings(data.manifest, analysis, memory), sections=sections)
    text = findings_markdown(findings)
    assert "## LISTs of the objects" in text
    assert "| customresources | consistent | etcd | 2,000 | 150.0 | 200.0 | 300.0 | 50.0 | 30.0 |" in text
    assert "## LISTs of the objects" not in findings_markdown(compute_findings(data.manifest, analysis, memory))
