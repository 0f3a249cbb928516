"""Issue 31's remaining cases, each a one-line error and a documented exit before anything slow starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.cluster.goenv import check_env
from crdscale.errors import UsageError


@pytest.mark.parametrize(
    "env, message",
    [
        ({"": "1"}, "'' is not an environment variable name"),
        ({"A=B": "1"}, "'A=B' is not an environment variable name"),
        ({"GOGC": "5\0"}, "'target.env.GOGC': a value cannot hold a NUL byte"),
        ({"GOGC": "banana"}, "'target.env.GOGC' must be an integer percentage"),
        ({"GOGC": "50 "}, "'target.env.GOGC' must be an integer percentage"),
        ({"GOMEMLIMIT": "2G"}, "'target.env.GOMEMLIMIT' must be bytes with an optional unit"),
        ({"GOMAXPROCS": "0"}, "'target.env.GOMAXPROCS' must be a positive integer"),
    ],
)
def test_environment_entries_go_would_misread_are_refused(env, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        check_env(env)


def test_environment_go_reads_passes():
    env = {"GOGC": "off", "GOMEMLIMIT": "2GiB", "GOMAXPROCS": "2", "GODEBUG": "gctrace=1", "X": ""}
    assert check_env(env) == env


def _one_error(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("crdscale: warning")]
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize(
    "text, message",
    [
        ('[target.env]\nGOGC = "banana"\n', "'target.env.GOGC' must be an integer percentage"),
        ('[target.env]\n"" = "1"\n', "'target.env': '' is not an environment variable name"),
        ('[matrix]\n"steps.count" = [1, 2]\nsteps.count = [3, 4]\n', "'steps.count' is given twice"),
        ("[probes.options.nosuchprobe]\nx = 1\n", "nosuchprobe not in [probes] each_step"),
    ],
)
def test_run_check_refuses(text, message, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("crdscale.scenario.check._check_target", lambda *a: None)  # no binaries needed here
    path = tmp_path / "s.toml"
    path.write_text(text)
    assert main(["run", "--check", str(path)]) == 2
    assert message in _one_error(capsys)


def test_binaries_checks_every_version_and_path_before_building(monkeypatch, capsys):
    def build(*_a, **_k):
        raise AssertionError("a build started before the flags were checked")

    monkeypatch.setattr("crdscale.cluster.binaries.kube_apiserver", build)
    monkeypatch.setattr("crdscale.cluster.binaries.kube_controller_manager", build)
    assert main(["binaries", "--kubectl-version", "banana"]) == 2
    assert "--kubectl-version: not a version: 'banana'" in _one_error(capsys)
    assert main(["binaries", "--etcd", "/nonexistent/etcd"]) == 3
    # What the user typed is named, not the scenario key it stands for.
    assert _one_error(capsys) == "crdscale: error: --etcd: /nonexistent/etcd is not an executable file"
    monkeypatch.setenv("CRDSCALE_ETCD", "/nonexistent/etcd")
    assert main(["binaries"]) == 3
    assert _one_error(capsys) == "crdscale: error: $CRDSCALE_ETCD: /nonexistent/etcd is not an executable file"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["footprint", "--calibrate", "--features", "nosuch"], "argument --features: unknown feature 'nosuch'"),
        (["footprint", "fit", "model", "x", "--features", "crds,"], None),
        (["top", "x.pb.gz", "--unit", "💥"], "argument --unit: '💥' is not a unit pprof knows"),
    ],
)
def test_flags_refused_as_they_are_read(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"] if message is None else argv)
    if message is None:  # a valid list parses (here up to --help)
        assert exit_.value.code == 0
        return
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_crd_tree_walk_is_bounded(tmp_path, monkeypatch):
    from crdscale.crds import load
    from crdscale.errors import CRDError

    for i in range(10):
        (tmp_path / f"{i}.yaml").write_text("{}")
    assert len(load.find_files(tmp_path)) == 10
    monkeypatch.setattr(load, "MAX_TREE_ENTRIES", 5)
    with pytest.raises(CRDError, match="more than 5 files and folders: not a CRD set"):
        load.find_files(tmp_path)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["probe", "discovery", "--tolerance", "-1"], "--tolerance must be a finite number >= 0, got -1.0"),
        (["probe", "apf", "--stats-wait-s", "nan"], "--stats-wait-s must be a finite number >= 0, got nan"),
    ],
)
def test_probe_numbers_refused_before_connecting(argv, message, capsys, monkeypatch):
    def connect(*_a, **_k):
        raise AssertionError("connected before the flags were checked")

    monkeypatch.setattr("crdscale.cluster.clients.connect", connect)
    assert main([*argv, "--yes"]) == 2
    assert message in _one_error(capsys)


def test_install_run_id_is_a_label_value(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["install", "x.yaml", "--run-id", "../../etc"])
    assert exit_.value.code == 2
    assert "is not a Kubernetes label value" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--image", "x:1", "--results", "s3://"], "an S3 results URL is s3://BUCKET[/PREFIX]"),
        (["--image", "has space", "--results", "s3://b/p"], "--image 'has space': not an image reference"),
        (["--image", "x:1", "--results", "pvc://"], "--results pvc://: names no claim"),
    ],
)
def test_cluster_submission_flags_refused_before_anything(flags, message, capsys):
    scenario = str(Path(__file__).resolve().parents[2] / "scenarios" / "gogc.toml")
    assert main(["run", "--cluster", "--print-manifests", *flags, scenario]) == 2
    assert message in _one_error(capsys)
