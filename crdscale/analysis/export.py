"""Profiles and tables for other tools: KCachegrind, flame graphs, CSV/Parquet.

- :func:`callgrind` gives the Callgrind format, so users without Go can
  browse a profile in KCachegrind/QCachegrind.
- :func:`folded_stacks` / :func:`folded_text` give Brendan Gregg's folded
  format (``root;caller;leaf value``) for ``flamegraph.pl``, speedscope, inferno.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from crdscale.analysis.pprof.decode import Profile, function_arrays
from crdscale.analysis.pprof.graph import build_graph, edges, flat_cum
from crdscale.analysis.pprof.views import graph_parts


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


def folded_text(profile: Profile, sample_index: str | int | None = None) -> str:
    """:func:`folded_stacks` as text, one ``stack value`` line per stack."""
    df = folded_stacks(profile, sample_index)
    return "".join(f"{s} {v}\n" for s, v in zip(df["stack"], df["value"]))


def callgrind(profile: Profile, sample_index: str | int | None = None, base: Profile | None = None) -> str:
    """The profile in Callgrind format (open with KCachegrind/QCachegrind), as text.

    One ``fn`` block per function (pprof's ``filefunctions`` nodes): its self
    cost is pprof's flat value, and each call to a callee carries the edge's
    inclusive cost, so KCachegrind's inclusive cost of a function is pprof's
    cum. Costs are integers in the sample type's unit (bytes, objects,
    nanoseconds); the event is named after the sample type (``inuse_space``).
    With ``base``, costs are ``profile - base`` (pprof's ``-diff_base``) and
    may be negative. Format: https://valgrind.org/docs/manual/cl-format.html
    """
    parts, index, _total = graph_parts(profile, sample_index, diff_base=base)
    g = build_graph(parts, "filefunctions")
    flat, cum = flat_cum(g)
    calls = edges(g)
    # Nodes carry pprof's names (generic functions shortened), so look the start lines up by those.
    fn_cols = function_arrays(profile)
    start_lines = pd.Series(fn_cols["start_line"][:-1], index=fn_cols["pprof_name"][:-1])
    start_lines = start_lines[~start_lines.index.duplicated()]
    kind = profile.meta.sample_types[index]
    nodes = g.nodes
    names = [n or p for n, p in zip(nodes["node_name"], nodes["name"])]
    files = [f or "?" for f in nodes["file"]]
    lines = [int(start_lines.get(n, 0) or 0) for n in nodes["node_name"]]
    out = [
        "# callgrind format",
        "version: 1",
        "creator: crdscale",
        "positions: line",
        f"event: {kind.type} : {kind.type} ({kind.unit})",
        f"events: {kind.type}",
        f"summary: {int(flat.sum())}",
        "",
    ]
    callees: dict[int, list] = {}
    for e in calls.itertuples(index=False):
        callees.setdefault(int(e.caller), []).append((int(e.callee), int(e.weight)))
    for i in np.flatnonzero((flat != 0) | (cum != 0)):
        out += [f"fl={files[i]}", f"fn={names[i]}", f"{lines[i]} {int(flat[i])}"]
        for callee, weight in callees.get(int(i), []):
            out += [f"cfl={files[callee]}", f"cfn={names[callee]}", f"calls=1 {lines[callee]}", f"{lines[i]} {weight}"]
        out.append("")
    return "\n".join(out) + "\n"
