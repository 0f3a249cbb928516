"""The one byte formatter and the one set of timestamp helpers."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from crdscale.timeutil import iso_from_epoch, utc_iso, utc_iso_micro, utc_stamp
from crdscale.units import fmt_bytes


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


def test_utc_spellings():
    when = datetime(2026, 11, 18, 11, 6, 40, 250000, tzinfo=timezone.utc)
    assert utc_iso(when) == "2026-11-18T11:06:40Z"
    assert utc_iso_micro(when) == "2026-11-18T11:06:40.250000Z"
    assert utc_stamp(when) == "20261118T110640Z"
    assert iso_from_epoch(when.timestamp()) == "2026-11-18T11:06:40Z"
    assert utc_iso().endswith("Z") and len(utc_stamp()) == 16
