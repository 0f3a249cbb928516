"""pprof's views as DataFrames: ``top``, ``peek`` and ``diff`` (``-diff_base``).

Every number is the number ``go tool pprof`` prints for the same options
(``internal/report`` and ``internal/driver`` of github.com/google/pprof):

- Percentages are of the *total*: the sum of the absolute sample values before
  any filter (pprof's default, so percentages stay comparable across
  filters). For a diff it is the total of the base profile; with ``mean`` the
  total is divided by the sum of the divisors.
- ``diff_base`` subtracts the base profile sample by sample.
- Filters (focus, ignore, show, hide, tagfocus) are :mod:`.select`'s.

Unlike pprof, nothing is dropped unless asked: by default every node with a
non-zero flat or cum value is returned. ``nodecount``/``nodefraction`` give
pprof's trimming when wanted, and the result says what was dropped.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from crdscale.analysis.pprof.decode import Profile
from crdscale.analysis.pprof.graph import Part, build_graph, edges, flat_cum, mean_values, sort_nodes
from crdscale.analysis.pprof.options import PPROF_EDGE_FRACTION
from crdscale.analysis.pprof.select import WARNING_NAMES, Filters, compile_regex, filter_notes, select
from crdscale.analysis.pprof.text import output_unit
from crdscale.errors import UsageError

TOP_COLUMNS = ["name", "flat", "flat_pct", "sum_pct", "cum", "cum_pct", "inline"]


def graph_parts(
    profile: Profile,
    sample_index: str | int | None = None,
    filters: Filters = Filters(),  # noqa: B008 (frozen: one shared empty filter is safe)
    diff_base: Profile | None = None,
    mean: bool = False,
) -> tuple[list[Part], int, int]:
    """The :class:`~.graph.Part` list a view builds its graph from, the sample
    type's position, and the report total (pprof's ``computeTotal``, in the
    sample unit; divided by the divisor sum with ``mean``)."""
    index = profile.sample_index(sample_index)
    profiles = [(profile, 1)]
    if diff_base is not None:
        if list(diff_base.meta.sample_types) != list(profile.meta.sample_types):
            raise UsageError(
                f"base profile has different sample types: {diff_base.sample_types} vs {profile.sample_types}"
            )
        profiles.append((diff_base, -1))
    # The total is taken before any filter, as pprof does (percentages of everything).
    totals = [int(np.abs(p.values(index)).sum()) for p, _ in profiles]
    # pprof sums the divisors with their sign (a base's are negative), the values without.
    divs = [int(p.values(0).sum()) * sign if mean else 0 for p, sign in profiles]
    if diff_base is not None and totals[1] > 0:
        total, div = totals[1], divs[1]
    else:
        total, div = sum(totals), sum(divs)
    if div:
        total = int(mean_values(np.array([total]), np.array([div]))[0])
    parts = []
    for p, sign in profiles:
        chosen = select(p, filters)
        parts.append(Part(p, index, sign, chosen.keep, chosen.visible, chosen.unmatched))
    return parts, index, total


def unmatched_filters(parts: list[Part]) -> list[str]:
    """The filters that matched nothing in any of the parts (pprof filters the merged profile),
    in pprof's order: what ``go tool pprof`` warns about ("Focus expression matched no samples")."""
    return [k for k in WARNING_NAMES if all(k in part.unmatched for part in parts)]


def _type_label(profile: Profile, index: int, mean: bool) -> str:
    name = profile.meta.sample_types[index].type
    return "mean_" + name if mean else name


def top(
    profile: Profile,
    sample_index: str | int | None = None,
    *,
    granularity: str = "functions",
    focus: str | None = None,
    ignore: str | None = None,
    show: str | None = None,
    hide: str | None = None,
    tagfocus: str | None = None,
    diff_base: Profile | None = None,
    mean: bool = False,
    sort: str = "flat",
    nodecount: int = 0,
    nodefraction: float = 0.0,
    edgefraction: float = PPROF_EDGE_FRACTION,
    noinlines: bool = False,
) -> pd.DataFrame:
    """The ``go tool pprof -top`` table.

    Returns one row per node, sorted by |flat| (or |cum| with ``sort="cum"``),
    columns ``name, flat, flat_pct, sum_pct, cum, cum_pct, inline``. ``flat``
    and ``cum`` are int64 in the sample type's unit (``df.attrs["unit"]``:
    bytes, count or nanoseconds; per unit of the first sample type with
    ``mean``); ``*_pct`` are percent (0-100) of ``df.attrs["total"]``;
    ``inline`` is ``""``, ``"inline"`` or ``"partial-inline"`` as pprof marks
    them.

    Nothing is dropped by default. ``nodefraction`` drops nodes whose |cum| is
    below that share of the shown total and ``nodecount`` keeps the first N,
    exactly as pprof's ``-nodefraction`` and ``-nodecount``; ``attrs`` then
    tells ``dropped_nodes`` and ``orig_count``. With ``diff_base``, values are
    ``profile - diff_base`` and percentages are of the base total. Filters are
    pprof's ``-focus -ignore -show -hide -tagfocus`` (see :mod:`.select`);
    ``attrs["unmatched_filters"]`` names those that matched nothing (pprof
    warns about them: :func:`~.text.pprof_notes`).
    """
    if sort not in ("flat", "cum"):
        raise UsageError(f"sort must be 'flat' or 'cum', not {sort!r}")
    filters = Filters(focus, ignore, show, hide, tagfocus)
    parts, index, total = graph_parts(profile, sample_index, filters, diff_base, mean)
    g = build_graph(parts, granularity, noinlines, mean)
    flat, cum = flat_cum(g)
    exists = (flat != 0) | (cum != 0)
    # pprof trims and sorts by the raw sums, and prints the means.
    total_value = int(flat[exists].sum())
    node_cutoff = abs(int(float(total_value) * nodefraction))
    edge_cutoff = abs(int(float(total_value) * edgefraction))

    kept = exists.copy()
    dropped = 0
    if node_cutoff > 0:
        kept &= np.abs(cum) >= node_cutoff
        dropped = int(exists.sum() - kept.sum())
    orig_count = int(kept.sum())
    # Only the kept nodes are ordered (an inuse_* view touches a fraction of the profile's functions).
    candidates = np.flatnonzero(kept)
    order = candidates[
        sort_nodes({k: v[candidates] for k, v in g.nodes.items()}, flat[candidates], cum[candidates], sort == "cum")
    ]
    trimmed = dropped > 0
    if nodecount and nodecount > 0 and len(order) > nodecount:
        order = order[:nodecount]
        kept = np.zeros_like(kept)
        kept[order] = True
        trimmed = True

    calls = edges(g, kept if trimmed else None)
    shown = np.abs(calls["weight"].to_numpy()) >= edge_cutoff
    # A node is "inline" when every call into it that is shown was inlined, "partial-inline" when some were.
    callee = calls["callee"].to_numpy()[shown]
    calls_in = np.bincount(callee, minlength=g.n_nodes)
    inlined_in = np.bincount(callee, weights=calls["inline"].to_numpy()[shown], minlength=g.n_nodes)
    marks = np.where(
        (calls_in > 0) & (inlined_in == calls_in), "inline", np.where(inlined_in > 0, "partial-inline", "")
    ).astype(object)

    if mean:
        flat_div, cum_div = flat_cum(g, g.divisor)
        flat, cum = mean_values(flat, flat_div), mean_values(cum, cum_div)
    f, c = flat[order], cum[order]
    out = pd.DataFrame(
        {
            "name": g.nodes["name"][order],
            "flat": f,
            "flat_pct": _pct(f, total),
            "sum_pct": _pct(np.cumsum(f), total),
            "cum": c,
            "cum_pct": _pct(c, total),
            "inline": marks[order],
        }
    )
    out.attrs.update(
        total=total,
        shown_total=int(f.sum()),
        sample_type=_type_label(profile, index, mean),
        unit=profile.meta.sample_types[index].unit,
        granularity=granularity,
        dropped_nodes=dropped,
        orig_count=orig_count,
        nodecount=nodecount,
        nodefraction=nodefraction,
        filters=filters.active(),
        unmatched_filters=unmatched_filters(parts),
    )
    return out


def diff(profile: Profile, base: Profile, sample_index: str | int | None = None, **options) -> pd.DataFrame:
    """``top`` of ``profile - base`` (``go tool pprof -diff_base=base``); see :func:`top`."""
    return top(profile, sample_index, diff_base=base, **options)


def peek(
    profile: Profile,
    regex: str,
    sample_index: str | int | None = None,
    *,
    granularity: str = "functions",
    focus: str | None = None,
    ignore: str | None = None,
    show: str | None = None,
    hide: str | None = None,
    tagfocus: str | None = None,
    diff_base: Profile | None = None,
    mean: bool = False,
    noinlines: bool = False,
) -> pd.DataFrame:
    """Callers and callees of every node whose name matches ``regex`` (``go tool pprof -peek``).

    Returns rows ``node, relation, name, value, pct, inline, flat`` in pprof's
    print order: for each matching node (sorted as ``top``) its callers
    (``relation="caller"``), itself (``"self"``, value = cum, plus ``flat``),
    then its callees (``"callee"``). ``value`` is the edge weight in the
    sample unit; ``pct`` is percent of the node's cum (for ``self``, of the
    total). Raises UsageError if nothing matches.
    """
    rx = compile_regex(regex, "peek")
    filters = Filters(focus, ignore, show, hide, tagfocus)
    parts, index, total = graph_parts(profile, sample_index, filters, diff_base, mean)
    g = build_graph(parts, granularity, noinlines, mean)
    flat, cum = flat_cum(g)
    exists = (flat != 0) | (cum != 0)
    order = sort_nodes(g.nodes, flat, cum, False)
    order = order[exists[order]]
    if mean:
        flat_div, cum_div = flat_cum(g, g.divisor)
        flat, cum = mean_values(flat, flat_div), mean_values(cum, cum_div)
    names = g.nodes["name"]
    # pprof's peek prints the edges' raw weights even with -mean (only nodes show means).
    calls = edges(g)
    calls["abs"] = np.abs(calls["weight"].to_numpy())
    calls["caller_name"] = names[calls["caller"].to_numpy()]
    calls["callee_name"] = names[calls["callee"].to_numpy()]
    rows = []
    for node in order:
        name = names[node]
        if not rx.search(name):
            continue
        node_cum = int(cum[node])
        callers = calls[calls["callee"] == node].sort_values(
            ["abs", "caller_name", "callee_name"], ascending=[False, True, True]
        )
        for e in callers.itertuples(index=False):
            rows.append((name, "caller", e.caller_name, int(e.weight), _pct1(e.weight, node_cum), bool(e.inline), 0))
        rows.append((name, "self", name, node_cum, _pct1(node_cum, total), False, int(flat[node])))
        callees = calls[calls["caller"] == node].sort_values(
            ["abs", "caller_name", "callee_name"], ascending=[False, True, True]
        )
        for e in callees.itertuples(index=False):
            rows.append((name, "callee", e.callee_name, int(e.weight), _pct1(e.weight, node_cum), bool(e.inline), 0))
    if not rows:
        notes = filter_notes(tagfocus, unmatched_filters(parts))  # pprof's, printed before its error
        raise UsageError(f"no matches found for regexp: {regex}", details="\n".join(notes) or None)
    out = pd.DataFrame(rows, columns=["node", "relation", "name", "value", "pct", "inline", "flat"])
    unit = profile.meta.sample_types[index].unit
    out.attrs.update(
        total=total,
        sample_type=_type_label(profile, index, mean),
        unit=unit,
        # pprof's peek header and units are those of the whole (untrimmed) graph.
        shown_total=int(flat[exists].sum()),
        output_unit=output_unit(flat[exists], cum[exists], total, unit),
        filters=filters.active(),
        unmatched_filters=unmatched_filters(parts),
    )
    return out


def _pct(values: np.ndarray, total: int) -> np.ndarray:
    if total == 0:
        return np.zeros(len(values))
    return np.abs(values / total) * 100.0


def _pct1(value: int, total: int) -> float:
    return abs(value / total) * 100.0 if total else 0.0
