"""A component's own flag set, read from the binary, and the validation of extra flags.

A scenario's ``apiserver_flags`` (and the controller-manager's) are passed to the binary as
they are. Mistyped, they fail only after a build and a start; so they are checked against the
flag set the binary itself prints (``--help``), read once per binary and cached by its sha256
under crdscale's cache (``flags/<sha256>.json``). Flags crdscale sets itself (ports,
addresses, certificates, etcd; see :mod:`crdscale.cluster.local`) are refused: a second value
would either be ignored or break the control plane. ``--feature-gates=...`` values are checked
against the gates of the binary's version (:mod:`crdscale.cluster.gates`).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from crdscale.cluster.gates import check_feature_gates
from crdscale.errors import BinaryError, UsageError
from crdscale.fsutil import sha256_file, write_json_atomic
from crdscale.paths import binaries_dir, cache_dir

# Bump when the parser changes: cached flag sets of an older parser are read again.
PARSER_VERSION = 1

# What crdscale.cluster.local sets on kube-apiserver's command line from its own state, and why
# a scenario may not set it too.
_SERVING = "crdscale serves on its own loopback address and port"
_CERTS = "crdscale makes the control plane's certificates and keys"
APISERVER_RESERVED: dict[str, str] = {
    "bind-address": _SERVING,
    "advertise-address": _SERVING,
    "secure-port": _SERVING,
    "etcd-servers": "crdscale starts the etcd kube-apiserver talks to",
    "tls-cert-file": _CERTS,
    "tls-private-key-file": _CERTS,
    "client-ca-file": _CERTS,
    "token-auth-file": "crdscale's clients authenticate with its token file",
    "service-account-issuer": _CERTS,
    "service-account-key-file": _CERTS,
    "service-account-signing-key-file": _CERTS,
    "cert-dir": _CERTS,
    "service-cluster-ip-range": "crdscale's node and controller-manager depend on its service range",
    "endpoint-reconciler-type": "the default reconciler refuses crdscale's loopback advertise address",
    "profiling": "crdscale takes its heap profiles from /debug/pprof",
}
CONTROLLER_MANAGER_RESERVED: dict[str, str] = {
    "kubeconfig": _CERTS,
    "authentication-kubeconfig": _CERTS,
    "authorization-kubeconfig": _CERTS,
    "bind-address": _SERVING,
    "secure-port": _SERVING,
    "tls-cert-file": _CERTS,
    "tls-private-key-file": _CERTS,
    "client-ca-file": _CERTS,
    "root-ca-file": _CERTS,
    "service-account-private-key-file": _CERTS,
    "cluster-signing-cert-file": _CERTS,
    "cluster-signing-key-file": _CERTS,
    "controllers": "set it with target.controller_manager_controllers",
    "profiling": "crdscale takes its heap profiles from /debug/pprof",
}

# pflag's usage lines: "  -v, --v Level   text", "      --etcd-servers strings   text", "      --profiling   text".
_FLAG_LINE = re.compile(
    r"^\s{2,}(?:-(?P<short>[A-Za-z0-9]), )?--(?P<name>[A-Za-z0-9][\w.-]*)(?: (?P<type>\S+))?(?:\s{2,}|$)"
)


@dataclass(frozen=True)
class FlagSet:
    """The flags a binary accepts.

    Attributes:
        binary: the binary's path when it was read.
        sha256: the binary's sha256 (the cache key).
        flags: long name (no dashes) -> value type as ``--help`` prints it (``"strings"``,
            ``"int"``); ``""`` for a boolean flag, which takes no separate value.
        short: one-letter alias -> long name (``v`` -> ``v``).
    """

    binary: str
    sha256: str
    flags: dict[str, str]
    short: dict[str, str]


def parse_help(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """Flags from a Go (pflag) program's ``--help``: ``({name: type}, {short: name})``."""
    flags: dict[str, str] = {}
    short: dict[str, str] = {}
    for line in text.splitlines():
        m = _FLAG_LINE.match(line)
        if not m:
            continue
        kind = m["type"] or ""
        # "version[=false]": the value is optional, so the flag stands alone like a boolean.
        flags.setdefault(m["name"], "" if "[=" in kind else kind)
        if m["short"]:
            short[m["short"]] = m["name"]
    return flags, short


def flags_cache_dir() -> Path:
    return cache_dir() / "flags"


def flag_set(binary: str | Path, *, timeout_s: float = 60) -> FlagSet:
    """``binary``'s own flags (``binary --help``), read once per binary and cached by its sha256."""
    path = Path(binary)
    try:
        digest = sha256_file(path)
    except OSError as err:
        raise BinaryError(f"cannot read {path}: {err.strerror or err}") from None
    cached = flags_cache_dir() / f"{digest}.json"
    try:
        data = json.loads(cached.read_text())
        if data.get("parser") == PARSER_VERSION:
            return FlagSet(data["binary"], digest, data["flags"], data["short"])
    except (OSError, ValueError, KeyError):
        pass
    try:
        proc = subprocess.run([str(path), "--help"], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError) as err:
        raise BinaryError(f"{path} --help failed: {err}") from None
    flags, short = parse_help(proc.stdout + "\n" + proc.stderr)
    if not flags:
        raise BinaryError(f"{path} --help printed no flags (exit {proc.returncode})")
    write_json_atomic(cached, {"parser": PARSER_VERSION, "binary": str(path), "flags": flags, "short": short})
    return FlagSet(str(path), digest, flags, short)


def split_flags(items: Sequence[str], known: FlagSet) -> list[tuple[str, str | None]]:
    """``["--a=1", "--b", "2", "--c"]`` -> ``[("a", "1"), ("b", "2"), ("c", None)]``: a flag
    that takes a value and has no ``=`` takes the next item. Names are checked by :func:`check_flags`."""
    out: list[tuple[str, str | None]] = []
    i = 0
    while i < len(items):
        item = items[i]
        if not isinstance(item, str):
            raise UsageError(f"flag {item!r} is not a string")
        if item == "--":
            raise UsageError("a bare -- in the flags ends the binary's flags: what follows would be ignored; remove it")
        if item.startswith("--"):
            name, eq, value = item[2:].partition("=")
        elif re.match(r"^-[A-Za-z0-9](=|$)", item):
            letter, eq, value = item[1:].partition("=")
            name = known.short.get(letter, letter)
        else:
            raise UsageError(f"flag {item!r} does not start with --")
        if not eq and known.flags.get(name) and i + 1 < len(items) and not items[i + 1].startswith("-"):
            out.append((name, items[i + 1]))
            i += 2
            continue
        out.append((name, value if eq else None))
        i += 1
    return out


def check_flags(
    items: Sequence[str],
    known: FlagSet,
    *,
    component: str = "kube-apiserver",
    reserved: Mapping[str, str] | None = None,
) -> list[dict]:
    """Validate extra command-line flags against ``known`` (the binary's flag set).

    Raises :class:`UsageError` (one line) for a bare ``--``, a flag the binary does not know
    (with the nearest names), a flag crdscale sets itself (``reserved``, default
    :data:`APISERVER_RESERVED`; why, in the message), and a flag needing a value given none.
    Returns ``[{"flag": name, "value": value}]`` in order, for provenance.
    """
    reserved = APISERVER_RESERVED if reserved is None else reserved
    record = []
    for name, value in split_flags(items, known):
        if name not in known.flags:
            nearest = difflib.get_close_matches(name, list(known.flags), n=3, cutoff=0.6)
            hint = f"; nearest: {', '.join('--' + n for n in nearest)}" if nearest else ""
            raise UsageError(f"{component} has no flag --{name}{hint}")
        if name in reserved:
            raise UsageError(f"--{name} is set by crdscale for {component} ({reserved[name]}); remove it")
        if value is None and known.flags[name]:
            raise UsageError(f"--{name} needs a value ({known.flags[name]}): write --{name}=VALUE")
        record.append({"flag": name, "value": value})
    return record


def check_reserved(
    items: Sequence[str], *, component: str = "kube-apiserver", reserved: Mapping[str, str] | None = None
) -> None:
    """What can be checked of extra flags before the binary exists: no bare ``--``, and none of the
    flags crdscale sets itself (``reserved``). UsageError (one line) otherwise."""
    reserved = APISERVER_RESERVED if reserved is None else reserved
    empty = FlagSet(binary="", sha256="", flags={}, short={})
    for name, _ in split_flags(items, empty):
        if name in reserved:
            raise UsageError(f"--{name} is set by crdscale for {component} ({reserved[name]}); remove it")


def feature_gates_in_flags(items: Sequence[str]) -> dict[str, object]:
    """The gates a flag list sets with ``--feature-gates=A=true,kube:B=false`` (every occurrence,
    later ones winning), name -> bool, or the raw text where it is not ``true``/``false``."""
    found: dict[str, object] = {}
    for i, item in enumerate(items):
        if item.startswith("--feature-gates="):
            text = item.split("=", 1)[1]
        elif item == "--feature-gates" and i + 1 < len(items):
            text = items[i + 1]
        else:
            continue
        for pair in filter(None, (p.strip() for p in text.split(","))):
            key, _, value = pair.partition("=")
            key = key.split(":", 1)[-1].strip()  # "kube:Name" in 1.31+ is the same gate
            found[key] = {"true": True, "false": False}.get(value.strip().lower(), value)
    return found


def check_component_flags(
    items: Sequence[str],
    binary: str | Path,
    *,
    component: str = "kube-apiserver",
    kube_version: str | None = None,
) -> dict:
    """Validate ``items`` for ``binary`` (kube-apiserver, or kube-controller-manager with
    ``component="kube-controller-manager"``): its flag set, crdscale's reserved flags, and,
    with ``kube_version``, the gates of ``--feature-gates`` (:func:`crdscale.cluster.gates.check_feature_gates`).

    Returns ``{"component", "binary_sha256", "flags": [...], "feature_gates": {...}}`` for provenance.
    """
    known = flag_set(binary)
    reserved = CONTROLLER_MANAGER_RESERVED if component == "kube-controller-manager" else APISERVER_RESERVED
    record = {
        "component": component,
        "binary_sha256": known.sha256,
        "flags": check_flags(items, known, component=component, reserved=reserved),
        "feature_gates": {},
    }
    if kube_version:
        asked = feature_gates_in_flags(items)
        if asked:
            record["feature_gates"] = check_feature_gates(asked, kube_version)
    return record


def released_flag_set(kube_version: str, component: str = "kube-apiserver") -> FlagSet | None:
    """The flag set of the released ``component`` ``kube_version`` when it is built already (a
    patched build of the same release has the same flags unless its diffs add some), else ``None``:
    flags can be checked before a build only once the release has been built."""
    path = binaries_dir("kube-apiserver", kube_version) / component
    if not (path.is_file() and os.access(path, os.X_OK)):
        return None
    return flag_set(path)
