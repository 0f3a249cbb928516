"""pprof views as pure functions: top, focus/ignore, diff, peek, granularity.

Every number here is the number ``go tool pprof`` prints for the same flags;
the rules are taken from github.com/google/pprof (``internal/graph``,
``internal/report``, ``internal/driver``, ``profile/filter.go``):

- A *node* is a function (or file, or line, with ``granularity``); a stack's
  inlined frames are nodes of their own.
- ``flat`` of a node sums the samples whose leaf frame is that node; ``cum``
  sums the samples in whose stack the node appears at least once (recursion
  counts once).
- Percentages are of the *total*: the sum of the absolute sample values before
  focus/ignore (pprof's default; percentages stay comparable across filters).
  For a diff it is the total of the base profile.
- focus/ignore select whole samples: a sample is kept if some frame matches
  ``focus`` and none matches ``ignore`` (ignore wins). A frame matches if the
  regular expression is found (unanchored) in the function name, the source
  file name, or the mapping (binary) file name.
- ``diff`` (``-diff_base``) subtracts the base profile sample by sample.

Unlike pprof, nothing is dropped unless asked: by default every node with a
non-zero flat or cum value is returned. ``nodecount``/``nodefraction`` give
pprof's trimming when wanted, and the result says what was dropped.
"""

from __future__ import annotations

import posixpath
import re
from datetime import datetime
from typing import Sequence

import numpy as np
import pandas as pd

from crdscale.analysis.profile import Profile
from crdscale.errors import UsageError

GRANULARITIES = ("functions", "filefunctions", "files", "lines", "addresses")

# pprof's default edge fraction: edges lighter than this share of the total are
# dropped before the "(inline)" marks are decided, so we need it to match them.
PPROF_EDGE_FRACTION = 0.001
PPROF_NODE_FRACTION = 0.005

TOP_COLUMNS = ["name", "flat", "flat_pct", "sum_pct", "cum", "cum_pct", "inline"]


# --------------------------------------------------------------------------
# Regular expressions and sample selection (focus / ignore)
# --------------------------------------------------------------------------


def compile_regex(pattern: str | None, option: str = "focus") -> re.Pattern | None:
    """Compile a Go (RE2) regular expression for Python's ``re``.

    The common RE2 syntax is the same in both; POSIX classes such as
    ``[[:alpha:]]`` and ``\\z`` are translated. Raises UsageError if invalid.
    """
    if pattern is None or pattern == "":
        return None
    translated = pattern.replace(r"\z", r"\Z")
    for posix, py in _POSIX_CLASSES.items():
        translated = translated.replace(f"[:{posix}:]", py)
    try:
        return re.compile(translated)
    except re.error as err:
        raise UsageError(f"parsing {option} regexp {pattern!r}: {err}") from None


_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "digit": "0-9",
    "lower": "a-z",
    "upper": "A-Z",
    "space": r"\t\n\v\f\r ",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
    "punct": r"!-/:-@\[-`{-~",
}


def location_matches(profile: Profile, regex: re.Pattern) -> pd.Series:
    """Bool Series indexed by location id: does the regex match any of the
    location's frames (function name or file name) or its mapping file?"""
    locs = profile.locations
    fn = profile.functions.set_index("function")
    names = fn["name"].reindex(locs["function"]).fillna("").to_numpy()
    files = fn["filename"].reindex(locs["function"]).fillna("").to_numpy()
    mapping_files = (
        profile.mappings.set_index("mapping")["filename"].reindex(locs["mapping"]).fillna("").to_numpy()
    )
    # Match each distinct string once: kube-apiserver profiles repeat them a lot.
    hit = _matches(regex, names) | _matches(regex, files) | _matches(regex, mapping_files)
    return pd.Series(hit, index=locs["location"].to_numpy()).groupby(level=0).any()


def _matches(regex: re.Pattern, strings: np.ndarray) -> np.ndarray:
    uniq, inverse = np.unique(strings.astype(str), return_inverse=True)
    found = np.fromiter((regex.search(s) is not None for s in uniq), dtype=bool, count=len(uniq))
    return found[inverse.reshape(-1)]


def select_samples(profile: Profile, focus: str | None = None, ignore: str | None = None) -> np.ndarray:
    """Bool array over samples: kept by ``-focus``/``-ignore`` as ``go tool pprof`` keeps them.

    A sample is kept if at least one of its locations matches ``focus`` (any
    location when focus is empty) and none matches ``ignore``.
    """
    focus_rx = compile_regex(focus, "focus")
    ignore_rx = compile_regex(ignore, "ignore")
    n = len(profile.samples)
    if focus_rx is None and ignore_rx is None:
        return np.ones(n, dtype=bool)
    stack_loc = profile.stacks["location"].to_numpy()
    stack_sample = profile.stacks["sample"].to_numpy()
    ignored = (
        location_matches(profile, ignore_rx).reindex(stack_loc).to_numpy(dtype=bool)
        if ignore_rx is not None
        else np.zeros(len(stack_loc), dtype=bool)
    )
    focused = (
        location_matches(profile, focus_rx).reindex(stack_loc).to_numpy(dtype=bool)
        if focus_rx is not None
        else np.ones(len(stack_loc), dtype=bool)
    )
    # pprof marks a location "ignored" before testing focus: ignore wins.
    focused = focused & ~ignored
    any_focused = np.bincount(stack_sample, weights=focused, minlength=n) > 0
    any_ignored = np.bincount(stack_sample, weights=ignored, minlength=n) > 0
    return any_focused & ~any_ignored


def filter_profile(profile: Profile, focus: str | None = None, ignore: str | None = None) -> Profile:
    """A new Profile with only the samples kept by focus/ignore (tables reindexed 0..n-1)."""
    keep = select_samples(profile, focus, ignore)
    return subset_samples(profile, keep)


def subset_samples(profile: Profile, keep: np.ndarray) -> Profile:
    """A new Profile with the samples where ``keep`` is true, renumbered 0..n-1."""
    new_index = np.cumsum(keep) - 1
    samples = profile.samples[keep].reset_index(drop=True)
    samples.index.name = "sample"
    stacks = profile.stacks[keep[profile.stacks["sample"].to_numpy()]].copy()
    stacks["sample"] = new_index[stacks["sample"].to_numpy()]
    labels = profile.labels[keep[profile.labels["sample"].to_numpy()]].copy()
    labels["sample"] = new_index[labels["sample"].to_numpy()]
    return Profile(
        samples,
        stacks.reset_index(drop=True),
        profile.locations,
        profile.functions,
        profile.mappings,
        labels.reset_index(drop=True),
        profile.meta,
        source=profile.source,
    )


# --------------------------------------------------------------------------
# Nodes: what a frame counts as, for a granularity
# --------------------------------------------------------------------------


def _clean_path(path: str) -> str:
    """Go's ``filepath.Clean`` (after pprof's default trimPath) for one file name."""
    for prefix in ("/proc/self/cwd/./", "/proc/self/cwd/"):
        if path.startswith(prefix):
            path = path[len(prefix):]
            break
    if not path:
        return ""
    cleaned = posixpath.normpath(path)
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned


def _node_rows(profile: Profile, granularity: str, noinlines: bool) -> tuple[pd.DataFrame, np.ndarray]:
    """pprof's NodeInfo for every row of ``profile.locations`` and which rows take part.

    With ``noinlines`` only the last frame of each location (the function the
    others were inlined into) takes part, as ``-noinlines`` does.
    """
    key = ("nodes", granularity, noinlines)
    if key in profile._cache:
        return profile._cache[key]
    if granularity not in GRANULARITIES:
        raise UsageError(f"granularity must be one of {', '.join(GRANULARITIES)}, not {granularity!r}")
    locs = profile.locations
    loc_ids = locs["location"].to_numpy()
    last_row = np.r_[loc_ids[1:] != loc_ids[:-1], True] if len(loc_ids) else np.zeros(0, bool)
    active = last_row if noinlines else np.ones(len(locs), dtype=bool)

    keep_function = granularity in ("functions", "filefunctions", "lines", "addresses")
    keep_file = granularity in ("filefunctions", "files", "lines", "addresses")
    keep_line = granularity in ("lines", "addresses")
    keep_address = granularity == "addresses"
    # "-granularity=addresses" without -noinlines is no aggregation at all, so columns stay.
    keep_column = granularity == "addresses" and not noinlines

    from crdscale.analysis.profile import _function_columns, _function_positions

    cols = _function_columns(profile)
    fids = locs["function"].to_numpy()
    has_fn = fids != 0
    pos = _function_positions(profile, fids)
    fn_name = cols["name"][pos]
    fn_file = cols["filename"][pos]
    fn_start = cols["start_line"][pos]
    maps = profile.mappings
    map_ids = maps["mapping"].to_numpy(dtype=np.int64)
    map_files = np.append(maps["filename"].to_numpy(dtype=object), "")
    loc_maps = locs["mapping"].to_numpy()
    map_order = np.argsort(map_ids, kind="stable")
    if len(map_ids):
        at = np.minimum(np.searchsorted(map_ids[map_order], loc_maps), len(map_ids) - 1)
        mpos = np.where(map_ids[map_order][at] == loc_maps, map_order[at], len(map_ids))
    else:
        mpos = np.zeros(len(loc_maps), dtype=np.int64)
    mapping_file = map_files[mpos]

    n = len(locs)
    name = fn_name if keep_function else np.full(n, "", dtype=object)
    name = np.where(has_fn, name, "")
    if keep_file:
        cleaned = {f: _clean_path(f) for f in set(fn_file.tolist())}
        file = np.array([cleaned[f] for f in fn_file], dtype=object) if n else np.zeros(0, dtype=object)
        file = np.where(has_fn, file, "")
    else:
        file = np.full(n, "", dtype=object)
    lineno = np.where(has_fn & keep_line, locs["line"].to_numpy(), 0)
    column = np.where(has_fn & keep_column, locs["column"].to_numpy(), 0)
    address = locs["address"].to_numpy() if keep_address else np.zeros(n, dtype=np.uint64)
    # pprof names a frame by its binary (and tells same-named ones apart by start
    # line) only when it has no function name.
    no_name = name == ""
    objfile = np.where(no_name, mapping_file, "")
    start_line = np.where(no_name & has_fn, fn_start, 0)

    rows = pd.DataFrame(
        {
            "node_name": name,
            "address": address.astype(np.uint64),
            "file": file,
            "start_line": start_line.astype(np.int64),
            "lineno": lineno.astype(np.int64),
            "column": column.astype(np.int64),
            "objfile": objfile,
        }
    )
    result = (rows, active)
    profile._cache[key] = result
    return result


NODE_KEY = ["node_name", "address", "file", "start_line", "lineno", "column", "objfile"]


def printable_name(row) -> str:
    """pprof's ``NodeInfo.PrintableName`` for one node row."""
    parts = []
    if row.address:
        parts.append(f"{int(row.address):016x}")
    if row.node_name:
        parts.append(row.node_name)
    if row.lineno:
        s = f"{row.file}:{row.lineno}"
        if row.column:
            s += f":{row.column}"
        parts.append(s)
    elif row.file:
        parts.append(row.file)
    elif row.node_name:
        pass
    elif row.objfile:
        parts.append("[" + posixpath.basename(row.objfile) + "]")
    else:
        parts.append("<unknown>")
    return " ".join(parts)


# --------------------------------------------------------------------------
# The graph: frames of all samples, with node ids
# --------------------------------------------------------------------------


class _Graph:
    """Everything the views need: one weight per sample and each sample's frames as node ids.

    ``frame_sample``/``frame_node``/``frame_inline`` are ordered by sample, then
    from leaf (first) to root (last).
    """

    def __init__(self, nodes, weight, is_base, frame_sample, frame_node, frame_inline):
        self.nodes = nodes  # DataFrame: NODE_KEY columns + "name"
        self.weight = weight  # int64 per sample (negative for diff base samples)
        self.is_base = is_base
        self.frame_sample = frame_sample
        self.frame_node = frame_node
        self.frame_inline = frame_inline

    @property
    def n_nodes(self) -> int:
        return len(self.nodes)


def _build_graph(
    parts: Sequence[tuple[Profile, int, int, np.ndarray | None]],
    granularity: str,
    noinlines: bool,
) -> _Graph:
    """Merge profiles (each with sample index, sign, optional sample mask) into one graph input."""
    key_frames = []
    frames = []
    weights = []
    bases = []
    sample_offset = 0
    for profile, index, sign, keep in parts:
        rows, active = _node_rows(profile, granularity, noinlines)
        key_frames.append(rows)
        expanded = _expanded(profile)
        row = expanded["row"].to_numpy()
        sel = active[row]
        w = profile.samples.iloc[:, index].to_numpy() * sign
        if keep is not None:
            w = np.where(keep, w, 0)
        frames.append((expanded["sample"].to_numpy()[sel] + sample_offset, row[sel], expanded["inlined"].to_numpy()[sel]))
        weights.append(w)
        bases.append(np.full(len(w), sign < 0))
        sample_offset += len(w)

    # One node id per distinct NodeInfo across all profiles: factorize each
    # column, combine the codes into one integer, factorize that (vectorized).
    all_rows = pd.concat(key_frames, ignore_index=True)
    combined = np.zeros(len(all_rows), dtype=np.int64)
    firsts = []
    for column in NODE_KEY:
        col_codes, col_uniques = pd.factorize(all_rows[column].to_numpy(dtype=object), sort=False)
        combined = combined * (len(col_uniques) + 1) + col_codes
        firsts.append(col_uniques)
    codes, first_rows = _factorize_first(combined)
    nodes = all_rows.iloc[first_rows].reset_index(drop=True)
    nodes["name"] = [printable_name(r) for r in nodes.itertuples(index=False)]

    offsets = np.cumsum([0] + [len(k) for k in key_frames])
    frame_sample = np.concatenate([f[0] for f in frames])
    frame_node = np.concatenate([codes[offsets[i] + f[1]] for i, f in enumerate(frames)]).astype(np.int64)
    frame_inline = np.concatenate([f[2] for f in frames])
    return _Graph(nodes, np.concatenate(weights), np.concatenate(bases), frame_sample, frame_node, frame_inline)


def _factorize_first(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes 0..k-1 for ``keys`` in order of first appearance, and the first row of each code."""
    codes, _uniques = pd.factorize(keys, sort=False)
    first = np.full(codes.max() + 1 if len(codes) else 0, len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes)))
    return codes.astype(np.int64), first


def _expanded(profile: Profile) -> pd.DataFrame:
    from crdscale.analysis.profile import _expand_stacks

    return _expand_stacks(profile)


def _flat_cum(g: _Graph) -> tuple[np.ndarray, np.ndarray]:
    """Flat and cum per node (int64), as pprof's graph.newGraph adds samples."""
    n = g.n_nodes
    w = g.weight
    fs, fn = g.frame_sample, g.frame_node
    live = w[fs] != 0
    fs, fn = fs[live], fn[live]
    flat = np.zeros(n, dtype=np.int64)
    cum = np.zeros(n, dtype=np.int64)
    if len(fs) == 0:
        return flat, cum
    leaf = np.r_[True, fs[1:] != fs[:-1]]
    np.add.at(flat, fn[leaf], w[fs[leaf]])
    # A node counts once per sample however often it recurs in the stack.
    pair = np.unique(fs * n + fn)
    np.add.at(cum, pair % n, w[pair // n])
    return flat, cum


def _edges(g: _Graph, kept: np.ndarray | None = None) -> pd.DataFrame:
    """Caller->callee edges between kept nodes: ``caller, callee, weight, inline``.

    As in pprof, frames of nodes that are not kept are skipped (the edge then
    jumps over them), an edge counts once per sample, and an edge is
    ``inline`` only if every counted occurrence is an inlined call.
    """
    fs, fn, fi = g.frame_sample, g.frame_node, g.frame_inline
    live = g.weight[fs] != 0
    if kept is not None:
        live &= kept[fn]
    fs, fn, fi = fs[live], fn[live], fi[live]
    same = fs[1:] == fs[:-1]
    callee, caller, inline, sample = fn[:-1][same], fn[1:][same], fi[:-1][same], fs[:-1][same]
    differ = callee != caller
    callee, caller, inline, sample = callee[differ], caller[differ], inline[differ], sample[differ]
    n = max(g.n_nodes, 1)
    # pprof walks root to leaf and only the first occurrence of an edge in a
    # sample counts; our frames run leaf to root, so keep the last one.
    per_sample = (sample * n + caller) * n + callee
    reversed_first = np.unique(per_sample[::-1], return_index=True)[1]
    keep = len(per_sample) - 1 - reversed_first
    edge_key = caller[keep] * n + callee[keep]
    codes, firsts = _factorize_first(edge_key)
    k = len(firsts)
    weight = np.zeros(k, dtype=np.int64)
    np.add.at(weight, codes, g.weight[sample[keep]])
    all_inline = np.ones(k, dtype=bool)
    np.logical_and.at(all_inline, codes, inline[keep])
    first_key = edge_key[firsts]
    return pd.DataFrame({"caller": first_key // n, "callee": first_key % n, "weight": weight, "inline": all_inline})


def _sort_nodes(nodes: pd.DataFrame, flat: np.ndarray, cum: np.ndarray, by_cum: bool) -> np.ndarray:
    """Node ids in pprof's FlatNameOrder (or CumNameOrder): |flat| (|cum|) descending,
    printable name, |cum| (|flat|) descending, then pprof's NodeInfo text."""
    names = nodes["name"].to_numpy(dtype=object)
    if len(names) == 0:
        return np.zeros(0, dtype=np.int64)
    by_name = sorted(range(len(names)), key=names.__getitem__)
    name_rank = np.empty(len(names), dtype=np.int64)
    name_rank[by_name] = np.arange(len(names))
    # Equal names must get equal ranks so the next keys decide between them.
    sorted_names = names[by_name]
    dup = np.r_[False, sorted_names[1:] == sorted_names[:-1]]
    name_rank[by_name] = np.cumsum(~dup) - 1
    uniq = sorted_names[~dup]
    info_rank = np.zeros(len(names), dtype=np.int64)
    if len(uniq) < len(names):
        # Only nodes sharing a printable name need pprof's last tie-breaker.
        info = [
            f"{{{r.node_name}  {int(r.address)} {r.file} {r.start_line} {r.lineno} {r.column} {r.objfile}}}"
            for r in nodes.itertuples(index=False)
        ]
        _, info_rank = np.unique(np.asarray(info, dtype=str), return_inverse=True)
        info_rank = info_rank.reshape(-1)
    first, second = (np.abs(cum), np.abs(flat)) if by_cum else (np.abs(flat), np.abs(cum))
    # np.lexsort sorts by the last key first.
    return np.lexsort((info_rank, -second, name_rank, -first)).astype(np.int64)


# --------------------------------------------------------------------------
# Public views
# --------------------------------------------------------------------------


def _parts(profile, base, sample_index, focus, ignore):
    index = profile.sample_index(sample_index)
    parts = [(profile, index, 1, None)]
    if base is not None:
        if [t for t in base.meta.sample_types] != [t for t in profile.meta.sample_types]:
            raise UsageError(
                "base profile has different sample types: "
                f"{base.sample_types} vs {profile.sample_types}"
            )
        parts.append((base, index, -1, None))
    # The total is taken before focus/ignore, as pprof does (percentages of everything).
    totals = [np.abs(p.samples.iloc[:, i].to_numpy()).sum() for p, i, _, _ in parts]
    total = int(totals[1]) if base is not None and totals[1] > 0 else int(sum(totals))
    if focus or ignore:
        parts = [(p, i, s, select_samples(p, focus, ignore)) for p, i, s, _ in parts]
    return parts, index, total


def top(
    profile: Profile,
    sample_index: str | int | None = None,
    *,
    granularity: str = "functions",
    focus: str | None = None,
    ignore: str | None = None,
    base: Profile | None = None,
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
    bytes, count or nanoseconds); ``*_pct`` are percent (0-100) of
    ``df.attrs["total"]``; ``inline`` is ``""``, ``"inline"`` or
    ``"partial-inline"`` as pprof marks them.

    Nothing is dropped by default. ``nodefraction`` drops nodes whose |cum| is
    below that share of the shown total and ``nodecount`` keeps the first N,
    exactly as pprof's ``-nodefraction`` and ``-nodecount``; ``attrs`` then
    tells ``dropped_nodes`` and ``orig_count``. With ``base``, values are
    ``profile - base`` and percentages are of the base total (``-diff_base``).
    """
    if sort not in ("flat", "cum"):
        raise UsageError(f"sort must be 'flat' or 'cum', not {sort!r}")
    parts, index, total = _parts(profile, base, sample_index, focus, ignore)
    g = _build_graph(parts, granularity, noinlines)
    flat, cum = _flat_cum(g)
    exists = (flat != 0) | (cum != 0)
    total_value = int(flat[exists].sum())
    node_cutoff = abs(int(float(total_value) * nodefraction))
    edge_cutoff = abs(int(float(total_value) * edgefraction))

    kept = exists.copy()
    dropped = 0
    if node_cutoff > 0:
        kept &= np.abs(cum) >= node_cutoff
        dropped = int(exists.sum() - kept.sum())
    orig_count = int(kept.sum())
    order = _sort_nodes(g.nodes, flat, cum, sort == "cum")
    order = order[kept[order]]
    trimmed = dropped > 0
    if nodecount and nodecount > 0 and len(order) > nodecount:
        order = order[:nodecount]
        kept = np.zeros_like(kept)
        kept[order] = True
        trimmed = True

    edges = _edges(g, kept if trimmed else None)
    edges = edges[np.abs(edges["weight"].to_numpy()) >= edge_cutoff]
    inline_in = edges.groupby("callee")["inline"].agg(["any", "all"])
    marks = np.full(g.n_nodes, "", dtype=object)
    if len(inline_in):
        callee = inline_in.index.to_numpy()
        marks[callee] = np.where(
            inline_in["all"].to_numpy(), "inline", np.where(inline_in["any"].to_numpy(), "partial-inline", "")
        )

    f, c = flat[order], cum[order]
    out = pd.DataFrame(
        {
            "name": g.nodes["name"].to_numpy()[order],
            "flat": f,
            "flat_pct": _pct(f, total),
            "sum_pct": _pct(np.cumsum(f), total),
            "cum": c,
            "cum_pct": _pct(c, total),
            "inline": marks[order],
        }
    )
    sample_type = profile.meta.sample_types[index]
    out.attrs.update(
        total=total,
        shown_total=int(f.sum()),
        sample_type=sample_type.type,
        unit=sample_type.unit,
        granularity=granularity,
        dropped_nodes=dropped,
        orig_count=orig_count,
        nodecount=nodecount,
        nodefraction=nodefraction,
        filters=_filters(focus, ignore),
    )
    return out


def diff(profile: Profile, base: Profile, sample_index: str | int | None = None, **options) -> pd.DataFrame:
    """``top`` of ``profile - base`` (``go tool pprof -diff_base=base``); see :func:`top`."""
    return top(profile, sample_index, base=base, **options)


def peek(
    profile: Profile,
    regex: str,
    sample_index: str | int | None = None,
    *,
    granularity: str = "functions",
    focus: str | None = None,
    ignore: str | None = None,
    base: Profile | None = None,
    noinlines: bool = False,
) -> pd.DataFrame:
    """Callers and callees of every node whose name matches ``regex`` (``go tool pprof -peek``).

    Returns rows ``node, relation, name, value, pct, inline`` in pprof's print
    order: for each matching node (sorted as ``top``) its callers
    (``relation="caller"``), itself (``"self"``, value = cum, plus ``flat``),
    then its callees (``"callee"``). ``value`` is the edge weight in the
    sample unit; ``pct`` is percent of the node's cum (for ``self``, of the
    total). Raises UsageError if nothing matches.
    """
    rx = compile_regex(regex, "peek")
    parts, index, total = _parts(profile, base, sample_index, focus, ignore)
    g = _build_graph(parts, granularity, noinlines)
    flat, cum = _flat_cum(g)
    exists = (flat != 0) | (cum != 0)
    order = _sort_nodes(g.nodes, flat, cum, False)
    order = order[exists[order]]
    names = g.nodes["name"].to_numpy()
    edges = _edges(g)
    edges["abs"] = np.abs(edges["weight"].to_numpy())
    edges["caller_name"] = names[edges["caller"].to_numpy()]
    edges["callee_name"] = names[edges["callee"].to_numpy()]
    rows = []
    for node in order:
        name = names[node]
        if not rx.search(name):
            continue
        node_cum = int(cum[node])
        callers = edges[edges["callee"] == node].sort_values(
            ["abs", "caller_name", "callee_name"], ascending=[False, True, True]
        )
        for e in callers.itertuples(index=False):
            rows.append((name, "caller", e.caller_name, int(e.weight), _pct1(e.weight, node_cum), bool(e.inline), 0))
        rows.append((name, "self", name, node_cum, _pct1(node_cum, total), False, int(flat[node])))
        callees = edges[edges["caller"] == node].sort_values(
            ["abs", "caller_name", "callee_name"], ascending=[False, True, True]
        )
        for e in callees.itertuples(index=False):
            rows.append((name, "callee", e.callee_name, int(e.weight), _pct1(e.weight, node_cum), bool(e.inline), 0))
    if not rows:
        raise UsageError(f"no matches found for regexp: {regex}")
    out = pd.DataFrame(rows, columns=["node", "relation", "name", "value", "pct", "inline", "flat"])
    sample_type = profile.meta.sample_types[index]
    out.attrs.update(
        total=total,
        sample_type=sample_type.type,
        unit=sample_type.unit,
        # pprof's peek header and units are those of the whole (untrimmed) graph.
        shown_total=int(flat[exists].sum()),
        output_unit=output_unit(flat[exists], cum[exists], total, sample_type.unit),
    )
    return out


def _pct(values: np.ndarray, total: int) -> np.ndarray:
    if total == 0:
        return np.zeros(len(values))
    return np.abs(values / total) * 100.0


def _pct1(value: int, total: int) -> float:
    return abs(value / total) * 100.0 if total else 0.0


def _filters(focus, ignore) -> list[str]:
    return [f"{k}={v}" for k, v in (("focus", focus), ("ignore", ignore)) if v]


# --------------------------------------------------------------------------
# pprof's text rendering (internal/measurement + internal/report)
# --------------------------------------------------------------------------

_UNIT_TYPES = [
    (
        [("B", ("b", "byte"), 1.0), ("kB", ("kb", "kbyte", "kilobyte"), float(1 << 10)),
         ("MB", ("mb", "mbyte", "megabyte"), float(1 << 20)), ("GB", ("gb", "gbyte", "gigabyte"), float(1 << 30)),
         ("TB", ("tb", "tbyte", "terabyte"), float(1 << 40)), ("PB", ("pb", "pbyte", "petabyte"), float(1 << 50))],
        ("B", 1.0),
    ),
    (
        [("ns", ("ns", "nanosecond"), 1.0), ("us", ("μs", "us", "microsecond"), 1e3),
         ("ms", ("ms", "millisecond"), 1e6), ("s", ("s", "sec", "second"), 1e9),
         ("hrs", ("hour", "hr"), 3600e9)],
        ("s", 1e9),
    ),
    (
        [("n*GCU", ("nanogcu",), 1e-9), ("u*GCU", ("microgcu",), 1e-6), ("m*GCU", ("milligcu",), 1e-3),
         ("GCU", ("gcu",), 1.0), ("k*GCU", ("kilogcu",), 1e3), ("M*GCU", ("megagcu",), 1e6),
         ("G*GCU", ("gigagcu",), 1e9), ("T*GCU", ("teragcu",), 1e12), ("P*GCU", ("petagcu",), 1e15)],
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


def profile_labels(profile: Profile, sample_type: str, total: int, format_value) -> list[str]:
    """pprof's header lines: File, Build ID, comments, Type, Time, Duration."""
    labels = []
    maps = profile.mappings
    if len(maps):
        first = maps.iloc[0]
        if first["filename"]:
            labels.append("File: " + posixpath.basename(first["filename"]))
        if first["build_id"]:
            labels.append("Build ID: " + first["build_id"])
    labels += [c for c in profile.meta.comments if not c.startswith("#")]
    labels.append("Type: " + sample_type)
    if profile.meta.doc_url:
        labels.append("Doc: " + profile.meta.doc_url)
    if profile.meta.time_nanos:
        when = datetime.fromtimestamp(profile.meta.time_nanos / 1e9).astimezone()
        labels.append("Time: " + when.strftime("%Y-%m-%d %H:%M:%S %Z"))
    if profile.meta.duration_nanos:
        duration = scaled_label(profile.meta.duration_nanos, "nanoseconds", "auto")
        unit = profile.unit(sample_type) if sample_type in profile.sample_types else ""
        total_nanos, total_unit = scale(total, unit, "nanoseconds")
        ratio = ""
        if total_unit == "ns" and total_nanos != 0:
            ratio = "(" + percentage(int(total_nanos), profile.meta.duration_nanos) + ")"
        labels.append(f"Duration: {duration}, Total samples = {format_value(total)} {ratio}")
    return labels


def format_top(table: pd.DataFrame, profile: Profile | None = None, unit: str = "minimum") -> str:
    """Render a :func:`top` table as ``go tool pprof -top`` prints it (header included)."""
    out_unit = select_output_unit(table) if unit == "minimum" else unit
    sample_unit = table.attrs["unit"]

    def fmt(v: int) -> str:
        return scaled_label(int(v), sample_unit, out_unit)

    total = table.attrs["total"]
    lines = []
    if profile is not None:
        lines += profile_labels(profile, table.attrs["sample_type"], total, fmt)
    filters = table.attrs.get("filters") or []
    if filters:
        lines.append("Active filters:")
        lines += ["   " + (f[:80] + "…" if len(f) > 80 else f) for f in filters]
    shown = table.attrs["shown_total"]
    lines.append(
        f"Showing nodes accounting for {fmt(shown)}, {percentage(shown, total).strip()} of {fmt(total)} total"
    )
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


def format_peek(table: pd.DataFrame, profile: Profile | None = None, unit: str = "minimum") -> str:
    """Render a :func:`peek` table as ``go tool pprof -peek`` prints it."""
    total = table.attrs["total"]
    sample_unit = table.attrs["unit"]
    if unit == "minimum":
        unit = table.attrs["output_unit"]

    def fmt(v: int) -> str:
        return scaled_label(int(v), sample_unit, unit)

    separator = "----------------------------------------------------------+-------------"
    lines = []
    if profile is not None:
        lines += profile_labels(profile, table.attrs["sample_type"], total, fmt)
    shown = table.attrs["shown_total"]
    lines.append(
        f"Showing nodes accounting for {fmt(shown)}, {percentage(shown, total).strip()} of {fmt(total)} total"
    )
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
