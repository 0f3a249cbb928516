"""crdscale ab with several changes as arms against one shared base: naming and checking the arms, the rounds'
order, resuming, and the verdicts, on tests/data/ab-arms (scenarios/gates.toml on v1.37.1: the base and
CBORServingAndStorage=true 3 runs each, ListFromCacheSnapshot=false 1; scripts/make_arms_fixture.py)."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from crdscale.cli.ab import arms_from_args, parse_arm
from crdscale.cli.main import main
from crdscale.errors import UsageError
from crdscale.report.ab import arms_verdict, render_ab_report, write_arms_verdict_files
from crdscale.report.lab import lab_plan
from crdscale.report.verdict import MAX_LINES, TOLD_NOT
from crdscale.scenario import ab as ab_module
from crdscale.scenario.ab import AB, Arm, Change, arm_order, check_arms, side_order
from crdscale.scenario.config import load_scenario

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "data" / "ab-arms"
GATES = ROOT / "tests" / "data" / "gates"
REFERENCE = {"base": ROOT / "data" / "reference-run", "other": ROOT / "data" / "reference-run-v1.24.0"}


def _args(**given) -> argparse.Namespace:
    fields = {"patch": [], "build_tag": [], "feature_gate": [], "apiserver_flag": [], "each": False, "arm": []}
    return argparse.Namespace(**{**fields, **given})


# --------------------------------------------------------------------------
# Arms from the command line
# --------------------------------------------------------------------------


def test_each_change_is_its_own_arm_named_after_it():
    arms = arms_from_args(
        _args(
            each=True,
            feature_gate=["ListFromCacheSnapshot=false", "ShardedListAndWatch=true"],
            apiserver_flag=["--watch-cache-sizes=a#0", "--watch-cache-sizes=b#0"],
            build_tag=["fieldsv1string"],
            patch=["/tmp/142066.diff"],
        )
    )
    assert [a.name for a in arms] == [
        "142066", "fieldsv1string", "ListFromCacheSnapshot", "ShardedListAndWatch", "watch-cache-sizes",
        "watch-cache-sizes-2",
    ]  # fmt: skip
    gate = arms[2].change
    assert gate == Change({"target.feature_gates": {"ListFromCacheSnapshot": False}}, "ListFromCacheSnapshot=false")
    assert arms[4].change.overrides == {"target.apiserver_flags": ["--watch-cache-sizes=a#0"]}


def test_an_arm_of_several_changes_and_an_arm_named_by_its_change():
    arm = parse_arm("budget: --patch /tmp/142066.diff --apiserver-flag=--watch-cache-max-bytes-per-resource=100Mi")
    assert arm.name == "budget"
    assert arm.change.overrides == {
        "target.patches": ["/tmp/142066.diff"],
        "target.apiserver_flags": ["--watch-cache-max-bytes-per-resource=100Mi"],
    }
    assert parse_arm("--feature-gate WatchListCompression=false").name == "WatchListCompression"


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"arm": ["a: --feature-gate X=true"], "feature_gate": ["Y=true"]}, "put every change in an --arm"),
        ({"each": True}, "--each: give the changes"),
        ({"arm": ["a: --v=1"]}, "is not --patch"),
        ({"arm": ["a:"]}, "no change"),
        ({"arm": ["--feature-gate X=true --feature-gate Y=true"]}, "needs a name"),
        ({"arm": ["a: --feature-gate X=maybe"]}, "NAME=true or NAME=false"),
        ({"arm": ["a: --feature-gate 'X=true"]}, "--arm"),
    ],
)
def test_bad_arms_are_one_line(given, message):
    with pytest.raises(UsageError, match=message):
        arms_from_args(_args(**given))


@pytest.mark.parametrize(
    ("arms", "message"),
    [
        ([Arm("base", Change({"target.build_tags": ["x"]}, "x"))], "not 'base'"),
        ([Arm("a/b", Change({"target.build_tags": ["x"]}, "x"))], "letters, digits"),
        ([Arm("a", Change({"target.build_tags": ["x"]}, "x"))] * 2, "named twice"),
        (
            [Arm("a", Change({"target.build_tags": ["x"]}, "x")), Arm("b", Change({"target.build_tags": ["x"]}, "x"))],
            "make the same change",
        ),
        ([Arm("a", Change({}, "nothing"))], "changes nothing"),
    ],
)
def test_arms_that_cannot_run_side_by_side(arms, message):
    with pytest.raises(UsageError, match=message):
        check_arms(arms)


def test_arms_refuse_the_cluster_in_one_line(capsys):
    code = main(["ab", "--each", "--feature-gate", "ListFromCacheSnapshot=false", "--cluster"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "arms runs here only" in err


@pytest.fixture
def recorded_gates(tmp_path, monkeypatch):
    """v1.37.1's gates as recorded (tests/data/gates) in a fresh cache, as tests/unit/test_gates.py has them."""
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache" / "feature-gates").mkdir(parents=True)
    for path in GATES.glob("v*.json"):
        shutil.copy(path, tmp_path / "cache" / "feature-gates" / path.name)
    return tmp_path


def test_check_validates_every_arm_before_anything(recorded_gates, capsys):
    out = recorded_gates / "runs"
    gates = ["--feature-gate", "ListFromCacheSnapshot=false", "--feature-gate", "ShardedListAndWatch=true"]
    scenario = str(ROOT / "scenarios" / "gates.toml")
    assert main(["ab", scenario, "--each", *gates, "--check", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith("ok: base and 2 arm(s) can run") and "ShardedListAndWatch: " in said
    code = main(["ab", scenario, "--each", *gates, "--feature-gate", "ListFromCacheSnapshots=true", "--check"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "ListFromCacheSnapshots" in err, err
    assert not out.exists()  # nothing created


# --------------------------------------------------------------------------
# Rounds
# --------------------------------------------------------------------------


def test_rounds_rotate_and_mirror():
    sides = ("base", "a", "b", "c")
    assert [arm_order(r, sides) for r in (1, 2, 3, 4)] == [
        ("base", "a", "b", "c"),
        ("c", "b", "a", "base"),
        ("a", "b", "c", "base"),
        ("base", "c", "b", "a"),
    ]
    # Over two rounds every configuration's mean place is the same: a linear drift hits each alike.
    for first in (1, 3):
        places = {s: arm_order(first, sides).index(s) + arm_order(first + 1, sides).index(s) for s in sides}
        assert len(set(places.values())) == 1
    # With one arm the first two rounds are the pairs' order.
    assert [arm_order(r, ("base", "changed")) for r in (1, 2)] == [side_order(1), side_order(2)]


def fake_run_cell(calls: list):
    """Copies a committed run: the base and arm 'v1' data/reference-run, arm 'v2' data/reference-run-v1.24.0
    (in odd rounds: its repeats spread)."""

    def run_cell(scenario, parent: Path, name: str) -> Path:
        side = scenario.raw["ab"]["side"]
        calls.append(name)
        out = parent / f"20261128T000000Z-{name}"
        round_ = int(name[1:3])
        shutil.copytree(REFERENCE["other" if side == "v2" and round_ % 2 else "base"], out)
        manifest = json.loads((out / "manifest.json").read_text())
        manifest["run_id"] = f"{manifest['run_id']}-{name}"
        (out / "manifest.json").write_text(json.dumps(manifest))
        return out

    return run_cell


def test_arms_run_in_rounds_resume_and_write_every_verdict(tmp_path, monkeypatch):
    monkeypatch.setattr(ab_module, "check_cells", lambda scenario, cells: [c.name for c, _ in cells])
    arms = [Arm("v1", Change({"target.apiserver_flags": ["--v=1"]}, "--v=1")),
            Arm("v2", Change({"target.apiserver_flags": ["--v=2"]}, "--v=2"))]  # fmt: skip
    ab = AB.create(tmp_path, load_scenario(None), None, arms=arms)
    calls: list[str] = []
    assert ab.run(fake_run_cell(calls), until=None, min_pairs=2) is None  # no comparison between rounds
    assert calls == ["r01-base", "r01-v1", "r01-v2", "r02-v2", "r02-v1", "r02-base"]
    reopened = AB.open(ab.path)
    assert reopened.arms == arms and reopened.paired() == {1, 2}
    reopened.run(fake_run_cell(calls), until=None, min_pairs=2)
    assert len(calls) == 6  # nothing run again
    verdict = write_arms_verdict_files(reopened)
    names = {p.name for p in ab.path.iterdir() if p.is_file()}
    assert {"ab.json", "verdict.md", "verdict.json", "verdict-v1.md", "verdict-v2.md"} <= names
    data = json.loads((ab.path / "verdict.json").read_text())
    assert [a["name"] for a in data["arms"]] == ["v1", "v2"] and data["rounds"] == 2 and data["runs"] == 6
    # v1's runs are the base's runs: every difference 0, and said so.
    v1 = verdict.arms[0]
    assert v1["per_crd"]["difference"] == pytest.approx(0.0, abs=1e-6)
    assert v1["per_crd"]["low"] == pytest.approx(0.0, abs=1e-6) or v1["per_crd"]["low"] is None
    for arm in verdict.arms:
        text = (ab.path / f"verdict-{arm['name']}.md").read_text()
        assert len(text.splitlines()) <= MAX_LINES and text.startswith("### crdscale verdict: --v=")


# --------------------------------------------------------------------------
# The verdicts, on recorded runs
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def recorded():
    ab = AB.open(RECORDED)
    return ab, arms_verdict(ab)


def test_the_fixture_is_two_arms_one_of_them_interrupted(recorded):
    ab, _ = recorded
    assert ab.sides == ("base", "CBORServingAndStorage", "ListFromCacheSnapshot")
    assert [ab.arm_runs(s) for s in ab.sides] == [3, 3, 1] and ab.paired() == {1}


def test_summary_has_one_row_per_arm_with_every_figure(recorded):
    _, verdict = recorded
    text = verdict.markdown()
    rows = [line for line in text.splitlines() if line.startswith("| [")]
    assert len(rows) == 2
    head = next(line for line in text.splitlines() if line.startswith("| arm |"))
    assert head == (
        "| arm | change | heap per CRD | heap per custom resource | kube-apiserver CPU per consistent LIST "
        "| kube-apiserver CPU per rv0 LIST | peak RSS |"
    )
    assert rows[0].startswith(
        "| [CBORServingAndStorage](verdict-CBORServingAndStorage.md) | `CBORServingAndStorage=true` |"
    )
    assert TOLD_NOT in rows[0]
    assert "3 round(s) of the base and 2 arm(s) (7 runs of 3 configurations)" in text
    assert "4 degrees of freedom for the total heap per custom resource" in text


def test_pooled_intervals_are_tighter_than_the_pairs_own(recorded):
    """The CBOR arm's runs are data/ab/gates-CBORServingAndStorage-true's: the same point, a tighter interval
    (Welch on its 3 + 3 runs gave [-3.7 KiB, +4.8 KiB] per custom resource)."""
    _, verdict = recorded
    recorded_ab = json.loads((ROOT / "data" / "ab" / "gates-CBORServingAndStorage-true" / "verdict.json").read_text())
    old = recorded_ab["per_object"]
    new = verdict.arms[0]["per_object"]
    assert new["difference"] == pytest.approx(old["difference"])
    assert new["high"] - new["low"] < old["high"] - old["low"]
    assert new["low"] <= new["difference"] <= new["high"]


def test_an_arm_of_one_run_gets_an_interval_from_the_pool(recorded):
    _, verdict = recorded
    lfcs = verdict.arms[1]
    assert lfcs["runs"] == 1
    assert lfcs["per_object"]["low"] < lfcs["per_object"]["difference"] < lfcs["per_object"]["high"]
    assert lfcs["peak_rss"]["low"] is not None  # one number a run, an interval all the same
    assert "1 run(s) of ListFromCacheSnapshot and 3 of the base" in lfcs["verdict"].markdown()


def test_each_arm_verdict_is_a_verdict_of_that_arm(recorded):
    _, verdict = recorded
    for arm in verdict.arms:
        text = arm["verdict"].markdown()
        assert len(text.splitlines()) <= MAX_LINES
        assert text.startswith(f"### crdscale verdict: {arm['change']}")
        assert f"changed: {arm['name']},repeat=1: run" in text
        assert "| peak RSS |" in text


def test_json_holds_every_arm_and_the_model(recorded):
    _, verdict = recorded
    data = json.loads(json.dumps(verdict.to_json(), default=str))
    assert data["kind"] == "arms" and [a["name"] for a in data["arms"]] == [
        "CBORServingAndStorage",
        "ListFromCacheSnapshot",
    ]
    assert data["spread"]["dof"] == 4 and data["spread"]["own"] == []
    assert {e["list"] for e in data["arms"][0]["lists"]} == {"consistent", "rv0"}
    assert data["arms"][1]["verdict"]["per_object"]["kind"] == "customresources"


def test_report_of_arms_is_refused_in_one_line(tmp_path):
    with pytest.raises(UsageError, match="crdscale report: ab-arms has 2 arms: its verdicts are verdict.md"):
        render_ab_report(RECORDED, tmp_path / "out")
    with pytest.raises(UsageError, match="crdscale lab: ab-arms has 2 arms"):
        lab_plan(RECORDED, ROOT / "notebooks")
    assert not (tmp_path / "out").exists()
