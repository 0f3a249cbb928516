"""argparse types for numeric flags, declared once: finite, in range, or argparse's one-line usage error.

``type=float`` takes ``nan``, ``inf`` and ``1e999``; each flag would then have to refuse them itself
(and several did not: ``top --nodefraction nan`` ended in a traceback). A flag declares its range here
and the value is checked where it enters::

    parser.add_argument("--qps", type=number(minimum=0, exclusive_minimum=True), ...)
    parser.add_argument("--timeout", type=positive_int, ...)
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

# Larger integers are typos or attacks: no count, size or duration crdscale takes comes near it.
MAX_INT = 10**15


def _describe(minimum, maximum, exclusive_minimum: bool) -> str:
    low = None if minimum is None else (f"> {minimum}" if exclusive_minimum else f">= {minimum}")
    high = None if maximum is None else f"<= {maximum}"
    return " and ".join(part for part in (low, high) if part)


def number(
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: bool = False,
    integer: bool = False,
) -> Callable[[str], float | int]:
    """An argparse ``type``: a finite number (an int when ``integer``) within the bounds given."""

    def parse(text: str) -> float | int:
        try:
            value: float | int = int(text, 10) if integer else float(text)
        except ValueError:
            kind = "an integer" if integer else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}") from None
        if not integer and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if integer and abs(value) > MAX_INT:
            raise argparse.ArgumentTypeError(f"{text!r} is out of range")
        too_low = minimum is not None and (value <= minimum if exclusive_minimum else value < minimum)
        too_high = maximum is not None and value > maximum
        if too_low or too_high:
            raise argparse.ArgumentTypeError(f"{text!r} must be {_describe(minimum, maximum, exclusive_minimum)}")
        return value

    parse.__name__ = "integer" if integer else "number"  # argparse names the type in its message
    return parse


finite_float = number()
nonnegative_float = number(minimum=0)
positive_float = number(minimum=0, exclusive_minimum=True)
fraction = number(minimum=0, maximum=1)
nonnegative_int = number(minimum=0, integer=True)
positive_int = number(minimum=1, integer=True)
any_int = number(integer=True)


def footprint_features(text: str) -> str:
    """An argparse ``type`` for ``--features F,F``: every name a feature a footprint model may use
    (:data:`crdscale.footprint.features.FEATURES`), checked as the flag is read, not after a sweep of
    runs. Returns ``text`` as given (the commands split it)."""
    from crdscale.footprint.features import FEATURES  # lazy: only when the flag is given: numpy, yaml for every --help

    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in FEATURES]
    if not names or unknown:
        said = f"unknown feature {unknown[0]!r}" if unknown else "no feature named"
        raise argparse.ArgumentTypeError(f"{said} (known: {', '.join(FEATURES)})")
    return text


footprint_features.__name__ = "features"


def pprof_unit(text: str) -> str:
    """An argparse ``type`` for ``--unit``: a unit pprof scales to (B, kB, MB, ms, s, ...), ``minimum`` or
    ``auto``; pprof itself would print an unknown one in the sample's unit without a word."""
    # lazy: would add 3 modules to --help
    from crdscale.analysis.pprof.measurement import is_display_unit

    if not is_display_unit(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a unit pprof knows (e.g. B, kB, MB, GB, ns, ms, s, auto)")
    return text


pprof_unit.__name__ = "unit"


def label_value(text: str) -> str:
    """An argparse ``type`` for a value that becomes a Kubernetes label value (``--run-id``): at most 63
    characters, alphanumerics with '-', '_' or '.' inside (k8s.io/apimachinery IsValidLabelValue),
    checked as the flag is read, not when the server refuses the first object."""
    if len(text) > 63 or not re.fullmatch(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?", text) or not text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Kubernetes label value (at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit)"
        )
    return text


label_value.__name__ = "label value"
