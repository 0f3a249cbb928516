"""pprof's text output: headers, ``-top`` and ``-peek`` tables.

Ports of the text printers of ``internal/report`` from github.com/google/pprof
(units and percentages are :mod:`.measurement`'s), so that ``crdscale top`` prints byte for byte
what ``go tool pprof`` prints for the same options.
"""

from __future__ import annotations

import posixpath
import re
from datetime import datetime

import numpy as np
import pandas as pd

from crdscale.analysis.pprof.decode import Profile, combine_headers
from crdscale.analysis.pprof.measurement import percentage, scale, scaled_label
from crdscale.analysis.pprof.select import filter_notes

# pprof's byte units are powers of two under decimal-looking names; crdscale's own tables say KiB/MiB/GiB.
PPROF_UNITS_NOTE = "pprof's byte units are binary: 1kB = 1024 B, 1MB = 2^20 B (MiB), 1GB = 2^30 B (GiB)"


def select_output_unit(table: pd.DataFrame) -> str:
    """The unit pprof's ``-unit=minimum`` picks for the shown rows of a top table."""
    return output_unit(table["flat"].to_numpy(), table["cum"].to_numpy(), table.attrs["total"], table.attrs["unit"])


def output_unit(flat: np.ndarray, cum: np.ndarray, total: int, unit: str) -> str:
    """pprof's ``selectOutputUnit``: the unit that shows the smallest shown node
    with at most two decimals (``kB``, ``MB``...), given the shown nodes' values."""
    if len(flat) == 0:
        return "minimum"
    min_value = 0
    for f, c in zip(np.abs(flat), np.abs(cum)):
        node_min = int(f) or int(c)
        if node_min > 0 and (min_value == 0 or node_min < min_value):
            min_value = node_min
    max_value = int(total)
    if min_value == 0:
        min_value = max_value
    _, min_unit = scale(min_value, unit, "minimum")
    _, max_unit = scale(max_value, unit, "minimum")
    out = min_unit
    if min_unit != max_unit and min_value * 100 < max_value:
        _, out = scale(100 * min_value, unit, "minimum")
    return out or unit


def profile_labels(
    profile: Profile, sample_type: str, unit: str, total: int, format_value, base: Profile | None = None
) -> list[str]:
    """pprof's header lines: File, Build ID, comments, Type, Time, Duration.

    ``sample_type`` is the type as pprof names it (``mean_`` prefixed with
    ``-mean``), ``unit`` its unit, ``total`` the report total in that unit.
    With ``base`` (``-diff_base``) the header is that of pprof's merged
    profile (:func:`~.decode.combine_headers`: the earlier time, the summed
    duration); the binary is the profile's, or the base's if it names none.
    """
    labels = []
    meta = profile.meta if base is None else combine_headers([profile.meta, base.meta])
    maps = profile.mappings
    if base is not None and not len(maps):
        maps = base.mappings
    if len(maps):
        first = maps.iloc[0]
        if first["filename"]:
            labels.append("File: " + posixpath.basename(first["filename"]))
        if first["build_id"]:
            labels.append("Build ID: " + first["build_id"])
    labels += [c for c in meta.comments if not c.startswith("#")]
    labels.append("Type: " + sample_type)
    if meta.doc_url:
        labels.append("Doc: " + meta.doc_url)
    if meta.time_nanos:
        when = datetime.fromtimestamp(meta.time_nanos / 1e9).astimezone()
        labels.append("Time: " + when.strftime("%Y-%m-%d %H:%M:%S %Z"))
    if meta.duration_nanos:
        duration = scaled_label(meta.duration_nanos, "nanoseconds", "auto")
        total_nanos, total_unit = scale(total, unit, "nanoseconds")
        ratio = ""
        if total_unit == "ns" and total_nanos != 0:
            ratio = "(" + percentage(int(total_nanos), meta.duration_nanos) + ")"
        labels.append(f"Duration: {duration}, Total samples = {format_value(total)} {ratio}")
    return labels


def pprof_notes(table: pd.DataFrame) -> list[str]:
    """What ``go tool pprof`` writes to stderr about a view's filters (:func:`~.select.filter_notes`):
    ``Focus expression matched no samples`` and the like."""
    tagfocus = [f.removeprefix("tagfocus=") for f in table.attrs.get("filters", []) if f.startswith("tagfocus=")]
    return filter_notes(tagfocus[0] if tagfocus else None, table.attrs.get("unmatched_filters", []))


def format_top(
    table: pd.DataFrame, profile: Profile | None = None, unit: str = "minimum", base: Profile | None = None
) -> str:
    """Render a :func:`top` table as ``go tool pprof -top`` prints it (header included).

    Pass the ``diff_base`` profile as ``base`` for a diff's header (see :func:`profile_labels`).
    Units are pprof's: its ``kB``/``MB``/``GB`` are 2^10/2^20/2^30 bytes (:data:`PPROF_UNITS_NOTE`).
    """
    out_unit = select_output_unit(table) if unit == "minimum" else unit
    sample_unit = table.attrs["unit"]

    def fmt(v: int) -> str:
        return scaled_label(int(v), sample_unit, out_unit)

    total = table.attrs["total"]
    lines = []
    if profile is not None:
        lines += profile_labels(profile, table.attrs["sample_type"], sample_unit, total, fmt, base)
    filters = table.attrs.get("filters") or []
    if filters:
        lines.append("Active filters:")
        lines += ["   " + (f[:80] + "…" if len(f) > 80 else f) for f in filters]
    shown = table.attrs["shown_total"]
    lines.append(f"Showing nodes accounting for {fmt(shown)}, {percentage(shown, total).strip()} of {fmt(total)} total")
    if total != 0:
        dropped = table.attrs.get("dropped_nodes", 0)
        if dropped > 0:
            cutoff = abs(int(float(total) * table.attrs.get("nodefraction", 0.0)))
            lines.append(f"Dropped {dropped} node{'s' if dropped > 1 else ''} (cum <= {fmt(cutoff)})")
        orig = table.attrs.get("orig_count", len(table))
        if 0 < len(table) < orig:
            lines.append(f"Showing top {len(table)} nodes out of {orig}")
    lines.append(f"{'flat':>10} {'flat':>5}% {'sum':>5}% {'cum':>10} {'cum':>5}%")
    flat_sum = 0
    for row in table.itertuples(index=False):
        flat_sum += int(row.flat)
        inl = f" ({row.inline})" if row.inline else ""
        lines.append(
            f"{fmt(row.flat):>10} {percentage(row.flat, total)} {percentage(flat_sum, total)} "
            f"{fmt(row.cum):>10} {percentage(row.cum, total)}  {row.name}{inl}"
        )
    return "\n".join(lines) + "\n"


def parse_pprof_top(text: str) -> tuple[dict, pd.DataFrame]:
    """Parse ``go tool pprof -top`` output into (header facts, rows).

    Header facts: ``type``, ``shown``, ``total`` (strings as printed). Rows:
    ``flat, flat_pct, sum_pct, cum, cum_pct, name, inline`` as printed. Used
    by tests to compare with recorded pprof output.
    """
    header: dict = {}
    rows = []
    in_rows = False
    for line in text.splitlines():
        if not in_rows:
            if line.startswith("Type: "):
                header["type"] = line[6:]
            m = re.match(r"Showing nodes accounting for (\S+), (\S+) of (\S+) total", line)
            if m:
                header["shown"], header["shown_pct"], header["total"] = m.groups()
            if line.split() == ["flat", "flat%", "sum%", "cum", "cum%"]:
                in_rows = True
            continue
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        name, inline = parts[5], ""
        m = re.match(r"^(.*) \((inline|partial-inline)\)$", name)
        if m:
            name, inline = m.groups()
        rows.append(dict(zip(["flat", "flat_pct", "sum_pct", "cum", "cum_pct"], parts[:5]), name=name, inline=inline))
    return header, pd.DataFrame(rows, columns=["flat", "flat_pct", "sum_pct", "cum", "cum_pct", "name", "inline"])


def format_peek(
    table: pd.DataFrame, profile: Profile | None = None, unit: str = "minimum", base: Profile | None = None
) -> str:
    """Render a :func:`peek` table as ``go tool pprof -peek`` prints it (``base``: as in :func:`format_top`)."""
    total = table.attrs["total"]
    sample_unit = table.attrs["unit"]
    if unit == "minimum":
        unit = table.attrs["output_unit"]

    def fmt(v: int) -> str:
        return scaled_label(int(v), sample_unit, unit)

    separator = "----------------------------------------------------------+-------------"
    lines = []
    if profile is not None:
        lines += profile_labels(profile, table.attrs["sample_type"], sample_unit, total, fmt, base)
    shown = table.attrs["shown_total"]
    lines.append(f"Showing nodes accounting for {fmt(shown)}, {percentage(shown, total).strip()} of {fmt(total)} total")
    lines += [separator, "      flat  flat%   sum%        cum   cum%   calls calls% + context \t \t "]
    flat_sum = 0
    for _node, rows in table.groupby("node", sort=False):
        lines.append(separator)
        node_cum = int(rows.loc[rows["relation"] == "self", "value"].iloc[0])
        for r in rows.itertuples(index=False):
            if r.relation == "self":
                flat_sum += int(r.flat)
                lines.append(
                    f"{fmt(r.flat):>10} {percentage(r.flat, total)} {percentage(flat_sum, total)} "
                    f"{fmt(r.value):>10} {percentage(r.value, total)}                | {r.name}"
                )
            else:
                inl = " (inline)" if r.inline else ""
                lines.append(f"{fmt(r.value):>50} {percentage(r.value, node_cum)} |   {r.name}{inl}")
    lines.append(separator)
    return "\n".join(lines) + "\n"
