"""The one module of number formatters (and missing-value test), and the one set of timestamp helpers."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import numpy as np
import pandas as pd
import pytest

from crdscale.timeutil import iso_from_epoch, utc_iso, utc_iso_micro, utc_stamp
from crdscale.units import (
    COLUMN_FORMATS,
    blank_missing,
    fmt_bytes,
    fmt_count,
    fmt_duration,
    fmt_interval,
    fmt_number,
    fmt_per_crd,
    fmt_value,
    is_missing,
)


@pytest.mark.parametrize(
    "value, text",
    [
        (512, "512 B"),
        (1536, "1.5 KiB"),
        (3 * 2**20, "3.0 MiB"),
        (5 * 2**30, "5.0 GiB"),
        (-2048, "-2.0 KiB"),
        (math.nan, "n/a"),
        (None, "n/a"),
    ],
)
def test_fmt_bytes(value, text):
    assert fmt_bytes(value) == text


def test_fmt_bytes_digits_and_fixed_unit():
    assert fmt_bytes(1.5 * 2**20, digits=2) == "1.50 MiB"
    assert fmt_bytes(3 * 2**30, unit="MiB", digits=0) == "3,072 MiB"
    assert fmt_bytes(100, unit="KiB") == "0.1 KiB"


def test_fmt_bytes_signed_and_missing_text():
    assert fmt_bytes(2048, signed=True) == "+2.0 KiB" and fmt_bytes(-2048, signed=True) == "-2.0 KiB"
    assert fmt_bytes(0, signed=True) == "0 B"
    assert fmt_bytes(None, missing="?") == "?" and fmt_bytes(math.nan, unit="MiB", digits=0, missing="?") == "?"
    assert fmt_bytes(1.5 * 2**30, unit="MiB", digits=0) == "1,536 MiB"


@pytest.mark.parametrize(
    "value, missing",
    [
        (None, True),
        (math.nan, True),
        (np.float64("nan"), True),
        (np.float32("nan"), True),
        (0, False),
        (0.0, False),
        ("", False),
        ("nan", False),
        (np.int64(3), False),
        (10**400, False),
        ([math.nan], False),
        (pd.Timestamp("2026-01-01"), False),
        (pd.NaT, True),
    ],
)
def test_is_missing(value, missing):
    assert is_missing(value) is missing


def test_is_missing_reads_nan_from_an_object_column():
    column = pd.Series([1.0, None, math.nan, "x"], dtype=object)
    assert [is_missing(v) for v in column] == [False, True, True, False]


@pytest.mark.parametrize(
    "value, unit, text",
    [
        (1536, "bytes", "1.5 KiB"),
        (448 * 2**10, "bytes/CRD", "448.0 KiB/CRD"),
        (0.1234, "share", "12.3%"),
        (1999.6, "CRDs", "2,000"),
        (3, "steps", "3"),
        (0.012345, "CPU seconds", "0.0123 CPU seconds"),
        (12345.0, "", "12,345"),
        (4657.0, "goroutines", "4,657 goroutines"),
        (-1234.4, "fds", "-1,234 fds"),
        (math.nan, "bytes", "n/a"),
        (None, "share", "n/a"),
    ],
)
def test_fmt_value(value, unit, text):
    assert fmt_value(value, unit) == text


def test_fmt_value_blank_for_a_table_cell_and_intervals():
    assert fmt_value(math.nan, "fds", missing="") == ""
    assert fmt_interval(1024, 2048, "bytes") == "[1.0 KiB, 2.0 KiB]"
    assert fmt_interval(None, 1.0, "bytes") == fmt_interval(0.1, math.nan, "share") == ""


def test_counts_numbers_per_crd_and_durations():
    assert fmt_count(12345.4) == "12,345" and fmt_count(None, missing="?") == "?"
    assert fmt_number(1234.0) == "1,234" and fmt_number(1234.5) == "1,234.5" and fmt_number(math.nan) == "n/a"
    assert fmt_per_crd(1.25 * 2**10, "bytes") == "1.25 KiB" and fmt_per_crd(3.14159, "objects") == "3.1"
    assert fmt_per_crd(math.nan, "bytes") == "n/a"
    assert [fmt_duration(s) for s in (0, 42.4, 185, 3720)] == ["0s", "42s", "3m05s", "1h02m"]


def test_column_formats_scale_to_the_unit_named_and_leave_missing_cells_blank():
    assert COLUMN_FORMATS["MiB"](3 * 2**20) == "3.000"  # binary, as every other table
    assert COLUMN_FORMATS["ms"](0.0123) == "12.3" and COLUMN_FORMATS["pct"](0.5) == "50.0%"
    assert COLUMN_FORMATS["x2"](1.5) == "1.50x" and COLUMN_FORMATS["int"](7.0) == "7"
    cell = blank_missing(COLUMN_FORMATS["s"])
    assert cell(1.234) == "1.23" and cell(None) == cell(math.nan) == ""


def test_utc_spellings():
    when = datetime(2026, 11, 18, 11, 6, 40, 250000, tzinfo=timezone.utc)
    assert utc_iso(when) == "2026-11-18T11:06:40Z"
    assert utc_iso_micro(when) == "2026-11-18T11:06:40.250000Z"
    assert utc_stamp(when) == "20261118T110640Z"
    assert iso_from_epoch(when.timestamp()) == "2026-11-18T11:06:40Z"
    assert utc_iso().endswith("Z") and len(utc_stamp()) == 16


def test_no_module_spells_the_missing_value_test_itself():
    """One helper: a second copy is where the next disagreement (None? NaN? numpy floats?) hides."""
    import re
    from pathlib import Path

    import crdscale

    copy = re.compile(r"isinstance\(\w+(\.\w+)?, float\) and (math|np)\.isnan|(?<![\w.])(\w+) != \3\b")
    root = Path(crdscale.__file__).parent
    found = [
        f"{path.relative_to(root)}:{n}"
        for path in root.rglob("*.py")
        if path.name != "units.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if copy.search(line)
    ]
    assert found == []
