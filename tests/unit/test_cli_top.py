"""`crdscale top` through the CLI entry point, and the exports."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pytest

from crdscale.analysis import export, views
from crdscale.analysis.profile import read_profile
from crdscale.cli.main import main

DATA = Path(__file__).resolve().parents[1] / "data" / "profiles"
KUBE = DATA / "kube-apiserver-heap-crds0060.pb.gz"


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith(("Time:", "# args:"))]


def test_top_prints_what_go_tool_pprof_prints(capsys):
    assert main(["top", str(KUBE), "--nodecount", "40", "--sample-index", "inuse_space"]) == 0
    recorded = (DATA / "kube-apiserver-heap-crds0060.top-inuse_space.txt").read_text()
    assert _rows(capsys.readouterr().out) == _rows(recorded)


def test_top_cum_and_focus(capsys):
    assert main(["top", str(KUBE), "--nodecount", "30", "--focus", "kube-openapi"]) == 0
    recorded = (DATA / "kube-apiserver-heap-crds0060.top-focus-openapi.txt").read_text()
    assert _rows(capsys.readouterr().out) == _rows(recorded)


def test_top_diff_base(capsys):
    new, base = DATA / "go-sample-heap2.pb.gz", DATA / "go-sample-heap.pb.gz"
    assert main(["top", str(new), "--base", str(base), "--nodecount", "40"]) == 0
    recorded = (DATA / "go-sample-heap2.diff-go-sample-heap.txt").read_text()
    assert _rows(capsys.readouterr().out) == _rows(recorded)


def test_top_peek(capsys):
    regex = r"crdHandler\)\.getOrCreateServingInfoFor$"
    assert main(["top", str(KUBE), "--peek", regex]) == 0
    recorded = (DATA / "kube-apiserver-heap-crds0060.peek-crdhandler.txt").read_text()
    assert _rows(capsys.readouterr().out) == _rows(recorded)


def test_top_by_cause(capsys):
    assert main(["top", str(KUBE), "--by-cause"]) == 0
    out = capsys.readouterr().out
    assert "openapi" in out and "other" in out


def test_top_writes_full_table(tmp_path, capsys):
    out = tmp_path / "top.parquet"
    assert main(["top", str(KUBE), "--nodecount", "5", "--output", str(out)]) == 0
    table = pd.read_parquet(out)
    assert len(table) > 5  # the file has every node, not just the printed ones
    assert list(table.columns) == views.TOP_COLUMNS


def test_top_errors_are_one_line_with_exit_codes(tmp_path, capsys):
    bad = tmp_path / "bad.pb.gz"
    bad.write_bytes(b"\x1f\x8bnot really gzip")
    assert main(["top", str(bad)]) == 6
    err = capsys.readouterr().err.strip()
    assert err.startswith("crdscale: error:") and "\n" not in err
    assert main(["top", str(KUBE), "--sample-index", "nope"]) == 2
    assert main(["top", str(KUBE), "--focus", "("]) == 2


def test_callgrind_export_costs_match_top():
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    buf = io.StringIO()
    export.to_callgrind(profile, buf, "inuse_space")
    text = buf.getvalue()
    assert text.startswith("event: inuse_space")
    table = views.top(profile, "inuse_space", granularity="filefunctions")
    # Each function's self cost line carries pprof's flat value exactly.
    blocks = [b for b in text.split("\n\n") if "\nfn=main.allocBytes\n" in "\n" + b]
    assert blocks
    self_cost = int(blocks[0].splitlines()[2].split()[1])
    want = int(table.loc[table["name"].str.startswith("main.allocBytes"), "flat"].iloc[0])
    assert self_cost == want


def test_folded_stacks_sum_to_total():
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    folded = export.folded_stacks(profile, "inuse_space")
    assert folded["value"].sum() == profile.total("inuse_space")
    assert all(";" in s or s for s in folded["stack"])
    buf = io.StringIO()
    export.write_folded(profile, buf, "inuse_space")
    first = buf.getvalue().splitlines()[0]
    assert first.rsplit(" ", 1)[1].lstrip("-").isdigit()


def test_write_table_csv_and_parquet(tmp_path):
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    table = views.top(profile)
    csv = export.write_table(table, tmp_path / "t.csv")
    pq = export.write_table(table, tmp_path / "t.parquet")
    assert pd.read_csv(csv)["flat"].sum() == table["flat"].sum()
    assert pd.read_parquet(pq)["cum"].tolist() == table["cum"].tolist()
    with pytest.raises(Exception):
        export.write_table(table, tmp_path / "t.xlsx")


def test_top_writes_callgrind_and_folded(tmp_path, capsys):
    cg, folded = tmp_path / "heap.callgrind", tmp_path / "heap.folded"
    assert main(["top", str(KUBE), "--nodecount", "3", "--callgrind", str(cg), "--folded", str(folded)]) == 0
    assert cg.read_text().startswith("event: inuse_space")
    assert "fn=k8s.io/" in cg.read_text()
    total = sum(int(line.rsplit(" ", 1)[1]) for line in folded.read_text().splitlines())
    assert total == read_profile(KUBE).total("inuse_space")
