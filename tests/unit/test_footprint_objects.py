"""`crdscale footprint --objects`: the shipped per-object terms, and what the CLI does with them."""

from __future__ import annotations

import json

import pytest
import yaml

from crdscale.cli.main import main
from crdscale.crds.generate import generate_crds, preset
from crdscale.footprint.objects import CAUSE, object_features
from crdscale.footprint.store import object_term_versions, read_object_term

KIB = 1024.0


def _crd():
    return generate_crds(preset("apigen", crd_count=1, group_count=1, property_count=20).validate())[0]


def test_shipped_terms_read_and_name_their_cells():
    versions = object_term_versions()
    assert {"1.24.0", "1.37.1"} <= set(versions)
    for version in versions:
        term = read_object_term(version)
        assert term.kube_version == version and term.dof >= 1 and term.log_sd > 0
        assert len(term.provenance["uses"]["object_fitting"]) == term.dof + len(term.columns)
        # A 1 KiB flat object costs kilobytes, not bytes or megabytes.
        assert 2 * KIB < term.mean({"bytes": 1024.0, "nodes": 22.0}) < 100 * KIB


# -- crdscale footprint --objects


def _crd_file(tmp_path):
    crd = _crd()
    path = tmp_path / "crd.yaml"
    path.write_text(yaml.safe_dump(crd))
    return path, crd


def _json(capsys, *argv):
    code = main(["footprint", *argv, "--shipped", "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_objects_add_a_cause_and_grow_total_rss_and_the_top_crds(tmp_path, capsys):
    path, _ = _crd_file(tmp_path)
    alone = _json(capsys, str(path))
    with_cr = _json(capsys, str(path), "--objects", "1000", "--object-shape", "flat")
    rows = {p["target"]: p for p in with_cr["predictions"]}
    before = {p["target"]: p for p in alone["predictions"]}
    heap = with_cr["objects"]["heap_bytes"]
    assert rows[CAUSE]["value"] == pytest.approx(heap["value"]) and heap["low"] > 0
    assert rows["total"]["value"] == pytest.approx(before["total"]["value"] + heap["value"])
    assert rows["rss"]["value"] > before["rss"]["value"] and rows["rss_peak"]["value"] > before["rss_peak"]["value"]
    assert with_cr["objects"]["total"] == 1000 and with_cr["objects"]["mean_features"]["bytes"] == 1024
    assert with_cr["top"]["costliest"][0]["bytes"] == pytest.approx(
        alone["top"]["costliest"][0]["bytes"] + heap["value"]
    )


def test_a_sample_of_real_objects_sets_their_shape(tmp_path, capsys):
    path, crd = _crd_file(tmp_path)
    item = {
        "apiVersion": "x.example.org/v1",
        "kind": "Thing",
        "metadata": {"name": "a", "uid": "u"},
        "spec": {f"k{i}": {"v": "x" * 10} for i in range(50)},
    }
    sample = tmp_path / "sample.yaml"
    sample.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [item, item]}))
    data = _json(capsys, str(path), "--objects", "10", "--object-sample", str(sample))
    assert data["objects"]["mean_features"] == object_features(item)
    assert "2 objects" in data["objects"]["sample"]


def test_budget_with_objects_fits_fewer_crds(tmp_path, capsys):
    folder = tmp_path / "set"
    folder.mkdir()
    for i in range(20):
        crd = _crd()
        crd["metadata"]["name"] = f"k{i}s.{crd['spec']['group']}"
        crd["spec"]["names"].update(plural=f"k{i}s", singular=f"k{i}", kind=f"K{i}")
        (folder / f"{i}.yaml").write_text(yaml.safe_dump(crd))
    whole = _json(capsys, str(folder), "--budget", "64GiB")["budget"]["whole_set"]["value"]
    budget = str(int(whole) + 1)  # the 20 CRDs alone just fit
    alone = _json(capsys, str(folder), "--budget", budget)["budget"]
    with_cr = _json(capsys, str(folder), "--budget", budget, "--objects", "500")["budget"]
    assert alone["fit"] == 20 and 0 < with_cr["fit"] < 20
    assert with_cr["whole_set"]["value"] > alone["whole_set"]["value"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--object-shape", "flat"], "--object-shape go with --objects N"),
        (["--objects", "-1"], "--objects must be >= 0"),
        (["--objects", "5", "--object-bytes", "2MiB"], "over etcd's"),
        (["--objects", "5", "--object-bytes", "lots"], "--object-bytes: 'lots' is not a size"),
        (["--objects", "5", "--kube-version", "1.32.2"], "no per-object term for kube-apiserver v1.32.2"),
    ],
)
def test_bad_object_flags_are_one_line(tmp_path, capsys, argv, message):
    path, _ = _crd_file(tmp_path)
    code = main(["footprint", str(path), "--shipped", *argv])
    _, err = capsys.readouterr()
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_object_sample_errors_are_one_line(tmp_path, capsys):
    path, crd = _crd_file(tmp_path)
    for text, message in (
        ("a: [", "not YAML or JSON"),
        ("just: data\n", "no Kubernetes objects"),
        (yaml.safe_dump(crd), "holds CRDs"),
        # A billion laughs: refused by the loader CRD files go through, before anything expands it.
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))
            + "kind: Thing\napiVersion: x/v1\n",
            "aliases expand it",
        ),
    ):
        sample = tmp_path / "s.yaml"
        sample.write_text(text)
        code = main(["footprint", str(path), "--shipped", "--objects", "3", "--object-sample", str(sample)])
        _, err = capsys.readouterr()
        assert code == 2 and message in err, err
    code = main(["footprint", str(path), str(path), "--shipped", "--objects", "3"])
    assert code == 2 and "--objects goes with one CRD set" in capsys.readouterr().err


def test_object_shape_choices_are_the_generators():
    import argparse

    from crdscale.cli.footprint import Command
    from crdscale.crds.objects import SHAPES

    parser = argparse.ArgumentParser()
    Command.add_arguments(parser)
    (action,) = [a for a in parser._actions if a.dest == "object_shape"]
    assert tuple(action.choices) == SHAPES


def test_explain_names_the_object_term(capsys):
    assert main(["footprint", "--explain", "--kube-version", "1.24.0"]) == 0
    out = capsys.readouterr().out
    assert "Objects (--objects): heap per custom resource" in out and "per JSON byte 0." in out


def test_nested_objects_warn_that_they_sit_high_in_the_interval(tmp_path, capsys):
    path, _ = _crd_file(tmp_path)
    nested = _json(capsys, str(path), "--objects", "10", "--object-shape", "nested")
    flat = _json(capsys, str(path), "--objects", "10", "--object-shape", "flat")
    assert any("read the upper end" in w for w in nested["warnings"])
    assert not any("read the upper end" in w for w in flat["warnings"])


def test_objects_no_cluster_could_store_are_refused(tmp_path, capsys):
    """Issue 31: --objects 10^15 predicted 22 billion GiB; a 3 MiB sampled object was accepted while
    --object-bytes 2MiB was refused. Both are inputs that cannot exist: one line, exit 2."""
    crds = tmp_path / "crds"
    crds.mkdir()
    for n, crd in enumerate(generate_crds(preset("apigen", crd_count=2, group_count=1, property_count=20).validate())):
        (crds / f"{n}.yaml").write_text(yaml.safe_dump(crd))
    assert main(["footprint", str(crds), "--objects", "1000000000000000"]) == 2
    assert "etcd's 8 GiB" in capsys.readouterr().err
    big = tmp_path / "big.yaml"
    big.write_text(yaml.safe_dump({"apiVersion": "x.example.com/v1", "kind": "Big", "metadata": {"name": "b"},
                                   "spec": {"data": "a" * (3 * 1024 * 1024)}}))  # fmt: skip
    assert main(["footprint", str(crds), "--objects", "10", "--object-sample", str(big)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "object 1" in err[0] and "1.5 MiB" in err[0]
