"""A pull request that adds a feature gate or a flag (#140939's OpenAPIV2LazyBuild, #142066's
--watch-cache-max-bytes-per-resource) is A/B'd with it set: `run --check` accepts a gate or a flag the
scenario's diffs declare, which the release does not have, and still refuses any other unknown one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crdscale.cluster import flags, patches
from crdscale.errors import UsageError
from crdscale.scenario import check
from crdscale.scenario.config import build_scenario

DATA = Path(__file__).parent.parent / "data"

ADDS = """\
diff --git a/staging/src/k8s.io/apiserver/pkg/features/kube_features.go b/staging/src/k8s.io/apiserver/pkg/features/kube_features.go
--- a/staging/src/k8s.io/apiserver/pkg/features/kube_features.go
+++ b/staging/src/k8s.io/apiserver/pkg/features/kube_features.go
@@ -1,2 +1,4 @@
 const (
+\t// Builds /openapi/v2 on its first request.
+\tOpenAPIV2LazyBuild featuregate.Feature = "OpenAPIV2LazyBuild"
 \tWatchList featuregate.Feature = "WatchList"
diff --git a/pkg/controlplane/apiserver/options/options.go b/pkg/controlplane/apiserver/options/options.go
--- a/pkg/controlplane/apiserver/options/options.go
+++ b/pkg/controlplane/apiserver/options/options.go
@@ -1,2 +1,4 @@
 func (s *Options) AddFlags(fs *pflag.FlagSet) {
+\tfs.StringSliceVar(&s.WatchCacheMaxBytes, "watch-cache-max-bytes-per-resource", nil, "budget")
+\tfs.BoolVar(&s.Bypass, "watch-cache-bypass", false, "bypass")
 \tfs.IntVar(&s.X, "kept", 0, "a flag on a context line is not added")
"""


def test_added_gates_and_flags_are_read_from_added_lines():
    diff = patches.parse_diff(ADDS, "adds.diff")
    assert patches.added_gates([diff]) == ["OpenAPIV2LazyBuild"]
    assert patches.added_flags([diff]) == {"watch-cache-max-bytes-per-resource": "value", "watch-cache-bypass": ""}
    assert patches.added_gates([]) == [] and patches.added_flags([]) == {}


@pytest.fixture
def release(tmp_path, monkeypatch):
    """v1.37.1 as recorded (its gates and kube-apiserver's flags), the diff applying without sources."""
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache" / "feature-gates").mkdir(parents=True)
    shutil.copy(DATA / "gates" / "v1.37.1.json", tmp_path / "cache" / "feature-gates" / "v1.37.1.json")
    data = json.loads((DATA / "flags" / "kube-apiserver-v1.37.1.json").read_text())
    known = flags.FlagSet("kube-apiserver", data["sha256"], data["flags"], data["short"])
    monkeypatch.setattr(flags, "released_flag_set", lambda version, component="kube-apiserver": known)
    monkeypatch.setattr(patches, "check", lambda diffs, version, **k: {"k8s.io/apiserver": ["x.go"]})
    path = tmp_path / "adds.diff"
    path.write_text(ADDS)
    return path


def _check(diff: Path | None, **target) -> check.CellReport:
    user = {"target": {"kube_version": "1.37.1", **({"patches": [str(diff)]} if diff else {}), **target}}
    report = check.CellReport("changed")
    check._check_changes(build_scenario(user), "scenario (changed)", report)
    return report


def test_a_gate_and_a_flag_the_diff_adds_are_accepted(release):
    report = _check(
        release,
        feature_gates={"OpenAPIV2LazyBuild": False, "CBORServingAndStorage": True},
        apiserver_flags=["--watch-cache-max-bytes-per-resource=50Mi", "--feature-gates=OpenAPIV2LazyBuild=false"],
    )
    gates_line = dict(report.checks)["feature gates"]
    assert "OpenAPIV2LazyBuild=false (added by the diff)" in gates_line
    assert "CBORServingAndStorage=true (alpha)" in gates_line


@pytest.mark.parametrize(
    "target, message",
    [
        ({"feature_gates": {"OpenAPIV2LazyBuild": False}}, "unknown feature gate OpenAPIV2LazyBuild"),
        ({"apiserver_flags": ["--watch-cache-max-bytes-per-resource=50Mi"]}, "no flag --watch-cache-max-bytes"),
    ],
)
def test_without_the_diff_they_are_still_refused(release, target, message):
    with pytest.raises(UsageError, match=message):
        _check(None, **target)


def test_an_unknown_gate_beside_the_diff_is_still_refused(release):
    with pytest.raises(UsageError, match="unknown feature gate OpenAPIV2LazyBiuld"):
        _check(release, feature_gates={"OpenAPIV2LazyBiuld": False})
    with pytest.raises(UsageError, match="no flag --kept"):
        _check(release, apiserver_flags=["--kept=1"])
