"""A local Kubernetes source tree (a researcher's checkout with a patch) as a build input.

kube-apiserver built from such a tree is cached under a name that says what
went in, so an unchanged tree is never rebuilt and a changed one always is:

* a git checkout: its commit plus the sha256 of everything not committed
  (``git diff HEAD`` and the untracked, not ignored, files);
* any other tree (a source tarball, a copy of the module zip): the sha256 of
  its files;
* the release the tree is based on: the nearest tag (``git describe``), else
  the version the caller names. Without ``staging/src/k8s.io`` in the tree
  (the module zip has none) the staging modules are that release's published
  ones, so it decides what is built.

How the tree is built is :func:`crdscale.cluster.binaries.kube_apiserver_source_program`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from crdscale.errors import BinaryError, UsageError
from crdscale.fsutil import sha256_file

KUBERNETES_MODULE = "k8s.io/kubernetes"
STAGING_DIR = "staging/src/k8s.io"
# Never part of a tree's content hash: the VCS and the Kubernetes build's own output.
UNHASHED_DIRS = frozenset({".git", "_output"})
EPOCH = "1970-01-01T00:00:00Z"

_MODULE_LINE = re.compile(r"^module\s+(\S+)", re.M)
# `git describe` past a tag: v1.37.1-3-g0123456789abcd (the tag itself may hold dashes: v1.38.0-alpha.0).
_DESCRIBE_DISTANCE = re.compile(r"^(?P<tag>.+)-(?P<count>\d+)-g(?P<hash>[0-9a-f]+)$")


@dataclass(frozen=True)
class KubeSource:
    """What a kube-apiserver built from a source tree is built from.

    Attributes:
        dir: the tree, absolute.
        commit: HEAD of a git checkout; ``None`` for other trees.
        diff_sha256: sha256 of a git checkout's uncommitted changes; ``None`` when clean or not git.
        content_sha256: sha256 of the files of a tree that is not a git checkout.
        base_version: the release the tree is based on, e.g. ``v1.37.1``.
        base_version_from: ``"git describe"`` or ``"given"`` (no tag to describe: the caller's version).
        version: what ``/version`` will report, in Kubernetes' own format
            (``v1.37.1-3+0123456789abcd-dirty``; ``v1.37.1+files.0123456789ab`` for a tree without git).
        commit_date: the commit's date (UTC), the build date ``/version`` reports; the epoch without git.
        staging_in_tree: the tree has ``staging/src/k8s.io`` (a git checkout does, the module zip does not).
    """

    dir: Path
    commit: str | None
    diff_sha256: str | None
    content_sha256: str | None
    base_version: str
    base_version_from: str
    version: str
    commit_date: str
    staging_in_tree: bool

    @property
    def dirty(self) -> bool:
        """Built from something other than a commit (uncommitted changes, or no git at all)."""
        return self.commit is None or self.diff_sha256 is not None

    @property
    def cache_name(self) -> str:
        """The build's cache directory name: ``source-v1.37.1-g0123456789ab`` for a clean commit,
        ``...-dirty-<diff sha256, 12 hex>`` with uncommitted changes, ``source-v1.37.1-files-<12 hex>``
        without git. The base release is part of it because it changes what is built."""
        if self.commit is None:
            return f"source-{self.base_version}-files-{self.content_sha256[:12]}"
        name = f"source-{self.base_version}-g{self.commit[:12]}"
        return f"{name}-dirty-{self.diff_sha256[:12]}" if self.diff_sha256 else name

    def facts(self) -> dict:
        """Plain data for manifests and the cache directory's ``source.json``."""
        return {
            "source_dir": str(self.dir),
            "commit": self.commit,
            "diff_sha256": self.diff_sha256,
            "content_sha256": self.content_sha256,
            "base_version": self.base_version,
            "base_version_from": self.base_version_from,
            "version": self.version,
            "staging": "tree" if self.staging_in_tree else "published modules of the base version",
            "cache": self.cache_name,
        }


def describe_build(facts: dict) -> str:
    """One line from :meth:`KubeSource.facts` (as a run manifest records them): ``built from
    DIR at commit 0123456789ab + uncommitted diff sha256 89abcdef0123 (base v1.37.1)``."""
    if facts.get("commit"):
        what = f"commit {facts['commit'][:12]}"
        if facts.get("diff_sha256"):
            what += f" + uncommitted diff sha256 {facts['diff_sha256'][:12]}"
    else:
        what = f"files sha256 {str(facts.get('content_sha256'))[:12]} (no git)"
    return f"built from {facts.get('source_dir')} at {what} (base {facts.get('base_version')})"


def check_tree(path: str | os.PathLike) -> Path:
    """``path`` made absolute, after checking it is a Kubernetes source tree (a go.mod for
    ``k8s.io/kubernetes`` and ``cmd/kube-apiserver``). Raises :class:`UsageError` (one line) if not."""
    tree = Path(path).expanduser().absolute()
    if not tree.is_dir():
        raise UsageError(f"{tree} is not a directory (expected a Kubernetes source tree)")
    try:
        module = _MODULE_LINE.search((tree / "go.mod").read_text(errors="replace"))
    except OSError:
        module = None
    if not module or module.group(1) != KUBERNETES_MODULE or not (tree / "cmd" / "kube-apiserver").is_dir():
        raise UsageError(
            f"{tree} is not a Kubernetes source tree (expected a go.mod for module "
            f"{KUBERNETES_MODULE} and cmd/kube-apiserver)"
        )
    return tree


def read_source(path: str | os.PathLike, *, fallback_version: str) -> KubeSource:
    """Identify the tree at ``path`` (checked with :func:`check_tree`).

    ``fallback_version`` (``v1.37.1``) is the base release when the tree has no
    tag to describe (not a git checkout, or one without tags). Takes a few
    seconds on a full Kubernetes checkout (``git diff``) or to read a tree without git.
    """
    tree = check_tree(path)
    staging_in_tree = (tree / STAGING_DIR).is_dir()
    if not _is_git_toplevel(tree):
        content = files_sha256(tree)
        return KubeSource(
            tree,
            None,
            None,
            content,
            fallback_version,
            "given",
            f"{fallback_version}+files.{content[:12]}",
            EPOCH,
            staging_in_tree,
        )
    commit = _git(tree, "rev-parse", "HEAD").strip()
    diff = uncommitted_sha256(tree)
    commit_date = (
        _git(tree, "log", "-1", "--format=%cd", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", env={"TZ": "UTC"}).strip()
        or EPOCH
    )
    describe = _git(tree, "describe", "--tags", "--match=v[0-9]*", "--abbrev=14", "HEAD", check=False).strip()
    if describe:
        base, base_from = describe_tag(describe), "git describe"
        version = kubernetes_git_version(describe, dirty=diff is not None)
    else:  # a shallow clone without tags: say which commit, on the caller's base
        base, base_from = fallback_version, "given"
        version = f"{fallback_version}+{commit[:14]}" + ("-dirty" if diff else "")
    return KubeSource(tree, commit, diff, None, base, base_from, version, commit_date, staging_in_tree)


def describe_tag(describe: str) -> str:
    """The tag in ``git describe`` output: ``v1.37.1-3-g0123456789abcd`` -> ``v1.37.1``."""
    m = _DESCRIBE_DISTANCE.match(describe)
    return m.group("tag") if m else describe


def kubernetes_git_version(describe: str, *, dirty: bool) -> str:
    """``git describe --tags --abbrev=14`` output as Kubernetes' hack/lib/version.sh turns it into
    a semantic version: ``v1.37.1-3-g0123…`` -> ``v1.37.1-3+0123…``, ``v1.38.0-alpha.0-12-g0123…``
    -> ``v1.38.0-alpha.0.12+0123…``, plus ``-dirty`` with uncommitted changes."""
    m = _DESCRIBE_DISTANCE.match(describe)
    if not m:
        version = describe
    elif "-" in m.group("tag"):  # a pre-release tag: the distance extends the pre-release
        version = f"{m.group('tag')}.{m.group('count')}+{m.group('hash')}"
    else:
        version = f"{m.group('tag')}-{m.group('count')}+{m.group('hash')}"
    return version + ("-dirty" if dirty else "")


def uncommitted_sha256(tree: Path) -> str | None:
    """sha256 of a git checkout's changes against HEAD (staged or not, as a binary diff) and of
    its untracked, not ignored, files (names and contents); ``None`` when there are none."""
    digest = hashlib.sha256()
    diff = _git_bytes(tree, "diff", "HEAD", "--binary", "--no-ext-diff", "--no-textconv", "--no-color")
    digest.update(diff)
    untracked = [p for p in _git_bytes(tree, "ls-files", "--others", "--exclude-standard", "-z").split(b"\0") if p]
    for name in sorted(untracked):
        digest.update(b"\0untracked\0" + name + b"\0" + _entry_sha256(tree / os.fsdecode(name)).encode())
    return digest.hexdigest() if diff or untracked else None


def files_sha256(tree: Path) -> str:
    """sha256 over the relative path and sha256 of every file under ``tree`` (symlinks by
    target), in sorted order, skipping directories named in :data:`UNHASHED_DIRS`."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(tree):
        dirs[:] = sorted(d for d in dirs if d not in UNHASHED_DIRS)
        for name in sorted(files):
            path = Path(root) / name
            digest.update(f"{path.relative_to(tree)}\0{_entry_sha256(path)}\n".encode())
    return digest.hexdigest()


def _entry_sha256(path: Path) -> str:
    if path.is_symlink():
        return "symlink:" + os.readlink(path)
    return sha256_file(path) if path.is_file() else "missing"


def _is_git_toplevel(tree: Path) -> bool:
    """The tree is the top of a git checkout (not merely inside someone else's repository)."""
    if not (tree / ".git").exists() or not shutil.which("git"):
        return False
    top = _git(tree, "rev-parse", "--show-toplevel", check=False).strip()
    return bool(top) and Path(top).resolve() == tree.resolve()


def _git_bytes(tree: Path, *args: str, check: bool = True, env: dict | None = None) -> bytes:
    # GIT_OPTIONAL_LOCKS=0: reading the tree's state must not rewrite the researcher's index.
    full_env = dict(os.environ, GIT_OPTIONAL_LOCKS="0", LC_ALL="C", **(env or {}))
    try:
        proc = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, env=full_env, timeout=600)
    except (OSError, subprocess.SubprocessError) as err:
        raise BinaryError(f"git {args[0]} in {tree} failed: {err}") from err
    if check and proc.returncode != 0:
        reason = proc.stderr.decode(errors="replace").strip().splitlines()
        raise BinaryError(f"git {args[0]} in {tree} failed (exit {proc.returncode}): {reason[-1] if reason else ''}")
    return proc.stdout if proc.returncode == 0 else b""


def _git(tree: Path, *args: str, check: bool = True, env: dict | None = None) -> str:
    return _git_bytes(tree, *args, check=check, env=env).decode(errors="replace")
