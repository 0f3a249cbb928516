"""The environment crdscale gives kube-apiserver (``target.env``, ``crdscale up --env``), checked where it enters.

A process environment cannot hold an empty name, a name with ``=`` or a NUL anywhere
(``os.execve`` refuses them, deep inside the start). And the Go runtime reads its own variables
leniently: ``GOGC=banana`` is silently 100, ``GOMEMLIMIT=2G`` silently no limit (Go wants
``2GiB``), so a run would measure a setting nobody asked for. The Go runtime's variables are
checked here as the runtime parses them (runtime/mgc.go ``readGOGC``, runtime/mgcpacer.go
``readGOMEMLIMIT`` and ``parseByteCount``, runtime/debug.go for GOMAXPROCS).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from crdscale.errors import UsageError

# GOMEMLIMIT: an integer with an optional unit B, KiB, MiB, GiB or TiB (binary only), or "off".
_BYTE_COUNT = re.compile(r"[0-9]+(B|KiB|MiB|GiB|TiB)?")
_TRACEBACK = ("none", "single", "all", "system", "crash", "wer")


def _gogc(value: str) -> str | None:
    if value == "off" or re.fullmatch(r"-?[0-9]+", value):
        return None
    return 'must be an integer percentage (e.g. "50") or "off"; Go reads anything else as 100'


def _gomemlimit(value: str) -> str | None:
    if value == "off" or _BYTE_COUNT.fullmatch(value):
        return None
    return 'must be bytes with an optional unit B, KiB, MiB, GiB or TiB (e.g. "2GiB"), or "off"'


def _gomaxprocs(value: str) -> str | None:
    if re.fullmatch(r"[0-9]+", value) and int(value) > 0:
        return None
    return "must be a positive integer; Go ignores anything else"


def _gotraceback(value: str) -> str | None:
    if value in _TRACEBACK or re.fullmatch(r"[0-9]+", value):
        return None
    return f"must be one of {', '.join(_TRACEBACK)}"


# The Go runtime's variables whose values it parses; others (GODEBUG, any name) pass as written.
GO_RUNTIME = {"GOGC": _gogc, "GOMEMLIMIT": _gomemlimit, "GOMAXPROCS": _gomaxprocs, "GOTRACEBACK": _gotraceback}


def check_env(env: Mapping[str, object], what: str = "target.env") -> dict[str, str]:
    """``env`` as the environment entries it will be, or :class:`UsageError` (one line naming ``what``)
    for an entry no process environment can hold or a Go runtime value Go would not read as written."""
    out = {}
    for name, value in env.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise UsageError(f"'{what}': {name!r} is not an environment variable name (not empty, no '=' or NUL)")
        if not isinstance(value, str):
            raise UsageError(f"'{what}.{name}' must be a string, got {value!r}")
        if "\0" in value:
            raise UsageError(f"'{what}.{name}': a value cannot hold a NUL byte")
        check = GO_RUNTIME.get(name)
        problem = check(value) if check else None  # as written: Go does not strip spaces either
        if problem:
            raise UsageError(f"'{what}.{name}' {problem}, got {value!r}")
        out[name] = value
    return out
