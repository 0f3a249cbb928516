"""Loader on fixtures: trees, streams, packages, malformed files."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscale.crds.load import load_crds
from crdscale.errors import CRDError

DATA = Path(__file__).resolve().parents[1] / "data" / "crds"


def test_tree_with_streams_lists_and_json():
    loaded = load_crds(DATA / "tree")
    names = sorted(c["metadata"]["name"] for c in loaded.crds)
    assert names == [
        "doohickeys.a.example.org",
        "gadgets.a.example.org",
        "gizmos.b.example.org",
        "sprockets.b.example.org",
        "widgets.a.example.org",
    ]
    assert loaded.skipped == {"ConfigMap": 1}
    # hidden directories and non-YAML files are not read
    assert loaded.files == 4
    gizmo = loaded.sources[[c["metadata"]["name"] for c in loaded.crds].index("gizmos.b.example.org")]
    assert gizmo.path.name == "stream.yaml" and gizmo.document == 4


def test_crossplane_package_keeps_only_crds():
    loaded = load_crds(DATA / "crossplane-package")
    assert len(loaded.crds) == 2
    assert loaded.skipped == {"Provider": 1}


def test_olm_bundle_keeps_only_v1_crds_and_counts_the_rest():
    loaded = load_crds(DATA / "olm-bundle")
    assert [c["metadata"]["name"] for c in loaded.crds] == ["databases.db.example.com"]
    assert loaded.skipped == {
        "ClusterServiceVersion": 1,
        "Service": 1,
        "<no kind>": 1,
        "CustomResourceDefinition (apiextensions.k8s.io/v1beta1)": 1,
    }
    assert loaded.skipped_total == 4


def test_several_sources_and_summary():
    loaded = load_crds([DATA / "crossplane-package", DATA / "olm-bundle"])
    summary = loaded.summary()
    assert summary.count == 3 and summary.groups == 3 and summary.group_versions == 3
    assert summary.properties_min == summary.properties_max == 3


@pytest.mark.parametrize(
    "name, expected",
    [
        ("bad-yaml-doc2.yaml", "bad-yaml-doc2.yaml: document 2: invalid YAML at line"),
        ("not-an-object-doc2.yaml", "not-an-object-doc2.yaml: document 2: expected an object, got list"),
        ("no-spec.yaml", "no-spec.yaml: document 1: CustomResourceDefinition nospecs.m.example.org has no spec"),
        ("truncated.json", "truncated.json: document 1: invalid JSON"),
        ("duplicate.yaml", "duplicate.yaml: document 2: CRD oks.m.example.org already defined in"),
    ],
)
def test_malformed_files_give_one_line_errors_naming_file_and_document(name, expected):
    with pytest.raises(CRDError) as err:
        load_crds(DATA / "malformed" / name)
    message = str(err.value)
    assert expected in message
    assert "\n" not in message


def test_missing_source():
    with pytest.raises(CRDError, match="no such file or directory"):
        load_crds(DATA / "does-not-exist")


def test_empty_stream_docs_are_not_counted_as_skipped(tmp_path):
    (tmp_path / "empty.yaml").write_text("---\n# nothing\n---\n")
    loaded = load_crds(tmp_path)
    assert loaded.crds == [] and loaded.skipped_total == 0 and loaded.files == 1
