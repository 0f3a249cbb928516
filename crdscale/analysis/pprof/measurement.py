"""pprof's measurement scaling: units, scaled labels and percentages.

A port of ``internal/measurement`` from github.com/google/pprof, the one place pprof scales every
unit, so that :mod:`.select` (``tagfocus`` values) and :mod:`.text` (the printed tables) agree.
"""

from __future__ import annotations

_UNIT_TYPES = [
    (
        [
            ("B", ("b", "byte"), 1.0),
            ("kB", ("kb", "kbyte", "kilobyte"), float(1 << 10)),
            ("MB", ("mb", "mbyte", "megabyte"), float(1 << 20)),
            ("GB", ("gb", "gbyte", "gigabyte"), float(1 << 30)),
            ("TB", ("tb", "tbyte", "terabyte"), float(1 << 40)),
            ("PB", ("pb", "pbyte", "petabyte"), float(1 << 50)),
        ],
        ("B", 1.0),
    ),
    (
        [
            ("ns", ("ns", "nanosecond"), 1.0),
            ("us", ("μs", "us", "microsecond"), 1e3),
            ("ms", ("ms", "millisecond"), 1e6),
            ("s", ("s", "sec", "second"), 1e9),
            ("hrs", ("hour", "hr"), 3600e9),
        ],
        ("s", 1e9),
    ),
    (
        [
            ("n*GCU", ("nanogcu",), 1e-9),
            ("u*GCU", ("microgcu",), 1e-6),
            ("m*GCU", ("milligcu",), 1e-3),
            ("GCU", ("gcu",), 1.0),
            ("k*GCU", ("kilogcu",), 1e3),
            ("M*GCU", ("megagcu",), 1e6),
            ("G*GCU", ("gigagcu",), 1e9),
            ("T*GCU", ("teragcu",), 1e12),
            ("P*GCU", ("petagcu",), 1e15),
        ],
        ("GCU", 1.0),
    ),
]


def _sniff(units, unit: str):
    unit = unit.lower()
    if len(unit) > 2:
        unit = unit.removesuffix("s")
    for canonical, aliases, factor in units:
        if unit in aliases:
            return canonical, factor
    return None


def is_display_unit(unit: str) -> bool:
    """Whether ``unit`` is one pprof scales to (``-unit``): a unit of one of its kinds, in any of its
    spellings, or ``minimum``/``auto`` (``count``/``sample``/``unit`` for counts). pprof itself prints an
    unknown one in the sample's unit, unsaid."""
    return unit in ("minimum", "auto", "count", "sample", "unit") or any(
        _sniff(units, unit) for units, _default in _UNIT_TYPES
    )


def scale(value: int, from_unit: str, to_unit: str) -> tuple[float, str]:
    """pprof's ``measurement.Scale``: (scaled value, unit label); ``to_unit`` may be ``minimum``/``auto``."""
    if value < 0:
        v, u = scale(-value, from_unit, to_unit)
        return -v, u
    for units, (default_name, default_factor) in _UNIT_TYPES:
        found = _sniff(units, from_unit)
        if found is None:
            continue
        v = float(value) * found[1]
        if to_unit in ("minimum", "auto"):
            best_f, best_u = 0.0, ""
            for canonical, _aliases, factor in units:
                if factor >= best_f and v / factor >= 1.0:
                    best_f, best_u = factor, canonical
            if best_f:
                return v / best_f, best_u
            return v / default_factor, default_name
        target = _sniff(units, to_unit)
        if target is None:
            return v / default_factor, default_name
        return v / target[1], target[0]
    if to_unit in ("count", "sample", "unit", "minimum", "auto"):
        return float(value), ""
    return float(value), to_unit


def scaled_label(value: int, from_unit: str, to_unit: str) -> str:
    """pprof's ``measurement.ScaledLabel``: ``1.50MB``, ``0``, ``12345``."""
    v, u = scale(value, from_unit, to_unit)
    sv = _go_float(v, 2)
    if sv.endswith(".00"):
        sv = sv[:-3]
    if sv in ("0", "-0"):
        return "0"
    return sv + u


def _go_float(v: float, digits: int) -> str:
    s = f"{v:.{digits}f}"
    return s


def percentage(value: int, total: int) -> str:
    """pprof's ``measurement.Percentage``: ``45.56%``, `` 100%``, ``0.42%`` (width 6)."""
    ratio = abs(value / total) * 100 if total else 0.0
    if 99.95 <= ratio <= 100.05:
        return "  100%"
    if ratio >= 1.0:
        return f"{ratio:5.2f}%"
    return f"{_go_g(ratio):>5}%"


def _go_g(x: float) -> str:
    """Go's ``%.2g`` (same as Python's except Python never prints ``e+0N`` differently)."""
    s = f"{x:.2g}"
    return s
