"""`crdscale footprint --activate` on recorded CRDs (nine of the Azure provider of 2026, tests/data/crds/azure-2026)
and recorded Crossplane ManagedResourceActivationPolicy files (tests/data/activation): which CRDs a pattern
activates, the whole set's and the activated part's predictions and what that saves, and bad patterns refused
in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.errors import UsageError
from crdscale.footprint import predict_activation, predict_footprint
from crdscale.footprint.activation import activation_patterns, compile_pattern, read_policy

DATA = Path(__file__).resolve().parents[1] / "data"
CRDS = DATA / "crds" / "azure-2026"
POLICY = DATA / "activation" / "mrap-security.yaml"
SECURITY_M = {
    "advancedthreatprotections.security.azure.m.upbound.io",
    "securitycenterautoprovisionings.security.azure.m.upbound.io",
    "securitycentersettings.security.azure.m.upbound.io",
}


# Go's path/filepath.Match, which Crossplane's ActivationPolicy.Match calls, on CRD names.
@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("*.network.azure.upbound.io", "routefilters.network.azure.upbound.io", True),
        ("*.network.azure.upbound.io", "routefilters.network.azure.m.upbound.io", False),
        ("*.azure.upbound.io", "routefilters.network.azure.upbound.io", True),  # '*' crosses dots
        ("*", "resourcegroups.azure.m.upbound.io", True),
        ("resourcegroups.azure.upbound.io", "resourcegroups.azure.upbound.io", True),
        ("resourcegroups.azure.upbound.io", "xresourcegroups.azure.upbound.io", False),  # whole names
        ("resourcegroup?.azure.upbound.io", "resourcegroups.azure.upbound.io", True),
        ("[a-r]*.azure.upbound.io", "resourcegroups.azure.upbound.io", True),
        ("[^a-r]*.azure.upbound.io", "resourcegroups.azure.upbound.io", False),
        ("resourcegroups\\.azure.upbound.io", "resourcegroups.azure.upbound.io", True),
        ("resourcegroups.azure.upbound.io", "resourcegroupsXazure.upbound.io", False),  # '.' is a dot
    ],
)
def test_a_pattern_matches_crd_names_as_crossplane_does(pattern, name, matches):
    assert compile_pattern(pattern).match(name) is matches


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        ("", "empty"),
        ("[abc", "without its ']'"),
        ("[]abc]", "where a class needs a character"),
        ("abc\\", "lone"),
        ("[z-a]*", "backwards"),
        ("*.s3.aws.upbound.io/v1", "no whitespace or '/'"),
        (" *.s3.aws.upbound.io", "no whitespace"),
    ],
)
def test_a_bad_pattern_is_one_line_and_exit_2(capsys, pattern, why):
    with pytest.raises(UsageError, match=why):
        compile_pattern(pattern)
    assert main(["footprint", str(CRDS), "--activate", pattern]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and why in err and "Traceback" not in err


def test_a_policy_file_gives_its_patterns_and_policies_add_up():
    patterns = read_policy(POLICY)
    assert [p.text for p in patterns] == [
        "*.security.azure.m.upbound.io",
        "resourcegroups.azure.m.upbound.io",
        "*.network.azure.upbound.io",
    ]
    assert "security-namespaced" in patterns[0].origin and "network" in patterns[2].origin
    # --activate and a policy together, one pattern given twice kept once
    both = activation_patterns(["*.network.azure.upbound.io", "*"], [POLICY])
    assert [p.text for p in both] == [
        "*.network.azure.upbound.io",
        "*",
        "*.security.azure.m.upbound.io",
        "resourcegroups.azure.m.upbound.io",
    ]


@pytest.mark.parametrize(
    ("policy", "why"),
    [
        (DATA / "activation" / "mrap-no-activate.yaml", "needs spec.activate"),
        (CRDS / "azure.upbound.io_resourcegroups.yaml", "no ManagedResourceActivationPolicy in it"),
        (DATA / "activation" / "missing.yaml", "No such file"),
    ],
)
def test_a_bad_policy_is_one_line_and_exit_2(capsys, policy, why):
    assert main(["footprint", str(CRDS), "--activate-policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and why in err


def test_a_policy_of_another_group_is_refused(tmp_path):
    other = tmp_path / "mrap.yaml"
    other.write_text(POLICY.read_text().replace("apiextensions.crossplane.io", "pkg.crossplane.io"))
    with pytest.raises(UsageError, match="Crossplane's is apiextensions.crossplane.io/v1alpha1"):
        read_policy(other)


def test_activation_predicts_the_whole_set_the_activated_part_and_the_difference():
    result = predict_activation(CRDS, policies=[POLICY], shipped=True, top=3)
    active = set(result.active.crd_set.names)
    assert active == SECURITY_M | {"resourcegroups.azure.m.upbound.io", "routefilters.network.azure.upbound.io"}
    assert result.matched == {
        "*.security.azure.m.upbound.io": 3,
        "resourcegroups.azure.m.upbound.io": 1,
        "*.network.azure.upbound.io": 1,
    }
    # Each part is the prediction of that set alone: the same model, the same rows.
    whole = predict_footprint(CRDS, shipped=True, top=0)
    assert result.whole.rows == whole.rows
    assert result.active.features["served_versions"] == 6  # routefilters serves two versions
    total = result.whole.rows["total"]["value"]
    assert 0 < result.active.rows["total"]["value"] < total
    # What activating only these saves is the whole minus the activated part, per target (a linear model).
    for target, row in result.saved.items():
        assert row["value"] == pytest.approx(result.whole.rows[target]["value"] - result.active.rows[target]["value"])
        assert row["low"] <= row["value"] <= row["high"]
    assert "rss_peak" not in result.saved  # the peak excess is one install's: the peak saves what settled saves


def test_the_command_prints_the_activation_as_text_and_json(capsys):
    argv = ["footprint", str(CRDS), "--activate", "*.security.azure.m.upbound.io", "--shipped", "--top", "2"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    result = predict_activation(CRDS, ["*.security.azure.m.upbound.io"], shipped=True, top=2)
    assert out == result.to_text() + "\n"
    assert "Activated: 3 of 9 CRDs (33.3%) by 1 pattern:" in out
    head = next(line for line in out.splitlines() if "heap, total" in line)
    assert head.count("[") == 3  # whole, activated, saved
    assert main([*argv, "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["activated"] == {"crds": 3, "of": 9} and set(data["activated_names"]) == SECURITY_M
    assert data["patterns"] == [{"pattern": "*.security.azure.m.upbound.io", "from": "--activate", "crds": 3}]
    assert {r["target"] for r in data["saved"]} >= {"total", "rss"} and "saved" in data["definitions"]
    assert data["whole"]["features"]["crds"] == 9 and data["active"]["features"]["crds"] == 3


def test_patterns_that_match_nothing_warn_or_refuse(capsys):
    argv = ["footprint", str(CRDS), "--shipped", "--top", "0"]
    assert main([*argv, "--activate", "*.network.azure.upbound.io", "--activate", "*.s3.aws.upbound.io"]) == 0
    assert "'*.s3.aws.upbound.io' (--activate) matches no CRD" in capsys.readouterr().err
    # A group without its '*.' matches no CRD name: refused, with the form that would.
    assert main([*argv, "--activate", "network.azure.upbound.io"]) == 2
    err = capsys.readouterr().err
    assert "no CRD of" in err and "plural.group" in err


@pytest.mark.parametrize(
    "extra",
    [["--budget", "1GiB"], ["--objects", "3"], ["--state", "installed"], [str(CRDS)], ["--explain"], ["--calibrate"]],
)
def test_activation_refuses_what_it_does_not_predict(capsys, extra):
    assert main(["footprint", str(CRDS), *extra, "--activate", "*"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
