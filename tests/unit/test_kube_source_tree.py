"""A local Kubernetes source tree as a build input: its cache key, version, throwaway module,
and the errors a bad path gives (tiny fake trees; nothing is built)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.cluster import binaries, kubesource
from crdscale.errors import BinaryError, UsageError
from crdscale.report.findings import provenance
from crdscale.rundir.writer import RunWriter
from crdscale.scenario.config import load_scenario, parse_scenario
from crdscale.scenario.experiment import Experiment
from crdscale.scenario.matrix import expand

GO_MOD = """\
module k8s.io/kubernetes

go 1.26.0

require k8s.io/api v0.0.0

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver
)
"""
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@localhost",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@localhost",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}

needs_git = pytest.mark.skipif(not shutil.which("git"), reason="needs git")


def fake_tree(path: Path, *, staging: bool = False) -> Path:
    (path / "cmd" / "kube-apiserver").mkdir(parents=True)
    (path / "go.mod").write_text(GO_MOD)
    (path / "cmd" / "kube-apiserver" / "apiserver.go").write_text("package main\n")
    if staging:  # as in the Kubernetes repository: siblings required at v0.0.0
        for module, requires in (("api", ""), ("apiserver", "require k8s.io/api v0.0.0\n")):
            (path / "staging" / "src" / "k8s.io" / module).mkdir(parents=True)
            (path / "staging" / "src" / "k8s.io" / module / "go.mod").write_text(
                f"module k8s.io/{module}\n\n{requires}"
            )
    return path


def git(tree: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), *args], check=True, capture_output=True, text=True, env=dict(os.environ, **GIT_ENV)
    ).stdout


def git_tree(path: Path, tag: str | None = "v1.37.1") -> Path:
    fake_tree(path)
    (path / ".gitignore").write_text("/_output\n")
    git(path, "init", "-q")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    if tag:
        git(path, "tag", tag)
    return path


def read(tree: Path) -> kubesource.KubeSource:
    return kubesource.read_source(tree, fallback_version="v1.37.1")


# ---------------------------------------------------------------- versions


@pytest.mark.parametrize(
    "describe, dirty, version",
    [
        ("v1.37.1", False, "v1.37.1"),
        ("v1.37.1", True, "v1.37.1-dirty"),
        ("v1.37.1-3-g0123456789abcd", False, "v1.37.1-3+0123456789abcd"),
        ("v1.38.0-alpha.0-12-g0123456789abcd", True, "v1.38.0-alpha.0.12+0123456789abcd-dirty"),
    ],
)
def test_git_version_as_kubernetes_formats_it(describe, dirty, version):
    assert kubesource.kubernetes_git_version(describe, dirty=dirty) == version


@pytest.mark.parametrize(
    "describe, tag",
    [
        ("v1.37.1", "v1.37.1"),
        ("v1.37.1-3-g0123456789abcd", "v1.37.1"),
        ("v1.38.0-alpha.0-12-g0123456789abcd", "v1.38.0-alpha.0"),
    ],
)
def test_describe_tag(describe, tag):
    assert kubesource.describe_tag(describe) == tag


# ---------------------------------------------------------------- cache keys


def test_tree_without_git_is_keyed_by_its_files(tmp_path):
    tree = fake_tree(tmp_path / "k")
    first = read(tree)
    assert first.commit is None and first.base_version_from == "given" and first.dirty
    assert first.cache_name == f"source-v1.37.1-files-{first.content_sha256[:12]}"
    assert first.version == f"v1.37.1+files.{first.content_sha256[:12]}"
    (tree / "_output").mkdir()
    (tree / "_output" / "bin").write_text("build output is not an input")
    assert read(tree) == first
    (tree / "cmd" / "kube-apiserver" / "apiserver.go").write_text("package main // patched\n")
    assert read(tree).cache_name != first.cache_name
    assert kubesource.read_source(tree, fallback_version="v1.36.0").cache_name.startswith("source-v1.36.0-files-")


@needs_git
def test_git_checkout_is_keyed_by_commit_and_uncommitted_diff(tmp_path):
    tree = git_tree(tmp_path / "k")
    commit = git(tree, "rev-parse", "HEAD").strip()
    clean = read(tree)
    assert (clean.commit, clean.diff_sha256, clean.version) == (commit, None, "v1.37.1")
    assert clean.cache_name == f"source-v1.37.1-g{commit[:12]}" and not clean.dirty
    assert clean.base_version_from == "git describe" and clean.commit_date == "2026-01-01T00:00:00Z"

    source = tree / "cmd" / "kube-apiserver" / "apiserver.go"
    source.write_text("package main // patch 1\n")
    patch1 = read(tree)
    assert patch1.version == "v1.37.1-dirty" and patch1.commit == commit
    assert patch1.cache_name == f"source-v1.37.1-g{commit[:12]}-dirty-{patch1.diff_sha256[:12]}"
    assert read(tree) == patch1  # stable: an unchanged tree is never rebuilt

    source.write_text("package main // patch 2\n")
    patch2 = read(tree)
    assert patch2.diff_sha256 != patch1.diff_sha256

    git(tree, "add", "-A")  # staged or not, the same change is the same key
    assert read(tree) == patch2

    (tree / "newfile.go").write_text("package main\n")  # untracked files are part of the diff
    assert read(tree).diff_sha256 != patch2.diff_sha256
    (tree / "newfile.go").unlink()

    (tree / "_output").mkdir()
    (tree / "_output" / "kube-apiserver").write_text("ignored")  # .gitignore'd: not an input
    assert read(tree) == patch2

    source.write_text("package main\n")
    git(tree, "reset", "-q")
    assert read(tree) == clean


@needs_git
def test_commits_after_a_tag_and_checkouts_without_tags(tmp_path):
    tree = git_tree(tmp_path / "k")
    (tree / "go.sum").write_text("")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "one more")
    commit = git(tree, "rev-parse", "HEAD").strip()
    assert read(tree).version == f"v1.37.1-1+{commit[:14]}"

    untagged = git_tree(tmp_path / "u", tag=None)
    source = kubesource.read_source(untagged, fallback_version="v1.36.0")
    commit = git(untagged, "rev-parse", "HEAD").strip()
    assert (source.base_version, source.base_version_from) == ("v1.36.0", "given")
    assert source.version == f"v1.36.0+{commit[:14]}"


@needs_git
def test_a_tree_inside_another_repository_is_not_that_repository(tmp_path):
    outer = tmp_path / "outer"
    outer.mkdir()
    git(outer, "init", "-q")
    assert read(fake_tree(outer / "k")).commit is None


# ---------------------------------------------------------------- what is built


def test_source_program_replaces_kubernetes_and_staging_with_the_tree(tmp_path):
    with_staging = read(fake_tree(tmp_path / "a", staging=True))
    program = binaries.kube_apiserver_source_program(with_staging)
    gomod = program.go_mod()
    # required at the base release: unchanged packages keep the released build's cache keys
    assert "\tk8s.io/kubernetes v1.37.1\n" in gomod
    assert f"\tk8s.io/kubernetes => {tmp_path / 'a'}\n" in gomod
    assert f"\tk8s.io/apiserver => {tmp_path / 'a' / 'staging/src/k8s.io/apiserver'}\n" in gomod
    # labelled as the released build selects them (part of Go's cache key): a staging module that
    # another requires at v0.37.1, one only k8s.io/kubernetes requires at its go.mod's v0.0.0
    assert "\tk8s.io/api v0.37.1\n" in gomod and "\tk8s.io/apiserver v0" not in gomod
    assert program.out_dir.name == with_staging.cache_name
    assert f"-X k8s.io/component-base/version.gitVersion={with_staging.version}" in program.ldflags
    assert "-X k8s.io/component-base/version.gitTreeState=dirty" in program.ldflags

    without = binaries.kube_apiserver_source_program(read(fake_tree(tmp_path / "b")))
    assert "\tk8s.io/apiserver => k8s.io/apiserver v0.37.1\n" in without.go_mod()
    prerelease = kubesource.read_source(fake_tree(tmp_path / "c"), fallback_version="v1.38.0-alpha.0")
    with pytest.raises(BinaryError, match="no staging/src/k8s.io"):
        binaries.kube_apiserver_source_program(prerelease)


def test_bad_trees_are_one_line_usage_errors(tmp_path, capsys):
    with pytest.raises(UsageError, match="is not a directory"):
        kubesource.check_tree(tmp_path / "missing")
    (tmp_path / "go.mod").write_text("module example.com/other\n")
    with pytest.raises(UsageError, match="is not a Kubernetes source tree"):
        kubesource.check_tree(tmp_path)
    with pytest.raises(UsageError, match="not both"):
        binaries.kube_apiserver(binary="/bin/true", source=tmp_path)

    assert main(["binaries", "--kube-source", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a Kubernetes source tree" in err[0]


# ---------------------------------------------------------------- scenarios and manifests


def test_scenario_kube_source_is_resolved_checked_and_a_matrix_axis(tmp_path, monkeypatch):
    fake_tree(tmp_path / "kubernetes")
    scenario_file = tmp_path / "patch.toml"
    scenario_file.write_text('[matrix]\n"target.kube_source" = ["", "kubernetes"]\n')
    monkeypatch.chdir("/")
    base = load_scenario(scenario_file)
    cells = expand(base)
    assert [c.name for c, _ in cells] == ["kube_source=none", "kube_source=kubernetes"]
    released, patched = (sc for _, sc in cells)
    assert not released.target.kube_source and "v1.37.1" in released.description
    assert patched.target.kube_source == str(tmp_path / "kubernetes")  # relative to the file
    assert "built from" in patched.summary()

    # A bad path in any cell stops the experiment before anything runs or is written.
    scenario_file.write_text('[matrix]\n"target.kube_source" = ["", "nowhere"]\n')
    runs = tmp_path / "runs"
    with pytest.raises(
        UsageError, match=r"cell kube_source=nowhere: 'target.kube_source': .*nowhere is not a directory"
    ):
        Experiment.create(runs, load_scenario(scenario_file))
    assert not runs.exists()
    expand(load_scenario(scenario_file))  # parsing alone does not look: reports open moved experiments

    with pytest.raises(UsageError, match="not both"):
        parse_scenario('[target]\nkube_source = "k"\napiserver_binary = "/bin/true"\n')
    monkeypatch.chdir(tmp_path)  # without a file: relative to the current directory
    assert load_scenario(None, overrides={"target.kube_source": "kubernetes"}).target.kube_source == str(
        tmp_path / "kubernetes"
    )
    with pytest.raises(UsageError, match="default scenario: 'target.kube_source': .* not a Kubernetes source tree"):
        load_scenario(None, overrides={"target.kube_source": "."})


def test_manifest_records_what_a_binary_was_built_from(tmp_path):
    binary = tmp_path / "kube-apiserver"
    binary.write_bytes(b"\x7fELF")
    run = RunWriter.create(tmp_path, "t")
    facts = {"source_dir": "/src/kubernetes", "commit": "0123456789abcdef", "diff_sha256": "89abcdef01234567"}
    run.record_binaries({"kube-apiserver": binary, "etcd": None}, built_from={"kube-apiserver": facts})
    recorded = run.manifest()["binaries"]["kube-apiserver"]
    assert recorded["built_from"] == facts and len(recorded["sha256"]) == 64
    assert (
        kubesource.describe_build(facts)
        == "built from /src/kubernetes at commit 0123456789ab + uncommitted diff sha256 89abcdef0123 (base None)"
    )
    assert kubesource.describe_build(facts) in provenance(run.manifest())["kube-apiserver"]  # findings.md says it
