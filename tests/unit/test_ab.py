"""crdscale ab without a cluster: the pairs' order, stopping, resuming and the verdict files, with a fake
run_cell that copies the committed runs (v1.37.1 stands in for the base, v1.24.0 for the change)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crdscale.cli.ab import parse_until, write_verdict
from crdscale.errors import UsageError
from crdscale.scenario.ab import AB, Change, Precision, side_order
from crdscale.scenario.config import load_scenario

ROOT = Path(__file__).resolve().parents[2]
RECORDED = {"base": ROOT / "data" / "reference-run", "changed": ROOT / "data" / "reference-run-v1.24.0"}
CHANGE = Change({"target.apiserver_flags": ["--v=1"]}, "--v=1")


def fake_run_cell(calls: list):
    def run_cell(scenario, parent: Path, name: str) -> Path:
        side = scenario.raw["ab"]["side"]
        calls.append(name)
        out = parent / f"20261127T000000Z-{name}"
        # The changed side alternates between the two recorded versions, so its repeats spread as real ones do.
        pair = int(name[1:3])
        source = RECORDED["base"] if side == "changed" and pair % 2 == 0 else RECORDED[side]
        shutil.copytree(source, out)
        manifest = json.loads((out / "manifest.json").read_text())
        manifest["run_id"] = f"{manifest['run_id']}-{name}"  # distinct runs, as real repeats are
        (out / "manifest.json").write_text(json.dumps(manifest))
        return out

    return run_cell


def test_pairs_alternate_which_side_runs_first():
    assert [side_order(p) for p in (1, 2, 3)] == [("base", "changed"), ("changed", "base"), ("base", "changed")]


def test_ab_runs_pairs_until_max_resumes_and_writes_the_verdict(tmp_path, caplog):
    ab = AB.create(tmp_path, load_scenario(None), CHANGE)
    calls: list[str] = []
    with caplog.at_level("INFO"):
        reached = ab.run(fake_run_cell(calls), until=0.0001, min_pairs=2, max_pairs=3)
    assert calls == ["p01-base", "p01-changed", "p02-changed", "p02-base", "p03-base", "p03-changed"]
    assert reached.pairs == 3 and reached.relative > 0.0001
    assert "more pair(s) would bring it within" in caplog.text
    reopened = AB.open(ab.path)
    assert reopened.complete_pairs() == 3 and reopened.change == CHANGE
    reopened.run(fake_run_cell(calls), until=None, min_pairs=3)
    assert len(calls) == 6  # nothing run again
    verdict = write_verdict(reopened)
    text = (ab.path / "verdict.md").read_text()
    assert text == verdict.markdown() and len(text.splitlines()) <= 60
    assert "3 interleaved base/changed pair(s), repeats pooled" in text
    assert json.loads((ab.path / "verdict.json").read_text())["pairs"] == 3
    assert (ab.path / "flame.html").stat().st_size > 100_000


def test_pairs_needed_scales_as_one_over_root_n():
    p = Precision(pairs=2, difference=100.0, low=60.0, high=140.0, base_total=200.0)
    assert p.relative == pytest.approx(0.2)
    assert p.pairs_needed(0.1) == 8 and p.pairs_needed(0.25) == 2


@pytest.mark.parametrize("text", ["0%", "-5%", "nan", "banana", "2000%"])
def test_until_refuses(text):
    with pytest.raises(UsageError):
        parse_until(text)


def test_a_matrix_or_no_change_is_refused(tmp_path):
    with pytest.raises(UsageError, match="needs a change"):
        AB.create(tmp_path, load_scenario(None), Change({}, "nothing"))
    assert not any(tmp_path.iterdir())
