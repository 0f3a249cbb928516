"""`crdscale footprint` and the loader it shares with `install`: refusals, hostile YAML, answers, cluster input."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from fakeapi import CRD_COLLECTION, FakeApiServer

from crdscale.cli.main import main
from crdscale.cluster.clients import Cluster, Credentials
from crdscale.crds.load import ETCD_REQUEST_LIMIT, cluster_crds, load_crds
from crdscale.crds.yamlstream import MAX_ALIAS_NODES, load_all
from crdscale.errors import CRDError

DATA = Path(__file__).resolve().parents[1] / "data" / "crds"
DEPLOYMENT = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"


def crd_yaml(name: str = "widgets", group: str = "example.org", properties: int = 3, api="apiextensions.k8s.io/v1"):
    props = {f"p{i}": {"type": "string"} for i in range(properties)}
    crd = {
        "apiVersion": api,
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{name}.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": name, "kind": name.capitalize()},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {"spec": {"type": "object", "properties": props}},
                        }
                    },
                }
            ],
        },
    }
    return yaml.safe_dump(crd)


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- refusing what is not a CRD set: one wording for footprint and install


@pytest.mark.parametrize(
    "files, found",
    [
        ({}, "found nothing (no YAML or JSON files)"),
        ({"deploy.yaml": DEPLOYMENT}, "found 1 Deployment"),
        (
            {"old.yaml": crd_yaml(api="apiextensions.k8s.io/v1beta1")},
            "found 1 CustomResourceDefinition (apiextensions.k8s.io/v1beta1) (v1beta1 CRDs are served by no "
            "kube-apiserver since 1.22",
        ),
        ({"empty.yaml": "---\n# nothing\n"}, "found 1 file with no documents"),
    ],
)
@pytest.mark.parametrize("command", ["footprint", "install"])
def test_no_v1_crd_is_refused_naming_what_was_found(tmp_path, capsys, files, found, command):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code, out, err = run_cli(capsys, command, str(tmp_path), *(["--shipped"] if command == "footprint" else []))
    assert code == 5
    assert out == ""
    assert err.startswith(
        f"crdscale: error: no apiextensions.k8s.io/v1 CustomResourceDefinitions in {tmp_path}: {found}"
    )
    assert err.count("\n") == 1


# -- hostile input, bounded

BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)


def test_alias_bomb_schema_is_refused_in_a_moment(tmp_path, capsys):
    # A CRD whose schema holds a billion laughs: nine levels of aliases of aliases, ~10^9 nodes expanded.
    bomb = "\n".join(f"          {line}" for line in BOMB.splitlines())
    text = crd_yaml().replace("      openAPIV3Schema:\n", "      openAPIV3Schema:\n        x-lol:\n" + bomb + "\n", 1)
    (tmp_path / "bomb.yaml").write_text(text)
    assert len(text) < 2000
    start = time.monotonic()
    code, out, err = run_cli(capsys, "footprint", str(tmp_path), "--shipped")
    assert time.monotonic() - start < 5
    assert code == 5
    assert "bomb.yaml: document 1: invalid YAML" in err or "alias" in err
    assert f"more than {MAX_ALIAS_NODES:,} nodes" in err
    assert err.count("\n") == 1


def test_crd_over_etcds_request_limit_is_refused(tmp_path, capsys):
    big = crd_yaml(properties=1).replace(
        "type: string", f"type: string\n                description: {'x' * (ETCD_REQUEST_LIMIT + 10)}", 1
    )
    (tmp_path / "big.yaml").write_text(big)
    code, out, err = run_cli(capsys, "footprint", str(tmp_path), "--shipped")
    assert code == 5
    assert "big.yaml: document 1: CustomResourceDefinition widgets.example.org is 1.5 MiB as JSON" in err
    assert "over the 1.5 MiB etcd accepts in one request" in err
    assert err.count("\n") == 1


# -- the fast loader builds what PyYAML's safe loader builds


@pytest.mark.parametrize(
    "text",
    [
        "a: &x {b: 1}\nc: *x\n",
        "base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n",
        "m:\n  <<: [{a: 1}, {a: 2, b: 3}]\n  a: 0\n",
        "x: !!str 12\ny: 0o12\nz: 012\nw: 2021-01-01\nv: yes\nu: ~\nt: 1.5e3\ns: '1'\nr: .inf\n",
        "s: !!set {a, b}\n",
        "a: &a [1, 2]\nb: [*a, *a]\n",
        "---\n---\nk: v\n...\n",
        "",
        "x: !!binary aGVsbG8=\n",
        "- null\n- Null\n- ''\n- true\n- off\n",
    ],
)
def test_fast_loader_matches_safe_load_all(text):
    assert list(load_all(text)) == list(yaml.safe_load_all(text))


@pytest.mark.parametrize("text", ["a: *nope\n", "? [1, 2]\n: x\n", "a: [1\n", "x: !!python/object:os.system ls\n"])
def test_fast_loader_refuses_what_safe_load_refuses(text):
    with pytest.raises(yaml.YAMLError):
        list(yaml.safe_load_all(text))
    with pytest.raises(yaml.YAMLError):
        list(load_all(text))


def test_fast_loader_matches_on_every_fixture():
    for path in sorted(DATA.rglob("*.yaml")):
        text = path.read_text()
        try:
            expected = list(yaml.safe_load_all(text))
        except yaml.YAMLError:
            continue
        assert list(load_all(text)) == expected, path


# -- answers


def _set(tmp_path: Path, name: str, sizes: dict[str, int]) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for crd, properties in sizes.items():
        (folder / f"{crd}.yaml").write_text(crd_yaml(crd, properties=properties))
    return folder


def test_json_answers_top_crds_and_budget(tmp_path, capsys):
    folder = _set(tmp_path, "set", {"small": 2, "medium": 20, "large": 200})
    code, out, err = run_cli(
        capsys, "footprint", str(folder), "--shipped", "-o", "json", "--budget", "64MiB", "--top", "2"
    )
    assert code == 0
    data = json.loads(out)
    assert [r["name"] for r in data["top"]["costliest"]] == ["large.example.org", "medium.example.org"]
    shares = [r["share"] for r in data["top"]["costliest"]]
    assert shares[0] > shares[1] > 0
    total = next(p for p in data["predictions"] if p["target"] == "total")["value"]
    assert data["top"]["costliest"][0]["bytes"] == pytest.approx(shares[0] * total)
    assert data["budget"]["crds"] == 3 and 0 <= data["budget"]["fit_at_high"] <= data["budget"]["fit"] <= 3
    assert "settled" in data["definitions"]["rss"] and "peak" in data["definitions"]["rss_peak"]
    # A memory limit must hold the peak: the budget is against peak growth, and every bound is >= 0.
    assert data["budget"]["target"] == "rss_peak"
    assert data["rss_peak_bytes"]["value"] > data["rss_bytes"]["value"] > 0
    assert all(p["low"] >= 0 and p["low"] <= p["value"] <= p["high"] for p in data["predictions"])
    assert any("--baseline" in w for w in data["warnings"])


def test_budget_smaller_than_one_crd_fits_none(tmp_path, capsys):
    folder = _set(tmp_path, "set", {"a": 2, "b": 3})
    code, out, _ = run_cli(capsys, "footprint", str(folder), "--shipped", "-o", "json", "--budget", "1KiB")
    assert code == 0 and json.loads(out)["budget"]["fit"] == 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--budget", "8 parsecs"], "--budget: '8 parsecs' is not a size"),
        (["--baseline", "1GiB"], "--baseline goes with --budget"),
        (["--budget", "1GiB", "--baseline", "2GiB"], "--budget must be larger than --baseline"),
        (["--top", "-1"], "--top must be >= 0"),
    ],
)
def test_bad_answer_flags_are_usage_errors(tmp_path, capsys, argv, message):
    folder = _set(tmp_path, "set", {"a": 2})
    code, _, err = run_cli(capsys, "footprint", str(folder), "--shipped", *argv)
    assert code == 2 and message in err


def test_old_new_difference_names_the_changes(tmp_path, capsys):
    old = _set(tmp_path, "old", {"kept": 5, "grown": 5, "dropped": 5})
    new = _set(tmp_path, "new", {"kept": 5, "grown": 50, "added": 5})
    code, out, err = run_cli(capsys, "footprint", str(old), str(new), "--shipped", "-o", "json")
    assert code == 0
    data = json.loads(out)
    assert data["changes"] == {
        "added": ["added.example.org"],
        "removed": ["dropped.example.org"],
        "changed": ["grown.example.org"],
        "unchanged": 1,
    }
    total = next(d for d in data["difference"] if d["target"] == "total")
    # One CRD swapped for one of the same size, one grown: what is added is the growth of "grown".
    assert total["value"] > 0 and total["low"] <= total["value"] <= total["high"]
    largest = {r["name"]: r for r in data["largest"]}
    assert largest["added.example.org"]["bytes"] > 0 and largest["added.example.org"]["change"] == "added"
    assert largest["dropped.example.org"]["bytes"] < 0
    assert largest["grown.example.org"]["bytes"] > 0 and "kept.example.org" not in largest
    code, out, _ = run_cli(capsys, "footprint", str(old), str(old), "--shipped", "-o", "json")
    same = json.loads(out)
    assert all(d["value"] == 0 for d in same["difference"])


def test_text_output_fits_one_screen(tmp_path, capsys):
    folder = _set(tmp_path, "set", {f"k{i}": i for i in range(1, 30)})
    code, out, _ = run_cli(capsys, "footprint", str(folder), "--shipped", "--budget", "8GiB", "--baseline", "1GiB")
    assert code == 0
    assert len(out.splitlines()) <= 32
    assert "RSS, settled" in out and "make half of it" in out and "CRDs fit, cheapest first" in out


def test_prediction_imports_neither_pandas_nor_scipy(tmp_path):
    """A prediction needs no DataFrame: pandas (with pyarrow) and scipy are ~0.4 CPU-s of its ~2.5 s, so
    the names it shares with the DataFrame analyses (crdscale.analysis.targets) come from a module that
    imports nothing. A fresh interpreter, because this test session has imported them all."""
    import os
    import subprocess
    import sys

    folder = _set(tmp_path, "set", {"k1": 1, "k2": 2})
    probe = (
        "import sys; from crdscale.cli.main import main; code = main(sys.argv[1:]); "
        "print(sorted(m for m in ('pandas', 'scipy', 'pyarrow') if m in sys.modules), code, file=sys.stderr)"
    )
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", probe, "footprint", str(folder), "--shipped"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=120,
        check=True,
    )
    assert "heap, total" in proc.stdout
    assert proc.stderr.strip().splitlines()[-1] == "[] 0"


# -- a live cluster, read-only


def test_cluster_crds_reads_installed_crds_with_one_list():
    server = FakeApiServer()
    for text in (crd_yaml("widgets"), crd_yaml("gadgets")):
        server.add(CRD_COLLECTION, yaml.safe_load(text))
    loaded = cluster_crds(Cluster("https://127.0.0.1:6443", server, Credentials()))
    assert sorted(c["metadata"]["name"] for c in loaded.crds) == ["gadgets.example.org", "widgets.example.org"]
    assert {s.method for s in server.sent()} == {"GET"}
    assert str(loaded.sources[0]).startswith("cluster https://127.0.0.1:6443: document")


def test_cluster_and_sources_are_exclusive(tmp_path, capsys):
    code, _, err = run_cli(capsys, "footprint", str(tmp_path), "--kubeconfig", str(tmp_path / "kc"))
    assert code == 2 and "give no CRD_SOURCE" in err


# -- what users feed it (packages and charts: tests/integration/test_footprint_packages.py)


def test_kubectl_get_list_and_stdin(tmp_path, monkeypatch, capsys):
    items = [yaml.safe_load(crd_yaml(n)) for n in ("widgets", "gadgets")]
    listing = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items})
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(listing.encode())))
    code, out, _ = run_cli(capsys, "footprint", "-", "--shipped", "-o", "json")
    assert code == 0
    data = json.loads(out)
    assert data["features"]["crds"] == 2 and data["source"] == "stdin"


def test_olm_bundle_counts_its_other_objects():
    loaded = load_crds(DATA / "olm-bundle")
    assert len(loaded.crds) == 1 and loaded.skipped["ClusterServiceVersion"] == 1


def test_not_utf8_is_one_line(tmp_path):
    (tmp_path / "bad.yaml").write_bytes(b"kind: \xff\n")
    with pytest.raises(CRDError, match="bad.yaml: cannot read: not UTF-8"):
        load_crds(tmp_path)


# -- measured in worker processes: the same answer, the same first error


def test_parallel_measure_matches_one_process(tmp_path, monkeypatch):
    from crdscale.crds import load
    from crdscale.footprint.features import crd_features

    for i in range(12):
        (tmp_path / f"c{i:02}.yaml").write_text(crd_yaml(f"k{i}", properties=i + 1) + "---\n" + DEPLOYMENT)
    serial = load.load_crds(tmp_path, measure=crd_features)
    monkeypatch.setattr(load, "PARALLEL_MIN_BYTES", 0)
    parallel = load.load_crds(tmp_path, measure=crd_features)
    assert parallel.names == serial.names and parallel.measures == serial.measures
    assert parallel.skipped == serial.skipped == {"Deployment": 12}
    assert [str(s) for s in parallel.sources] == [str(s) for s in serial.sources]
    assert parallel.crds == [] and len(load.load_crds(tmp_path).crds) == 12

    (tmp_path / "c05.yaml").write_text("kind: [\n")
    with pytest.raises(CRDError, match=r"c05.yaml: document 1: invalid YAML"):
        load.load_crds(tmp_path, measure=crd_features)


def _deep_schema(levels: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_deeply_nested_yaml_and_json_are_one_line(tmp_path, capsys):
    import sys

    crd = yaml.safe_load(crd_yaml())
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"] = _deep_schema(3000)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        (tmp_path / "deep.json").write_text(json.dumps(crd))
    finally:
        sys.setrecursionlimit(limit)
    code, _, err = run_cli(capsys, "footprint", str(tmp_path), "--shipped")
    assert code == 5 and "deep.json: document 1: nests too deeply" in err and err.count("\n") == 1

    (tmp_path / "deep.json").unlink()
    flow = "{type: string}"
    for _ in range(1000):
        flow = "{type: object, properties: {a: " + flow + "}}"
    (tmp_path / "deep.yaml").write_text("a: " + flow + "\n")
    code, _, err = run_cli(capsys, "footprint", str(tmp_path), "--shipped")
    assert code == 5 and "deep.yaml: document 1: invalid YAML: it nests deeper than 400 levels" in err


@pytest.mark.skipif(__import__("shutil").which("helm") is not None, reason="checks the message without helm")
def test_chart_with_only_templated_crds_and_no_helm_says_why(tmp_path, capsys):
    (tmp_path / "templates").mkdir()
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 0.1.0\n")
    (tmp_path / "templates" / "crd.yaml").write_text("kind: CustomResourceDefinition\n{{ .Values.x }}\n")
    code, _, err = run_cli(capsys, "footprint", str(tmp_path), "--shipped")
    assert code == 5 and err.count("\n") == 1
    assert "found nothing" in err and "helm is not on PATH" in err and "helm template" in err


def test_stdin_can_be_only_one_of_old_and_new(capsys):
    # Before: the first '-' read stdin whole and the second said "no CRDs in stdin".
    assert main(["footprint", "-", "-"]) == 2
    assert "stdin is read once" in capsys.readouterr().err
