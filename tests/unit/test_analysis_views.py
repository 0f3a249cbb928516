"""crdscale's pprof views against `go tool pprof` output recorded beside the test profiles.

Each ``tests/data/profiles/<stem>.<case>.txt`` starts with ``# args: ...`` (the
pprof flags used), then ``# stderr: ...`` lines (what pprof wrote to stderr);
the same options go through crdscale and the printed text must be the same,
header included (pprof ran with TZ=UTC, and so do these tests), so totals and
every flat/cum value agree; pprof's "... expression matched no samples"
warnings must be crdscale's too. A live test reruns pprof when Go is installed.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from crdscale.analysis.pprof import text, views
from crdscale.analysis.pprof.graph import GRANULARITIES
from crdscale.analysis.pprof.select import select_samples
from crdscale.collect.pprof import read_profile as _read_profile
from crdscale.errors import UsageError

DATA = Path(__file__).resolve().parents[1] / "data" / "profiles"
CASES = sorted(DATA.glob("*.txt"))


@cache
def read_profile(path):
    """Decoded once per test session: views never modify a Profile."""
    return _read_profile(path)


FILTERS = ("focus", "ignore", "show", "hide", "tagfocus")


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """pprof recorded its ``Time:`` lines in UTC: print ours in UTC too."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _options(args: list[str]) -> dict:
    """Translate pprof flags into crdscale options."""
    opts = {"command": "top", "nodefraction": 0.005, "nodecount": 0, "unit": "minimum"}
    for arg in args:
        flag, _, value = arg.lstrip("-").partition("=")
        if flag == "top":
            opts["command"] = "top"
        elif flag == "peek":
            opts["command"] = "peek"
        elif flag in ("nodecount",):
            opts["nodecount"] = int(value)
        elif flag == "nodefraction":
            opts["nodefraction"] = float(value)
        elif flag == "sample_index":
            opts["sample_index"] = value
        elif flag == "cum":
            opts["sort"] = "cum"
        elif flag in ("mean", "noinlines"):
            opts[flag] = True
        elif flag in GRANULARITIES:
            opts["granularity"] = flag
        elif flag in FILTERS + ("unit",):
            opts[flag] = value
        elif flag == "diff_base":
            opts["diff_base"] = value
        elif not flag:
            continue
        else:
            opts.setdefault("peek_regex", arg)  # the argument after -peek
    return opts


def _crdscale_table(profile_path: Path, args: list[str]):
    """(crdscale's table for pprof's args, the rendered text)."""
    if "-peek" in args:
        regex = args[args.index("-peek") + 1]
        args = [a for a in args if a not in ("-peek", regex)]
    else:
        regex = None
    opts = _options(args)
    profile = read_profile(profile_path)
    base = read_profile(profile_path.parent / opts["diff_base"]) if "diff_base" in opts else None
    common = dict(
        granularity=opts.get("granularity", "functions"),
        diff_base=base,
        mean=opts.get("mean", False),
        noinlines=opts.get("noinlines", False),
        **{k: opts.get(k) for k in FILTERS},
    )
    if regex is not None:
        table = views.peek(profile, regex, opts.get("sample_index"), **common)
        return table, text.format_peek(table, profile, opts["unit"], base)
    table = views.top(
        profile,
        opts.get("sample_index"),
        sort=opts.get("sort", "flat"),
        nodecount=opts["nodecount"],
        nodefraction=opts["nodefraction"],
        **common,
    )
    return table, text.format_top(table, profile, opts["unit"], base)


def _crdscale_output(profile_path: Path, args: list[str]) -> str:
    return _crdscale_table(profile_path, args)[1]


def _comparable(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith(("# args:", "# stderr:"))]


def _filter_notes(stderr: list[str]) -> list[str]:
    """pprof's notes about the filters among its stderr lines (not, e.g., "Main binary filename not available.")."""
    return [line for line in stderr if line.endswith(("expression matched no samples", "as range, not regexp"))]


def _recorded_warnings(recorded: str) -> list[str]:
    stderr = [line.removeprefix("# stderr: ") for line in recorded.splitlines() if line.startswith("# stderr: ")]
    return _filter_notes(stderr)


def _profile_for(case: Path) -> Path:
    stem = case.name.split(".")[0]
    return DATA / f"{stem}.pb.gz"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_matches_recorded_pprof_output(case: Path):
    recorded = case.read_text()
    args = recorded.splitlines()[0].removeprefix("# args:").split()
    ours = _crdscale_output(_profile_for(case), args)
    assert _comparable(ours) == _comparable(recorded)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_warns_as_pprof_warns(case: Path):
    """pprof's notes about the filters, word for word: filters that match nothing (the focus
    that only matches inside a generic function's dropped parameter list is one), and how a
    tagfocus was read."""
    recorded = case.read_text()
    args = recorded.splitlines()[0].removeprefix("# args:").split()
    table, _ = _crdscale_table(_profile_for(case), args)
    assert text.pprof_notes(table) == _recorded_warnings(recorded)


@pytest.mark.parametrize("case", [c for c in CASES if ".top-" in c.name or ".diff-" in c.name], ids=lambda c: c.name)
def test_numbers_match_recorded(case: Path):
    """Belt and braces: the parsed rows (flat, cum, percentages, names) are equal field by field."""
    recorded = case.read_text()
    args = recorded.splitlines()[0].removeprefix("# args:").split()
    want_header, want = text.parse_pprof_top(recorded)
    got_header, got = text.parse_pprof_top(_crdscale_output(_profile_for(case), args))
    assert got_header["total"] == want_header["total"]
    assert got_header["shown"] == want_header["shown"]
    assert got.to_dict("records") == want.to_dict("records")


def test_flat_and_cum_are_exact_integers():
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    table = views.top(profile, "inuse_space")
    values = profile.values("inuse_space")
    assert table.attrs["total"] == int(values.sum())
    assert int(table["flat"].sum()) == int(values.sum())  # every sample's leaf is one node
    assert table["flat"].dtype == np.int64 and table["cum"].dtype == np.int64
    assert (table["cum"] >= table["flat"]).all()


def test_nothing_dropped_by_default():
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    every = views.top(profile)
    trimmed = views.top(profile, nodefraction=0.005)
    assert len(every) > len(trimmed)
    assert every.attrs["dropped_nodes"] == 0
    assert trimmed.attrs["dropped_nodes"] == len(every) - len(trimmed)


def test_focus_ignore_ignore_wins():
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    kept = select_samples(profile, focus="main\\.deep", ignore="main\\.deep")
    assert not kept.any()
    focused = select_samples(profile, focus="main\\.deep")
    assert 0 < focused.sum() < len(focused)


def test_focus_matches_file_names_too():
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    by_file = select_samples(profile, focus="go_sample_profiles/main\\.go")
    by_name = select_samples(profile, focus="^main\\.")
    assert (by_file == by_name).all()


def test_diff_against_itself_is_empty():
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    table = views.diff(profile, profile)
    assert len(table) == 0
    assert table.attrs["total"] == profile.total()


def test_peek_lists_callers_and_callees():
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    table = views.peek(profile, r"^main\.deep$")
    assert set(table["relation"]) == {"caller", "self", "callee"}
    assert "main.allocBytes" in set(table.loc[table["relation"] == "callee", "name"])


def test_bad_options_are_usage_errors():
    profile = read_profile(DATA / "go-sample-heap.pb.gz")
    with pytest.raises(UsageError):
        views.top(profile, "no_such_type")
    with pytest.raises(UsageError):
        views.top(profile, granularity="modules")
    with pytest.raises(UsageError):
        views.top(profile, focus="(unclosed")
    with pytest.raises(UsageError):
        views.peek(profile, "^nothing-matches-this$")


def test_scaled_label_and_percentage_like_go():
    assert text.scaled_label(1536, "bytes", "minimum") == "1.50kB"
    assert text.scaled_label(0, "bytes", "MB") == "0"
    assert text.scaled_label(12345, "count", "minimum") == "12345"
    assert text.scaled_label(1_500_000, "nanoseconds", "auto") == "1.50ms"
    assert text.percentage(1, 3) == "33.33%"
    assert text.percentage(1, 1) == "  100%"
    assert text.percentage(42, 10000) == " 0.42%"
    assert text.percentage(0, 10) == "    0%"


# The recorded grid above (test_matches_recorded_pprof_output) holds crdscale to pprof's output on
# every run; this reruns pprof itself, to recheck the recordings against the installed Go (-m recheck).
@pytest.mark.recheck
@pytest.mark.external
@pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed")
@pytest.mark.parametrize(
    "stem",
    ["go-sample-heap", "go-sample-cpu", "kube-apiserver-heap-crds0060", "kube-apiserver-heap-crds0160"],
)
@pytest.mark.parametrize(
    "args",
    [
        ["-top", "-nodecount=25"],
        ["-top", "-nodecount=25", "-sample_index=0"],
        ["-top", "-nodecount=25", "-cum", "-noinlines"],
        ["-top", "-nodecount=25", "-focus=runtime|main", "-ignore=gzip"],
        ["-top", "-nodecount=25", "-hide=runtime", "-mean"],
        ["-top", "-nodecount=25", "-show=main|k8s", "-tagfocus=:1kb"],
    ],
)
def test_live_against_go_tool_pprof(stem: str, args: list[str]):
    path = DATA / f"{stem}.pb.gz"
    live = subprocess.run(["go", "tool", "pprof", *args, str(path)], capture_output=True, text=True, timeout=120)
    assert live.returncode == 0, live.stderr
    table, ours = _crdscale_table(path, args)
    assert _comparable(ours) == _comparable(live.stdout)
    assert text.pprof_notes(table) == _filter_notes(live.stderr.splitlines())
