"""Byte counts for people: one formatter for tables, reports and progress lines."""

from __future__ import annotations

import math

_BINARY_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))


def fmt_bytes(value: float | None, *, digits: int = 1, unit: str | None = None) -> str:
    """``1.5 MiB``, ``12.3 KiB``, ``512 B`` (binary units); ``n/a`` for None/NaN.

    ``digits`` is the number of decimals for KiB and up; ``unit`` (``"MiB"``…) fixes
    the unit instead of choosing the largest that keeps the number >= 1.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    sign, v = ("-" if value < 0 else ""), abs(float(value))
    for name, factor in _BINARY_UNITS:
        if name == unit or (unit is None and v >= factor):
            return f"{sign}{v / factor:,.{digits}f} {name}"
    return f"{sign}{v:,.0f} B"


_SIZE_SUFFIXES = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "ki": 2**10,
    "kib": 2**10,
    "mi": 2**20,
    "mib": 2**20,
    "gi": 2**30,
    "gib": 2**30,
    "ti": 2**40,
    "tib": 2**40,
}


def parse_bytes(text: str) -> int:
    """``"8GiB"``, ``"8Gi"`` (Kubernetes quantities), ``"512 MiB"``, ``"1.5G"`` (decimal), ``"1000"`` -> bytes.

    Raises ValueError naming the accepted forms."""
    import re

    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text)
    factor = _SIZE_SUFFIXES.get(match.group(2).lower()) if match else None
    if factor is None:
        raise ValueError(f"{text!r} is not a size (e.g. 8GiB, 8Gi, 512MiB, 1.5G, 1000000)")
    return int(float(match.group(1)) * factor)
