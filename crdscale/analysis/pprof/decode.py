"""Decode pprof ``profile.proto`` files (gzip or plain) into tidy pandas tables.

Heap, allocs, CPU and goroutine profiles written by Go's ``runtime/pprof``
(and served by kube-apiserver's ``/debug/pprof/...``) are all the same message;
only the sample types differ. Values are kept exactly as the writer stored
them: Go already scales sampled heap values up by the sampling rate, so
scaling them again would double count.

Everything that is not a valid profile raises :class:`ProfileError` with a
one-line message; callers never see protobuf, gzip or index errors.
"""

from __future__ import annotations

import itertools
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import numpy as np
import pandas as pd

from crdscale.analysis.pprof.schema import profile_message_class
from crdscale.errors import ProfileError

PathOrBytes = Union[str, os.PathLike, bytes, bytearray, memoryview]

# Refuse to inflate more than this: a gzip bomb should fail fast, not eat RAM.
MAX_PROFILE_BYTES = 1 << 30


@dataclass(frozen=True)
class ValueType:
    """One sample type, e.g. ``ValueType("inuse_space", "bytes")``."""

    type: str
    unit: str


@dataclass(frozen=True)
class ProfileMeta:
    """Profile-wide facts: sample types with units, period, and when it was taken."""

    sample_types: tuple[ValueType, ...]
    default_sample_type: str
    period_type: ValueType | None
    period: int
    time_nanos: int
    duration_nanos: int
    comments: tuple[str, ...] = ()
    drop_frames: str = ""
    keep_frames: str = ""
    doc_url: str = ""

    @property
    def kind(self) -> str:
        """``heap``, ``cpu``, ``goroutine`` or ``allocs`` guessed from the sample types (``other`` if unknown)."""
        types = [t.type for t in self.sample_types]
        if "inuse_space" in types:
            return "allocs" if self.default_sample_type == "alloc_space" else "heap"
        if "cpu" in types:
            return "cpu"
        if types == ["goroutine"]:
            return "goroutine"
        return "other"

    @property
    def time(self) -> pd.Timestamp | None:
        """When the profile was taken (UTC), or None if the writer did not say."""
        return pd.Timestamp(self.time_nanos, unit="ns", tz="UTC") if self.time_nanos else None


@dataclass(eq=False)
class Profile:
    """A decoded profile as tidy tables.

    - ``samples``: one row per sample (index ``sample`` = 0..n-1), one int64
      column per sample type, named by the type (``inuse_space`` ...), in the
      units of ``meta.sample_types``.
    - ``stacks``: ``sample, depth, location``; depth 0 is the leaf (the
      allocating or running frame), the largest depth the root.
    - ``locations``: one row per frame of a location: ``location, address,
      mapping, inline_depth, function, line, column``. A location with inlined
      calls has several rows; ``inline_depth`` 0 is the innermost (inlined)
      function, the last row the function the code was inlined into. A
      location without line information has one row with ``function`` 0.
    - ``functions``: ``function, name, system_name, filename, start_line``.
    - ``mappings``: ``mapping, memory_start, memory_limit, file_offset,
      filename, build_id, has_functions, has_filenames, has_line_numbers,
      has_inline_frames``.
    - ``labels``: ``sample, key, str, num, num_unit``; a string label has
      ``str`` set and ``num`` 0, a numeric label (e.g. heap profiles' ``bytes``,
      the size of each allocated object) has ``str`` None and ``num`` set.
    """

    samples: pd.DataFrame
    stacks: pd.DataFrame
    locations: pd.DataFrame
    functions: pd.DataFrame
    mappings: pd.DataFrame
    labels: pd.DataFrame
    meta: ProfileMeta
    source: str = ""
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def sample_types(self) -> list[str]:
        """Sample type names in profile order."""
        return [t.type for t in self.meta.sample_types]

    def sample_index(self, sample_index: str | int | None = None) -> int:
        """Resolve a ``-sample_index`` the way ``go tool pprof`` does.

        ``None`` picks the profile's default sample type, else the last one; an
        int (or a digit string) is a position; ``inuse_X`` also matches a type
        named ``X`` (legacy profiles). Raises UsageError for an unknown name.
        """
        from crdscale.errors import UsageError

        types = self.sample_types
        if sample_index is None or sample_index == "":
            if self.meta.default_sample_type in types:
                return types.index(self.meta.default_sample_type)
            return len(types) - 1
        if isinstance(sample_index, int) or str(sample_index).isdigit():
            i = int(sample_index)
            if not 0 <= i < len(types):
                raise UsageError(f"sample index {i} is outside the range [0..{len(types) - 1}]")
            return i
        no_inuse = sample_index.removeprefix("inuse_")
        for i, t in enumerate(types):
            if t in (sample_index, no_inuse):
                return i
        raise UsageError(f"sample index {sample_index!r} must be one of: {', '.join(types)}")

    def unit(self, sample_index: str | int | None = None) -> str:
        """Unit of a sample type (``bytes``, ``count``, ``nanoseconds``)."""
        return self.meta.sample_types[self.sample_index(sample_index)].unit

    def values(self, sample_index: str | int | None = None) -> np.ndarray:
        """Sample values (int64) for one sample type, in sample order."""
        return self.samples.iloc[:, self.sample_index(sample_index)].to_numpy()

    def total(self, sample_index: str | int | None = None) -> int:
        """Sum of one sample type over all samples, in its unit."""
        return int(np.abs(self.values(sample_index)).sum())

    def frames(self) -> pd.DataFrame:
        """Stacks expanded through inlined frames: ``sample, depth, location,
        inline_depth, function, name, filename, line``; ``depth`` counts frames
        (inlined ones included) from the leaf, 0 first."""
        expanded = expand_stacks(self)
        cols = function_arrays(self)
        pos = function_rows(self, expanded["function"].to_numpy())
        return expanded.drop(columns=["row", "inlined"]).assign(
            name=cols["name"][pos], filename=cols["filename"][pos]
        )


def read_profile(source: PathOrBytes) -> Profile:
    """Read a ``profile.proto`` (gzip-compressed or plain) from a path or bytes.

    Returns a :class:`Profile` of DataFrames (see its docstring for columns and
    units). Raises :class:`ProfileError` (one line) for anything that is not a
    valid profile: unreadable file, empty input, bad gzip, bad protobuf,
    dangling ids, out-of-range string indexes, wrong number of values.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, name = bytes(source), "<bytes>"
    else:
        name = str(source)
        try:
            data = Path(source).read_bytes()
        except OSError as err:
            raise ProfileError(f"{name}: cannot read: {err.strerror or err}") from None
    return parse_profile(data, name)


def parse_profile(data: bytes, name: str = "<bytes>") -> Profile:
    """Decode profile bytes (gzip or plain); see :func:`read_profile`."""
    if not data:
        raise ProfileError(f"{name}: empty input, not a pprof profile")
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, name)
        if not data:
            raise ProfileError(f"{name}: empty profile after gunzip")
    try:
        msg = profile_message_class().FromString(data)
    except Exception as err:  # DecodeError, RuntimeError from the C parser: all mean "not a profile"
        raise ProfileError(f"{name}: not a pprof profile ({type(err).__name__}: {err})") from None
    try:
        return _to_tables(msg, name)
    except ProfileError:
        raise
    except (IndexError, KeyError, ValueError, OverflowError, TypeError) as err:
        raise ProfileError(f"{name}: malformed pprof profile ({type(err).__name__}: {err})") from None


def _gunzip(data: bytes, name: str) -> bytes:
    """Inflate every gzip member (Go's reader, like ``gzip -d``, accepts concatenated members)."""
    out = bytearray()
    rest = data
    try:
        while rest:
            if rest[:2] != b"\x1f\x8b":
                raise ProfileError(f"{name}: trailing garbage after gzip data")
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out += d.decompress(rest, MAX_PROFILE_BYTES + 1 - len(out))
            if len(out) > MAX_PROFILE_BYTES:
                raise ProfileError(f"{name}: profile inflates to more than {MAX_PROFILE_BYTES >> 20} MiB")
            if not d.eof:
                raise ProfileError(f"{name}: truncated gzip data")
            rest = d.unused_data
    except zlib.error as err:
        raise ProfileError(f"{name}: bad gzip data ({err})") from None
    return bytes(out)


def _to_tables(msg, name: str) -> Profile:
    strings = [s.decode("utf-8", "replace") for s in msg.string_table]
    if not strings or strings[0] != "":
        raise ProfileError(f"{name}: not a pprof profile (string_table[0] must be empty)")
    n_strings = len(strings)

    def s(index: int, what: str) -> str:
        if not 0 <= index < n_strings:
            raise ProfileError(f"{name}: {what} string index {index} out of range [0, {n_strings})")
        return strings[index]

    sample_types = tuple(ValueType(s(v.type, "sample type"), s(v.unit, "sample unit")) for v in msg.sample_type)
    if not sample_types:
        raise ProfileError(f"{name}: not a pprof profile (no sample types)")
    period_type = (
        ValueType(s(msg.period_type.type, "period type"), s(msg.period_type.unit, "period unit"))
        if msg.HasField("period_type")
        else None
    )
    meta = ProfileMeta(
        sample_types=sample_types,
        default_sample_type=s(msg.default_sample_type, "default sample type"),
        period_type=period_type,
        period=int(msg.period),
        time_nanos=int(msg.time_nanos),
        duration_nanos=int(msg.duration_nanos),
        comments=tuple(s(c, "comment") for c in msg.comment),
        drop_frames=s(msg.drop_frames, "drop_frames"),
        keep_frames=s(msg.keep_frames, "keep_frames"),
        doc_url=s(msg.doc_url, "doc_url"),
    )

    string_array = np.array(strings, dtype=object)

    def strs(indexes: np.ndarray, what: str) -> np.ndarray:
        """Vectorized ``s``: look up many string indexes at once."""
        if len(indexes) and (indexes.min() < 0 or indexes.max() >= n_strings):
            bad = indexes[(indexes < 0) | (indexes >= n_strings)][0]
            raise ProfileError(f"{name}: {what} string index {bad} out of range [0, {n_strings})")
        return string_array[indexes]

    # Functions: one pass over the messages (attribute access is the slow part).
    fmsgs = msg.function
    f_ints = np.array([(f.name, f.system_name, f.filename, f.start_line) for f in fmsgs], dtype=np.int64).reshape(-1, 4)
    function_ids = np.array([f.id for f in fmsgs], dtype=np.uint64)
    functions = pd.DataFrame(
        {
            "function": _ids(function_ids, "function", name),
            "name": strs(f_ints[:, 0], "function name"),
            "system_name": strs(f_ints[:, 1], "function system name"),
            "filename": strs(f_ints[:, 2], "function file"),
            "start_line": f_ints[:, 3],
        }
    )

    # Mappings.
    mmsgs = msg.mapping
    mapping_ids = np.fromiter((m.id for m in mmsgs), dtype=np.uint64, count=len(mmsgs))
    mappings = pd.DataFrame(
        {
            "mapping": _ids(mapping_ids, "mapping", name),
            "memory_start": np.fromiter((m.memory_start for m in mmsgs), dtype=np.uint64, count=len(mmsgs)),
            "memory_limit": np.fromiter((m.memory_limit for m in mmsgs), dtype=np.uint64, count=len(mmsgs)),
            "file_offset": np.fromiter((m.file_offset for m in mmsgs), dtype=np.uint64, count=len(mmsgs)),
            "filename": [s(m.filename, "mapping file") for m in mmsgs],
            "build_id": [s(m.build_id, "mapping build id") for m in mmsgs],
            "has_functions": [m.has_functions for m in mmsgs],
            "has_filenames": [m.has_filenames for m in mmsgs],
            "has_line_numbers": [m.has_line_numbers for m in mmsgs],
            "has_inline_frames": [m.has_inline_frames for m in mmsgs],
        }
    )

    # Locations, one row per (possibly inlined) frame.
    loc_rows = []
    line_rows: list = []
    for loc in msg.location:
        lines = loc.line
        loc_rows.append((loc.id, loc.mapping_id, loc.address, len(lines)))
        if lines:
            line_rows.extend([(ln.function_id, ln.line, ln.column) for ln in lines])
    loc_arr = np.array(loc_rows, dtype=np.uint64).reshape(-1, 4)
    location_ids = _ids(loc_arr[:, 0], "location", name)
    loc_mapping = loc_arr[:, 1]
    loc_address = loc_arr[:, 2]
    n_lines = loc_arr[:, 3].astype(np.int64)
    rows_per_loc = np.maximum(n_lines, 1)  # a location without lines still is a frame
    total_rows = int(rows_per_loc.sum())
    line_arr = np.array(line_rows, dtype=np.int64).reshape(-1, 3)
    if len(line_arr) and (line_arr[:, 0] < 0).any():
        raise ProfileError(f"{name}: function id out of range in a location line")
    line_fn = line_arr[:, 0].astype(np.uint64)
    line_no = line_arr[:, 1]
    line_col = line_arr[:, 2]
    has_lines = np.repeat(n_lines > 0, rows_per_loc)
    row_fn = np.zeros(total_rows, dtype=np.uint64)
    row_line = np.zeros(total_rows, dtype=np.int64)
    row_col = np.zeros(total_rows, dtype=np.int64)
    row_fn[has_lines], row_line[has_lines], row_col[has_lines] = line_fn, line_no, line_col
    starts = np.cumsum(rows_per_loc) - rows_per_loc
    inline_depth = np.arange(total_rows, dtype=np.int64) - np.repeat(starts, rows_per_loc)
    _check_refs(row_fn, function_ids, "function", name)
    _check_refs(loc_mapping, mapping_ids, "mapping", name)
    locations = pd.DataFrame(
        {
            "location": np.repeat(location_ids, rows_per_loc),
            "address": np.repeat(loc_address, rows_per_loc),
            "mapping": np.repeat(loc_mapping.astype(np.int64), rows_per_loc),
            "inline_depth": inline_depth,
            "function": row_fn.astype(np.int64),
            "line": row_line,
            "column": row_col,
        }
    )

    # Samples and stacks.
    smsgs = msg.sample
    n_samples = len(smsgs)
    n_types = len(sample_types)
    loc_lists = [sm.location_id for sm in smsgs]
    depth_counts = np.fromiter(map(len, loc_lists), dtype=np.int64, count=n_samples)
    stack_locs = np.fromiter(
        itertools.chain.from_iterable(loc_lists), dtype=np.uint64, count=int(depth_counts.sum())
    )
    value_lists = [sm.value for sm in smsgs]
    value_counts = np.fromiter(map(len, value_lists), dtype=np.int64, count=n_samples)
    if n_samples and (value_counts != n_types).any():
        bad = int(np.argmax(value_counts != n_types))
        raise ProfileError(
            f"{name}: sample {bad} has {value_counts[bad]} values but the profile has {n_types} sample types"
        )
    values = np.fromiter(
        itertools.chain.from_iterable(value_lists), dtype=np.int64, count=n_samples * n_types
    ).reshape(n_samples, n_types)
    _check_refs(stack_locs, location_ids.astype(np.uint64), "location", name, allow_zero=False)
    sample_of_frame = np.repeat(np.arange(n_samples, dtype=np.int64), depth_counts)
    frame_starts = np.cumsum(depth_counts) - depth_counts
    depth = np.arange(len(stack_locs), dtype=np.int64) - np.repeat(frame_starts, depth_counts)
    stacks = pd.DataFrame({"sample": sample_of_frame, "depth": depth, "location": stack_locs.astype(np.int64)})
    columns = unique_names([t.type for t in sample_types])
    samples = pd.DataFrame(values, columns=columns)
    samples.index.name = "sample"

    # Labels (string and numeric); heap profiles carry a "bytes" label on every sample.
    label_rows = [(i, lab.key, lab.str, lab.num, lab.num_unit)
                  for i, sm in enumerate(smsgs) if sm.label for lab in sm.label]
    lab = np.array(label_rows, dtype=np.int64).reshape(-1, 5)
    is_str = lab[:, 2] != 0
    str_values = strs(lab[:, 2], "label value").astype(object)
    str_values[~is_str] = None
    labels = pd.DataFrame(
        {
            "sample": lab[:, 0],
            "key": strs(lab[:, 1], "label key"),
            "str": pd.Series(str_values, dtype=object),
            "num": np.where(is_str, 0, lab[:, 3]),
            "num_unit": strs(np.where(is_str, 0, lab[:, 4]), "label unit"),
        }
    )

    return Profile(samples, stacks, locations, functions, mappings, labels, meta, source=name)


def _ids(ids: np.ndarray, what: str, name: str) -> np.ndarray:
    """Validate a table's ids (non-zero, unique, fit in int64) and return them as int64."""
    if len(ids) == 0:
        return ids.astype(np.int64)
    if (ids == 0).any():
        raise ProfileError(f"{name}: {what} with id 0")
    if (ids > np.uint64(np.iinfo(np.int64).max)).any():
        raise ProfileError(f"{name}: {what} id too large")
    if len(np.unique(ids)) != len(ids):
        raise ProfileError(f"{name}: duplicate {what} ids")
    return ids.astype(np.int64)


def _check_refs(refs: np.ndarray, known: np.ndarray, what: str, name: str, allow_zero: bool = True) -> None:
    """Every reference must name a known id (0 means "none" where allowed)."""
    if len(refs) == 0:
        return
    candidates = refs[refs != 0] if allow_zero else refs
    missing = ~np.isin(candidates, known.astype(np.uint64))
    if missing.any():
        raise ProfileError(f"{name}: reference to unknown {what} id {int(candidates[missing][0])}")


def unique_names(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        n = n or "value"
        if n in seen:
            seen[n] += 1
            n = f"{n}_{seen[n]}"
        else:
            seen[n] = 0
        out.append(n)
    return out


def expand_stacks(profile: Profile) -> pd.DataFrame:
    """Stacks with each location replaced by its frames, innermost inlined frame first."""
    cached = profile._cache.get("expanded")
    if cached is not None:
        return cached
    locs = profile.locations
    loc_ids = locs["location"].to_numpy()
    # Locations rows are grouped by location: first row index and row count per id.
    first = np.flatnonzero(np.r_[True, loc_ids[1:] != loc_ids[:-1]]) if len(loc_ids) else np.array([], np.int64)
    counts = np.diff(np.r_[first, len(loc_ids)])
    order = np.argsort(loc_ids[first], kind="stable")
    sorted_ids = loc_ids[first][order]
    stack_locs = profile.stacks["location"].to_numpy()
    pos = order[np.searchsorted(sorted_ids, stack_locs)] if len(stack_locs) else np.array([], np.int64)
    n_rows = counts[pos]
    row = np.repeat(first[pos], n_rows) + (
        np.arange(int(n_rows.sum())) - np.repeat(np.cumsum(n_rows) - n_rows, n_rows)
    )
    sample = np.repeat(profile.stacks["sample"].to_numpy(), n_rows)
    per_sample = np.bincount(sample, minlength=len(profile.samples)) if len(sample) else np.zeros(0, np.int64)
    depth = np.arange(len(sample)) - np.repeat(np.cumsum(per_sample) - per_sample, per_sample)
    out = pd.DataFrame(
        {
            "sample": sample,
            "depth": depth,
            "location": loc_ids[row],
            "inline_depth": locs["inline_depth"].to_numpy()[row],
            "function": locs["function"].to_numpy()[row],
            "line": locs["line"].to_numpy()[row],
            "row": row,
            # True for a frame that was inlined into the next one up (not the location's last row).
            "inlined": locs["inline_depth"].to_numpy()[row] != np.repeat(counts[pos] - 1, n_rows),
        }
    )
    profile._cache["expanded"] = out
    return out


def function_arrays(profile: Profile) -> dict:
    """Function table columns as numpy arrays with a trailing "no function" row, cached.

    Analysis code indexes these by position (see :func:`function_rows`)
    instead of reindexing string columns frame by frame, which is much slower.
    """
    cached = profile._cache.get("function_columns")
    if cached is None:
        fn = profile.functions
        ids = fn["function"].to_numpy(dtype=np.int64)
        order = np.argsort(ids, kind="stable")
        cached = {
            "sorted_ids": ids[order],
            "order": order,
            "name": np.append(fn["name"].to_numpy(dtype=object), ""),
            "filename": np.append(fn["filename"].to_numpy(dtype=object), ""),
            "start_line": np.append(fn["start_line"].to_numpy(dtype=np.int64), 0),
        }
        profile._cache["function_columns"] = cached
    return cached


def function_rows(profile: Profile, function_ids: np.ndarray) -> np.ndarray:
    """Row positions in ``profile.functions`` for function ids; id 0 (none) maps to the sentinel row."""
    cols = function_arrays(profile)
    sorted_ids, order = cols["sorted_ids"], cols["order"]
    n = len(sorted_ids)
    if n == 0:
        return np.zeros(len(function_ids), dtype=np.int64)
    at = np.searchsorted(sorted_ids, function_ids)
    at_clipped = np.minimum(at, n - 1)
    found = sorted_ids[at_clipped] == function_ids
    return np.where(found, order[at_clipped], n)
