"""The /openapi/v2 state: a run that profiles before and after a GET of the v2 spec gives the spec's
cost per CRD from each step's pair of profiles, and the scenario key, profile names and fetch are checked."""

from __future__ import annotations

import pandas as pd
import pytest

from crdscale.analysis.openapiv2 import openapi_v2_per_crd, step_differences
from crdscale.analysis.percrd import fit_per_crd, profile_points
from crdscale.analysis.pprof.testing import encode_profile, synthetic_profile
from crdscale.analysis.targets import TOTAL
from crdscale.cli.main import main
from crdscale.errors import UsageError
from crdscale.rundir import RunWriter
from crdscale.rundir.layout import parse_profile_filename, profile_filename

OPENAPI = ["k8s.io/kube-openapi/pkg/builder3.BuildOpenAPISpecFromRoutes", "main.main"]
UNKNOWN = ["main.mystery", "main.main"]
SERVED_PER_CRD, SPEC_BASE, SPEC_PER_CRD = 30_000, 4_000_000, 9_000
COUNTS = (0, 100, 200, 300)


def _profile(openapi: int, other: int):
    return synthetic_profile([(OPENAPI, [1, openapi]), (UNKNOWN, [1, other])])


def _spec(n: int) -> int:
    return SPEC_BASE + SPEC_PER_CRD * n


def _points(jitter=(0, 0, 0, 0)):
    """Profiles as a server that keeps the fetched spec until the next GET: a step's served profile
    holds the previous step's spec (none before the first GET), its openapiv2 profile this step's."""
    pts = []
    for k, n in enumerate(COUNTS):
        held = _spec(COUNTS[k - 1]) if k else 0
        pts.append((n, None, _profile(1_000_000 + held, 20_000_000 + SERVED_PER_CRD * n)))
        pts.append((n, "openapiv2", _profile(1_000_000 + _spec(n) + jitter[k], 20_000_000 + SERVED_PER_CRD * n)))
    return profile_points(pts)


def test_each_step_pair_gives_the_spec_per_crd():
    table = openapi_v2_per_crd(_points()).set_index(["metric", "cause"])
    assert table.loc[("bytes", TOTAL), "per_crd"] == pytest.approx(SPEC_PER_CRD)
    assert table.loc[("bytes", "openapi"), "per_crd"] == pytest.approx(SPEC_PER_CRD)
    assert table.loc[("bytes", TOTAL), "steps"] == 3
    assert table.loc[("bytes", TOTAL), "at_baseline"] == pytest.approx(SPEC_BASE)  # the built-in APIs' spec


def test_interval_comes_from_the_steps_spread():
    row = openapi_v2_per_crd(_points(jitter=(0, 50_000, -80_000, 60_000))).set_index(["metric", "cause"])
    total = row.loc[("bytes", TOTAL)]
    assert total["per_crd_low"] < total["per_crd"] < total["per_crd_high"]
    assert total["dof"] == 2


def test_openapiv2_phase_is_the_state_with_its_own_baseline():
    fits, _ = fit_per_crd(_points())
    by = fits.set_index(["phase", "metric", "cause"])["per_crd"]
    # served (and a client fetched the spec): the served cost plus the spec's, from the phase's own 0-CRD profile
    assert by[("openapiv2", "bytes", TOTAL)] == pytest.approx(SERVED_PER_CRD + SPEC_PER_CRD)


def test_no_openapiv2_profiles_no_table():
    pts = profile_points([(n, None, _profile(1_000_000, 20_000_000 + SERVED_PER_CRD * n)) for n in COUNTS])
    assert step_differences(pts).empty
    assert openapi_v2_per_crd(pts).empty


def test_profile_name_of_the_phase_round_trips():
    name = profile_filename("heap", 2, 200, "openapiv2")
    assert name == "heap-step02-crds0200-openapiv2.pb.gz"
    parsed = parse_profile_filename(name)
    assert (parsed.step, parsed.crds, parsed.phase) == (2, 200, "openapiv2")


def test_analyze_prints_the_v2_table(tmp_path, capsys):
    run = RunWriter.create_at(tmp_path / "run")
    run.write_manifest({"name": "openapi-v2"})
    for k, n in enumerate(COUNTS):
        held = _spec(COUNTS[k - 1]) if k else 0
        run.write_profile("heap", k, n, None, encode_profile(_profile(1_000_000 + held, 20_000_000)))
        run.write_profile("heap", k, n, "openapiv2", encode_profile(_profile(1_000_000 + _spec(n), 20_000_000)))
    run.close()
    assert main(["analyze", str(run.path)]) == 0
    out = capsys.readouterr().out
    assert "After a GET of /openapi/v2" in out and "phase openapiv2" in out
    table = pd.read_csv(run.path / "analysis" / "openapi_v2.csv")
    assert table.loc[(table["metric"] == "bytes") & (table["cause"] == TOTAL), "per_crd"].iloc[0] == pytest.approx(
        SPEC_PER_CRD
    )


@pytest.mark.parametrize("value", ["yaml", "true"])
def test_scenario_key_is_checked(value):
    from crdscale.scenario.config import parse_scenario

    with pytest.raises(UsageError, match="profiles.openapi_v2") as err:
        parse_scenario(f'[profiles]\nopenapi_v2 = "{value}"\n')
    assert "\n" not in str(err.value)


def test_scenario_key_default_is_off():
    from crdscale.scenario.config import parse_scenario

    assert parse_scenario(None).profiles.openapi_v2 == "none"
    assert parse_scenario('[profiles]\nopenapi_v2 = "json"\n').profiles.openapi_v2 == "json"


class _Response:
    def __init__(self, status: int, body: bytes):
        self.status_code, self.content, self.text = status, body, body.decode()

    def json(self):
        raise ValueError("not JSON")


class _Cluster:
    def __init__(self, status: int = 200):
        self.status, self.requests = status, []

    def get(self, path, **kwargs):
        self.requests.append((path, kwargs))
        return _Response(self.status, b"x" * 1234)


def test_fetch_asks_for_protobuf_as_kubectl_does():
    from crdscale.collect.openapi import fetch_openapi_v2
    from crdscale.errors import ClusterError

    cluster = _Cluster()
    fetched = fetch_openapi_v2(cluster)
    path, kwargs = cluster.requests[0]
    assert path == "/openapi/v2" and "protobuf" in kwargs["headers"]["Accept"]
    assert fetched.bytes == 1234 and fetched.format == "protobuf"
    with pytest.raises(ClusterError, match="HTTP 403"):
        fetch_openapi_v2(_Cluster(403))
    with pytest.raises(ValueError):
        fetch_openapi_v2(cluster, "yaml")


def test_a_failed_get_makes_the_next_pair_span_two_steps():
    pts = _points()
    # step 2's GET failed (a 504): no openapiv2 profile at 200 CRDs; step 3's served profile then holds step 1's spec
    pts = pts[~((pts["crds"] == 200) & (pts["phase"] == "openapiv2"))]
    held = pts["crds"] == 300
    pts.loc[held & (pts["phase"] == "served") & (pts["cause"].isin(["openapi", TOTAL])), "value"] -= SPEC_PER_CRD * 100
    diffs = step_differences(pts)
    total = diffs[(diffs["metric"] == "bytes") & (diffs["cause"] == TOTAL)].set_index("crds")
    assert list(total.index) == [0, 100, 300] and total.loc[300, "added"] == 200
    table = openapi_v2_per_crd(pts).set_index(["metric", "cause"])
    assert table.loc[("bytes", TOTAL), "per_crd"] == pytest.approx(SPEC_PER_CRD)
