"""`crdscale top` through the CLI entry point, and the exports."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from crdscale.analysis import export
from crdscale.analysis.pprof import text, views
from crdscale.cli.common import write_table
from crdscale.cli.main import main
from crdscale.collect.pprof import read_profile
from crdscale.errors import UsageError

DATA = Path(__file__).resolve().parents[1] / "data" / "profiles"
KUBE = DATA / "kube-apiserver-heap-crds0060.pb.gz"


def _rows(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith(("Time:", "# args:", "# stderr:"))]


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
    assert main(["top", str(new), "--diff_base", str(base), "--nodecount", "40"]) == 0
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
    assert main(["top", str(KUBE), "--nodecount", "5", "--table", str(out)]) == 0
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


def _parse_callgrind(text: str) -> tuple[dict, dict, dict]:
    """Minimal Callgrind reader: (header, self cost per fn, call costs per fn) per the format spec."""
    header, self_cost, call_cost = {}, {}, {}
    fn = callee = None
    after_calls = False
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if sep and key in ("fl", "fn", "cfl", "cfn", "calls"):
            if key == "fn":
                fn = value
                self_cost.setdefault(fn, 0)
            elif key == "cfn":
                callee = value
            elif key == "calls":
                after_calls = True
            continue
        if ": " in line and fn is None:
            k, v = line.split(": ", 1)
            header[k] = v
            continue
        position, cost = line.split()
        int(position)
        if after_calls:
            call_cost.setdefault(fn, {})[callee] = int(cost)
            after_calls = False
        else:
            self_cost[fn] += int(cost)
    return header, self_cost, call_cost


def test_callgrind_export_costs_match_top():
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    text = export.callgrind(profile, "inuse_space")
    assert text.startswith("# callgrind format\n")
    header, self_cost, calls = _parse_callgrind(text)
    assert header["events"] == "inuse_space" and header["version"] == "1"
    table = views.top(profile, "inuse_space", granularity="filefunctions")
    assert int(header["summary"]) == table.attrs["total"] == sum(self_cost.values())
    # Each function's self cost is pprof's flat value exactly; its calls add up to cum - flat
    # when no recursion is involved.
    for row in table.itertuples(index=False):
        fn = row.name.split(" ")[0]
        assert self_cost[fn] == row.flat
    want = table.set_index(table["name"].str.split(" ").str[0])
    assert self_cost["main.main"] + sum(calls["main.main"].values()) == want.loc["main.main", "cum"]


def test_write_table_csv_and_parquet(tmp_path):
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    table = views.top(profile)
    csv = write_table(table, tmp_path / "t.csv")
    pq = write_table(table, tmp_path / "t.parquet")
    assert pd.read_csv(csv)["flat"].sum() == table["flat"].sum()
    assert pd.read_parquet(pq)["cum"].tolist() == table["cum"].tolist()
    with pytest.raises(UsageError, match="must end in .csv or .parquet"):
        write_table(table, tmp_path / "t.xlsx")


def test_top_writes_callgrind_and_folded(tmp_path, capsys):
    cg, folded = tmp_path / "heap.callgrind", tmp_path / "heap.folded"
    assert main(["top", str(KUBE), "--nodecount", "3", "--callgrind", str(cg), "--folded", str(folded)]) == 0
    assert "\nevents: inuse_space\n" in cg.read_text()
    assert "fn=k8s.io/" in cg.read_text()
    total = sum(int(line.rsplit(" ", 1)[1]) for line in folded.read_text().splitlines())
    assert total == read_profile(KUBE).total("inuse_space")


@pytest.mark.parametrize(
    "case,argv",
    [
        ("go-sample-heap.top-show", ["--nodecount", "30", "--show", r"main\."]),
        ("go-sample-heap.top-hide", ["--nodecount", "30", "--hide", "runtime"]),
        ("go-sample-heap.top-tagfocus-range", ["--nodecount", "30", "--tagfocus", "bytes=1kb:4kb"]),
        ("go-sample-heap.top-mean", ["--nodecount", "30", "--mean", "--sample-index", "alloc_space"]),
        ("go-sample-heap.peek-mean", ["--peek", r"main\.(deep|maps)$", "--mean"]),
        (
            "kube-apiserver-heap-crds0060.top-show-hide",
            ["--nodecount", "30", "--show", "apiextensions|kube-openapi", "--hide", "json"],
        ),
        (
            "kube-apiserver-heap-crds0060.top-all-filters",
            ["--nodecount", "30", "--focus", "apiextensions", "--show", "k8s.io", "--tagfocus", "bytes=:1kb"],
        ),
        ("synthetic-labels.top-tagfocus-key", ["--nodefraction", "0", "--tagfocus", "verb=list|watch"]),
        ("synthetic-labels.top-tagfocus-any", ["--nodefraction", "0", "--tagfocus", "verb:get,resource:crd"]),
        ("synthetic-labels.top-tagfocus-unit", ["--nodefraction", "0", "--tagfocus", "request=2kb:"]),
    ],
)
def test_top_new_options_print_what_pprof_prints(case, argv, capsys):
    """Each option byte for byte against `go tool pprof` output recorded with the same flags."""
    recorded = (DATA / f"{case}.txt").read_text()
    profile = DATA / (case.split(".")[0] + ".pb.gz")
    assert main(["top", str(profile), *argv]) == 0
    assert _rows(capsys.readouterr().out) == _rows(recorded)


def test_top_diff_base_with_hide_and_mean(capsys):
    new, base = DATA / "go-sample-heap2.pb.gz", DATA / "go-sample-heap.pb.gz"
    argv = ["top", str(new), "--diff_base", str(base), "--nodecount", "40", "--hide", "runtime", "--mean"]
    assert main(argv) == 0
    recorded = (DATA / "go-sample-heap2.diff-go-sample-heap-hide-mean.txt").read_text()
    assert _rows(capsys.readouterr().out) == _rows(recorded)


def test_top_json_rows_are_the_printed_rows(capsys):
    assert main(["top", str(KUBE), "--nodecount", "40", "--sample-index", "inuse_space", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    recorded = (DATA / "kube-apiserver-heap-crds0060.top-exact-bytes.txt").read_text()
    _header, rows = text.parse_pprof_top(recorded)
    assert doc["sample_type"] == "inuse_space" and doc["unit"] == "bytes"
    assert f"{doc['total']}B" == _header["total"]
    assert [r["name"] for r in doc["rows"]] == rows["name"].tolist()
    assert [f"{r['flat']}B" if r["flat"] else "0" for r in doc["rows"]] == rows["flat"].tolist()
    assert set(doc["rows"][0]) == set(views.TOP_COLUMNS)


def test_peek_and_by_cause_json(capsys):
    assert main(["top", str(KUBE), "--peek", "crdHandler", "-o", "json"]) == 0
    peek = json.loads(capsys.readouterr().out)
    assert {r["relation"] for r in peek["rows"]} == {"caller", "self", "callee"}
    assert main(["top", str(KUBE), "--by-cause", "-o", "json"]) == 0
    causes = json.loads(capsys.readouterr().out)
    assert sum(r["value"] for r in causes["rows"]) == causes["total"]


GENERICS = DATA / "kube-apiserver-heap-crds0160.pb.gz"


@pytest.fixture
def utc(monkeypatch):
    """pprof recorded its ``Time:`` lines in UTC."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_top_focus_inside_a_dropped_parameter_list_matches_nothing_as_in_pprof(capsys, utc):
    """pprof drops generic functions' parameter lists before it filters: a focus that matches
    only there keeps nothing, and pprof's warning goes to stderr."""
    argv = ["top", str(GENERICS), "--nodecount", "20", "--sample-index", "alloc_space", "--focus", r"Sum\("]
    assert main(argv) == 0
    captured = capsys.readouterr()
    recorded = (DATA / "kube-apiserver-heap-crds0160.top-focus-dropped-params.txt").read_text()
    assert captured.out.splitlines() == [line for line in recorded.splitlines() if not line.startswith("# ")]
    assert captured.err.splitlines() == ["Focus expression matched no samples"]


def test_top_diff_base_header_is_the_merged_profiles(capsys, utc):
    """The earlier Time of the two (the base's here) and, for CPU, the durations added up."""
    new, base = DATA / "kube-apiserver-cpu.pb.gz", DATA / "go-sample-cpu.pb.gz"
    assert main(["top", str(new), "--diff_base", str(base), "--nodecount", "40"]) == 0
    recorded = (DATA / "kube-apiserver-cpu.diff-go-sample-cpu.txt").read_text()
    out = capsys.readouterr().out
    assert out.splitlines() == recorded.splitlines()[1:]
    assert "Time: 2026-11-22 03:20:16 UTC" in out and "Duration: 5.31s" in out


def test_top_says_what_pprofs_units_are(capsys):
    with pytest.raises(SystemExit):
        main(["top", "--help"])
    assert "2^20" in capsys.readouterr().out


def test_by_cause_is_crdscales_table_in_binary_units(capsys):
    assert main(["top", str(KUBE), "--by-cause"]) == 0
    out = capsys.readouterr().out
    assert "MiB" in out and "MB" not in out.replace("MiB", "")


def test_peek_that_finds_nothing_says_which_filter_matched_nothing(capsys):
    argv = ["top", str(GENERICS), "--peek", "hmac", "--focus", r"Sum\(", "--sample-index", "alloc_space"]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["crdscale: error: no matches found for regexp: hmac", "Focus expression matched no samples"]
