"""Write profiles and tables for other tools: KCachegrind, flame graphs, CSV/Parquet.

- :func:`to_callgrind` writes the Callgrind format through ``pyprof2calltree``
  so users without Go can browse a profile in KCachegrind/QCachegrind.
- :func:`folded_stacks` gives Brendan Gregg's folded format
  (``root;caller;leaf value``) for ``flamegraph.pl``, speedscope, inferno.
- :func:`write_table` writes any DataFrame as CSV or Parquet by extension.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from crdscale.analysis.profile import Profile
from crdscale.analysis.views import _build_graph, _edges, _flat_cum, _parts
from crdscale.errors import UsageError


def write_table(table: pd.DataFrame, path: str | Path) -> Path:
    """Write ``table`` to ``path`` as ``.csv`` or ``.parquet`` (chosen by extension); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    flat = table.copy()
    flat.attrs = {}  # attrs are not serializable by every writer; the columns carry the data
    if path.suffix == ".csv":
        flat.to_csv(path, index=False)
    elif path.suffix in (".parquet", ".pq"):
        flat.to_parquet(path, index=False)
    else:
        raise UsageError(f"{path}: table output must end in .csv or .parquet")
    return path


def folded_stacks(profile: Profile, sample_index: str | int | None = None) -> pd.DataFrame:
    """Folded stacks: one row per distinct stack, ``stack`` (function names from
    root to leaf joined by ``;``, inlined frames included) and ``value`` (sum
    of the sample type, in its unit). Zero-valued stacks are left out."""
    values = profile.values(sample_index)
    frames = profile.frames()
    names = frames["name"].replace("", "<unknown>").to_numpy(dtype=object)
    sample = frames["sample"].to_numpy()
    stacks = [""] * len(values)
    # Frames run leaf to root within a sample; the folded format reads root first.
    bounds = np.flatnonzero(np.r_[True, sample[1:] != sample[:-1], True]) if len(sample) else np.array([0])
    for start, end in zip(bounds[:-1], bounds[1:]):
        stacks[sample[start]] = ";".join(reversed(names[start:end]))
    df = pd.DataFrame({"stack": stacks, "value": values})
    df = df[df["value"] != 0]
    df = df.groupby("stack", sort=True, as_index=False)["value"].sum()
    df.attrs["unit"] = profile.unit(sample_index)
    return df


def write_folded(profile: Profile, out: str | Path | IO[str], sample_index: str | int | None = None) -> None:
    """Write :func:`folded_stacks` as text lines ``stack value``."""
    df = folded_stacks(profile, sample_index)
    text = "".join(f"{s} {v}\n" for s, v in zip(df["stack"], df["value"]))
    if hasattr(out, "write"):
        out.write(text)
    else:
        Path(out).write_text(text)


def callgrind_entries(profile: Profile, sample_index: str | int | None = None, base: Profile | None = None):
    """pyprof2calltree entries (one per function, with calls to its callees).

    Inclusive/exclusive costs are the pprof cum/flat values in the sample unit
    (bytes, objects or nanoseconds), handed over as pyprof2calltree's
    "seconds" so that its nanosecond scaling writes them back unchanged.
    """
    from pyprof2calltree import SCALE, Code, Entry, Subentry

    parts, _index, _total = _parts(profile, base, sample_index, None, None)
    g = _build_graph(parts, "filefunctions", False)
    flat, cum = _flat_cum(g)
    edges = _edges(g)
    start_lines = profile.functions.drop_duplicates("name").set_index("name")["start_line"]

    def seconds(v: int) -> float:
        # Half a unit of slack so int(x * SCALE) in pyprof2calltree gives back v exactly.
        return (v + (0.5 if v >= 0 else -0.5)) / SCALE

    codes = []
    for r in g.nodes.itertuples(index=False):
        name = r.node_name or r.name
        codes.append(Code(r.file or "?", int(start_lines.get(r.node_name, 0) or 0), name))
    calls: dict[int, list] = {}
    for e in edges.itertuples(index=False):
        calls.setdefault(int(e.caller), []).append(
            Subentry(codes[int(e.callee)], 1, 0, 0.0, seconds(int(e.weight)))
        )
    entries = []
    for i in np.flatnonzero((flat != 0) | (cum != 0)):
        entries.append(Entry(codes[i], 1, 0, seconds(int(flat[i])), seconds(int(cum[i])), calls.get(int(i), [])))
    return entries


def to_callgrind(
    profile: Profile,
    out: str | Path | IO[str],
    sample_index: str | int | None = None,
    base: Profile | None = None,
) -> None:
    """Write the profile in Callgrind format (open with KCachegrind/QCachegrind).

    Costs are in the sample type's unit; the event is named after the sample
    type (e.g. ``inuse_space``) instead of pyprof2calltree's ``ns``.
    """
    from pyprof2calltree import CalltreeConverter

    entries = callgrind_entries(profile, sample_index, base)
    buf = io.StringIO()
    CalltreeConverter(entries).output(buf)
    index = profile.sample_index(sample_index)
    kind = profile.meta.sample_types[index]
    text = buf.getvalue().replace(
        "event: ns : Nanoseconds\nevents: ns\n", f"event: {kind.type} : {kind.type} ({kind.unit})\nevents: {kind.type}\n", 1
    )
    if hasattr(out, "write"):
        out.write(text)
    else:
        Path(out).write_text(text)
