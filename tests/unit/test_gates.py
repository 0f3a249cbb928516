"""Feature gates per version: parsing both source formats, and validation against the lists
recorded from v1.37.1's and v1.28.15's module sources (tests/data/gates/)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crdscale.cluster import gates, patches
from crdscale.errors import UsageError

DATA = Path(__file__).parent.parent / "data" / "gates"

# As k8s.io/kubernetes v1.28's pkg/features/kube_features.go writes them (excerpt).
SPEC_MAP = """\
const (
	// owner: @x
	WatchList featuregate.Feature = "WatchList"
	APISelfSubjectReview featuregate.Feature = "APISelfSubjectReview"
)
var defaultKubernetesFeatureGates = map[featuregate.Feature]featuregate.FeatureSpec{
	APISelfSubjectReview: {Default: true, PreRelease: featuregate.GA, LockToDefault: true}, // GA in 1.28; remove in 1.30

	genericfeatures.APIListChunking: {Default: true, PreRelease: featuregate.Beta},

	WatchList: {Default: false, PreRelease: featuregate.Alpha},
}
"""

# As v1.37's kube_features.go and client-go's known_features.go write them (excerpt).
VERSIONED_MAP = """\
const (
	CBORServingAndStorage featuregate.Feature = "CBORServingAndStorage"
	ClientsAllowCBOR Feature = "ClientsAllowCBOR"
	CRDValidationRatchetingX featuregate.Feature = "CRDValidationRatcheting"
)
var defaultVersionedKubernetesFeatureGates = map[featuregate.Feature]featuregate.VersionedSpecs{
	genericfeatures.CBORServingAndStorage: {
		{Version: version.MustParse("1.32"), Default: false, PreRelease: featuregate.Alpha},
	},
	apiextensionsfeatures.CRDValidationRatchetingX: {
		{Version: version.MustParse("1.28"), Default: false, PreRelease: featuregate.Alpha},
		{Version: version.MustParse("1.30"), Default: true, PreRelease: featuregate.Beta},
		{Version: version.MustParse("1.33"), Default: true, LockToDefault: true, PreRelease: featuregate.GA},
	},
}
var clientGates = map[Feature]VersionedSpecs{
	ClientsAllowCBOR: {
		{Version: version.MustParse("1.32"), Default: false, PreRelease: Alpha},
	},
}
"""


def test_feature_spec_map_is_parsed():
    parsed = gates.parse_gate_sources([SPEC_MAP], "v1.28.15")
    assert parsed["WatchList"] == gates.Gate("WatchList", "alpha", False)
    assert parsed["APISelfSubjectReview"] == gates.Gate("APISelfSubjectReview", "GA", True, locked=True)
    assert parsed["APIListChunking"].stage == "beta"  # a staging gate listed by its constant's name
    assert {"AllAlpha", "AllBeta"} <= set(parsed)


@pytest.mark.parametrize(
    "version, stage, default, locked, since",
    [
        ("v1.29.0", "alpha", False, False, "1.28"),
        ("v1.31.2", "beta", True, False, "1.30"),
        ("v1.37.1", "GA", True, True, "1.33"),
    ],
)
def test_versioned_specs_give_the_stage_at_the_version(version, stage, default, locked, since):
    gate = gates.parse_gate_sources([VERSIONED_MAP], version)["CRDValidationRatcheting"]
    assert (gate.stage, gate.default, gate.locked, gate.since) == (stage, default, locked, since)


def test_client_go_gates_without_package_prefix():
    parsed = gates.parse_gate_sources([VERSIONED_MAP], "v1.37.1")
    assert parsed["ClientsAllowCBOR"].stage == "alpha"
    assert parsed["CBORServingAndStorage"].since == "1.32"


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """The recorded lists in a fresh crdscale cache; module sources unavailable."""
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path))
    (tmp_path / "feature-gates").mkdir()
    for path in DATA.glob("v*.json"):
        shutil.copy(path, tmp_path / "feature-gates" / path.name)

    def no_sources(module, version, **_kw):
        raise UsageError(f"{module} {version} is not in the Go module cache")

    monkeypatch.setattr(patches, "module_source", no_sources)
    return tmp_path


def test_recorded_lists_load_from_the_cache(recorded):
    new, old = gates.gates_for("1.37.1"), gates.gates_for("v1.28.15")
    assert new["CBORServingAndStorage"].stage == "alpha"
    assert new["ListFromCacheSnapshot"].stage == "beta"
    assert old["ConsistentListFromCache"].stage == "alpha"
    assert "CBORServingAndStorage" not in old and "APIListChunking" not in new


@pytest.mark.parametrize(
    "version, asked, expected",
    [
        (
            "v1.37.1",
            {"CBORServingAndStorage": True, "WatchList": False},
            {
                "CBORServingAndStorage": {"enabled": True, "stage": "alpha", "default": False, "locked": False},
                "WatchList": {"enabled": False, "stage": "beta", "default": True, "locked": False},
            },
        ),
        (
            "v1.28.15",
            {"ConsistentListFromCache": True},
            {"ConsistentListFromCache": {"enabled": True, "stage": "alpha", "default": False, "locked": False}},
        ),
    ],
)
def test_known_gates_are_recorded_with_their_stage(recorded, version, asked, expected):
    assert gates.check_feature_gates(asked, version) == expected


@pytest.mark.parametrize(
    "version, asked, message",
    [
        (
            "v1.37.1",
            {"CBORServingAndStorag": True},
            "unknown feature gate CBORServingAndStorag for v1.37.1; nearest: CBORServingAndStorage",
        ),
        (
            "v1.37.1",
            {"listfromcachesnapshot": True},
            "unknown feature gate listfromcachesnapshot for v1.37.1; nearest: ListFromCacheSnapshot",
        ),
        (
            "v1.28.15",
            {"CBORServingAndStorage": True},
            "CBORServingAndStorage is not a feature gate of v1.28.15 (v1.37.1 has it, alpha); "
            "choose a version that has it",
        ),
        ("v1.37.1", {"NoSuchThingAtAll": True}, "unknown feature gate NoSuchThingAtAll for v1.37.1"),
        ("v1.37.1", {"WatchList": "yes"}, "feature gate WatchList: 'yes' is not true or false"),
    ],
)
def test_bad_gates_are_one_line(recorded, version, asked, message):
    with pytest.raises(UsageError) as err:
        gates.check_feature_gates(asked, version)
    assert str(err.value) == message


def test_gate_locked_to_its_default_is_refused(recorded):
    locked = next(g for g in gates.gates_for("v1.37.1").values() if g.locked)
    with pytest.raises(UsageError, match=f"{locked.name} is {locked.stage} and locked to"):
        gates.check_feature_gates({locked.name: not locked.default}, "v1.37.1")


def test_gates_from_help():
    text = (
        "      --feature-gates colonSeparatedMultimapStringString\n"
        "                kube:AllAlpha=true|false (ALPHA - default=false)\n"
        "                kube:CBORServingAndStorage=true|false (ALPHA - default=false)\n"
        "                kube:WatchList=true|false (BETA - default=true)\n"
        "                kube:AllowDNSOnlyNodeCSR=true|false (DEPRECATED - default=false)\n"
    )
    assert gates.gates_from_help(text) == {
        "AllAlpha": "alpha",
        "CBORServingAndStorage": "alpha",
        "WatchList": "beta",
        "AllowDNSOnlyNodeCSR": "deprecated",
    }
