"""Kubeconfig files: which ones, merged how, and the context chosen from them.

crdscale reads kubeconfigs the way kubectl and client-go do
(``k8s.io/client-go/tools/clientcmd``, ``ClientConfigLoadingRules.Load``):

* one file named explicitly (``--kubeconfig FILE``) is used alone and must exist;
* a list (``$KUBECONFIG=a:b:c``, or ``--kubeconfig a:b:c``) is merged: the
  **first file to set a name** in ``clusters``, ``users`` or ``contexts`` wins
  and later files never change it; ``current-context`` comes from the first
  file that sets one; missing files are skipped, duplicate paths read once;
* relative paths (``certificate-authority``, ``client-certificate``,
  ``client-key``, ``tokenFile``, and an ``exec`` command containing a ``/``)
  are resolved against the directory of **the file that defined the entry**.

Go programs crdscale starts (crdscale-client, kubectl) get the same list in
``$KUBECONFIG`` (:meth:`KubeconfigFiles.child_env`) and merge it themselves by
these same rules: nothing is copied, so no token or key lands in a temporary
file or a run directory, and an exec plugin is run by client-go as usual.

This module only reads files; :mod:`crdscale.cluster.clients` turns the chosen
context into credentials and :mod:`crdscale.cluster.auth` runs exec plugins.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from crdscale.errors import UsageError

SECTIONS = {"clusters": "cluster", "users": "user", "contexts": "context"}
# Keys holding a file path, per section, resolved against the defining file's directory
# (client-go's GetClusterFileReferences / GetAuthInfoFileReferences).
PATH_KEYS = {"clusters": ("certificate-authority",), "users": ("client-certificate", "client-key", "tokenFile")}


@dataclass(frozen=True)
class KubeconfigFiles:
    """Where a cluster's kubeconfig comes from.

    Attributes:
        paths: the files, highest precedence first.
        explicit: one file named on purpose (``--kubeconfig FILE``): used alone, must exist.
            Otherwise a precedence list: merged, missing files skipped.
    """

    paths: tuple[Path, ...]
    explicit: bool = True

    @classmethod
    def parse(cls, value: str | os.PathLike | KubeconfigFiles) -> KubeconfigFiles:
        """``FILE`` (explicit) or ``a:b:c`` (a list, as ``$KUBECONFIG``; ``~`` expanded, duplicates dropped)."""
        if isinstance(value, KubeconfigFiles):
            return value
        text = os.fspath(value)
        parts = [p for p in text.split(os.pathsep) if p]
        if len(parts) == 1 and os.pathsep not in text:
            return cls((Path(parts[0]).expanduser(),), explicit=True)
        return cls.from_list(parts)

    @classmethod
    def from_list(cls, entries: Iterable[str]) -> KubeconfigFiles:
        seen: dict[Path, None] = {}
        for entry in entries:
            if entry:
                seen.setdefault(Path(entry).expanduser(), None)
        if not seen:
            raise UsageError("empty kubeconfig list")
        return cls(tuple(seen), explicit=False)

    def existing(self) -> list[Path]:
        """The files that will be read. Raises :class:`UsageError` when there are none."""
        if self.explicit:
            if not self.paths[0].is_file():
                raise UsageError(f"kubeconfig not found: {self.paths[0]}")
            return [self.paths[0]]
        found = [p for p in self.paths if p.is_file()]
        if not found:
            raise UsageError(f"no kubeconfig file exists among {self}")
        return found

    def child_env(self) -> dict[str, str]:
        """Environment naming these files for kubectl or a client-go program, which merge them by the
        rules above. Absolute paths: the child may run in another directory."""
        return {"KUBECONFIG": os.pathsep.join(str(p.absolute()) for p in self.paths)}

    def __str__(self) -> str:
        return os.pathsep.join(str(p) for p in self.paths)


@dataclass(frozen=True)
class Selection:
    """The context chosen from a (merged) kubeconfig, paths already absolute.

    Attributes:
        context: its name.
        cluster: the ``cluster`` mapping (``server``, ``certificate-authority[-data]``, ...).
        user: the ``user`` mapping (``token``, ``tokenFile``, client certificate, ``exec``, ...).
        namespace: the context's namespace, if any.
    """

    context: str
    cluster: dict[str, Any]
    user: dict[str, Any]
    namespace: str | None = None


def read_file(path: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """One kubeconfig file as ``{"clusters": {name: entry}, "users": ..., "contexts": ..., "current-context": str}``,
    its relative paths resolved against its directory. An empty file is an empty config, as for client-go."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as err:
        raise UsageError(f"cannot read kubeconfig {path}: {err.strerror}") from err
    except UnicodeDecodeError:
        raise UsageError(f"kubeconfig {path} is not a kubeconfig (not UTF-8 text)") from None
    except yaml.YAMLError as err:
        raise UsageError(f"kubeconfig {path} is not valid YAML: {' '.join(str(err).split())}") from err
    if not isinstance(data, dict):
        raise UsageError(f"kubeconfig {path} is not a kubeconfig (a YAML mapping)")
    base = path.absolute().parent
    out: dict[str, Any] = {"current-context": data.get("current-context") or ""}
    for section, inner in SECTIONS.items():
        entries: dict[str, dict[str, Any]] = {}
        for item in data.get(section) or []:
            name = (item or {}).get("name")
            if not isinstance(item, dict) or not name:
                raise UsageError(f"kubeconfig {path}: an entry of '{section}' has no name")
            if name in entries:
                # client-go refuses the same name twice in one file.
                raise UsageError(f"kubeconfig {path}: duplicate name {name!r} in '{section}'")
            entries[name] = _resolve_paths(section, dict(item.get(inner) or {}), base)
        out[section] = entries
    return out


def _resolve_paths(section: str, entry: dict[str, Any], base: Path) -> dict[str, Any]:
    for key in PATH_KEYS.get(section, ()):
        if entry.get(key) and not os.path.isabs(entry[key]):
            entry[key] = str(base / entry[key])
    exec_config = entry.get("exec")
    if section == "users" and isinstance(exec_config, dict):
        command = str(exec_config.get("command") or "")
        # Only a command with a path separator is a file; a bare name is looked up on $PATH.
        if os.sep in command and not os.path.isabs(command):
            entry["exec"] = {**exec_config, "command": str(base / command)}
    return entry


def merge(configs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Merge configs read by :func:`read_file`, highest precedence first: the first to set a name
    (or ``current-context``) wins."""
    merged: dict[str, Any] = {"current-context": "", **{section: {} for section in SECTIONS}}
    for config in configs:
        for section in SECTIONS:
            for name, entry in config.get(section, {}).items():
                merged[section].setdefault(name, entry)
        if not merged["current-context"]:
            merged["current-context"] = config.get("current-context") or ""
    return merged


def load(files: KubeconfigFiles) -> dict[str, Any]:
    """The merged config of ``files`` (see the module docstring). Raises :class:`UsageError`."""
    return merge(read_file(path) for path in files.existing())


def select(config: dict[str, Any], context: str | None = None, *, where: str = "kubeconfig") -> Selection:
    """The ``context`` (default: ``current-context``) of a merged config, with its cluster and user.
    Raises :class:`UsageError` naming what is missing."""
    name = context or config.get("current-context")
    contexts = config.get("contexts", {})
    if not name:
        raise UsageError(
            f"{where} has no current-context; pass --context (contexts: {', '.join(sorted(contexts)) or 'none'})"
        )
    if name not in contexts:
        raise UsageError(f"context {name!r} not found in {where} (contexts: {', '.join(sorted(contexts)) or 'none'})")
    ctx = contexts[name]
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    cluster = config.get("clusters", {}).get(cluster_name)
    if cluster is None:
        raise UsageError(f"context {name!r} in {where} names cluster {cluster_name!r}, which is not defined")
    if not cluster.get("server"):
        raise UsageError(f"cluster {cluster_name!r} in {where} has no server")
    user: dict[str, Any] = {}
    if user_name:
        if user_name not in config.get("users", {}):
            raise UsageError(f"context {name!r} in {where} names user {user_name!r}, which is not defined")
        user = config["users"][user_name]
    return Selection(context=name, cluster=cluster, user=user, namespace=ctx.get("namespace"))
