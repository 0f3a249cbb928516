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
