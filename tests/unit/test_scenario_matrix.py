"""Matrix expansion: cells in a stable, readable order, each a valid scenario."""

from __future__ import annotations

import pytest

from crdscale.errors import UsageError
from crdscale.scenario.config import load_scenario, parse_scenario
from crdscale.scenario.matrix import Cell, expand, format_value, matrix_cells

ZAP = """
name = "zap"
[crds]
count = 60
groups = 6
[matrix]
"target.kube_version" = ["1.24.0", "1.37.1"]
"target.env.GOGC" = ["100", "50"]
"""


def test_cells_are_the_cross_product_in_file_order_with_readable_names():
    s = parse_scenario(ZAP)
    assert s.matrix == {"target.kube_version": ["1.24.0", "1.37.1"], "target.env.GOGC": ["100", "50"]}
    cells = expand(s)
    assert [c.name for c, _ in cells] == [
        "kube_version=1.24.0,GOGC=100",
        "kube_version=1.24.0,GOGC=50",
        "kube_version=1.37.1,GOGC=100",
        "kube_version=1.37.1,GOGC=50",
    ]
    cell, sc = cells[1]
    assert sc.target.kube_version == "1.24.0" and sc.target.env == {"GOGC": "50"}
    assert sc.crds.count == 60 and sc.name == "zap"
    assert "v1.24.0" in sc.description  # derived per cell, not copied from the base
    assert sc.raw["experiment"] == {"name": "zap", "cell": cell.name, "values": cell.values, "repeat": 1}
    assert "matrix" not in sc.raw
    # Stable: the same file gives the same names.
    assert [c.name for c, _ in expand(parse_scenario(ZAP))] == [c.name for c, _ in cells]


def test_unquoted_dotted_keys_repeat_and_set_overrides():
    text = '[matrix]\ntarget.env.GOGC = ["100", "50"]\ncrds.versions = [1, 2]\nrepeat = 2\n'
    s = parse_scenario(text, overrides={"steps.count": 3, "crds.count": 20, "crds.groups": 2})
    cells = expand(s)
    assert len(cells) == 8
    assert cells[0][0] == Cell("GOGC=100,versions=1,repeat=1", {"target.env.GOGC": "100", "crds.versions": 1}, 1)
    assert cells[1][0].name == "GOGC=100,versions=1,repeat=2"
    assert all(sc.steps.count == 3 and sc.crds.count == 20 for _, sc in cells)
    assert cells[-1][1].crds.versions == 2


def test_set_on_an_axis_replaces_the_axis_by_its_one_value():
    s = parse_scenario(ZAP, overrides={"target.kube_version": "1.30.0"})
    assert s.matrix == {"target.env.GOGC": ["100", "50"]}
    assert s.replaced_axes == {"target.kube_version": ["1.24.0", "1.37.1"]}
    cells = expand(s)
    assert [c.name for c, _ in cells] == ["GOGC=100", "GOGC=50"]
    assert {sc.target.kube_version for _, sc in cells} == {"1.30.0"}


def test_set_on_every_axis_is_one_plain_run_and_repeat_survives():
    text = '[matrix]\n"target.kube_version" = ["1.24.0", "1.37.1"]\n'
    s = parse_scenario(text, overrides={"target.kube_version": "1.37.1"})
    assert s.matrix == {} and s.target.kube_version == "1.37.1"
    assert [c.name for c, _ in expand(s)] == ["base"]
    s = parse_scenario(text + "repeat = 2\n", overrides={"target.kube_version": "1.37.1"})
    assert s.matrix == {"repeat": 2}
    assert [c.name for c, _ in expand(s)] == ["base,repeat=1", "base,repeat=2"]


@pytest.mark.parametrize(
    "axis, key",
    [
        ('"target.env" = [{ GOGC = "100" }, { GOGC = "50" }]', "target.env.GOGC"),
        ('"target.env.GOGC" = ["100"]', "target.env"),
    ],
)
def test_set_inside_or_around_an_axis_is_refused(axis, key):
    with pytest.raises(UsageError, match=r"overlaps the matrix axis"):
        parse_scenario(f"[matrix]\n{axis}\n", overrides={key: {"GOGC": "1"} if key == "target.env" else "1"})


def test_invalid_cells_are_refused_before_running():
    with pytest.raises(UsageError, match=r"cell property_count=-1"):
        expand(parse_scenario('[matrix]\n"crds.property_count" = [10, -1]\n'))
    with pytest.raises(UsageError, match="not a scenario key"):
        parse_scenario('[matrix]\n"crds.colour" = [1, 2]\n')
    with pytest.raises(UsageError, match="non-empty list"):
        parse_scenario('[matrix]\n"crds.count" = 5\n')
    with pytest.raises(UsageError, match="repeat"):
        parse_scenario("[matrix]\nrepeat = 0\n")
    with pytest.raises(UsageError, match="must be a string"):
        expand(parse_scenario('[matrix]\n"target.env.GOGC" = [100]\n'))
    with pytest.raises(UsageError, match="both be named"):
        matrix_cells({"crds.count": [10, 10]})


def test_values_in_names_are_file_safe_and_distinct():
    assert format_value(["--v=2", "--watch-cache=false"]) == "v=2+watch-cache=false"
    assert format_value([]) == "none"
    a = format_value("/home/me/kubernetes/_output/local/bin/linux/amd64/kube-apiserver")
    b = format_value("/home/me/kubernetes/_output/local/bin/linux/arm64/kube-apiserver")
    assert "/" not in a and len(a) <= 40 and a != b
    names = [
        c.name for c in matrix_cells({"target.apiserver_flags": [[], ["--v=2"]], "target.env.GOMEMLIMIT": ["2GiB"]})
    ]
    assert names == ["apiserver_flags=none,GOMEMLIMIT=2GiB", "apiserver_flags=v=2,GOMEMLIMIT=2GiB"]


def test_same_short_name_uses_the_full_key():
    names = [c.name for c in matrix_cells({"target.env.count": ["1"], "crds.count": [5]})]
    assert names == ["target.env.count=1,crds.count=5"]


def test_no_matrix_is_one_base_cell(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('[crds]\nsource = "crds"\n[matrix]\n"steps.count" = [1, 2]\n')
    s = load_scenario(path)
    cells = expand(s)
    assert all(sc.crds.source == str(tmp_path / "crds") for _, sc in cells)
    assert expand(parse_scenario(None))[0][0].name == "base"


def test_a_whole_env_table_per_cell():
    s = parse_scenario('[matrix]\n"target.env" = [{}, {GOGC = "50"}, {GOMEMLIMIT = "1GiB"}]\n')
    cells = expand(s)
    assert [c.name for c, _ in cells] == ["env=none", "env=GOGC=50", "env=GOMEMLIMIT=1GiB"]
    assert [sc.target.env for _, sc in cells] == [{}, {"GOGC": "50"}, {"GOMEMLIMIT": "1GiB"}]


def test_example_scenarios_expand():
    from pathlib import Path

    files = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.toml"))
    assert {f.stem for f in files} >= {"zap-fix", "gogc", "schema-size", "versions"}
    for f in files:
        scenario = load_scenario(f)
        # A scenario with a [matrix] is several runs; the others (objects.toml: one command, one run) one.
        assert len(expand(scenario)) >= (2 if scenario.matrix else 1), f
