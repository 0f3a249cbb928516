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

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from crdscale import fsutil
from crdscale.analysis.pprof import wire
from crdscale.analysis.pprof.names import pprof_names
from crdscale.analysis.pprof.schema import FILE_DESCRIPTOR, PACKAGE
from crdscale.analysis.pprof.wire import WireError
from crdscale.errors import ProfileError, UsageError

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


def combine_headers(metas: list[ProfileMeta]) -> ProfileMeta:
    """The header of pprof's merged profile (``profile.Merge``'s ``combineHeaders``), as
    ``-diff_base`` makes it from the profile and then its base.

    Time: pprof's loop keeps the earliest time, but a profile without a time
    (0) makes it 0 unless the first one has none; durations add up; comments
    are merged without repeats; the period is the largest; the default sample
    type and the doc URL are the first non-empty ones.
    """
    time_nanos = duration_nanos = period = 0
    comments: list[str] = []
    default_sample_type = doc_url = ""
    for meta in metas:
        if time_nanos == 0 or meta.time_nanos < time_nanos:
            time_nanos = meta.time_nanos
        duration_nanos += meta.duration_nanos
        period = max(period, meta.period) if period else meta.period
        comments += [c for c in meta.comments if c not in comments]
        default_sample_type = default_sample_type or meta.default_sample_type
        doc_url = doc_url or meta.doc_url
    first = metas[0]
    return ProfileMeta(
        sample_types=first.sample_types,
        default_sample_type=default_sample_type,
        period_type=first.period_type,
        period=period,
        time_nanos=time_nanos,
        duration_nanos=duration_nanos,
        comments=tuple(comments),
        drop_frames=first.drop_frames,
        keep_frames=first.keep_frames,
        doc_url=doc_url,
    )


TABLES = {
    "samples": None,  # one column per sample type, named after it
    "stacks": ("sample", "depth", "location"),
    "locations": ("location", "address", "mapping", "inline_depth", "function", "line", "column"),
    "functions": ("function", "name", "system_name", "filename", "start_line"),
    "mappings": (
        "mapping",
        "memory_start",
        "memory_limit",
        "file_offset",
        "filename",
        "build_id",
        "has_functions",
        "has_filenames",
        "has_line_numbers",
        "has_inline_frames",
    ),
    "labels": ("sample", "key", "str", "num", "num_unit"),
}


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

    The decoder keeps numpy columns and builds each DataFrame on first use
    (views read columns with :meth:`column` and never need most of them);
    fixtures may pass DataFrames directly.
    """

    def __init__(
        self,
        samples: pd.DataFrame,
        stacks: pd.DataFrame,
        locations: pd.DataFrame,
        functions: pd.DataFrame,
        mappings: pd.DataFrame,
        labels: pd.DataFrame,
        meta: ProfileMeta,
        source: str = "",
    ):
        self._frames = dict(
            samples=samples, stacks=stacks, locations=locations, functions=functions, mappings=mappings, labels=labels
        )
        self._columns: dict[str, dict[str, np.ndarray]] = {}
        self.meta = meta
        self.source = source
        self._cache: dict = {}

    @classmethod
    def from_columns(cls, columns: dict[str, dict[str, np.ndarray]], meta: ProfileMeta, source: str = "") -> Profile:
        """A Profile from numpy columns per table (names as in :data:`TABLES`); DataFrames come on demand."""
        profile = cls(None, None, None, None, None, None, meta, source)
        profile._columns = columns
        return profile

    def column(self, table: str, name: str) -> np.ndarray:
        """One column of a table as a numpy array, without building the DataFrame."""
        columns = self._columns.get(table)
        if columns is not None:
            return columns[name]
        return self._frame(table)[name].to_numpy()

    def _frame(self, table: str) -> pd.DataFrame:
        frame = self._frames.get(table)
        if frame is None:
            frame = pd.DataFrame(dict(self._columns[table]), copy=False)
            if table == "samples":
                frame.index.name = "sample"
            self._frames[table] = frame
        return frame

    def _replace(self, table: str, frame: pd.DataFrame) -> None:
        """Swap in a new table (fixtures edit profiles this way); derived caches are dropped."""
        self._frames[table] = frame
        self._columns.pop(table, None)
        self._cache.clear()

    samples = property(lambda self: self._frame("samples"), lambda self, v: self._replace("samples", v))
    stacks = property(lambda self: self._frame("stacks"), lambda self, v: self._replace("stacks", v))
    locations = property(lambda self: self._frame("locations"), lambda self, v: self._replace("locations", v))
    functions = property(lambda self: self._frame("functions"), lambda self, v: self._replace("functions", v))
    mappings = property(lambda self: self._frame("mappings"), lambda self, v: self._replace("mappings", v))
    labels = property(lambda self: self._frame("labels"), lambda self, v: self._replace("labels", v))

    @property
    def sample_columns(self) -> list[str]:
        """Column names of ``samples`` (the sample types, made unique)."""
        columns = self._columns.get("samples")
        return list(columns) if columns else list(self._frame("samples").columns)

    @property
    def n_samples(self) -> int:
        """Number of samples."""
        columns = self._columns.get("samples")
        return len(next(iter(columns.values()))) if columns else len(self._frame("samples"))

    def value_matrix(self) -> np.ndarray:
        """All sample values as an int64 array of shape (samples, sample types)."""
        cached = self._cache.get("value_matrix")
        if cached is None:
            columns = self._columns.get("samples")
            if columns:
                cached = np.column_stack(list(columns.values())).astype(np.int64, copy=False)
            else:
                cached = self._frame("samples").to_numpy(dtype=np.int64)
            cached = cached.reshape(self.n_samples, len(self.meta.sample_types))
            self._cache["value_matrix"] = cached
        return cached

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
        return self.value_matrix()[:, self.sample_index(sample_index)]

    def total(self, sample_index: str | int | None = None) -> int:
        """Sum of one sample type over all samples, in its unit."""
        return int(np.abs(self.values(sample_index)).sum())

    def frames(self) -> pd.DataFrame:
        """Stacks expanded through inlined frames: ``sample, depth, location,
        inline_depth, function, name, filename, line``; ``depth`` counts frames
        (inlined ones included) from the leaf, 0 first."""
        expanded = expand_stacks(self)
        cols = function_arrays(self)
        pos = function_rows(self, expanded["function"])
        keep = ("sample", "depth", "location", "inline_depth", "function", "line")
        return pd.DataFrame(
            {**{k: expanded[k] for k in keep}, "name": cols["name"][pos], "filename": cols["filename"][pos]}
        )


def parse_profile(data: bytes, name: str = "<bytes>") -> Profile:
    """Decode a ``profile.proto`` (gzip-compressed or plain) from bytes; ``name`` labels errors.

    Returns a :class:`Profile` of tables (see its docstring for columns and
    units). Raises :class:`ProfileError` (one line) for anything that is not a
    valid profile: empty input, bad gzip, bad protobuf, dangling ids,
    out-of-range string indexes, wrong number of values.
    """
    msg = _message(data, name)
    try:
        return _to_tables(msg, name)
    except ProfileError:
        raise
    except _MALFORMED as err:
        raise ProfileError(f"{name}: malformed pprof profile ({type(err).__name__}: {err})") from None


@dataclass(frozen=True)
class ProfileHeader:
    """Where a profile comes from, without its samples: :class:`ProfileMeta` (period, ``time_nanos``)
    and each mapping's ``(filename, build_id)`` in the profile's order (Go writes the program's own
    executable first)."""

    meta: ProfileMeta
    mappings: tuple[tuple[str, str], ...]


def parse_profile_header(data: bytes, name: str = "<bytes>") -> ProfileHeader:
    """A profile's header and mappings (:class:`ProfileHeader`), a tenth of :func:`parse_profile`'s
    time: samples, locations and functions stay undecoded. Raises :class:`ProfileError` as it does."""
    msg = _message(data, name)
    try:
        strings = _Strings(_decode_strings(msg.string_table), name)
        meta = _meta(msg, strings)
        columns, _ids_ = _mappings(msg, strings, name)
    except ProfileError:
        raise
    except _MALFORMED as err:
        raise ProfileError(f"{name}: malformed pprof profile ({type(err).__name__}: {err})") from None
    return ProfileHeader(meta, tuple(zip(columns["filename"].tolist(), columns["build_id"].tolist())))


# What a malformed message raises while it is decoded into tables.
_MALFORMED = (WireError, IndexError, KeyError, ValueError, OverflowError, TypeError)


def _message(data: bytes, name: str):
    """The profile message of ``data`` (gzip-compressed or plain), its top level split, nothing decoded."""
    if not data:
        raise ProfileError(f"{name}: empty input, not a pprof profile")
    if data[:2] == b"\x1f\x8b":
        data = _gunzip(data, name)
        if not data:
            raise ProfileError(f"{name}: empty profile after gunzip")
    try:
        return raw_profile_message_class().FromString(data)
    except Exception as err:  # DecodeError, RuntimeError from the C parser: all mean "not a profile"
        raise ProfileError(f"{name}: not a pprof profile ({type(err).__name__}: {err})") from None


@lru_cache(maxsize=1)
def raw_profile_message_class():
    """A ``Profile`` look-alike whose samples, mappings, locations and functions stay
    undecoded (``repeated bytes``): protobuf splits the top level in C, :mod:`.wire`
    decodes each kind of message with numpy, all messages at once."""
    # lazy: protobuf is imported when a profile is first decoded, not with the package: the CLI's --help
    # and the readers that never decode one do not pay for it.
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    file = descriptor_pb2.FileDescriptorProto.FromString(FILE_DESCRIPTOR)
    file.name = file.name.replace(".proto", "_raw.proto")
    file.package = PACKAGE + ".raw"
    for message in file.message_type:
        for f in message.field:
            if f.type_name:
                f.type_name = f.type_name.replace(PACKAGE + ".", PACKAGE + ".raw.")
            if message.name == "Profile" and f.number in _RAW_FIELDS:
                f.type = descriptor_pb2.FieldDescriptorProto.TYPE_BYTES
                f.ClearField("type_name")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(PACKAGE + ".raw.Profile"))


# Profile's sample, mapping, location and function fields.
_RAW_FIELDS = (2, 3, 4, 5)


def _gunzip(data: bytes, name: str) -> bytes:
    """Inflate every gzip member (Go's reader, like ``gzip -d``, accepts concatenated members)."""
    members: list[bytes] = []
    size = 0
    rest = data
    try:
        while rest:
            if rest[:2] != b"\x1f\x8b":
                raise ProfileError(f"{name}: trailing garbage after gzip data")
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            members.append(d.decompress(rest, MAX_PROFILE_BYTES + 1 - size))
            size += len(members[-1])
            if size > MAX_PROFILE_BYTES:
                raise ProfileError(f"{name}: profile inflates to more than {MAX_PROFILE_BYTES >> 20} MiB")
            if not d.eof:
                raise ProfileError(f"{name}: truncated gzip data")
            rest = d.unused_data
    except zlib.error as err:
        raise ProfileError(f"{name}: bad gzip data ({err})") from None
    return members[0] if len(members) == 1 else b"".join(members)  # Go writes one member: no copy


def _messages(items) -> tuple[np.ndarray, wire.Fields, int]:
    """Raw messages of one kind split into fields: (their buffer, the fields, how many messages)."""
    items = list(items)  # protobuf makes a bytes object per access: once, not twice
    n = len(items)
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=n)
    ends = np.cumsum(lengths)
    items.append(bytes(wire.PADDING))  # wire.buffer's padding, without copying the joined bytes again
    buf = np.frombuffer(b"".join(items), dtype=np.uint8)
    return buf, wire.walk(buf, ends - lengths, ends), n


def _decode_strings(table) -> list[str]:
    """The string table as text (invalid UTF-8 replaced, as Go's pprof shows it)."""
    joined = b"\x00".join(table)
    if not table or joined.count(b"\x00") != len(table) - 1:  # a string holds a NUL itself
        return [s.decode("utf-8", "replace") for s in table]
    # One decode for all (NUL never occurs in UTF-8 sequences, so the separators survive "replace").
    return joined.decode("utf-8", "replace").split("\x00")


def _to_tables(msg, name: str) -> Profile:
    """The decoded message as a :class:`Profile`: each table decoded in its own step, in the
    order the references between them are checked (functions and mappings before the
    locations naming them, locations before the stacks)."""
    strings = _Strings(_decode_strings(msg.string_table), name)
    meta = _meta(msg, strings)
    functions, function_ids = _functions(msg, strings, name)
    mappings, mapping_ids = _mappings(msg, strings, name)
    locations, location_ids = _locations(msg, function_ids, mapping_ids, name)
    buf, fields, values, stacks = _samples(msg, len(meta.sample_types), location_ids, name)
    labels = _labels(buf, fields, strings, name)
    tables = dict(
        samples={c: values[:, i] for i, c in enumerate(unique_names([t.type for t in meta.sample_types]))},
        stacks=stacks,
        locations=locations,
        functions=functions,
        mappings=mappings,
        labels=labels,
    )
    profile = Profile.from_columns(tables, meta, source=name)
    profile._cache["value_matrix"] = values
    return profile


class _Strings:
    """The profile's string table with checked look-ups (an index out of range is a
    :class:`ProfileError` naming what referred to it)."""

    def __init__(self, strings: list[str], name: str):
        if not strings or strings[0] != "":
            raise ProfileError(f"{name}: not a pprof profile (string_table[0] must be empty)")
        self.strings = strings
        self.array = np.array(strings, dtype=object)
        self.name = name

    def one(self, index: int, what: str) -> str:
        if not 0 <= index < len(self.strings):
            raise ProfileError(f"{self.name}: {what} string index {index} out of range [0, {len(self.strings)})")
        return self.strings[index]

    def many(self, indexes: np.ndarray, what: str) -> np.ndarray:
        """Vectorized :meth:`one`: look up many string indexes at once."""
        n_strings = len(self.strings)
        indexes = indexes.view(np.int64) if indexes.dtype == np.uint64 else indexes
        if len(indexes) and (indexes.min() < 0 or indexes.max() >= n_strings):
            bad = indexes[(indexes < 0) | (indexes >= n_strings)][0]
            raise ProfileError(f"{self.name}: {what} string index {bad} out of range [0, {n_strings})")
        return self.array[indexes]


def _meta(msg, strings: _Strings) -> ProfileMeta:
    s = strings.one
    sample_types = tuple(ValueType(s(v.type, "sample type"), s(v.unit, "sample unit")) for v in msg.sample_type)
    if not sample_types:
        raise ProfileError(f"{strings.name}: not a pprof profile (no sample types)")
    period_type = (
        ValueType(s(msg.period_type.type, "period type"), s(msg.period_type.unit, "period unit"))
        if msg.HasField("period_type")
        else None
    )
    return ProfileMeta(
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


def _functions(msg, strings: _Strings, name: str) -> tuple[dict, np.ndarray]:
    """The functions table's columns and the raw ids (for checking the locations' references)."""
    _buf, f, n = _messages(msg.function)
    function_ids = f.scalar(1, n)
    columns = {
        "function": _ids(function_ids, "function", name),
        "name": strings.many(f.scalar(2, n), "function name"),
        "system_name": strings.many(f.scalar(3, n), "function system name"),
        "filename": strings.many(f.scalar(4, n), "function file"),
        "start_line": f.scalar(5, n, np.int64),
    }
    return columns, function_ids


def _mappings(msg, strings: _Strings, name: str) -> tuple[dict, np.ndarray]:
    """The mappings table's columns and the raw ids (for checking the locations' references)."""
    _buf, f, n = _messages(msg.mapping)
    mapping_ids = f.scalar(1, n)
    flags = ("has_functions", "has_filenames", "has_line_numbers", "has_inline_frames")
    columns = {
        "mapping": _ids(mapping_ids, "mapping", name),
        "memory_start": f.scalar(2, n),
        "memory_limit": f.scalar(3, n),
        "file_offset": f.scalar(4, n),
        "filename": strings.many(f.scalar(5, n), "mapping file"),
        "build_id": strings.many(f.scalar(6, n), "mapping build id"),
        **{key: f.scalar(number, n) != 0 for number, key in enumerate(flags, start=7)},
    }
    return columns, mapping_ids


def _locations(msg, function_ids: np.ndarray, mapping_ids: np.ndarray, name: str) -> tuple[dict, np.ndarray]:
    """The locations table's columns, one row per (possibly inlined) frame, and the ids, one per
    location (for checking the stacks' references)."""
    buf, f, n = _messages(msg.location)
    location_ids = _ids(f.scalar(1, n), "location", name)
    loc_mapping = f.scalar(2, n)
    loc_address = f.scalar(3, n)
    line_fields = f.select(4, 2)
    if (f.number == 4).sum() != len(line_fields.message):
        raise ProfileError(f"{name}: malformed pprof profile (location line is not a message)")
    lf = wire.walk(buf, line_fields.start, line_fields.end)
    n_line_msgs = len(line_fields.message)
    line_fn = lf.scalar(1, n_line_msgs)
    line_no = lf.scalar(2, n_line_msgs, np.int64)
    line_col = lf.scalar(3, n_line_msgs, np.int64)
    n_lines = np.bincount(line_fields.message, minlength=n).astype(np.int64)
    rows_per_loc = np.maximum(n_lines, 1)  # a location without lines still is a frame
    total_rows = int(rows_per_loc.sum())
    has_lines = np.repeat(n_lines > 0, rows_per_loc)
    row_fn = np.zeros(total_rows, dtype=np.uint64)
    row_line = np.zeros(total_rows, dtype=np.int64)
    row_col = np.zeros(total_rows, dtype=np.int64)
    row_fn[has_lines], row_line[has_lines], row_col[has_lines] = line_fn, line_no, line_col
    if (row_fn > np.uint64(np.iinfo(np.int64).max)).any():
        raise ProfileError(f"{name}: function id out of range in a location line")
    _check_refs(row_fn, function_ids, "function", name)
    _check_refs(loc_mapping, mapping_ids, "mapping", name)
    if (loc_mapping > np.uint64(np.iinfo(np.int64).max)).any():
        raise ProfileError(f"{name}: mapping id out of range in a location")
    columns = {
        "location": np.repeat(location_ids, rows_per_loc),
        "address": np.repeat(loc_address, rows_per_loc),
        "mapping": np.repeat(loc_mapping.astype(np.int64), rows_per_loc),
        "inline_depth": wire.range_indexes(0, rows_per_loc),
        "function": row_fn.astype(np.int64),
        "line": row_line,
        "column": row_col,
    }
    return columns, location_ids


def _samples(msg, n_types: int, location_ids: np.ndarray, name: str):
    """The samples' values (one row per sample, one column per sample type) and stacks, with
    the samples' buffer and fields (their labels are decoded from them next)."""
    buf, f, n_samples = _messages(msg.sample)
    stack_locs, depth_counts = wire.packed_varints(buf, f.select(1), n_samples)
    raw_values, value_counts = wire.packed_varints(buf, f.select(2), n_samples)
    if n_samples and (value_counts != n_types).any():
        bad = int(np.argmax(value_counts != n_types))
        raise ProfileError(
            f"{name}: sample {bad} has {value_counts[bad]} values but the profile has {n_types} sample types"
        )
    values = raw_values.view(np.int64).reshape(n_samples, n_types)
    _check_refs(stack_locs, location_ids.astype(np.uint64), "location", name, allow_zero=False)
    return buf, f, values, _StackColumns(depth_counts, stack_locs.astype(np.int64))


def _labels(buf: np.ndarray, f: wire.Fields, strings: _Strings, name: str) -> dict:
    """The labels table (string and numeric); heap profiles carry a "bytes" label on every sample."""
    label_fields = f.select(3, 2)
    if (f.number == 3).sum() != len(label_fields.message):
        raise ProfileError(f"{name}: malformed pprof profile (sample label is not a message)")
    n_labels = len(label_fields.message)
    lab = wire.walk(buf, label_fields.start, label_fields.end)
    str_index = lab.scalar(2, n_labels, np.int64)
    is_str = str_index != 0
    str_values = strings.many(str_index, "label value").astype(object)
    str_values[~is_str] = None
    return {
        "sample": label_fields.message,
        "key": strings.many(lab.scalar(1, n_labels, np.int64), "label key"),
        "str": str_values,
        "num": np.where(is_str, 0, lab.scalar(3, n_labels, np.int64)),
        "num_unit": strings.many(np.where(is_str, 0, lab.scalar(4, n_labels, np.int64)), "label unit"),
    }


class _StackColumns(Mapping):
    """The ``stacks`` table's columns from each sample's stack length; ``depth`` is
    computed on first use (only inline-free profiles and DataFrame users need it)."""

    def __init__(self, depth_counts: np.ndarray, locations: np.ndarray):
        self._depth_counts = depth_counts
        self._starts = np.cumsum(depth_counts) - depth_counts
        self._columns = {"location": locations}

    def __getitem__(self, key: str) -> np.ndarray:
        if key not in self._columns:
            counts = self._depth_counts
            if key == "sample":
                self._columns[key] = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
            elif key == "depth":
                self._columns[key] = wire.range_indexes(0, counts)
        return self._columns[key]

    def entries_of(self, samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Stack entries of the samples where ``samples`` is True, and the sample of each
        (in stack order), without a pass over every entry."""
        chosen = np.flatnonzero(samples)
        counts = self._depth_counts[chosen]
        return wire.range_indexes(self._starts[chosen], counts), np.repeat(chosen, counts)

    def __iter__(self):
        return iter(TABLES["stacks"])

    def __len__(self) -> int:
        return len(TABLES["stacks"])


def _ids(ids: np.ndarray, what: str, name: str) -> np.ndarray:
    """Validate a table's ids (non-zero, unique, fit in int64) and return them as int64."""
    if len(ids) == 0:
        return ids.astype(np.int64)
    if (ids == 0).any():
        raise ProfileError(f"{name}: {what} with id 0")
    if (ids > np.uint64(np.iinfo(np.int64).max)).any():
        raise ProfileError(f"{name}: {what} id too large")
    # Increasing ids (Go writes 1..n) are unique without hashing them.
    if not (ids[1:] > ids[:-1]).all() and len(np.unique(ids)) != len(ids):
        raise ProfileError(f"{name}: duplicate {what} ids")
    return ids.astype(np.int64)


def _check_refs(refs: np.ndarray, known: np.ndarray, what: str, name: str, allow_zero: bool = True) -> None:
    """Every reference must name a known id (0 means "none" where allowed)."""
    if len(refs) == 0:
        return
    candidates = refs[refs != 0] if allow_zero else refs
    if len(known) and known.min() == 1 and known.max() == len(known):
        # Ids 1..n (what Go writes; ids are unique, checked before): a range check will do.
        missing = (candidates < 1) | (candidates > np.uint64(len(known)))
    else:
        missing = ~np.isin(candidates, known.astype(np.uint64))
    if missing.any():
        raise ProfileError(f"{name}: reference to unknown {what} id {int(candidates[missing][0])}")


def unique_names(names: list[str]) -> list[str]:
    """Column names for sample types: empty names become ``value``, repeats get ``_1``, ``_2``..."""
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


def expand_stacks(profile: Profile) -> ExpandedStacks:
    """Stacks with each location replaced by its frames, innermost inlined frame first.

    Returns a mapping of numpy arrays of equal length, one entry per frame,
    ordered by sample then from leaf to root: ``sample``, ``depth`` (frames
    from the leaf), ``location``, ``inline_depth``, ``function``, ``line``,
    ``row`` (the frame's row in ``profile.locations``) and ``inlined`` (the
    frame was inlined into the next one up). Cached on the profile.
    """
    cached = profile._cache.get("expanded")
    if cached is None:
        cached = profile._cache["expanded"] = ExpandedStacks(profile)
    return cached


class ExpandedStacks(Mapping):
    """:func:`expand_stacks`' arrays, each computed on first use.

    A 2,000-CRD heap profile has ~500,000 frames: ``top`` needs only ``row``
    and ``sample``, so the other columns (a pass over every frame each) wait
    until something asks for them; and :meth:`rows_of` expands only the
    samples a view counts (a tenth of a heap profile's have any bytes in use).
    """

    KEYS = ("sample", "depth", "location", "inline_depth", "function", "line", "row", "inlined")

    def __init__(self, profile: Profile):
        self._profile = profile
        self._arrays: dict[str, np.ndarray] = {}
        loc_ids = profile.column("locations", "location")
        # Locations rows are grouped by location: first row index and row count per id.
        first = np.flatnonzero(np.r_[True, loc_ids[1:] != loc_ids[:-1]]) if len(loc_ids) else np.array([], np.int64)
        counts = np.diff(np.r_[first, len(loc_ids)])
        order = np.argsort(loc_ids[first], kind="stable")
        sorted_ids = loc_ids[first][order]
        self._counts = counts
        self._first = first
        # Location id -> its position in first/counts (identity when Go's 1..n ids come in order).
        self._order = None if (order == np.arange(len(order))).all() else order
        self._sorted_ids = sorted_ids

    def _locations_of(self, entries: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Per stack entry (all, or those at ``entries``): its location's first locations
        row and how many frames (rows) it expands to."""
        stack_locs = self._profile.column("stacks", "location")
        if entries is not None:
            stack_locs = stack_locs[entries]
        if len(stack_locs) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        pos = _positions(self._sorted_ids, stack_locs)
        if self._order is not None:
            pos = self._order[pos]
        return self._first[pos], self._counts[pos]

    def rows_of(self, samples: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """``(row, sample)`` of the frames of the samples where ``samples`` (bool per
        sample) is True, in frame order; all frames for None."""
        if samples is None or samples.all() or "row" in self._arrays:
            row, sample = self["row"], self["sample"]
            if samples is None or samples.all():
                return row, sample
            keep = samples[sample]
            return row[keep], sample[keep]
        stacks = self._profile._columns.get("stacks")
        if isinstance(stacks, _StackColumns):  # decoded here: each sample's entries are a known range
            return self._expand(*stacks.entries_of(samples))
        entries = np.flatnonzero(samples[self._profile.column("stacks", "sample")])
        return self._expand(entries, self._profile.column("stacks", "sample")[entries])

    def _expand(
        self, entries: np.ndarray | None, stack_samples: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Frames (row, sample) of the stack entries at ``entries`` (all for None), whose
        samples are ``stack_samples``."""
        if entries is None:
            stack_samples = self._profile.column("stacks", "sample")
        first, n_rows = self._locations_of(entries)
        if len(n_rows) == 0 or (n_rows == 1).all():  # no inlining (CPU, goroutine profiles): a frame per entry
            return first, stack_samples
        # Frame k of stack entry i is row first[i] + k.
        return wire.range_indexes(first, n_rows), np.repeat(stack_samples, n_rows)

    def __getitem__(self, key: str) -> np.ndarray:
        array = self._arrays.get(key)
        if array is None:
            if key not in self.KEYS:
                raise KeyError(key)
            array = self._arrays[key] = self._compute(key)
        return array

    def _compute(self, key: str) -> np.ndarray:
        if key in ("row", "sample"):
            self._arrays["row"], self._arrays["sample"] = self._expand(None)
            return self._arrays[key]
        profile, row = self._profile, self["row"]
        if key == "depth":
            sample = self["sample"]
            per_sample = np.bincount(sample, minlength=profile.n_samples) if len(sample) else np.zeros(0, np.int64)
            return wire.range_indexes(0, per_sample)
        if key == "inlined":
            last_depth = np.repeat(self._counts - 1, self._counts)  # per locations row: its location's last
            return self["inline_depth"] != last_depth[row]
        column = {"location": "location", "inline_depth": "inline_depth", "function": "function", "line": "line"}
        return profile.column("locations", column[key])[row]

    def __iter__(self):
        return iter(self.KEYS)

    def __len__(self) -> int:
        return len(self.KEYS)


def _positions(sorted_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``np.searchsorted(sorted_ids, ids)``, without the search when the ids are 1..n (Go numbers them so)."""
    n = len(sorted_ids)
    if n and sorted_ids[0] == 1 and sorted_ids[-1] == n and (np.diff(sorted_ids) == 1).all():
        at = ids.astype(np.int64)  # a copy, changed in place below
        at -= 1
        return np.clip(at, 0, n, out=at)
    return np.searchsorted(sorted_ids, ids)


def function_arrays(profile: Profile) -> dict:
    """Function table columns as numpy arrays with a trailing "no function" row, cached.

    Analysis code indexes these by position (see :func:`function_rows`)
    instead of reindexing string columns frame by frame, which is much slower.
    ``name`` is the name as the profile stores it; ``pprof_name`` the name
    ``go tool pprof`` shows and filters on (:mod:`.names`), computed once per
    function, not per frame.
    """
    cached = profile._cache.get("function_columns")
    if cached is None:
        ids = profile.column("functions", "function").astype(np.int64, copy=False)
        order = np.argsort(ids, kind="stable")
        names = profile.column("functions", "name").astype(object, copy=False)
        system_names = profile.column("functions", "system_name").astype(object, copy=False)
        cached = {
            "sorted_ids": ids[order],
            "order": order,
            "name": np.append(names, ""),
            "pprof_name": np.append(pprof_names(names, system_names), ""),
            "filename": np.append(profile.column("functions", "filename").astype(object, copy=False), ""),
            "start_line": np.append(profile.column("functions", "start_line").astype(np.int64, copy=False), 0),
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
    at = _positions(sorted_ids, function_ids)
    at_clipped = np.minimum(at, n - 1)
    found = sorted_ids[at_clipped] == function_ids
    return np.where(found, order[at_clipped], n)


def location_function_rows(profile: Profile) -> np.ndarray:
    """:func:`function_rows` of every row of ``profile.locations`` (cached): a frame's
    function row is then ``location_function_rows(profile)[frames["row"]]``."""
    cached = profile._cache.get("location_function_rows")
    if cached is None:
        cached = profile._cache["location_function_rows"] = function_rows(
            profile, profile.column("locations", "function")
        )
    return cached


def read_profile_bytes(path) -> bytes:
    """The bytes of the profile file ``path``, read at most up to the size limit of a profile (a path
    symlinked to ``/dev/zero`` is refused, not read until memory runs out); ProfileError (one line) for a
    directory, an unreadable file or one over the limit."""
    try:
        data = fsutil.read_bounded(path, MAX_PROFILE_BYTES)
    except OSError as err:
        raise ProfileError(f"{path}: cannot read: {err.strerror or err}") from None
    if len(data) > MAX_PROFILE_BYTES:
        raise ProfileError(f"{path}: larger than {MAX_PROFILE_BYTES >> 20} MiB; not a heap profile")
    return data
