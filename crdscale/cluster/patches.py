"""Unified diffs applied to a released Kubernetes version's Go module sources.

A pull request's ``.diff`` (as a forge serves it: ``diff --git`` headers, renames,
new and deleted files) names files by their path in the kubernetes repository. Each
file belongs to one Go module: ``staging/src/k8s.io/<name>/...`` to ``k8s.io/<name>``,
anything else to ``k8s.io/kubernetes``. A released build (see
:func:`crdscale.cluster.binaries.kube_apiserver_program`) takes those modules from the
Go module cache (``k8s.io/kubernetes@v1.Y.Z``, ``k8s.io/<name>@v0.Y.Z``); a patched one
copies each touched module, applies the diff to the copy and ``replace``\\ s the module
with it. No kubernetes checkout is needed.

Three steps, each usable alone:

* :func:`read_diff` / :func:`parse_diff`: the files and hunks of a diff, and its sha256;
* :func:`check`: before anything is built (well under 5 s once the module cache holds
  the release's sources), refuse a diff that is empty, touches a file outside the modules
  the build uses, or does not apply -- one line naming the file and the hunk;
* :func:`patched_modules`: the patched copies, made once per (module, version, diffs)
  under crdscale's cache and moved into place atomically, module path -> directory.

Diffs are applied with ``git apply`` (outside any repository it is a strict ``patch``
that understands git's rename and mode headers).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from crdscale.cluster import gobuild
from crdscale.cluster.versions import staging_version
from crdscale.errors import UsageError
from crdscale.paths import cache_dir

log = logging.getLogger(__name__)

KUBERNETES_MODULE = "k8s.io/kubernetes"
STAGING_PREFIX = "staging/src/k8s.io/"
# Path components git apply strips from a file's path in the repository to get its path
# in the module: "a/" for k8s.io/kubernetes, "a/staging/src/k8s.io/<name>/" for staging.
_STRIP = {True: 5, False: 1}
# Never in a module zip (Go drops vendor/ of a module that is not the main one), so never built.
_OUTSIDE_PREFIXES = ("vendor/",)

_GIT_HEADER = re.compile(r"^diff --git (?P<a>\"?a/.+?\"?) (?P<b>\"?b/.+\"?)$")
_HUNK_HEADER = re.compile(r"^@@ -(?P<os>\d+)(?:,(?P<ol>\d+))? \+(?P<ns>\d+)(?:,(?P<nl>\d+))? @@")
_GIT_FAILED = re.compile(r"patch failed: (?P<path>.+):(?P<line>\d+)$")
_GIT_MISSING = re.compile(r"error: (?P<path>.+?): (?:No such file or directory|does not exist in index)$")
_GIT_EXISTS = re.compile(r"error: (?P<path>.+?): already exists in working directory$")


@dataclass(frozen=True)
class Hunk:
    """One ``@@ -old_start,old_lines +new_start,new_lines @@`` hunk (1-based, as in the diff)."""

    old_start: int
    old_lines: int
    new_start: int
    new_lines: int

    @property
    def header(self) -> str:
        return f"@@ -{self.old_start},{self.old_lines} +{self.new_start},{self.new_lines} @@"


@dataclass(frozen=True)
class FileChange:
    """One file of a diff, by its path in the kubernetes repository.

    Attributes:
        old_path: the path before (``None`` for a new file).
        new_path: the path after (``None`` for a deleted file).
        status: ``"modified"``, ``"added"``, ``"deleted"``, ``"renamed"`` or ``"copied"``.
        hunks: its hunks in order (none for a pure rename or a mode change).
        text: the file's section of the diff, headers included.
    """

    old_path: str | None
    new_path: str | None
    status: str
    hunks: tuple[Hunk, ...]
    text: str

    @property
    def path(self) -> str:
        """The path after the change (before, for a deleted file)."""
        return self.new_path or self.old_path or ""

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the change touches (both sides of a rename), each once."""
        return tuple(dict.fromkeys(p for p in (self.old_path, self.new_path) if p))


@dataclass(frozen=True)
class Diff:
    """A parsed unified diff: its name (the file's), sha256 of its bytes, and its files."""

    name: str
    sha256: str
    files: tuple[FileChange, ...]

    def modules(self) -> dict[str, list[FileChange]]:
        """Module path -> the changes to its files, in diff order."""
        by_module: dict[str, list[FileChange]] = {}
        for change in self.files:
            by_module.setdefault(change_module(change, self.name), []).append(change)
        return by_module

    def provenance(self) -> dict:
        """What a run records about this diff: name, sha256 and the files it touches."""
        return {"name": self.name, "sha256": self.sha256, "files": [c.path for c in self.files]}


def module_of(repo_path: str) -> tuple[str, str]:
    """The Go module holding ``repo_path`` (a path in the kubernetes repository) and the
    file's path inside it: ``staging/src/k8s.io/apiserver/pkg/x.go`` ->
    ``("k8s.io/apiserver", "pkg/x.go")``, ``pkg/features/kube_features.go`` ->
    ``("k8s.io/kubernetes", "pkg/features/kube_features.go")``."""
    if repo_path.startswith(STAGING_PREFIX):
        name, _, rest = repo_path[len(STAGING_PREFIX) :].partition("/")
        if name and rest:
            return f"k8s.io/{name}", rest
    return KUBERNETES_MODULE, repo_path


def change_module(change: FileChange, diff_name: str = "the diff") -> str:
    """The one module a file change belongs to; a rename across modules is refused."""
    modules = {module_of(p)[0] for p in change.paths}
    if len(modules) > 1:
        raise UsageError(
            f"{diff_name}: {change.old_path} -> {change.new_path} moves a file between Go modules "
            f"({' and '.join(sorted(modules))}); crdscale patches each module's sources separately"
        )
    return modules.pop()


def _strip_side(raw: str, prefix: str) -> str | None:
    raw = raw.strip()
    if raw.startswith('"') and raw.endswith('"'):
        raw = raw[1:-1].encode().decode("unicode_escape")
    if raw == "/dev/null":
        return None
    raw = raw.split("\t")[0]  # traditional diffs put a timestamp after a tab
    return raw[len(prefix) :] if raw.startswith(prefix) else raw


def parse_diff(text: str, name: str = "diff") -> Diff:
    """Parse the unified diff ``text`` (git-style as a forge serves ``<pull request>.diff``,
    or traditional ``--- a/x`` / ``+++ b/x`` sections; a ``.patch`` mail preamble is skipped).

    Raises :class:`UsageError` (one line) for an empty diff or one whose hunks are cut short.
    """
    sha = hashlib.sha256(text.encode()).hexdigest()
    lines = text.splitlines(keepends=True)
    files: list[FileChange] = []
    i = 0
    current: dict | None = None

    def finish(end: int) -> None:
        nonlocal current
        if current is None:
            return
        old, new, status = current["old"], current["new"], current["status"]
        if status == "modified":
            if old is None and new is not None:
                status = "added"
            elif new is None and old is not None:
                status = "deleted"
        section = "".join(lines[current["start"] : end])
        files.append(FileChange(old, new, status, tuple(current["hunks"]), section))
        current = None

    while i < len(lines):
        line = lines[i].rstrip("\r\n")
        git = _GIT_HEADER.match(line)
        if git:
            finish(i)
            current = {
                "start": i,
                "old": _strip_side(git["a"], "a/"),
                "new": _strip_side(git["b"], "b/"),
                "status": "modified",
                "hunks": [],
                "git": True,
                "seen_minus": False,
            }
            i += 1
            continue
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            if current is None or not current.get("git") or current["seen_minus"] or current["hunks"]:
                finish(i)
                current = {"start": i, "status": "modified", "hunks": [], "git": False}
            current["old"] = _strip_side(line[4:], "a/")
            current["new"] = _strip_side(lines[i + 1].rstrip("\r\n")[4:], "b/")
            current["seen_minus"] = True
            i += 2
            continue
        hunk = _HUNK_HEADER.match(line)
        if hunk and current is not None:
            h = Hunk(
                int(hunk["os"]),
                int(hunk["ol"]) if hunk["ol"] is not None else 1,
                int(hunk["ns"]),
                int(hunk["nl"]) if hunk["nl"] is not None else 1,
            )
            current["hunks"].append(h)
            old_left, new_left = h.old_lines, h.new_lines
            i += 1
            while (old_left > 0 or new_left > 0) and i < len(lines):
                body = lines[i][:1]
                if body in (" ", "\n", "\r"):
                    old_left, new_left = old_left - 1, new_left - 1
                elif body == "-":
                    old_left -= 1
                elif body == "+":
                    new_left -= 1
                elif body != "\\":
                    break
                i += 1
            while i < len(lines) and lines[i].startswith("\\"):  # "\ No newline at end of file"
                i += 1
            if old_left > 0 or new_left > 0:
                raise UsageError(
                    f"{name}: hunk {len(current['hunks'])} of {current['new'] or current['old']} is cut short"
                )
            continue
        if current is not None and current.get("git"):
            if line.startswith("new file mode"):
                current["status"], current["old"] = "added", None
            elif line.startswith("deleted file mode"):
                current["status"], current["new"] = "deleted", None
            elif line.startswith("rename from "):
                current["status"], current["old"] = "renamed", _strip_side(line[len("rename from ") :], "")
            elif line.startswith("rename to "):
                current["new"] = _strip_side(line[len("rename to ") :], "")
            elif line.startswith("copy from "):
                current["status"], current["old"] = "copied", _strip_side(line[len("copy from ") :], "")
            elif line.startswith("copy to "):
                current["new"] = _strip_side(line[len("copy to ") :], "")
        i += 1
    finish(len(lines))
    if not files:
        raise UsageError(f"{name}: an empty diff (no file changes in it)")
    return Diff(name, sha, tuple(files))


def read_diff(path: str | os.PathLike) -> Diff:
    """Read and parse the diff file ``path`` (named by its file name)."""
    p = Path(path).expanduser()
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read diff {p}: {getattr(err, 'strerror', None) or err}") from None
    return parse_diff(text, p.name)


# ---------------------------------------------------------------- module sources


def module_version(module: str, kube_version: str) -> str:
    """The version of ``module`` released with k8s.io/kubernetes ``kube_version``: the same
    for k8s.io/kubernetes, ``v0.Y.Z`` for a staging module."""
    return kube_version if module == KUBERNETES_MODULE else staging_version(kube_version)


def go_module_cache() -> Path:
    """Go's module cache (``go env GOMODCACHE``, :func:`crdscale.cluster.gobuild.go_env`)."""
    return Path(gobuild.go_env("GOMODCACHE")["GOMODCACHE"] or Path.home() / "go" / "pkg" / "mod")


def module_source(module: str, version: str, *, download: bool = True, timeout_s: float = 600) -> Path:
    """The directory of ``module@version`` in the Go module cache (read-only files), downloaded
    first when missing and ``download`` (``go mod download``, within ``timeout_s``).

    Raises :class:`UsageError` when it is not there and cannot be had.
    """
    found = go_module_cache() / f"{gobuild.escape_module_path(module)}@{version}"
    if (found / "go.mod").is_file():
        return found
    if not download:
        raise UsageError(f"{module} {version} is not in the Go module cache ({found})")
    info = gobuild.module_download(module, version, timeout_s=timeout_s)
    if info.get("Error") or not info.get("Dir"):
        reason = (info.get("Error") or "no directory").splitlines()[-1]
        raise UsageError(f"cannot get the sources of {module} {version}: {reason}")
    return Path(info["Dir"])


def staging_modules(kube_version: str, *, download: bool = True) -> set[str]:
    """The staging modules k8s.io/kubernetes ``kube_version`` builds with (its go.mod's
    ``=> ./staging/...`` replacements)."""
    gomod = go_module_cache() / f"{KUBERNETES_MODULE}@{kube_version}" / "go.mod"
    if not gomod.is_file():
        if not download:
            raise UsageError(f"{KUBERNETES_MODULE} {kube_version} is not in the Go module cache")
        # Its go.mod alone (go list -m fetches the .mod, not the 40 MB zip): a second or two.
        info = gobuild.module_info(KUBERNETES_MODULE, kube_version, timeout_s=30)
        if info.get("Error") or not info.get("GoMod"):
            raise UsageError(f"cannot read the go.mod of {KUBERNETES_MODULE} {kube_version}: {info.get('Error')}")
        gomod = Path(info["GoMod"])
    return set(re.findall(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/", gomod.read_text(), re.M))


def _outside(change: FileChange, module: str, used: set[str]) -> str | None:
    """Why ``change`` is outside the modules the build uses, or ``None``."""
    for path in change.paths:
        if module != KUBERNETES_MODULE and module not in used:
            return f"{path} is in {module}, which kube-apiserver's build does not use"
        if module == KUBERNETES_MODULE and path.startswith(STAGING_PREFIX):
            return f"{path} is under {STAGING_PREFIX} but names no module"
        if module == KUBERNETES_MODULE and path.startswith(_OUTSIDE_PREFIXES):
            return f"{path} is in vendor/, which Go does not build for a module that is not the main one"
    return None


def _section_for_module(changes: Sequence[FileChange]) -> str:
    return "".join(c.text if c.text.endswith("\n") else c.text + "\n" for c in changes)


def _git_apply(directory: Path, text: str, strip: int, *, check: bool) -> subprocess.CompletedProcess:
    cmd = ["git", "apply", f"-p{strip}", "--whitespace=nowarn", "--verbose"]
    if check:
        cmd.append("--check")
    # Outside any repository git apply works on plain files; the ceiling keeps it from finding
    # (and applying relative to) a repository that happens to enclose the directory.
    env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(directory.parent), LC_ALL="C")
    try:
        return subprocess.run(cmd, cwd=directory, input=text, capture_output=True, text=True, timeout=120, env=env)
    except FileNotFoundError:
        raise UsageError("git is not installed (crdscale applies diffs with git apply)") from None


def _apply_failure(
    result: subprocess.CompletedProcess, diff: Diff, changes: Sequence[FileChange], module: str, version: str
) -> UsageError:
    """One line naming the file and hunk git apply stopped at."""
    out = result.stderr + result.stdout
    staged = module != KUBERNETES_MODULE
    prefix = f"{STAGING_PREFIX}{module.removeprefix('k8s.io/')}/" if staged else ""
    where = f"{module} {version}"
    for line in out.splitlines():
        m = _GIT_FAILED.search(line)
        if m:
            repo_path = prefix + m["path"]
            start = int(m["line"])
            change = next((c for c in changes if repo_path in c.paths), None)
            if change:
                index = next((n for n, h in enumerate(change.hunks, 1) if h.old_start == start), None)
                if index is not None:
                    hunk = change.hunks[index - 1]
                    return UsageError(
                        f"{diff.name}: hunk {index} of {repo_path} ({hunk.header}) does not apply to {where}"
                    )
            return UsageError(f"{diff.name}: {repo_path} does not apply to {where} at its line {start}")
        m = _GIT_MISSING.search(line)
        if m:
            return UsageError(f"{diff.name}: {prefix + m['path']} is not in {where} (the diff changes it)")
        m = _GIT_EXISTS.search(line)
        if m:
            return UsageError(f"{diff.name}: {prefix + m['path']} already exists in {where} (the diff adds it)")
    last = next((ln for ln in reversed(out.splitlines()) if ln.startswith("error")), out.strip() or "git apply failed")
    return UsageError(f"{diff.name}: does not apply to {where}: {last.removeprefix('error: ')}")


# What a diff adds that a check before the build cannot find in the release: a feature gate (its
# declaration, as every kube_features.go writes one) and a flag (a pflag registration). A pull request
# that adds a gate or a flag is A/B'd with it set; kube-apiserver itself checks both when it starts.
_ADDED_GATE = re.compile(r'^\+\s*(\w+)\s+featuregate\.Feature\s*=\s*"(\w+)"', re.MULTILINE)
_ADDED_FLAG = re.compile(r'^\+.*\b(\w*)VarP?\([^"\n]*"([a-z0-9][a-z0-9-]*)"', re.MULTILINE)


def added_gates(diffs: Sequence[Diff]) -> list[str]:
    """The feature gates the diffs declare (``Name featuregate.Feature = "Name"`` on an added line)."""
    return list(dict.fromkeys(m.group(2) for d in diffs for f in d.files for m in _ADDED_GATE.finditer(f.text)))


def added_flags(diffs: Sequence[Diff]) -> dict[str, str]:
    """The command-line flags the diffs register (``fs.StringVar(&o.X, "name", ...)`` on an added line):
    name -> ``""`` for a boolean flag (it takes no separate value), ``"value"`` otherwise."""
    found: dict[str, str] = {}
    for d in diffs:
        for f in d.files:
            for m in _ADDED_FLAG.finditer(f.text):
                found.setdefault(m.group(2), "" if m.group(1) == "Bool" else "value")
    return found


def check(diffs: Sequence[Diff], kube_version: str, *, download: bool = True) -> dict[str, list[str]]:
    """Refuse, as one :class:`UsageError` line, diffs that cannot be built on ``kube_version``:
    a file outside the modules kube-apiserver's build uses, or a hunk that does not apply
    (its file and hunk named). Diffs apply in order, so a later one may build on an earlier
    one. Only the touched files are copied (to a temporary directory), so this takes well
    under a second once the module cache holds the touched modules (``download``: fetch the
    missing ones). Returns module -> the repository paths the diffs touch in it.
    """
    used = staging_modules(kube_version, download=download)
    touched: dict[str, list[str]] = {}
    plan = _steps_by_module(diffs)
    for module, steps in plan.items():
        for diff, changes in steps:
            for change in changes:
                why = _outside(change, module, used)
                if why:
                    raise UsageError(f"{diff.name}: {why}")
            touched.setdefault(module, []).extend(p for c in changes for p in c.paths)
    for module, steps in plan.items():
        version = module_version(module, kube_version)
        source = module_source(module, version, download=download)
        strip = _STRIP[module != KUBERNETES_MODULE]
        with tempfile.TemporaryDirectory(prefix="crdscale-check-") as tmp:
            work = Path(tmp) / "m"
            work.mkdir()
            for path in dict.fromkeys(touched[module]):
                inside = module_of(path)[1]
                if (source / inside).is_file():
                    (work / inside).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source / inside, work / inside)
            for diff, changes in steps:
                result = _git_apply(work, _section_for_module(changes), strip, check=False)
                if result.returncode != 0:
                    raise _apply_failure(result, diff, changes, module, version)
    return {m: list(dict.fromkeys(paths)) for m, paths in touched.items()}


def patched_modules_dir() -> Path:
    """Where patched module copies live: ``<cache>/patched-modules``."""
    return cache_dir() / "patched-modules"


def patched_module_paths(diffs: Sequence[Diff], kube_version: str) -> dict[str, Path]:
    """Module path -> where the patched copy of its ``kube_version`` sources is (or will be), for
    each module the ``diffs`` touch: named by module, version and the sha256 of what is applied
    to it, so the same diffs on the same release share one copy."""
    out: dict[str, Path] = {}
    for module, steps in _steps_by_module(diffs).items():
        version = module_version(module, kube_version)
        key = hashlib.sha256(
            "\n".join([module, version, *(_section_for_module(c) for _, c in steps)]).encode()
        ).hexdigest()[:16]
        out[module] = patched_modules_dir() / f"{gobuild.escape_module_path(module).replace('/', '_')}@{version}-{key}"
    return out


def _steps_by_module(diffs: Sequence[Diff]) -> dict[str, list[tuple[Diff, list[FileChange]]]]:
    by_module: dict[str, list[tuple[Diff, list[FileChange]]]] = {}
    for diff in diffs:
        for module, changes in diff.modules().items():
            by_module.setdefault(module, []).append((diff, changes))
    return by_module


def patched_modules(diffs: Sequence[Diff], kube_version: str) -> dict[str, Path]:
    """Make the patched copies :func:`patched_module_paths` names (the diffs applied in order)
    and return them. Each copy is made once, in a temporary directory beside it, and renamed
    into place only when every diff applied: a copy that exists is always complete.
    """
    check(diffs, kube_version)
    paths = patched_module_paths(diffs, kube_version)
    root = patched_modules_dir()
    root.mkdir(parents=True, exist_ok=True)
    for module, steps in _steps_by_module(diffs).items():
        final = paths[module]
        version = module_version(module, kube_version)
        with open(root / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if (final / "go.mod").is_file():
                continue
            source = module_source(module, version)
            log.info(f"copying {module} {version} to patch it: {final}")
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
            try:
                work = tmp / "m"
                shutil.copytree(source, work, symlinks=True)
                _make_writable(work)
                strip = _STRIP[module != KUBERNETES_MODULE]
                for diff, changes in steps:
                    result = _git_apply(work, _section_for_module(changes), strip, check=False)
                    if result.returncode != 0:
                        raise _apply_failure(result, diff, changes, module, version)
                os.replace(work, final)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return paths


def _make_writable(tree: Path) -> None:
    """The module cache's files are read-only (0444, directories 0555); the copy must be patched."""
    for dirpath, _dirnames, filenames in os.walk(tree):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, 0o644)


@dataclass(frozen=True)
class BuildChanges:
    """What a build changes on a released kube-apiserver: diffs (applied in order) and Go build
    tags. The empty value builds the release as it is.

    Attributes:
        diffs: parsed diffs (:func:`read_diff`).
        tags: ``go build -tags`` values, checked by :func:`crdscale.cluster.gobuild.check_build_tags`.
    """

    diffs: tuple[Diff, ...] = ()
    tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "diffs", tuple(self.diffs))
        object.__setattr__(self, "tags", gobuild.check_build_tags(self.tags))

    def __bool__(self) -> bool:
        return bool(self.diffs or self.tags)

    @property
    def sha256(self) -> str:
        """One sha256 over each diff's sha256 (in order) and the tags (sorted): the cache key."""
        parts = [f"diff {d.sha256}" for d in self.diffs] + [f"tag {t}" for t in sorted(self.tags)]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()

    def cache_name(self, kube_version: str) -> str:
        """The build's cache directory name: the version alone for no changes, else
        ``v1.37.1-changes-<sha256, 12 hex>``."""
        return f"{kube_version}-changes-{self.sha256[:12]}" if self else kube_version

    def provenance(self) -> dict:
        """What a run records: each diff's name, sha256 and touched files, and the build tags."""
        return {
            "diffs": [d.provenance() for d in self.diffs],
            "build_tags": list(self.tags),
            "sha256": self.sha256,
        }


def build_changes(diff_paths: Sequence[str | os.PathLike] = (), tags: Sequence[str] = ()) -> BuildChanges:
    """:class:`BuildChanges` from diff files (read and parsed) and build tags (checked)."""
    return BuildChanges(tuple(read_diff(p) for p in diff_paths), tuple(tags))
