"""Function names as ``go tool pprof`` shows and matches them.

pprof symbolizes every profile it reads, and that step (``demangleSingleFunction``
in ``internal/symbolizer`` of github.com/google/pprof, default ``-symbolize``
mode) rewrites a function's name before anything prints or filters it: a name
that "looks like demangled C++" -- it holds ``<``, ``>``, ``[``, ``]`` or ``::``,
and neither ``.<`` (Java) nor ``]).`` (a Go method on a generic type) -- loses
every balanced ``(...)`` and then every balanced ``<...>``. Go's generic
functions match that test, so pprof prints

    sync.OnceValue[go.shape.func(*encoding/json.encodeState, ...)].func1

as ``sync.OnceValue[go.shape.func].func1``, and ``-focus``/``-ignore``/``-show``/
``-hide`` see only the shortened name (a regexp that matches inside the dropped
parentheses matches no sample). Methods of generic types
(``pkg.(*T[go.shape.int]).M``) keep their names.

Mangled C++/Rust symbols (``_Z...``, ``_R...``), which pprof demangles, are
left as they are: Go profiles do not hold them.
"""

from __future__ import annotations

import re

import numpy as np

_PAREN = re.compile(r"[()]")
_ANGLE = re.compile(r"[<>]")


def pprof_name(name: str, system_name: str) -> str:
    """The name pprof shows for a function whose profile says ``name`` and ``system_name``.

    pprof keeps a name that differs from the system name (already demangled by
    the writer); otherwise it starts from the system name (Go writes both equal).
    """
    if name and system_name != name:
        return name
    if looks_like_demangled_cplusplus(system_name):
        return remove_matching(remove_matching(system_name, _PAREN), _ANGLE)
    return system_name


def pprof_names(names: np.ndarray, system_names: np.ndarray) -> np.ndarray:
    """:func:`pprof_name` of each function-table entry (object array); names that cannot change
    (no bracket, no ``::``: almost all of them) are not looked at twice."""
    out = np.asarray(names, dtype=object).copy()
    for i, (name, system_name) in enumerate(zip(names, system_names)):
        if name != system_name or _may_shorten(name):
            out[i] = pprof_name(name, system_name)
    return out


def _may_shorten(name: str) -> bool:
    return "[" in name or "<" in name or "]" in name or ">" in name or "::" in name


def looks_like_demangled_cplusplus(name: str) -> bool:
    """pprof's ``looksLikeDemangledCPlusPlus``: should the name lose its parameter lists?"""
    if ".<" in name:  # Java: class.<init>
        return False
    if "])." in name:  # Go: pkg.(*T[...]).Method
        return False
    return any(c in name for c in "<>[]") or "::" in name


def remove_matching(name: str, pair: re.Pattern) -> str:
    """pprof's ``removeMatching``: drop every outermost balanced pair (``(...)`` or ``<...>``,
    as ``pair`` finds them); a closing one without its opening one stops the work there."""
    opening = pair.pattern[1]
    nesting = first = 0
    at = pair.search(name)
    while at is not None:
        current = at.start()
        if name[current] == opening:
            nesting += 1
            if nesting == 1:
                first = current
        else:
            nesting -= 1
            if nesting < 0:
                return name
            if nesting == 0:
                name = name[:first] + name[current + 1 :]
                current = first - 1
        at = pair.search(name, current + 1)
    return name
