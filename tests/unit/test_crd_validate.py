"""crdscale.crds.validate: what kube-apiserver answers to a CRD it refuses, said before anything is sent.
Every expected line below is what kube-apiserver v1.37.1 answered to a dry-run create of the same CRD
(field paths name spec.versions[i] where the server, for a single version, says spec.validation)."""

from __future__ import annotations

import copy
import json

import pytest

from crdscale.cli.main import main
from crdscale.crds.validate import rejection

UNDECODABLE = 'CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: '
INVALID = 'CustomResourceDefinition.apiextensions.k8s.io "widgets.hostile.example.org" is invalid: '

BASE = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.hostile.example.org"},
    "spec": {
        "group": "hostile.example.org",
        "scope": "Cluster",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}},
                    }
                },
            }
        ],
    },
}


def _v(crd):
    return crd["spec"]["versions"][0]


def _root(crd):
    return _v(crd)["schema"]["openAPIV3Schema"]


def _second(crd, **changes):
    crd["spec"]["versions"].append({**copy.deepcopy(_v(crd)), **changes})


# The eight of issue 31, then more of the same two stages.
CASES = {
    "schema-a-string": (
        lambda c: _v(c)["schema"].update(openAPIV3Schema="type: object"),
        UNDECODABLE + "json: cannot unmarshal string into Go struct field "
        "CustomResourceValidation.spec.versions.schema.openAPIV3Schema of type v1.JSONSchemaProps",
    ),
    "properties-a-list": (
        lambda c: _root(c).update(properties=[{"spec": {"type": "object"}}]),
        UNDECODABLE + "json: cannot unmarshal array into Go struct field "
        "JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties of type map[string]v1.JSONSchemaProps",
    ),
    "type-5": (
        lambda c: _root(c)["properties"]["spec"]["properties"]["size"].update(type=5),
        UNDECODABLE + "json: cannot unmarshal number into Go struct field "
        "JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.properties.type of type string",
    ),
    "no-storage-version": (
        lambda c: _v(c).update(storage=False),
        INVALID + "spec.versions: Invalid value: none marked: must have exactly one version marked as storage version",
    ),
    "two-storage-versions": (
        lambda c: _second(c, name="v2"),
        INVALID
        + "spec.versions: Invalid value: 2 marked (v1, v2): must have exactly one version marked as storage version",
    ),
    "a-version-twice": (
        lambda c: _second(c, storage=False),
        INVALID + 'spec.versions: Invalid value: "v1" twice: must contain unique version names',
    ),
    "served-yes": (
        lambda c: _v(c).update(served="yes"),
        UNDECODABLE + "json: cannot unmarshal string into Go struct field "
        "CustomResourceDefinitionVersion.spec.versions.served of type bool",
    ),
    "name-not-plural-group": (
        lambda c: c["metadata"].update(name="gadgets.hostile.example.org"),
        'CustomResourceDefinition.apiextensions.k8s.io "gadgets.hostile.example.org" is invalid: metadata.name: '
        'Invalid value: "gadgets.hostile.example.org": must be spec.names.plural+"."+spec.group',
    ),
    "group-without-dot": (
        lambda c: (c["spec"].update(group="hostile"), c["metadata"].update(name="widgets.hostile")),
        'CustomResourceDefinition.apiextensions.k8s.io "widgets.hostile" is invalid: spec.group: Invalid value: '
        '"hostile": should be a domain with at least one dot',
    ),
    "scope-unknown": (
        lambda c: c["spec"].update(scope="Global"),
        INVALID + 'spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced"',
    ),
    "property-without-type": (
        lambda c: _root(c)["properties"]["spec"].pop("type"),
        INVALID + "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: "
        "must not be empty for specified object fields",
    ),
    "root-a-string": (
        lambda c: _root(c).update(type="string"),
        INVALID + 'spec.versions[0].schema.openAPIV3Schema.type: Invalid value: "string": must be object at the root',
    ),
    "array-without-items": (
        lambda c: _root(c)["properties"].update(l={"type": "array"}),
        INVALID + "spec.versions[0].schema.openAPIV3Schema.properties[l].items: Required value: must be specified",
    ),
    "no-schema": (
        lambda c: _v(c).pop("schema"),
        INVALID + "spec.versions[0].schema.openAPIV3Schema: Required value",
    ),
    "additional-properties-a-string": (
        lambda c: _root(c)["properties"].update(l={"type": "object", "additionalProperties": "x"}),
        UNDECODABLE + "boolean or JSON schema expected",
    ),
    "max-length-1.5": (
        lambda c: _root(c)["properties"].update(l={"type": "string", "maxLength": 1.5}),
        UNDECODABLE + "json: cannot unmarshal number 1.5 into Go struct field "
        "JSONSchemaProps.spec.versions.schema.openAPIV3Schema.properties.maxLength of type int64",
    ),
}


def _crd(name: str) -> dict:
    crd = copy.deepcopy(BASE)
    CASES[name][0](crd)
    return crd


def test_a_crd_kube_apiserver_accepts_passes():
    assert rejection(BASE) is None


@pytest.mark.parametrize("name", list(CASES))
def test_refused_in_kube_apiservers_words(name):
    assert rejection(_crd(name)) == CASES[name][1]


@pytest.mark.parametrize(
    "change",
    [
        lambda c: c["spec"]["names"].update(kind="widget"),  # kind may be lower case
        lambda c: c["spec"]["names"].pop("singular"),  # defaulted
        lambda c: c["spec"]["names"].pop("listKind"),  # defaulted
        lambda c: _v(c).update(served=False),  # a version nobody is served is allowed
        lambda c: _root(c)["properties"].update(l={"x-kubernetes-int-or-string": True}),
        lambda c: _root(c)["properties"].update(l={"type": "integer", "maxLength": 2.0}),
    ],
)
def test_what_kube_apiserver_accepts_is_not_refused(change):
    crd = copy.deepcopy(BASE)
    change(crd)
    assert rejection(crd) is None


EIGHT = list(CASES)[:8]


@pytest.mark.parametrize("name", EIGHT)
def test_footprint_and_run_check_refuse_the_eight(name, tmp_path, capsys, monkeypatch):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(_crd(name)))
    assert main(["footprint", str(path), "--shipped"]) == 5
    err = capsys.readouterr().err.strip()
    assert err == f"crdscale: error: {path}: document 1: kube-apiserver would reject this CRD: {CASES[name][1]}"
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'[crds]\nsource = "{path}"\n')
    monkeypatch.setattr("crdscale.scenario.check._check_target", lambda *a: None)  # no binaries needed here
    assert main(["run", "--check", str(scenario)]) == 5
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "kube-apiserver would reject this CRD: " + CASES[name][1] in err[0]


def test_run_check_refuses_a_source_that_is_not_crds(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("crdscale.scenario.check._check_target", lambda *a: None)
    scenario = tmp_path / "s.toml"
    scenario.write_text('[crds]\nsource = "/etc/passwd"\n')
    assert main(["run", "--check", str(scenario)]) == 5
    assert capsys.readouterr().err.strip() == (
        "crdscale: error: s.toml: 'crds.source': /etc/passwd: document 1: expected an object, got str"
    )
    scenario.write_text('[crds]\nsource = ""\n')
    assert main(["run", "--check", str(scenario)]) == 2
    assert capsys.readouterr().err.strip() == "crdscale: error: s.toml: 'crds.source' must not be empty"
