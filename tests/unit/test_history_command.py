"""`crdscale history`: which releases, bad input in one line before anything is built, a resumable
history directory (fake runs), and its page's tables on a recorded history (tests/data/history: the two
committed reference runs as its cells)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from crdscale.analysis import history as h
from crdscale.cli.main import main
from crdscale.errors import RunInterrupted, UsageError
from crdscale.scenario import history
from crdscale.scenario.config import parse_scenario

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "data" / "history"


@pytest.fixture
def proxy(tmp_path, monkeypatch):
    """A module proxy serving 1.30.4 and 1.31.2 whole, 1.31.3 without k8s.io/apiserver, nothing of 1.29."""
    gomod = tmp_path / "kubernetes.mod"
    gomod.write_text(
        "module k8s.io/kubernetes\n\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n"
        "\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver\n)\n"
    )
    served = {"k8s.io/kubernetes@v1.31.3": {"GoMod": str(gomod)}, "k8s.io/api@v0.31.3": {}}
    for version in ("1.30.4", "1.31.2"):
        served[f"k8s.io/kubernetes@v{version}"] = {"GoMod": str(gomod)}
        served[f"k8s.io/api@v0.{version[2:]}"] = {}
        served[f"k8s.io/apiserver@v0.{version[2:]}"] = {}
    asked = []

    def lookup(module, version):
        asked.append(f"{module}@{version}")
        return served.get(f"{module}@{version}", {"Error": "not found"})

    lookup.asked = asked
    from crdscale.cluster import releases

    monkeypatch.setattr(releases, "_lookup", lookup)
    monkeypatch.setattr(releases, "built_here", lambda version: False)
    return lookup


@pytest.mark.parametrize(
    "spec,expected",
    [
        ("1.24..1.37", [history.VersionItem("range", "1.24", "1.37")]),
        ("v1.30", [history.VersionItem("minor", "1.30")]),
        ("1.24.0, 1.37.1", [history.VersionItem("release", "v1.24.0"), history.VersionItem("release", "v1.37.1")]),
    ],
)
def test_parse_versions(spec, expected):
    assert history.parse_versions(spec) == expected


@pytest.mark.parametrize(
    "spec,message",
    [
        ("1.30..1.24", "the older minor comes first"),
        ("1.24..latest", "a range goes from one minor to another"),
        ("1.x", "not a minor"),
        (",", "name at least one release"),
        ("1.12..1.14", "served from 1.16 on"),
    ],
)
def test_bad_versions_are_one_line(spec, message):
    with pytest.raises(UsageError, match=message):
        history.parse_versions(spec)


def test_resolve_versions_newest_buildable_and_why(proxy, tmp_path):
    plan = history.resolve_versions("1.30..1.31,1.30.4", lookup=proxy, cache_path=tmp_path / "c.json")
    assert plan.versions == ["v1.30.4", "v1.31.2"]
    assert any("v1.31.3 lacks k8s.io/apiserver" in line for line in plan.choices)
    # The choices are cached: a second history asks the proxy nothing about the minors.
    before = len(proxy.asked)
    assert history.resolve_versions("1.31", lookup=proxy, cache_path=tmp_path / "c.json").versions == ["v1.31.2"]
    assert len(proxy.asked) == before


def test_resolve_versions_refuses_what_cannot_be_built(proxy, tmp_path):
    cache = tmp_path / "c.json"
    with pytest.raises(UsageError, match="no release of 1.29 can be built"):
        history.resolve_versions("1.29..1.29", lookup=proxy, cache_path=cache)
    with pytest.raises(UsageError, match="does not serve k8s.io/kubernetes v1.31.9"):
        history.resolve_versions("1.31.9", lookup=proxy, cache_path=cache)
    with pytest.raises(UsageError, match="lacks k8s.io/apiserver v0.31.3"):
        history.resolve_versions("1.31.3", lookup=proxy, cache_path=cache)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--versions", "1.29"], "no release of 1.29 can be built"),
        (["--versions", "1.31.9"], "does not serve"),
        (["--versions", "1.30..1.24"], "the older minor comes first"),
        (["--versions", "1.30.4", "--set", "target.kube_version=1.30.4"], "come from --versions"),
        (["--versions", "1.30.4", "--repeats", "0"], "--repeats 0"),
        (["--versions", "1.30.4", "--kubeconfig", "x"], "--kubeconfig goes with --cluster"),
        (["--versions", "1.30.4", "--image", "x"], "--image goes with --cluster"),
        (["--resume", str(RECORDED), "--versions", "1.30"], "--resume takes the workload"),
    ],
)
def test_bad_input_exits_2_before_anything_is_built(proxy, args, message, capsys):
    assert main(["history", "--check", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_toolchain_that_does_not_exist_exits_2(proxy, monkeypatch, capsys):
    from crdscale.cluster import toolchain

    monkeypatch.setattr(toolchain, "available_toolchains", lambda: ("go1.18.1", "go1.18.10"))
    assert main(["history", "--check", "--versions", "1.30.4", "--go", "1.18.99"]) == 2
    assert "no toolchain go1.18.99" in capsys.readouterr().err


def test_check_lists_the_releases_and_every_cell(proxy, capsys):
    assert main(["history", "--check", "--versions", "1.30..1.31", "--repeats", "2", "--go", "local"]) == 0
    out = capsys.readouterr().out
    assert "releases (2): v1.30.4, v1.31.2" in out and "4 cells checked" in out
    assert "cell kube_version=1.31.2,repeat=2:" in out


def test_print_default_is_the_workload():
    scenario = parse_scenario(history.workload_text())
    assert scenario.grows_objects and scenario.objects.crd_steps > 1 and scenario.crds.preset == "provider"
    assert scenario.target.go == "release" and scenario.steps.serve == "watch"
    assert scenario.crd_step_sizes(scenario.crds.count) == [25, 25, 25, 25]


def test_crd_steps_needs_objects():
    with pytest.raises(UsageError, match="'objects.crd_steps' is set"):
        parse_scenario("[objects]\ncrd_steps = 3\n")


class FakeRunner:
    """Makes a run directory per cell; interrupted (as Ctrl-C) at the call named ``interrupt_at`` (1-based)."""

    def __init__(self, interrupt_at: int | None = None):
        self.calls: list[str] = []
        self.interrupt_at = interrupt_at

    def __call__(self, scenario, parent: Path, name: str) -> Path:
        self.calls.append(name)
        run = parent / f"run-{len(self.calls):02d}-{name}"
        run.mkdir()
        assert scenario.target.kube_version == name.split(",")[0].split("=")[1]
        if len(self.calls) == self.interrupt_at:
            raise RunInterrupted("run interrupted (SIGINT received)")
        return run


def _history(tmp_path, versions=("v1.30.4", "v1.31.2", "v1.32.1"), repeats=2):
    scenario = history.history_scenario(None, list(versions), repeats=repeats, go="local")
    plan = history.VersionPlan(list(versions), [f"{v}: asked for" for v in versions])
    table = history.history_table(plan, spec=",".join(versions), repeats=repeats, go="local", workload=None)
    return history.create_history(tmp_path, scenario, table, check=False)


def test_an_interrupted_history_resumes_from_where_it_stopped(tmp_path):
    created = _history(tmp_path)
    assert [c.cell.name for c in created.cells][:3] == [
        "kube_version=1.30.4,repeat=1", "kube_version=1.30.4,repeat=2", "kube_version=1.31.2,repeat=1",
    ]  # fmt: skip
    first = FakeRunner(interrupt_at=4)  # k = 3 of n = 6 cells completed, the 4th interrupted
    with pytest.raises(RunInterrupted):
        created.run(first)
    reopened = history.open_history(created.path)
    assert [c.status for c in reopened.cells] == ["completed"] * 3 + ["interrupted", "pending", "pending"]
    assert history.progress_line(reopened) == "3 of 6 cells completed; 1 of 3 releases complete"
    second = FakeRunner()
    reopened.run(second)
    assert second.calls == [c.cell.name for c in reopened.cells[3:]]  # from k on; the finished ones never again
    third = FakeRunner()
    history.open_history(created.path).run(third)
    assert third.calls == []
    done = history.completed_by_version(history.open_history(created.path))
    assert list(done) == ["v1.30.4", "v1.31.2", "v1.32.1"] and all(len(runs) == 2 for runs in done.values())


def test_resume_through_the_cli_runs_only_what_is_left(tmp_path, monkeypatch, capsys):
    from crdscale.cli import common

    created = _history(tmp_path, versions=("v1.30.4", "v1.31.2"), repeats=1)
    with pytest.raises(RunInterrupted):
        created.run(FakeRunner(interrupt_at=2))
    fake = FakeRunner()
    monkeypatch.setattr(common, "run_with_progress", fake)
    monkeypatch.setattr("crdscale.cli.run._check", lambda scenario, cells=None: [])
    assert main(["history", "--resume", str(created.path)]) == 0
    assert fake.calls == ["kube_version=1.31.2"]
    assert capsys.readouterr().out.strip() == str(created.path)


def test_resume_refuses_an_experiment_that_is_no_history(tmp_path):
    path = tmp_path / "exp"
    path.mkdir()
    manifest = json.loads((RECORDED / "experiment.json").read_text())
    del manifest["history"]
    (path / "experiment.json").write_text(json.dumps(manifest))
    with pytest.raises(UsageError, match="not a history"):
        history.open_history(path)


def test_the_recorded_history_by_release_and_its_changepoints():
    from crdscale.report.history import changepoint_rows, history_markdown, load_history, release_rows

    recorded = load_history(RECORDED)
    assert recorded.versions == ["v1.24.0", "v1.37.1"]
    totals = recorded.releases[recorded.releases["cause"] == "total"].set_index(["quantity", "version"])["value"]
    # The committed runs' own numbers (README): 937.0 KiB per CRD on v1.37.1.
    assert totals[(h.HEAP_PER_CRD, "v1.37.1")] / 1024 == pytest.approx(937.0, abs=0.1)
    assert {h.RSS_PER_CRD, h.CPU_PER_CRD, h.RSS_PEAK, h.RSS_SETTLED} <= set(totals.index.get_level_values(0))
    picked = recorded.changepoints
    zap = picked[(picked["quantity"] == h.HEAP_PER_CRD) & (picked["cause"] == "zap-counters")].iloc[0]
    assert zap["difference"] / 1024 == pytest.approx(-461.0, abs=0.1) and "pull/111477" in zap["upstream"]
    assert ((picked["low"] > 0) | (picked["high"] < 0)).all()
    rows = release_rows(recorded)
    # kube-controller-manager's and etcd's place in the table, empty until runs carry their figures.
    assert "kube-controller-manager: heap per CRD" in rows.columns and "etcd: RSS per CRD" in rows.columns
    assert set(rows["etcd: heap per CRD"]) == {"—"}
    table = changepoint_rows(recorded)
    assert (table["frames that moved most"] != "").sum() == 1  # the pair's frames, once
    text = history_markdown(recorded)
    assert "crdscale history data/reference.toml --versions 1.24.0,1.37.1 --repeats 1 --go local" in text


def test_wide_table_keeps_every_component_group():
    wide = h.wide_table(pd.DataFrame(columns=h.RELEASE_COLUMNS))
    assert set(wide.columns.get_level_values(0)) == set(h.COMPONENTS)


def test_process_differences_combine_the_releases_intervals():
    rows = [
        ("kube-apiserver", h.RSS_PER_CRD, "v1.30.0", "total", 100.0, 90.0, 110.0, 2, "bytes"),
        ("kube-apiserver", h.RSS_PER_CRD, "v1.31.0", "total", 200.0, 170.0, 230.0, 2, "bytes"),
    ]
    diffs = h.process_differences(pd.DataFrame(rows, columns=h.RELEASE_COLUMNS))
    r = diffs.iloc[0]
    assert (r["older"], r["newer"], r["difference"]) == ("v1.30.0", "v1.31.0", 100.0)
    assert r["high"] - r["difference"] == pytest.approx((10**2 + 30**2) ** 0.5)


def test_lab_binds_the_history_notebook(tmp_path):
    pytest.importorskip("papermill")
    from crdscale.report.lab import bind_notebooks

    copy = tmp_path / "history"
    copy.mkdir()
    manifest = json.loads((RECORDED / "experiment.json").read_text())
    for cell in manifest["cells"]:
        cell["run_dir"] = str((RECORDED / cell["run_dir"]).resolve())
    (copy / "experiment.json").write_text(json.dumps(manifest))
    bound = bind_notebooks(copy, execute=False)
    assert [b.path.name for b in bound] == ["history.ipynb"] and bound[0].created
    assert str(copy.resolve()) in bound[0].path.read_text()
    shutil.rmtree(copy)


def test_a_page_needs_two_runs(tmp_path):
    from crdscale.report.history import load_history

    manifest = json.loads((RECORDED / "experiment.json").read_text())
    for cell in manifest["cells"]:
        cell["run_dir"] = str((RECORDED / cell["run_dir"]).resolve())
    manifest["cells"][1].update(status="interrupted")
    (tmp_path / "experiment.json").write_text(json.dumps(manifest))
    with pytest.raises(UsageError, match="one completed run; a history's page needs two"):
        load_history(tmp_path)


SMALL = ROOT / "tests" / "data" / "history-small"  # v1.24.0 and v1.37.1, kube-controller-manager and etcd profiled


def test_kube_controller_manager_and_etcd_by_release():
    from crdscale.report.history import load_history, release_rows

    recorded = load_history(SMALL)
    others = recorded.releases[recorded.releases["component"] != h.APISERVER]
    got = set(zip(others["component"], others["quantity"], others["version"]))
    assert got == {
        (c, q, v) for c in ("kube-controller-manager", "etcd") for q in h.COMPONENT_METRICS.values()
        for v in ("v1.24.0", "v1.37.1")
    }  # fmt: skip
    assert (others["cause"] == "total").all() and (others["low"] <= others["value"]).all()
    etcd = others.set_index(["component", "quantity", "version"]).loc[("etcd", h.HEAP_PER_CRD, "v1.24.0")]
    assert etcd["value"] / 1024 == pytest.approx(164.4, abs=0.1)  # what compare says of the run (components table)
    rows = release_rows(recorded)
    assert "—" not in set(rows["kube-controller-manager: heap per CRD"]) | set(rows["etcd: RSS per CRD"])
    # Their consecutive differences, each with the frames of its own process's profiles.
    changes = recorded.changes.set_index(["component", "quantity"])
    assert changes.loc[("etcd", h.HEAP_PER_CRD), "frames"].startswith("go.etcd.io/")
    assert changes.loc[("kube-controller-manager", h.HEAP_PER_CRD), "frames"].startswith("k8s.io/")
    assert changes.loc[("etcd", h.RSS_PER_CRD), "frames"] == ""
    # The numbers docs/how-to/history.md quotes of this fixture.
    assert changes.loc[("etcd", h.HEAP_PER_CRD), "difference"] / 1024 == pytest.approx(-57.8, abs=0.05)
    picked = recorded.changepoints.set_index("cause")
    assert picked.loc["total", "difference"] / 1024 == pytest.approx(-1609.7, abs=0.05)
    assert picked.loc["openapi", "difference"] / 1024 == pytest.approx(-991.5, abs=0.05)


def test_the_history_json_and_show(capsys):
    assert main(["history", "--show", str(SMALL), "-o", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"releases", "changes", "changepoints", "seeds"} <= set(data)
    assert {r["component"] for r in data["releases"]} == {"kube-apiserver", "kube-controller-manager", "etcd"}
    picked = {(r["component"], r["quantity"], r["cause"]) for r in data["changepoints"]}
    assert picked == {("kube-apiserver", h.HEAP_PER_CRD, "total"), ("kube-apiserver", h.HEAP_PER_CRD, "openapi")}
    assert "pull/111477" in next(r["upstream"] for r in data["changepoints"] if r["cause"] == "total")
    assert main(["history", "--show", str(SMALL)]) == 0
    text = capsys.readouterr().out
    assert "## Changepoints" in text and "## Beside the seeds" in text and "etcd: heap per CRD" in text
    assert main(["history", "--show", str(SMALL), "--versions", "1.30"]) == 2


def test_the_page_draws_the_components():
    pytest.importorskip("matplotlib")
    from crdscale.report.history import history_content, load_history

    content = history_content(load_history(SMALL))
    names = [f.name for f in content.figures]
    assert {"heap-per-crd", "heap-per-custom-resource", "components-heap-per-crd", "components-rss-per-crd"} <= set(
        names
    )
    assert "kube-controller-manager: heap per CRD" in content.findings_md([], "")
    assert content.findings_json["seeds"]


def _change(component, quantity, cause, older_value, difference, low, high, frames=""):
    return (component, quantity, "v1.30.0", "v1.31.0", cause, older_value, older_value + difference, difference, low,
            high, difference / older_value, frames)  # fmt: skip


def test_changepoints_need_a_sure_and_large_difference_in_any_component():
    differences = pd.DataFrame(
        [
            _change("etcd", h.HEAP_PER_CRD, "total", 100_000, 30_000, 10_000, 50_000, "go.etcd.io/x.Grow +29.3 KiB"),
            _change("etcd", h.RSS_PER_CRD, "total", 100_000, 30_000, -5_000, 65_000),  # the interval holds 0
            _change("kube-controller-manager", h.HEAP_PER_CRD, "total", 100_000, 5_000, 1_000, 9_000),  # 5 %: small
            _change("kube-apiserver", h.HEAP_PER_CRD, "openapi", 100_000, -60_000, -80_000, -40_000),
        ],
        columns=h.CHANGE_COLUMNS,
    )
    picked = h.changepoints(differences)
    assert list(zip(picked["component"], picked["quantity"])) == [
        ("kube-apiserver", h.HEAP_PER_CRD), ("etcd", h.HEAP_PER_CRD),
    ]  # fmt: skip
    known = (
        h.UpstreamChange("-", r"go\.etcd\.io/x\.Grow", "an etcd change", (("etcd#1", "https://e/1"),), "etcd"),
        h.UpstreamChange("-", r"go\.etcd\.io/x\.Grow", "same frame, another process", (("k#2", "https://k/2"),)),
    )
    linked = h.upstream_links(picked, known).set_index("component")["upstream"]
    assert linked["etcd"] == "[etcd#1](https://e/1)" and linked["kube-apiserver"] == ""


def test_the_seeds_beside_the_measured_release():
    from crdscale.report.history import load_history

    seeds = load_history(RECORDED).seeds.set_index(["source", "quantity", "cause"])
    zap = seeds.loc[("one-pager", h.HEAP_PER_CRD, "zap-counters")]
    # The one-pager's 448 KB of zap counters per served CRD (measured on 1.23): beside v1.24.0, the history's
    # nearest release, which holds 461.0 KiB (README), and v1.37.1, which holds none.
    assert zap["seed_value"] == 448 * 1024 and zap["release"] == "v1.24.0" and zap["newest"] == "v1.37.1"
    assert zap["value"] / 1024 == pytest.approx(461.0, abs=0.1) and abs(zap["newest_value"]) < 1024
    rss = seeds.loc[("upbound-blog", h.RSS_PER_CRD, "total")]
    assert rss["seed_value"] == 4 * 2**20 and rss["value"] > 0


def test_every_upstream_change_and_seed_is_on_the_sources_page():
    import tomllib

    sources = tomllib.loads((ROOT / "docs" / "results" / "sources.toml").read_text())["source"]
    urls = {s["url"] for s in sources.values()}
    for change in h.UPSTREAM_CHANGES:
        assert {url for _name, url in change.links} <= urls, change.what
    for quote in h.SEED_QUOTES:
        assert quote.source in sources and sources[quote.source]["url"] == quote.url
