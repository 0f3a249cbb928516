"""Numbers for people: every number crdscale prints goes through one of these formatters, and
every "is there a value?" test through :func:`is_missing`.

Bytes are binary (KiB, MiB, GiB: 2^10, 2^20, 2^30 B), never decimal MB, so tables, reports and
progress lines agree. A missing value (None or NaN) prints as ``n/a`` unless the caller says
otherwise (``missing=""`` for a blank table cell, ``"?"`` for a progress line).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

_BINARY_UNITS = (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10))
MISSING = "n/a"


def is_missing(value: Any) -> bool:
    """True for None, NaN (a float, a numpy float, pandas' NaN in an object column) and pandas'
    NaT; False for everything else: numbers, 0, strings (also ""), lists, timestamps.

    NaN and NaT are the values unequal to themselves; pandas' ``NA`` (which has no truth value)
    and arrays do not count: crdscale's tables hold NaN where a number is missing."""
    if value is None:
        return True
    if isinstance(value, (str, bytes, int)):
        return False
    try:
        return bool(value != value)
    except (TypeError, ValueError):
        return False


def fmt_bytes(
    value: float | None, *, digits: int = 1, unit: str | None = None, signed: bool = False, missing: str = MISSING
) -> str:
    """``1.5 MiB``, ``12.3 KiB``, ``512 B`` (binary units); ``missing`` for None/NaN.

    ``digits`` is the number of decimals for KiB and up; ``unit`` (``"MiB"``…) fixes
    the unit instead of choosing the largest that keeps the number >= 1; ``signed`` puts
    a ``+`` before a positive value (a difference).
    """
    if is_missing(value):
        return missing
    sign = "-" if value < 0 else ("+" if signed and value > 0 else "")
    v = abs(float(value))
    for name, factor in _BINARY_UNITS:
        if name == unit or (unit is None and v >= factor):
            return f"{sign}{v / factor:,.{digits}f} {name}"
    return f"{sign}{v:,.0f} B"


def fmt_count(value: float | None, *, missing: str = MISSING) -> str:
    """``12,345``: a count, rounded to a whole number, with thousands separators."""
    return missing if is_missing(value) else f"{value:,.0f}"


def fmt_number(value: float | None, *, missing: str = MISSING) -> str:
    """``1,234`` for a whole number, ``1,234.5`` otherwise (a median of counts)."""
    if is_missing(value):
        return missing
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def fmt_value(value: float | None, unit: str, *, missing: str = MISSING) -> str:
    """A number in its unit, for tables: ``bytes``, ``bytes/CRD`` and ``bytes/object`` scaled
    (:func:`fmt_bytes`), ratios (``x``) with a ×, ``share`` in percent, ``CRDs`` and ``steps`` as
    whole numbers, anything else to three significant digits (whole from 1,000 up) followed by its unit."""
    if is_missing(value):
        return missing
    if unit in ("bytes", "bytes/CRD", "bytes/object"):
        return fmt_bytes(value) + {"bytes": "", "bytes/CRD": "/CRD", "bytes/object": "/object"}[unit]
    if unit == "x":
        return f"{value:,.1f}×"
    if unit == "share":
        return f"{100 * value:.1f}%"
    if unit in ("CRDs", "steps"):
        return f"{value:,.0f}"
    if abs(value) >= 1000:  # whole: "4,657 goroutines", not "4.66e+03 goroutines"
        return f"{value:,.0f} {unit}".strip()
    return f"{value:,.3g} {unit}".strip()


def fmt_interval(low: float | None, high: float | None, unit: str) -> str:
    """``[low, high]`` in ``unit`` (:func:`fmt_value`), or empty when there is no interval."""
    if is_missing(low) or is_missing(high):
        return ""
    return f"[{fmt_value(low, unit)}, {fmt_value(high, unit)}]"


def fmt_per_crd(value: float | None, metric: str) -> str:
    """A per-CRD growth: bytes with two decimals (``1.25 KiB``), objects to one decimal."""
    if is_missing(value):
        return MISSING
    if metric == "objects":
        return f"{value:,.1f}"
    return fmt_bytes(value, digits=2)


def fmt_duration(seconds: float) -> str:
    """``1h02m``, ``3m05s``, ``42s``."""
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


# A printed table's column units -> how a value shows (seconds and bytes scaled to the unit named).
# The probes name them in their Sections (crdscale.collect.probes.Section); a missing value is a
# blank cell (see blank_missing).
COLUMN_FORMATS: dict[str, Callable[[Any], str]] = {
    "ms": lambda v: f"{v * 1000:.1f}",
    "MiB": lambda v: f"{v / 2**20:.3f}",  # 2^20 B, as crdscale's other tables count bytes
    "s": lambda v: f"{v:.2f}",
    "count": lambda v: f"{v:g}",
    "int": lambda v: str(int(v)),
    "pct": lambda v: f"{v:.1%}",
    "x1": lambda v: f"{v:.1f}x",
    "x2": lambda v: f"{v:.2f}x",
    "f1": lambda v: f"{v:.1f}",
}


def blank_missing(fn: Callable[[Any], str]) -> Callable[[Any], str]:
    """``fn`` for table cells: a missing value is an empty cell."""
    return lambda v: "" if is_missing(v) else fn(v)


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
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text)
    factor = _SIZE_SUFFIXES.get(match.group(2).lower()) if match else None
    if factor is None:
        raise ValueError(f"{text!r} is not a size (e.g. 8GiB, 8Gi, 512MiB, 1.5G, 1000000)")
    return int(float(match.group(1)) * factor)
