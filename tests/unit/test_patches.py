"""Diffs on a released version's module sources: parsing, module mapping, the check before a
build, the patched copies, and build tags. A fake module cache stands in for Go's."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from crdscale.cluster import binaries, gobuild, patches
from crdscale.errors import UsageError

DATA = Path(__file__).parent.parent / "data" / "patches"

HANDLER = "pkg/apiserver/handler.go"
HANDLER_TEXT = "package apiserver\n\n// one\nfunc a() {}\n\n// two\nfunc b() {}\n"
FEATURES = "pkg/features/kube_features.go"
FEATURES_TEXT = "package features\n\nconst A = 1\n"

MODIFY_STAGING = """\
diff --git a/staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/handler.go b/staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/handler.go
index 1111111..2222222 100644
--- a/staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/handler.go
+++ b/staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/handler.go
@@ -1,4 +1,4 @@
 package apiserver
<SP>
-// one
+// one, changed
 func a() {}
@@ -5,3 +5,4 @@ func a() {}
<SP>
 // two
 func b() {}
+func c() {}
""".replace("<SP>", " ")  # a context line that is one space (kept out of the source: editors strip it)

NEW_RENAME_DELETE = """\
diff --git a/pkg/features/new.go b/pkg/features/new.go
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/pkg/features/new.go
@@ -0,0 +1 @@
+package features
diff --git a/pkg/features/kube_features.go b/pkg/features/renamed.go
similarity index 100%
rename from pkg/features/kube_features.go
rename to pkg/features/renamed.go
diff --git a/staging/src/k8s.io/apiserver/pkg/gone.go b/staging/src/k8s.io/apiserver/pkg/gone.go
deleted file mode 100644
index 4444444..0000000
--- a/staging/src/k8s.io/apiserver/pkg/gone.go
+++ /dev/null
@@ -1 +0,0 @@
-package pkg
"""


@pytest.fixture
def module_cache(tmp_path, monkeypatch):
    """A read-only module cache holding k8s.io/kubernetes v1.37.1 and two staging modules."""
    root = tmp_path / "gomodcache"
    files = {
        ("k8s.io/kubernetes", "v1.37.1"): {
            "go.mod": "module k8s.io/kubernetes\n\nreplace (\n"
            "\tk8s.io/apiextensions-apiserver => ./staging/src/k8s.io/apiextensions-apiserver\n"
            "\tk8s.io/apiserver => ./staging/src/k8s.io/apiserver\n)\n",
            FEATURES: FEATURES_TEXT,
        },
        ("k8s.io/apiextensions-apiserver", "v0.37.1"): {
            "go.mod": "module k8s.io/apiextensions-apiserver\n",
            HANDLER: HANDLER_TEXT,
        },
        ("k8s.io/apiserver", "v0.37.1"): {"go.mod": "module k8s.io/apiserver\n", "pkg/gone.go": "package pkg\n"},
    }
    for (module, version), contents in files.items():
        for rel, text in contents.items():
            path = root / f"{module}@{version}" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for path in sorted(root.rglob("*"), reverse=True):  # read-only, as Go leaves its cache
        path.chmod(0o555 if path.is_dir() else 0o444)
    monkeypatch.setattr(patches, "go_module_cache", lambda: root)
    monkeypatch.setenv("CRDSCALE_CACHE", str(tmp_path / "cache"))
    yield root
    for path in root.rglob("*"):
        path.chmod(0o755)


@pytest.mark.parametrize(
    "path, module, inside",
    [
        (
            "staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go",
            "k8s.io/apiserver",
            "pkg/storage/cacher/watch_cache.go",
        ),
        ("staging/src/k8s.io/api/core/v1/types.go", "k8s.io/api", "core/v1/types.go"),
        ("pkg/features/kube_features.go", "k8s.io/kubernetes", "pkg/features/kube_features.go"),
        ("cmd/kube-apiserver/app/server.go", "k8s.io/kubernetes", "cmd/kube-apiserver/app/server.go"),
        ("staging/README.md", "k8s.io/kubernetes", "staging/README.md"),
    ],
)
def test_module_of_maps_staging_and_the_rest(path, module, inside):
    assert patches.module_of(path) == (module, inside)


def test_parse_modified_file_with_two_hunks():
    diff = patches.parse_diff(MODIFY_STAGING, "pr.diff")
    (change,) = diff.files
    assert change.status == "modified"
    assert change.path == "staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/handler.go"
    assert [h.header for h in change.hunks] == ["@@ -1,4 +1,4 @@", "@@ -5,3 +5,4 @@"]
    assert list(diff.modules()) == ["k8s.io/apiextensions-apiserver"]
    assert len(diff.sha256) == 64


def test_parse_new_renamed_and_deleted_files():
    diff = patches.parse_diff(NEW_RENAME_DELETE, "x.diff")
    statuses = [(c.status, c.old_path, c.new_path) for c in diff.files]
    assert statuses == [
        ("added", None, "pkg/features/new.go"),
        ("renamed", "pkg/features/kube_features.go", "pkg/features/renamed.go"),
        ("deleted", "staging/src/k8s.io/apiserver/pkg/gone.go", None),
    ]
    assert {m: [c.path for c in cs] for m, cs in diff.modules().items()} == {
        "k8s.io/kubernetes": ["pkg/features/new.go", "pkg/features/renamed.go"],
        "k8s.io/apiserver": ["staging/src/k8s.io/apiserver/pkg/gone.go"],
    }
    assert diff.provenance()["files"] == [
        "pkg/features/new.go",
        "pkg/features/renamed.go",
        "staging/src/k8s.io/apiserver/pkg/gone.go",
    ]


def test_traditional_diff_and_mail_preamble_are_read():
    text = "From abc Mon Sep 17 00:00:00 2001\nSubject: x\n---\n pkg/a.go | 1 +\n\n" + (
        "--- a/pkg/a.go\n+++ b/pkg/a.go\n@@ -1 +1,2 @@\n x\n+y\n"
    )
    (change,) = patches.parse_diff(text).files
    assert (change.path, change.status, len(change.hunks)) == ("pkg/a.go", "modified", 1)


@pytest.mark.parametrize("text", ["", "\n", "just some words\n"])
def test_empty_diff_is_refused(text):
    with pytest.raises(UsageError, match="empty diff"):
        patches.parse_diff(text, "empty.diff")


def test_cut_short_hunk_is_refused():
    with pytest.raises(UsageError, match="hunk 1 of pkg/a.go is cut short"):
        patches.parse_diff("--- a/pkg/a.go\n+++ b/pkg/a.go\n@@ -1,3 +1,3 @@\n x\n")


def test_rename_across_modules_is_refused():
    text = (
        "diff --git a/pkg/a.go b/staging/src/k8s.io/apiserver/a.go\nsimilarity index 100%\n"
        "rename from pkg/a.go\nrename to staging/src/k8s.io/apiserver/a.go\n"
    )
    with pytest.raises(UsageError, match="moves a file between Go modules"):
        patches.parse_diff(text, "m.diff").modules()


def test_check_accepts_diffs_that_apply(module_cache):
    diff = patches.parse_diff(MODIFY_STAGING, "pr.diff")
    other = patches.parse_diff(NEW_RENAME_DELETE, "x.diff")
    started = time.monotonic()
    touched = patches.check([diff, other], "v1.37.1", download=False)
    assert time.monotonic() - started < 5
    assert set(touched) == {"k8s.io/apiextensions-apiserver", "k8s.io/kubernetes", "k8s.io/apiserver"}


def test_check_names_file_and_hunk_that_does_not_apply(module_cache):
    bad = MODIFY_STAGING.replace(" // two\n", " // three\n")
    with pytest.raises(UsageError) as err:
        patches.check([patches.parse_diff(bad, "pr.diff")], "v1.37.1", download=False)
    assert str(err.value) == (
        "pr.diff: hunk 2 of staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/handler.go "
        "(@@ -5,3 +5,4 @@) does not apply to k8s.io/apiextensions-apiserver v0.37.1"
    )


def test_check_names_a_missing_file(module_cache):
    text = MODIFY_STAGING.replace("handler.go", "absent.go")
    with pytest.raises(UsageError, match=r"pkg/apiserver/absent\.go is not in k8s.io/apiextensions-apiserver"):
        patches.check([patches.parse_diff(text, "pr.diff")], "v1.37.1", download=False)


def test_later_diff_builds_on_earlier_one(module_cache):
    first = patches.parse_diff(MODIFY_STAGING, "1.diff")
    second = patches.parse_diff(
        MODIFY_STAGING.replace("-// one\n+// one, changed\n", "-// one, changed\n+// one, again\n")
        .replace("@@ -5,3 +5,4 @@ func a() {}\n \n // two\n func b() {}\n+func c() {}\n", "")
        .replace(" // two\n", ""),
        "2.diff",
    )
    patches.check([first, second], "v1.37.1", download=False)
    with pytest.raises(UsageError, match="2.diff: hunk 1"):
        patches.check([second], "v1.37.1", download=False)


@pytest.mark.parametrize(
    "path, why",
    [
        ("staging/src/k8s.io/sample-apiserver/main.go", "k8s.io/sample-apiserver, which kube-apiserver's build"),
        ("vendor/github.com/x/y.go", "vendor/"),
    ],
)
def test_check_refuses_files_outside_the_build(module_cache, path, why):
    text = f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(UsageError, match=why):
        patches.check([patches.parse_diff(text, "o.diff")], "v1.37.1", download=False)


def test_patched_modules_copies_applies_and_reuses(module_cache):
    diff = patches.parse_diff(MODIFY_STAGING, "pr.diff")
    dirs = patches.patched_modules([diff], "v1.37.1")
    ((module, copy),) = dirs.items()
    assert module == "k8s.io/apiextensions-apiserver"
    assert copy.name.startswith("k8s.io_apiextensions-apiserver@v0.37.1-")
    assert "// one, changed" in (copy / HANDLER).read_text()
    assert "func c() {}" in (copy / HANDLER).read_text()
    source = module_cache / "k8s.io/apiextensions-apiserver@v0.37.1" / HANDLER
    assert source.read_text() == HANDLER_TEXT  # the module cache is left alone
    assert not [p for p in copy.parent.iterdir() if p.name.startswith(".tmp-")]
    stamp = (copy / HANDLER).stat().st_mtime_ns
    assert patches.patched_modules([diff], "v1.37.1") == dirs
    assert (copy / HANDLER).stat().st_mtime_ns == stamp


def test_kube_apiserver_program_replaces_patched_modules_and_passes_tags(module_cache, tmp_path):
    diff = patches.parse_diff(MODIFY_STAGING, "pr.diff")
    changes = patches.BuildChanges((diff,), ("fieldsv1string",))
    gomod = module_cache / "k8s.io/kubernetes@v1.37.1" / "go.mod"
    program = binaries.kube_apiserver_program("v1.37.1", module_info={"GoMod": str(gomod)}, changes=changes)
    text = program.go_mod()
    copy = patches.patched_module_paths([diff], "v1.37.1")["k8s.io/apiextensions-apiserver"]
    assert f"\tk8s.io/apiextensions-apiserver => {copy}" in text
    assert "\tk8s.io/apiserver => k8s.io/apiserver v0.37.1" in text
    assert "k8s.io/kubernetes v1.37.1" in text  # the versions stay the release's: Go's cache is reused
    assert program.tags == ("fieldsv1string",)
    assert program.out_dir.name == f"v1.37.1-changes-{changes.sha256[:12]}"
    assert "-X k8s.io/component-base/version.gitTreeState=dirty" in program.ldflags
    plain = binaries.kube_apiserver_program("v1.37.1", module_info={"GoMod": str(gomod)})
    assert plain.out_dir.name == "v1.37.1" and plain.tags == ()


def test_cache_key_covers_each_diff_and_the_tags():
    a = patches.parse_diff(MODIFY_STAGING, "a.diff")
    b = patches.parse_diff(NEW_RENAME_DELETE, "b.diff")
    keys = {
        patches.BuildChanges().cache_name("v1.37.1"),
        patches.BuildChanges((a,)).cache_name("v1.37.1"),
        patches.BuildChanges((a, b)).cache_name("v1.37.1"),
        patches.BuildChanges((b, a)).cache_name("v1.37.1"),
        patches.BuildChanges((a,), ("x",)).cache_name("v1.37.1"),
    }
    assert len(keys) == 5
    assert patches.BuildChanges().cache_name("v1.37.1") == "v1.37.1"
    assert patches.BuildChanges(tags=("b", "a")).sha256 == patches.BuildChanges(tags=("a", "b")).sha256
    record = patches.BuildChanges((a,), ("x",)).provenance()
    assert record["diffs"][0]["name"] == "a.diff" and record["build_tags"] == ["x"]


@pytest.mark.parametrize("tags, expected", [(["fieldsv1string"], ("fieldsv1string",)), ("a,b.c,a", ("a", "b.c"))])
def test_build_tags_accepted(tags, expected):
    assert gobuild.check_build_tags(tags) == expected


@pytest.mark.parametrize("tag", ["with-dash", "two words", "", "a,b", "ünï"])
def test_build_tags_with_characters_go_refuses(tag):
    with pytest.raises(UsageError, match="letters, digits, underscores and dots"):
        gobuild.check_build_tags([tag])


def test_changes_refuse_a_given_binary():
    with pytest.raises(UsageError, match="released version"):
        binaries.kube_apiserver("1.37.1", binary="/bin/true", changes=patches.BuildChanges(tags=("x",)))


@pytest.mark.parametrize("name", ["known-cost-v1.37.1.diff", "noop-v1.37.1.diff"])
def test_fixture_diffs_parse(name):
    diff = patches.read_diff(DATA / name)
    assert diff.files and all(c.status == "modified" for c in diff.files)
    assert set(diff.modules()) <= {"k8s.io/apiserver", "k8s.io/apiextensions-apiserver"}


def test_fixture_diffs_apply_to_v1_37_1_when_its_sources_are_cached():
    try:
        patches.module_source("k8s.io/kubernetes", "v1.37.1", download=False)
        patches.module_source("k8s.io/apiserver", "v0.37.1", download=False)
        patches.module_source("k8s.io/apiextensions-apiserver", "v0.37.1", download=False)
    except (UsageError, gobuild.BinaryError):
        pytest.skip("v1.37.1's sources are not in the Go module cache")
    for name in ("known-cost-v1.37.1.diff", "noop-v1.37.1.diff"):  # each alone: they are the two arms
        started = time.monotonic()
        patches.check([patches.read_diff(DATA / name)], "v1.37.1", download=False)
        assert time.monotonic() - started < 5


def test_git_is_there():
    assert shutil.which("git"), "patches are applied with git apply"


def test_first_compiler_error_of_the_last_step():
    log = (
        "$ go build -o old ./cmd/x\nold/file.go:1:1: an error of an earlier build\n"
        "$ go mod tidy\n$ go build -trimpath -o dir/ ./cmd/kube-apiserver\n"
        "# k8s.io/apiserver/pkg/storage/cacher\n"
        "k8s.io/apiserver@v0.37.1/pkg/storage/cacher/watch_cache.go:226:7: undefined: store.Nope\n"
        "k8s.io/apiserver@v0.37.1/pkg/storage/cacher/watch_cache.go:590:4: unknown field Nope\n"
    )
    assert gobuild.first_compiler_error(log) == (
        "k8s.io/apiserver@v0.37.1/pkg/storage/cacher/watch_cache.go:226:7: undefined: store.Nope"
    )
    assert gobuild.first_compiler_error("$ go build\nno Go files\n") is None


def test_failed_build_names_the_first_compiler_error_and_caches_nothing(tmp_path):
    if not shutil.which("go"):
        pytest.skip("needs Go")
    program = gobuild.GoProgram(
        binary_name="broken",
        out_dir=tmp_path / "out",
        go_directive="go 1.22",
        requires={},
        main_go="package main\n\nfunc main() { undefinedThing() }\n",
    )
    with pytest.raises(gobuild.BinaryError, match=r"main\.go:3:\d+: undefined: undefinedThing"):
        gobuild.build(program)
    assert not program.binary.exists()
    assert not (program.out_dir / ".partial" / "broken").exists()
