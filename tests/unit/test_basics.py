"""Small shared helpers: atomic writes, run-dir names, ownership labels, CLI help."""

import os
import stat

import pytest

from crdscale import ownership
from crdscale.cli.main import SUBCOMMANDS, build_parser, main
from crdscale.fsutil import read_json, write_atomic, write_json_atomic
from crdscale.rundir.layout import parse_profile_filename, profile_filename


def test_write_atomic_leaves_no_temp_files_and_sets_mode(tmp_path):
    target = write_atomic(tmp_path / "a" / "secret.txt", "x", mode=0o600)
    assert target.read_text() == "x"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["secret.txt"]


def test_write_atomic_keeps_old_content_when_the_write_fails(tmp_path):
    target = write_json_atomic(tmp_path / "m.json", {"status": "running"})

    class Boom:
        pass

    with pytest.raises(TypeError):
        write_atomic(target, Boom())  # not bytes/str: fails before replacing
    assert read_json(target) == {"status": "running"}
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


@pytest.mark.parametrize(
    "kind,step,crds,phase,name",
    [
        ("heap", 3, 300, None, "heap-step03-crds0300.pb.gz"),
        ("heap", 0, 0, None, "heap-step00-crds0000.pb.gz"),
        ("cpu", 12, 1200, "installed", "cpu-step12-crds1200-installed.pb.gz"),
    ],
)
def test_profile_names_round_trip(kind, step, crds, phase, name):
    assert profile_filename(kind, step, crds, phase) == name
    parsed = parse_profile_filename(name)
    assert (parsed.kind, parsed.step, parsed.crds, parsed.phase) == (kind, step, crds, phase)


def test_foreign_file_names_are_not_profiles():
    assert parse_profile_filename("manifest.json") is None
    assert parse_profile_filename("heap.pb.gz") is None


def test_ownership_labels_and_selector():
    labels = ownership.ownership_labels("r1")
    assert ownership.is_owned(labels) and ownership.is_owned(labels, "r1")
    assert not ownership.is_owned(labels, "r2")
    assert not ownership.is_owned({"app.kubernetes.io/managed-by": "helm"})
    assert not ownership.is_owned(None)
    assert ownership.owned_selector("r1") == "app.kubernetes.io/managed-by=crdscale,crdscale.io/run-id=r1"


def test_every_subcommand_has_help(capsys):
    parser = build_parser()
    choices = parser._subparsers._group_actions[0].choices
    for name, sub in choices.items():
        assert sub.description and len(sub.description) > 40, f"'{name}' needs a docstring that teaches"
    assert set(choices) <= set(SUBCOMMANDS)


def test_no_command_prints_help_and_fails(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


def test_user_errors_are_one_line_with_exit_code(capsys):
    assert main(["up", "--kube-version", "latest"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["crdscale: error: not a version: 'latest' (expected X.Y.Z, e.g. 1.37.1)"]
