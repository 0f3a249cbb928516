"""Generator: determinism, sizes, apigen parity, provider-like options."""

from __future__ import annotations

import json

import pytest

from crdscale.cli.main import main
from crdscale.crds.generate import (
    APIGEN_MAX_RANDOM_PROPERTIES,
    PROVIDER_PRINTER_COLUMNS,
    GeneratorParams,
    generate_crds,
    parse_type_weights,
    preset,
    version_names,
    write_crds,
)
from crdscale.crds.load import load_crds
from crdscale.crds.summary import count_properties, crd_properties, summarize
from crdscale.errors import UsageError


def _depth(schema: dict, level: int = 0) -> int:
    children = [_depth(p, level + 1) for p in (schema.get("properties") or {}).values()]
    return max(children, default=level)


def test_same_seed_same_crds_and_hash():
    params = GeneratorParams(crd_count=20, group_count=4, property_count=30, seed=7)
    first, second = generate_crds(params), generate_crds(params)
    assert json.dumps(first) == json.dumps(second)
    assert summarize(first).sha256 == summarize(second).sha256


def test_other_seed_other_crds():
    a = generate_crds(GeneratorParams(crd_count=5, group_count=1, property_count=10, seed=1))
    b = generate_crds(GeneratorParams(crd_count=5, group_count=1, property_count=10, seed=2))
    assert summarize(a).sha256 != summarize(b).sha256


def test_apigen_parity_groups_round_robin_and_exact_property_count():
    crds = generate_crds(GeneratorParams(crd_count=10, group_count=3, property_count=25))
    groups = [c["spec"]["group"] for c in crds]
    assert len(set(groups)) == 3
    # CRD i lands in group i % G, as apigen's `j = (j + 1) % gvCount`.
    assert groups[0] == groups[3] == groups[6] == groups[9]
    assert groups[1] == groups[4] and groups[2] == groups[5]
    for crd in crds:
        spec = crd["spec"]
        assert spec["scope"] == "Cluster"
        assert [v["name"] for v in spec["versions"]] == ["v1alpha1"]
        assert spec["versions"][0]["served"] and spec["versions"][0]["storage"]
        assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"
        assert spec["names"]["listKind"] == spec["names"]["kind"] + "List"
        schema = spec["versions"][0]["schema"]["openAPIV3Schema"]
        assert count_properties(schema) == 25
        assert "labels" not in crd["metadata"]  # ownership labels are the installer's job


def test_apigen_property_count_zero_is_random_between_1_and_100():
    crds = generate_crds(GeneratorParams(crd_count=40, group_count=2, property_count=0, seed=3))
    counts = {crd_properties(c) for c in crds}
    assert all(1 <= n <= APIGEN_MAX_RANDOM_PROPERTIES for n in counts)
    assert len(counts) > 5


@pytest.mark.parametrize("groups, crds", [(5, 4), (0, 3)])
def test_apigen_group_count_rules(groups, crds):
    with pytest.raises(UsageError):
        generate_crds(GeneratorParams(crd_count=crds, group_count=groups, property_count=1))


def test_names_unique_beyond_word_list():
    crds = generate_crds(GeneratorParams(crd_count=3000, group_count=300, property_count=1))
    names = [c["metadata"]["name"] for c in crds]
    assert len(set(names)) == 3000
    assert len({c["spec"]["group"] for c in crds}) == 300


def test_versions_repeat_the_schema_and_last_is_storage():
    crds = generate_crds(GeneratorParams(crd_count=2, group_count=1, property_count=12, versions=3))
    for crd in crds:
        versions = crd["spec"]["versions"]
        assert [v["name"] for v in versions] == version_names(3) == ["v1alpha1", "v1beta1", "v1"]
        assert [v["storage"] for v in versions] == [False, False, True]
        assert all(v["served"] for v in versions)
        schemas = [json.dumps(v["schema"]) for v in versions]
        assert len(set(schemas)) == 1
        # copies, not shared objects (YAML would write anchors)
        assert versions[0]["schema"] is not versions[1]["schema"]
        assert crd_properties(crd) == 36
    summary = summarize(crds)
    assert summary.group_versions == 3 and summary.versions == 6


@pytest.mark.parametrize("depth", [1, 2, 4])
def test_depth_is_bounded(depth):
    crds = generate_crds(
        GeneratorParams(
            crd_count=5,
            group_count=1,
            property_count=80,
            max_depth=depth,
            type_weights=(("object", 5.0), ("string", 1.0)),
        )
    )
    depths = [_depth(c["spec"]["versions"][0]["schema"]["openAPIV3Schema"]) for c in crds]
    assert max(depths) == depth


def test_type_mix_and_descriptions():
    params = GeneratorParams(
        crd_count=3,
        group_count=1,
        property_count=50,
        max_depth=1,
        type_weights=parse_type_weights("string=1,boolean"),
        description_length=40,
    )
    for crd in generate_crds(params):
        props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        assert {p["type"] for p in props.values()} == {"string", "boolean"}
        assert all(len(p["description"]) == 40 for p in props.values())


def test_bigger_parameters_give_bigger_schemas():
    small = summarize(generate_crds(GeneratorParams(crd_count=5, group_count=1, property_count=10)))
    large = summarize(generate_crds(GeneratorParams(crd_count=5, group_count=1, property_count=100)))
    described = summarize(
        generate_crds(GeneratorParams(crd_count=5, group_count=1, property_count=100, description_length=100))
    )
    assert small.schema_bytes_max < large.schema_bytes_min
    assert described.schema_bytes_min > large.schema_bytes_max + 100 * 100


def test_scope_mixed_alternates():
    crds = generate_crds(GeneratorParams(crd_count=4, group_count=1, property_count=1, scope="mixed"))
    assert [c["spec"]["scope"] for c in crds] == ["Cluster", "Namespaced", "Cluster", "Namespaced"]


def test_provider_preset_looks_like_a_provider():
    crds = generate_crds(preset("provider", crd_count=3, group_count=1, property_count=20, printer_columns=5))
    crd = crds[0]
    assert crd["spec"]["names"]["categories"] == ["crossplane", "managed"]
    version = crd["spec"]["versions"][-1]
    assert version["subresources"] == {"status": {}}
    columns = version["additionalPrinterColumns"]
    assert [c["name"] for c in columns[:4]] == [c["name"] for c in PROVIDER_PRINTER_COLUMNS]
    assert columns[4]["jsonPath"].startswith(".spec.forProvider.")
    root = version["schema"]["openAPIV3Schema"]["properties"]
    for_provider = root["spec"]["properties"]["forProvider"]
    at_provider = root["status"]["properties"]["atProvider"]
    assert count_properties(for_provider) == 20
    assert for_provider == at_provider
    assert "conditions" in root["status"]["properties"]


def test_params_to_dict_is_json():
    data = preset("provider", crd_count=1, group_count=1).to_dict()
    assert json.loads(json.dumps(data))["type_weights"]["string"] == 5.0


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_write_then_load_round_trips(tmp_path, fmt):
    crds = generate_crds(GeneratorParams(crd_count=6, group_count=2, property_count=15, versions=2))
    write_crds(crds, tmp_path / "out", fmt=fmt)
    loaded = load_crds(tmp_path / "out")
    assert len(loaded.crds) == 6
    assert loaded.summary() == summarize(crds)


def test_single_stream_round_trips(tmp_path):
    crds = generate_crds(GeneratorParams(crd_count=4, group_count=2, property_count=5))
    write_crds(crds, tmp_path / "all.yaml", single_file=True)
    assert load_crds(tmp_path / "all.yaml").summary().sha256 == summarize(crds).sha256


def test_cli_generate_writes_files_and_prints_summary(tmp_path, capsys):
    out = tmp_path / "crds"
    assert main(["generate", "-g", "5", "-c", "20", "--property-count", "10", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert len(list(out.glob("*.yaml"))) == 20
    assert "CRDs:            20" in printed and "groups:          5" in printed
    assert "properties:      min 10, median 10, max 10, total 200" in printed


def test_cli_generate_stream_to_stdout(capsys):
    assert main(["generate", "-g", "1", "-c", "2", "--property-count", "3", "-o", "-", "--preset", "provider"]) == 0
    captured = capsys.readouterr()
    assert captured.out.count("kind: CustomResourceDefinition") == 2
    assert "CRDs:" in captured.err


def test_cli_generate_bad_counts_is_a_usage_error(capsys):
    assert main(["generate", "-g", "5", "-c", "2"]) == 2
    assert "group count cannot be greater" in capsys.readouterr().err
