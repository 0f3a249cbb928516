"""crdscale-client without Go: the build module, its JSON lines, and what the probes make of them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from crdscale.cluster import binaries, goclient
from crdscale.collect.probes import clientmem, discovery
from crdscale.models import probecosts
from crdscale.models.tokenbucket import PRESETS, RateLimit


def test_program_pins_client_go_and_embeds_the_packaged_source(tmp_path, monkeypatch):
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path))
    prog = goclient.program()
    assert prog.binary_name == "crdscale-client"
    assert prog.requires["k8s.io/client-go"] == goclient.CLIENT_GO_VERSION
    assert prog.requires["k8s.io/api"] == prog.requires["k8s.io/apimachinery"] == goclient.CLIENT_GO_VERSION
    # Typed CRD caches: the apiextensions types of the same release.
    assert prog.requires["k8s.io/apiextensions-apiserver"] == goclient.CLIENT_GO_VERSION
    assert prog.main_go == goclient.source()
    assert "package main" in prog.main_go and '"informers"' in prog.main_go
    # Cached per client-go version and source: the directory names both.
    assert prog.out_dir == tmp_path / "crdscale-client" / goclient.build_version()
    gomod = prog.go_mod()
    assert gomod.startswith("module crdscale.local/crdscale-client\n\ngo 1.26.0\n")
    assert f"\tk8s.io/client-go {goclient.CLIENT_GO_VERSION}\n" in gomod


def test_build_version_changes_with_the_source():
    a = goclient.build_version("v0.37.1", "package main // a")
    b = goclient.build_version("v0.37.1", "package main // b")
    assert a.startswith("v0.37.1-") and a != b
    assert goclient.build_version("v0.37.1", "package main // a") == a


def test_parse_lines_keeps_only_events():
    lines = [
        '{"event": "ready", "t": 0.1, "pid": 7}',
        "klog noise",
        "",
        '{"no_event": 1}',
        "{broken",
        '{"event":"synced","t":1}',
    ]
    events = goclient.parse_lines(lines)
    assert [e["event"] for e in events] == ["ready", "synced"]
    assert events[0]["pid"] == 7


def test_connection_names_the_kubeconfig_files_in_the_environment_and_the_context_as_a_flag():
    # $KUBECONFIG, not --kubeconfig (one file, no merge): client-go merges the list as crdscale did.
    assert goclient.connection("/k/config") == ([], {"KUBECONFIG": "/k/config"})
    assert goclient.connection("/k/a:/k/b", "ctx") == (["--context=ctx"], {"KUBECONFIG": "/k/a:/k/b"})


@pytest.mark.parametrize(
    "gomod, expected",
    [("module x\n\ngo 1.16\n", "go 1.24"), ("go 1.26.0\n", "go 1.26.0"), ("", "go 1.24"), ("go 1.25\n", "go 1.25")],
)
def test_kubectl_module_go_line_follows_the_required_module(gomod, expected):
    assert binaries._go_directive(gomod) == expected


def test_kubectl_program_requires_the_staging_version(tmp_path, monkeypatch):
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path))
    prog = binaries.kubectl_program("v1.23.3", gomod_text="go 1.16\n")
    assert prog.requires == {"k8s.io/kubectl": "v0.23.3", "k8s.io/component-base": "v0.23.3"}
    assert prog.out_dir == tmp_path / "kubectl" / "v1.23.3"
    assert any("gitVersion=v1.23.3" in flag for flag in prog.ldflags)


@pytest.mark.parametrize(
    "version, preset",
    [
        ("1.23.3", "legacy"),
        ("v1.23.5", "kubectl-1.24"),
        ("1.24.0", "kubectl-1.24"),
        ("1.29.9", "kubectl-1.24"),
        ("1.37.1", None),
    ],
)
def test_kubectl_discovery_limit_by_version(version, preset):
    limit = discovery.kubectl_limit(version)
    assert (limit.name if limit else None) == preset


def _discovery_events(gvs: int, burst: int, qps: float) -> list[dict]:
    """Events shaped like crdscale-client's: /api, /apis, then every group-version at once."""
    events, t = [], 1.0
    for path in ("/api", "/apis"):
        events.append({"event": "wait", "t": t, "start_s": t, "wait_s": 0.0})
        events.append(
            {
                "event": "request",
                "t": t + 0.01,
                "path": path,
                "start_s": t,
                "latency_s": 0.01,
                "bytes": 100,
                "status": 200,
            }
        )
        t += 0.01
    waits = [max(0.0, (i - burst) / qps) for i in range(3, gvs + 3)]  # requests 3.. take tokens 3..
    for i, wait in enumerate(waits):
        events.append({"event": "wait", "t": t + wait, "start_s": t, "wait_s": wait})
        events.append(
            {
                "event": "request",
                "t": t + wait + 0.01,
                "path": f"/apis/g{i}.example.com/v1",
                "start_s": t + wait,
                "latency_s": 0.01,
                "bytes": 50,
                "status": 200,
            }
        )
    wall = t + max(waits) + 0.01 - 1.0
    events.append({"event": "summary", "t": 1.0 + wall, "wall_s": wall, "groups": gvs, "group_versions": gvs})
    return events


def test_discovery_from_events_matches_waits_and_predicts():
    limit = RateLimit("t", 10, 5.0)
    run = discovery.discovery_from_events(_discovery_events(30, limit.burst, limit.qps), limit)
    s = run.summary
    assert s["mode"] == "client-go"
    assert s["requests"] == 32 and s["group_versions"] == 30 and s["errors"] == 0
    assert s["bytes"] == 2 * 100 + 30 * 50
    assert s["max_limiter_wait_s"] == pytest.approx((32 - 10) / 5.0)
    assert s["preamble_s"] == pytest.approx(0.02)
    assert s["predicted_delay_s"] == pytest.approx(s["max_limiter_wait_s"], rel=0.02)
    table = run.requests
    assert list(table["phase"][:2]) == ["groups", "groups"]
    assert table["limiter_wait_s"].is_monotonic_increasing
    assert table["start_s"].min() == pytest.approx(0.0)


def test_discovery_from_events_without_a_summary_is_an_error():
    from crdscale.errors import ClusterError

    with pytest.raises(ClusterError):
        discovery.discovery_from_events([{"event": "ready", "t": 0}], PRESETS["legacy"])


def test_discovery_from_events_without_limiter_has_no_waits():
    events = [e for e in _discovery_events(5, 100, 5.0) if e["event"] != "wait"]
    run = discovery.discovery_from_events(events, PRESETS["disabled"])
    assert run.summary["max_limiter_wait_s"] == 0.0
    assert math.isnan(run.requests["limiter_wait_s"].iloc[0])


def _cachemem_event(mode="metadata", watch_list=False, items=100, live=4 << 20, **extra):
    return {
        "event": "cachemem",
        "t": 3.0,
        "kind": mode,
        "resource": "l1.probe.crdscale.io/v1, Resource=listprobes",
        "decoded": "metadata" if mode == "metadata" else "unstructured",
        "watch_list": watch_list,
        "items": items,
        "sync_s": 0.5,
        "managed_fields": 0 if mode == "transform" else items,
        "schemas": 0,
        "baseline_heap_bytes": 1 << 20,
        "peak_heap_bytes": 8 << 20,
        "live_heap_bytes": live,
        "baseline_rss_kib": 10240,
        "rss_kib": 20480,
        "peak_rss_kib": 30720,
        "gc_cycles": 3,
        **extra,
    }


def test_cache_report_adds_the_cache_heap_and_mib_columns():
    row = clientmem.cache_report(_cachemem_event())
    assert row["mode"] == "metadata" and row["watch_list"] is False and row["seconds"] == 0.5
    assert row["cache_heap_bytes"] == 3 << 20 and row["cache_heap_mib"] == 3
    assert row["peak_heap_mib"] == 8 and row["live_heap_mib"] == 4 and row["peak_rss_mib"] == 30
    assert "event" not in row and "t" not in row and "kind" not in row
    # A GC that leaves less than the baseline is no negative cache.
    assert clientmem.cache_report(_cachemem_event(live=1 << 19))["cache_heap_bytes"] == 0


def _runs(cache="custom-resources", heaps=None, watch_list=(False, True)):
    heaps = heaps or {"full": 6000, "metadata": 2000, "transform": 3000}
    rows = []
    for wl in watch_list:
        for mode, per_object in heaps.items():
            event = _cachemem_event(mode, wl, items=200, live=(1 << 20) + 200 * per_object, peak_rss_kib=30720)
            rows.append(dict(clientmem.cache_report(event), cache=cache, json_bytes=200 * 1500, json_items=200))
    return pd.DataFrame(rows)


def test_clientmem_costs_per_object_per_crd_and_against_the_full_cache():
    table = probecosts.clientmem_costs(_runs())
    by = table.set_index(["mode", "watch_list"])
    assert by.loc[("full", False), "heap_per_object_bytes"] == 6000
    assert by.loc[("metadata", True), "ratio_to_full"] == pytest.approx(1 / 3)
    assert by.loc[("transform", False), "ratio_to_full"] == pytest.approx(0.5)
    assert by.loc[("full", True), "heap_per_json_byte"] == pytest.approx(4.0)
    # One CRD's custom resources: the whole cache is that CRD's.
    assert by.loc[("full", False), "heap_per_crd_bytes"] == 200 * 6000
    assert by.loc[("full", False), "rss_per_object_bytes"] == (30720 - 10240) * 1024 / 200


def test_clientmem_costs_of_a_crd_cache_are_per_crd_and_of_secrets_per_no_crd():
    crds = probecosts.clientmem_costs(_runs("crds", {"full": 90_000, "transform": 9_000}, (False,)))
    assert list(crds["heap_per_crd_bytes"]) == [90_000, 9_000]
    assert list(crds["ratio_to_full"]) == pytest.approx([1.0, 0.1])
    secrets = probecosts.clientmem_costs(_runs("secrets", {"full": 10, "metadata": 1}, (True,)))
    assert secrets["heap_per_crd_bytes"].isna().all()


def test_clientmem_costs_without_a_full_run_has_no_ratio():
    table = probecosts.clientmem_costs(_runs(heaps={"metadata": 2000}))
    assert table["ratio_to_full"].isna().all() and (table["heap_per_object_bytes"] == 2000).all()
