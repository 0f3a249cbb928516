"""Real clients against the local control plane: client-go informers, discovery, cache memory, kubectl.

One set of CRDs (each in its own group) serves the informer and discovery tests,
so the server is set up once: enough for 150+ group-versions.
"""

from __future__ import annotations

import pytest

from crdscale.cluster.local import LocalControlPlane
from crdscale.collect import metrics as metric_defs
from crdscale.collect.probes import clientmem, discovery
from crdscale.collect.probes.configs import ListProbeConfig
from crdscale.collect.probes.fixtures import ProbeFixtures, sweep_crds
from crdscale.collect.probes.listobjects import populate
from crdscale.crds.serve import ResourceServer
from crdscale.models import tokenbucket
from crdscale.ownership import new_run_id

# The kubectl test needs kubectl v1.24.0, which make test builds while the other tests run (scripts/test.sh).
pytestmark = [pytest.mark.integration, pytest.mark.extra_versions]

SERVED_CRDS = 100
MIN_GROUP_VERSIONS = 155


@pytest.fixture(scope="module")
def cluster():
    """This module's own control plane, without kube-controller-manager: its garbage collector
    watches every CRD within 30 s of install, which opens each one's etcd client before our
    informers do, and the fds per served CRD measured below would be those of nobody's watch."""
    with LocalControlPlane(controller_manager=False) as cp:
        yield cp.connect()


@pytest.fixture(scope="module")
def crds(cluster):
    """At least 100 CRDs in new groups, and the server at 155+ group-versions; removed afterwards."""
    base = discovery.count_group_versions(cluster)
    with ProbeFixtures(cluster, new_run_id()) as fixtures:
        created = sweep_crds(0, max(SERVED_CRDS, MIN_GROUP_VERSIONS - base), fixtures.labels, fixtures.instance)
        fixtures.install_crds(created)
        yield created


def _open_fds(cluster) -> float:
    text = cluster.get("/metrics", timeout=30).text
    return next(v for name, labels, v in metric_defs.parse_exposition(text, {"process_open_fds"}) if not labels)


def test_informers_cost_about_one_fd_per_crd_and_all_sync(cluster, crds):
    served = crds[:SERVED_CRDS]
    before = _open_fds(cluster)
    with ResourceServer(cluster, "watch") as server:
        assert server.client == "go-informers"
        result = server.serve(1, served)
        assert result.listed == SERVED_CRDS, result.list_errors[:3]
        assert server.open_watches == SERVED_CRDS
        after = _open_fds(cluster)
        memory = server._informers.memory()
        stopped = server._informers.close()
    per_crd = (after - before) / SERVED_CRDS
    # The etcd client of each newly served resource; all watches share one HTTP/2 connection.
    assert 0.7 <= per_crd <= 1.3, f"{per_crd:.2f} fds per served CRD ({before:.0f} -> {after:.0f})"
    assert stopped and stopped[0]["synced"] == SERVED_CRDS
    assert memory[0]["pid"] > 0


def test_client_go_discovery_waits_as_the_token_bucket_predicts(cluster, crds):
    limit = tokenbucket.PRESETS["legacy"]  # (100, 5)
    run = discovery.client_go_discovery(cluster, limit)
    s = run.summary
    assert s["group_versions"] >= MIN_GROUP_VERSIONS - 5
    assert s["errors"] == 0 and s["requests"] == s["group_versions"] + 2
    predicted = s["predicted_delay_s"]
    assert predicted > 8.0
    assert tokenbucket.relative_error(s["max_limiter_wait_s"], predicted) <= 0.15, (s["max_limiter_wait_s"], predicted)


def test_pinned_kubectl_discovery_is_measured(cluster, crds):
    gv = discovery.count_group_versions(cluster)
    rows = discovery.kubectl_rows(cluster.kubeconfig, ["1.24.0"], gv)
    by_command = {r["command"]: r for r in rows}
    assert set(by_command) == {"kubectl get pods", "kubectl api-resources"}
    for row in rows:
        assert row["limit"] == "kubectl v1.24.0" and row["errors"] == 0
        # Legacy discovery: /api, /apis and one GET per group-version (plus the command's own).
        assert row["requests"] >= gv + 2
        assert row["predicted_delay_s"] == 0.0  # (300, 50) does not throttle below 300 group-versions


def test_metadata_only_cache_peaks_5x_lower_with_100_mib_of_secrets(cluster):
    config = ListProbeConfig(
        custom_resources=0, secrets=105, secret_bytes=1_000_000, namespaces=1, repeats=1
    )  # 100.1 MiB
    with ProbeFixtures(cluster, new_run_id()) as fixtures:
        ns = populate(fixtures, config).namespaces[0]
        runs = clientmem.measure_cache(
            cluster, "secrets", namespace=ns, modes=("full", "metadata"), watch_list=("off",)
        )
        reports = {r["mode"]: r for r in runs}
    full, meta = reports["full"], reports["metadata"]
    assert full["items"] == meta["items"] == 105
    assert full["peak_rss_kib"] >= 5 * meta["peak_rss_kib"], (full["peak_rss_mib"], meta["peak_rss_mib"])
    assert full["peak_heap_bytes"] >= 5 * meta["peak_heap_bytes"]
