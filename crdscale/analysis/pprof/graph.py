"""pprof's call graph: nodes (what a frame counts as), flat/cum per node, edges, node order.

Every number here is the number ``go tool pprof`` computes for the same
options (``internal/graph`` of github.com/google/pprof):

- A *node* is a function (or file, or line, with ``granularity``); a stack's
  inlined frames are nodes of their own unless ``noinlines``.
- ``flat`` of a node sums the samples whose leaf frame is that node; ``cum``
  sums the samples in whose stack the node appears at least once (recursion
  counts once). With a mean divisor (``-mean``) each also has a divisor sum
  and the shown value is their integer quotient.
- An edge counts once per sample; it is ``inline`` only if every counted
  occurrence is a call inlined into its caller.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pandas as pd

from crdscale.analysis.pprof.decode import Profile, expand_stacks, function_arrays, location_function_rows
from crdscale.analysis.pprof.options import GRANULARITIES
from crdscale.errors import UsageError

# The columns of pprof's NodeInfo: two frames are the same node when all are equal.
NODE_KEY = ["node_name", "address", "file", "start_line", "lineno", "column", "objfile"]


# --------------------------------------------------------------------------
# Nodes: what a frame counts as, for a granularity
# --------------------------------------------------------------------------


def clean_path(path: str) -> str:
    """Go's ``filepath.Clean`` (after pprof's default trimPath) for one file name."""
    for prefix in ("/proc/self/cwd/./", "/proc/self/cwd/"):
        if path.startswith(prefix):
            path = path[len(prefix) :]
            break
    if not path:
        return ""
    cleaned = posixpath.normpath(path)
    if cleaned.startswith("//"):
        cleaned = "/" + cleaned.lstrip("/")
    return cleaned


def node_rows(profile: Profile, granularity: str = "functions", noinlines: bool = False) -> dict[str, np.ndarray]:
    """pprof's NodeInfo for every row of ``profile.locations``: the :data:`NODE_KEY`
    columns, as the granularity keeps them (cached on the profile)."""
    key = ("nodes", granularity, noinlines)
    if key in profile._cache:
        return profile._cache[key]
    if granularity not in GRANULARITIES:
        raise UsageError(f"granularity must be one of {', '.join(GRANULARITIES)}, not {granularity!r}")
    col = profile.column

    keep_function = granularity in ("functions", "filefunctions", "lines", "addresses")
    keep_file = granularity in ("filefunctions", "files", "lines", "addresses")
    keep_line = granularity in ("lines", "addresses")
    keep_address = granularity == "addresses"
    # "-granularity=addresses" without -noinlines is no aggregation at all, so columns stay.
    keep_column = granularity == "addresses" and not noinlines

    cols = function_arrays(profile)
    fids = col("locations", "function")
    has_fn = fids != 0
    pos = location_function_rows(profile)  # cached: attribution reads the same rows
    fn_name = cols["pprof_name"][pos]  # pprof shows and keys nodes by its shortened names
    fn_start = cols["start_line"][pos]
    map_ids = col("mappings", "mapping").astype(np.int64, copy=False)
    map_files = np.append(col("mappings", "filename").astype(object, copy=False), "")
    loc_maps = col("locations", "mapping")
    map_order = np.argsort(map_ids, kind="stable")
    if len(map_ids):
        at = np.minimum(np.searchsorted(map_ids[map_order], loc_maps), len(map_ids) - 1)
        mpos = np.where(map_ids[map_order][at] == loc_maps, map_order[at], len(map_ids))
    else:
        mpos = np.zeros(len(loc_maps), dtype=np.int64)
    mapping_file = map_files[mpos]

    n = len(fids)
    name = fn_name if keep_function else np.full(n, "", dtype=object)
    name = np.where(has_fn, name, "")
    if keep_file:
        cleaned = {f: clean_path(f) for f in set(cols["filename"].tolist())}
        file_table = np.array([cleaned[f] for f in cols["filename"].tolist()], dtype=object)  # ends with ""
        file = np.where(has_fn, file_table[pos], "")
    else:
        file = np.full(n, "", dtype=object)
    lineno = np.where(has_fn & keep_line, col("locations", "line"), 0)
    column = np.where(has_fn & keep_column, col("locations", "column"), 0)
    address = col("locations", "address") if keep_address else np.zeros(n, dtype=np.uint64)
    # pprof names a frame by its binary (and tells same-named ones apart by start
    # line) only when it has no function name.
    no_name = name == ""
    objfile = np.where(no_name, mapping_file, "")
    start_line = np.where(no_name & has_fn, fn_start, 0)

    # Integer codes of the string columns, equal where the strings are equal: from the
    # function and mapping tables (a few thousand names) instead of every locations row.
    codes = {
        "node_name": _row_codes(cols["pprof_name"], pos, has_fn) if keep_function else np.zeros(n, dtype=np.int64),
        "file": _row_codes(file_table, pos, has_fn) if keep_file else np.zeros(n, dtype=np.int64),
        "objfile": _row_codes(map_files, mpos, no_name),
    }
    rows = {
        "node_name": name.astype(object, copy=False),
        "address": address.astype(np.uint64),
        "file": file.astype(object, copy=False),
        "start_line": start_line.astype(np.int64),
        "lineno": lineno.astype(np.int64),
        "column": column.astype(np.int64),
        "objfile": objfile.astype(object, copy=False),
    }
    profile._cache[key] = rows
    profile._cache[("node_codes", granularity, noinlines)] = codes
    return rows


def node_codes(profile: Profile, granularity: str = "functions", noinlines: bool = False) -> dict[str, np.ndarray]:
    """Integer codes of :func:`node_rows`' string columns (``node_name``, ``file``, ``objfile``),
    equal exactly where the strings are; valid within this profile only (cached)."""
    node_rows(profile, granularity, noinlines)  # computes and caches them
    return profile._cache[("node_codes", granularity, noinlines)]


def _row_codes(table_strings: np.ndarray, pos: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Per locations row, a code for ``table_strings[pos]`` where ``keep``, else for ``""``
    (codes are equal exactly where the strings are; ``table_strings`` ends with ``""``)."""
    table_codes, _ = pd.factorize(table_strings, sort=False)
    return np.where(keep, table_codes[pos], table_codes[-1]).astype(np.int64)


NODE_KEY = ["node_name", "address", "file", "start_line", "lineno", "column", "objfile"]


def printable_names(nodes: dict[str, np.ndarray]) -> np.ndarray:
    """pprof's ``NodeInfo.PrintableName`` for node columns (object array)."""
    names = nodes["node_name"].copy()
    # Only a function name: the name itself (the common case, done in bulk).
    simple = (names != "") & (nodes["address"] == 0) & (nodes["lineno"] == 0) & (nodes["file"] == "")
    for i in np.flatnonzero(~simple):
        names[i] = printable_name(SimpleNamespace(**{k: v[i] for k, v in nodes.items()}))
    return names


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


@dataclass(frozen=True)
class Part:
    """One profile's contribution to a graph: which sample type, with which sign
    (-1 for a subtracted base), which samples (``keep``) and which frames
    (``visible``, per row of ``profile.locations``); None means all.
    ``unmatched`` names the filters that matched nothing in this profile
    (:class:`~.select.Selection`)."""

    profile: Profile
    index: int
    sign: int = 1
    keep: np.ndarray | None = None
    visible: np.ndarray | None = None
    unmatched: tuple[str, ...] = ()


@dataclass(frozen=True)
class Graph:
    """Every sample's weight and frames as node ids, ready for :func:`flat_cum` and :func:`edges`.

    ``frame_sample``/``frame_node``/``frame_inline`` are ordered by sample, then
    from leaf (first) to root (last). ``divisor`` (per sample) is set for
    ``-mean``: pprof divides each node's sum of weights by its sum of divisors.
    """

    nodes: dict[str, np.ndarray]  # per node: the NODE_KEY columns + "name" (pprof's printable name)
    weight: np.ndarray  # int64 per sample (negative for subtracted base samples)
    divisor: np.ndarray | None
    frame_sample: np.ndarray
    frame_node: np.ndarray
    frame_inline: np.ndarray

    @property
    def n_nodes(self) -> int:
        return len(self.nodes["name"])

    def live_frames(self) -> np.ndarray:
        """Bool per frame: its sample counts (pprof skips samples whose weight and divisor are both 0)."""
        live = self.weight != 0
        if self.divisor is not None:
            live |= self.divisor != 0
        return live[self.frame_sample]


def _frame_rows(profile: Profile, visible: np.ndarray | None, noinlines: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``profile.locations``: (the frame takes part, it is inlined into the next one up).

    A frame is inlined unless it is the last remaining frame of its location;
    with ``noinlines`` only that last frame takes part (pprof's ``-noinlines``
    keeps a location's last line after ``-show``/``-hide`` removed others).
    """
    key = ("frame_rows", noinlines)
    if visible is None and key in profile._cache:
        return profile._cache[key]
    loc_ids = profile.column("locations", "location")
    n = len(loc_ids)
    vis = np.ones(n, dtype=bool) if visible is None else visible
    if n:
        starts = np.flatnonzero(np.r_[True, loc_ids[1:] != loc_ids[:-1]])
        counts = np.diff(np.r_[starts, n])
        last_visible = np.maximum.reduceat(np.where(vis, np.arange(n), -1), starts)
        last = vis & (np.arange(n) == np.repeat(last_visible, counts))
    else:
        last = np.zeros(0, dtype=bool)
    result = (last, np.zeros(n, dtype=bool)) if noinlines else (vis, vis & ~last)
    if visible is None:
        profile._cache[key] = result
    return result


def build_graph(
    parts: list[Part], granularity: str = "functions", noinlines: bool = False, mean: bool = False
) -> Graph:
    """Merge profiles (see :class:`Part`) into one :class:`Graph`.

    With ``mean`` the divisor of each sample is its first sample type (pprof's
    ``-mean``: e.g. bytes per object, nanoseconds per sample).
    """
    key_frames = []
    frames = []
    weights = []
    divisors = []
    sample_offset = 0
    for part in parts:
        profile = part.profile
        key_frames.append(node_rows(profile, granularity, noinlines))
        active, inlined = _frame_rows(profile, part.visible, noinlines)
        w = profile.values(part.index) * part.sign
        d = profile.values(0) * part.sign if mean else None
        if part.keep is not None:
            w = np.where(part.keep, w, 0)
            d = np.where(part.keep, d, 0) if mean else None
        # pprof skips samples whose value (and divisor) is 0: their frames are never expanded.
        counted = w != 0 if d is None else (w != 0) | (d != 0)
        row, sample = expand_stacks(profile).rows_of(counted)
        if not active.all():  # -show/-hide/-noinlines left some frames out
            sel = active[row]
            row, sample = row[sel], sample[sel]
        frames.append((sample + sample_offset if sample_offset else sample, row, inlined[row]))
        weights.append(w)
        divisors.append(d)
        sample_offset += len(w)

    # One node id per distinct NodeInfo across all profiles: factorize each
    # column, combine the codes into one integer, factorize that (vectorized).
    all_rows = {c: np.concatenate([k[c] for k in key_frames]) for c in NODE_KEY}
    # One profile: its string columns' codes from node_rows (equal strings, equal codes).
    string_codes = node_codes(parts[0].profile, granularity, noinlines) if len(parts) == 1 else None
    combined = np.zeros(len(all_rows["node_name"]), dtype=np.int64)
    for column in NODE_KEY:
        values = all_rows[column]
        if string_codes is not None and column in string_codes:
            col_codes = string_codes[column]
            n_codes = int(col_codes.max(initial=0)) + 1
        elif values.dtype != object and values.min(initial=0) >= 0 and values.max(initial=0) < 1 << 20:
            # Small non-negative integers (line numbers...) are their own codes.
            col_codes, n_codes = values.astype(np.int64), int(values.max(initial=0)) + 1
        else:
            col_codes, col_uniques = pd.factorize(values, sort=False)
            n_codes = len(col_uniques)
        if combined.max(initial=0) >= (1 << 62) // (n_codes + 1):
            combined = pd.factorize(combined, sort=False)[0].astype(np.int64)  # keep the product in int64
        combined = combined * (n_codes + 1) + col_codes
    codes, first_rows = _factorize_first(combined)
    nodes = {c: v[first_rows] for c, v in all_rows.items()}
    nodes["name"] = printable_names(nodes)

    offsets = np.cumsum([0] + [len(k["node_name"]) for k in key_frames])
    frame_sample = np.concatenate([f[0] for f in frames])
    frame_node = np.concatenate([codes[offsets[i] + f[1]] for i, f in enumerate(frames)]).astype(np.int64)
    frame_inline = np.concatenate([f[2] for f in frames])
    divisor = np.concatenate(divisors) if mean else None
    return Graph(nodes, np.concatenate(weights), divisor, frame_sample, frame_node, frame_inline)


def _factorize_first(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes 0..k-1 for ``keys`` in order of first appearance, and the first row of each code."""
    codes, _uniques = pd.factorize(keys, sort=False)
    first = np.full(codes.max() + 1 if len(codes) else 0, len(codes), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(codes)))
    return codes.astype(np.int64), first


def flat_cum(g: Graph, values: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Flat and cum per node (int64), as pprof's ``newGraph`` adds samples.

    ``values`` (per sample) defaults to the graph's weights; pass
    ``g.divisor`` to get the ``-mean`` divisor sums.
    """
    n = g.n_nodes
    w = g.weight if values is None else values
    live = g.live_frames()
    fs, fn = g.frame_sample[live], g.frame_node[live]
    flat = np.zeros(n, dtype=np.int64)
    cum = np.zeros(n, dtype=np.int64)
    if len(fs) == 0:
        return flat, cum
    leaf = np.r_[True, fs[1:] != fs[:-1]]
    np.add.at(flat, fn[leaf], w[fs[leaf]])
    # A node counts once per sample however often it recurs in the stack.
    pair = _distinct(fs * n + fn)
    np.add.at(cum, pair % n, w[pair // n])
    return flat, cum


def _distinct(keys: np.ndarray) -> np.ndarray:
    """``np.unique`` of int64 keys by sorting (numpy 2's hashing unique is ~8x slower here)."""
    keys = np.sort(keys)
    return keys[np.r_[True, keys[1:] != keys[:-1]]] if len(keys) else keys


def mean_values(sums: np.ndarray, divisors: np.ndarray) -> np.ndarray:
    """pprof's ``FlatValue``/``CumValue``: ``sums / divisors`` truncated toward zero (Go's integer
    division), the sum itself where the divisor is 0."""
    safe = np.where(divisors == 0, 1, divisors)
    quotient = np.abs(sums) // np.abs(safe) * np.sign(sums) * np.sign(safe)
    return np.where(divisors == 0, sums, quotient).astype(np.int64)


def edges(g: Graph, kept: np.ndarray | None = None) -> pd.DataFrame:
    """Caller->callee edges between kept nodes: ``caller, callee, weight, inline``
    (plus ``divisor`` when the graph has one).

    As in pprof, frames of nodes that are not kept are skipped (the edge then
    jumps over them), an edge counts once per sample, and an edge is
    ``inline`` only if every counted occurrence is an inlined call.
    """
    fs, fn, fi = g.frame_sample, g.frame_node, g.frame_inline
    live = g.live_frames()
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
    # The last occurrence of each (sample, caller, callee): hashed, not sorted (~500,000 frames).
    keep = np.flatnonzero(~pd.Series(per_sample).duplicated(keep="last").to_numpy())
    edge_key = caller[keep] * n + callee[keep]
    codes, firsts = _factorize_first(edge_key)
    k = len(firsts)
    weight = np.zeros(k, dtype=np.int64)
    np.add.at(weight, codes, g.weight[sample[keep]])
    all_inline = np.bincount(codes, weights=~inline[keep], minlength=k) == 0  # no call that was not inlined
    first_key = edge_key[firsts]
    out = pd.DataFrame({"caller": first_key // n, "callee": first_key % n, "weight": weight, "inline": all_inline})
    if g.divisor is not None:
        divisor = np.zeros(k, dtype=np.int64)
        np.add.at(divisor, codes, g.divisor[sample[keep]])
        out["divisor"] = divisor
    return out


def sort_nodes(nodes: dict[str, np.ndarray], flat: np.ndarray, cum: np.ndarray, by_cum: bool) -> np.ndarray:
    """Node ids in pprof's FlatNameOrder (or CumNameOrder): |flat| (|cum|) descending,
    printable name, |cum| (|flat|) descending, then pprof's NodeInfo text."""
    names = nodes["name"]
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
            f"{{{n}  {int(a)} {f} {s} {ln} {c} {o}}}" for n, a, f, s, ln, c, o in zip(*(nodes[k] for k in NODE_KEY))
        ]
        _, info_rank = np.unique(np.asarray(info, dtype=str), return_inverse=True)
        info_rank = info_rank.reshape(-1)
    first, second = (np.abs(cum), np.abs(flat)) if by_cum else (np.abs(flat), np.abs(cum))
    # np.lexsort sorts by the last key first.
    return np.lexsort((info_rank, -second, name_rank, -first)).astype(np.int64)
