"""kube-apiserver built from a local Kubernetes source tree: "v1.37.1 as released vs my patch"
as one matrix, the patch observed in the running server, the build cached by commit + diff.

The tree is the k8s.io/kubernetes v1.37.1 module source (from the Go module cache, which
building v1.37.1 filled) committed to a fresh git repository tagged v1.37.1, plus one
uncommitted line that logs a marker at startup. Its staging modules come from the
published v0.37.1 (the module zip has no staging/src). Committed with fixed dates, so
the commit and thus the cache key are the same on every run: a second test run reuses
the build. With a warm Go build cache only the patched package is compiled again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from crdscale.cli.main import main
from crdscale.cluster import binaries, gobuild, kubesource
from crdscale.rundir import layout, read_run

KUBE_VERSION = "v1.37.1"
SERVER_GO = "cmd/kube-apiserver/app/server.go"
PATCH_AFTER = '\tklog.Infof("Version: %+v", utilversion.Get())\n'
MARKER = "crdscale test patch: this kube-apiserver was built from a local source tree"
# Fixed identity and dates: the same tree gives the same commit, hence the same cache key.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "crdscale",
    "GIT_AUTHOR_EMAIL": "crdscale@localhost",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "crdscale",
    "GIT_COMMITTER_EMAIL": "crdscale@localhost",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}

SCENARIO = """\
name = "patch"
[target]
kube_version = "1.37.1"
[crds]
count = 4
groups = 1
property_count = 5
[steps]
count = 1
serve = "list"
settle_seconds = 0
[profiles]
installed_phase = false
[metrics]
source = "direct"
scrape_interval_seconds = 1
[matrix]
"target.kube_source" = ["", "{tree}"]
"""


def _git(tree: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(tree), "-c", "core.hooksPath=/dev/null", *args],
        check=True,
        capture_output=True,
        env=dict(os.environ, **GIT_ENV),
        timeout=600,
    )


def make_patched_tree(dest: Path) -> Path:
    """k8s.io/kubernetes v1.37.1 from the module cache as a git checkout at tag v1.37.1, with the
    marker line added (uncommitted) to kube-apiserver's Run(). Returns ``dest``."""
    info = gobuild.module_download("k8s.io/kubernetes", KUBE_VERSION)
    assert not info.get("Error"), info
    # The module cache is read-only: copy file contents only, then make the directories writable.
    shutil.copytree(info["Dir"], dest, copy_function=shutil.copyfile)
    for root, _dirs, _files in os.walk(dest):
        os.chmod(root, 0o755)
    _git(dest, "init", "-q")
    _git(dest, "add", "-A")
    _git(dest, "commit", "-q", "--no-gpg-sign", "-m", f"k8s.io/kubernetes {KUBE_VERSION} (module zip)")
    _git(dest, "tag", KUBE_VERSION)
    server = dest / SERVER_GO
    text = server.read_text()
    assert PATCH_AFTER in text, f"{SERVER_GO} changed upstream: pick another line to patch"
    server.write_text(text.replace(PATCH_AFTER, PATCH_AFTER + f'\tklog.InfoS("{MARKER}")\n', 1))
    return dest


@pytest.fixture(scope="module")
def patched_tree(tmp_path_factory) -> Path:
    return make_patched_tree(tmp_path_factory.mktemp("kube-source") / "kubernetes")


def _cells(experiment: Path) -> dict[str, Path]:
    runs = [p for p in experiment.iterdir() if p.is_dir() and (p / layout.MANIFEST).is_file()]
    return {read_run(p).manifest["scenario"]["experiment"]["cell"]: p for p in runs}


def test_released_vs_patch_matrix_observes_the_patch_and_caches_the_build(patched_tree, tmp_path, capsys):
    scenario = tmp_path / "patch.toml"
    scenario.write_text(SCENARIO.format(tree=patched_tree))
    assert main(["run", str(scenario), "--out", str(tmp_path / "runs")]) == 0
    experiment = Path(capsys.readouterr().out.strip().splitlines()[-1])
    cells = _cells(experiment)
    released, patched = cells["kube_source=none"], next(p for name, p in cells.items() if name != "kube_source=none")

    released_manifest = read_run(released).manifest
    assert released_manifest["versions"]["kube-apiserver"] == KUBE_VERSION
    assert "built_from" not in released_manifest["binaries"]["kube-apiserver"]
    assert MARKER not in (released / layout.LOGS / "kube-apiserver.log").read_text()

    manifest = read_run(patched).manifest
    # /version says it is v1.37.1 with uncommitted changes, and the patched line ran at startup.
    assert manifest["versions"]["kube-apiserver"] == f"{KUBE_VERSION}-dirty"
    assert MARKER in (patched / layout.LOGS / "kube-apiserver.log").read_text()
    binary = manifest["binaries"]["kube-apiserver"]
    built_from = binary["built_from"]
    assert built_from["source_dir"] == str(patched_tree)
    assert built_from["commit"] and built_from["diff_sha256"] and built_from["base_version"] == KUBE_VERSION
    assert binary["sha256"] != released_manifest["binaries"]["kube-apiserver"]["sha256"]

    # The same tree again: the cached build, nothing compiled.
    again = binaries.kube_apiserver(source=patched_tree)
    assert again.source == "cache" and str(again.path) == binary["path"]
    assert main(["binaries", "--kube-source", str(patched_tree)]) == 0
    out = capsys.readouterr().out
    assert f"{KUBE_VERSION}-dirty" in out and "cache" in out and built_from["diff_sha256"][:12] in out

    # Another patch is another build (its key only: building twice is too slow for CI).
    server = patched_tree / SERVER_GO
    server.write_text(server.read_text() + "// another patch\n")
    changed = kubesource.read_source(patched_tree, fallback_version=KUBE_VERSION)
    assert changed.commit == built_from["commit"] and changed.diff_sha256 != built_from["diff_sha256"]
    assert changed.cache_name != built_from["cache"]
