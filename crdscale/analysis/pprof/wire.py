"""Protobuf wire format decoded with numpy, many messages at once.

A 2,000-CRD kube-apiserver heap profile holds ~12,000 samples with ~500,000
stack entries. Reading them through protobuf's Python objects costs a Python
call per sample and per stack entry; here every message of a kind (all
samples, all locations...) advances together, one field per numpy step, and
packed arrays are decoded in one pass over their bytes.

Any encoding a conforming writer may produce is accepted (packed or unpacked
repeated fields, fields in any order, unknown fields skipped, the last value of
a repeated scalar wins); anything malformed raises :class:`WireError`.
Spec: https://protobuf.dev/programming-guides/encoding/
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MAX_VARINT = 10  # bytes in the longest varint (a negative int64)


class WireError(ValueError):
    """The bytes are not valid protobuf wire format."""


# Zero bytes after a buffer's data, so that reads past the end stay in bounds (they are checked).
PADDING = MAX_VARINT + 8


def buffer(data: bytes) -> np.ndarray:
    """The bytes as uint8, padded with :data:`PADDING` zero bytes."""
    return np.frombuffer(data + bytes(PADDING), dtype=np.uint8)


def range_indexes(first, counts: np.ndarray, dtype=np.int64) -> np.ndarray:
    """``first[i], first[i] + 1, ..., first[i] + counts[i] - 1`` for every range i, concatenated:
    one repeat and one in-place add, no loop. With ``first`` 0, each element's position within
    its range (a depth). ``dtype`` int32 halves the memory to touch where the values fit."""
    offsets = np.cumsum(counts) - counts
    index = np.repeat((np.asarray(first) - offsets).astype(dtype), counts)
    index += np.arange(len(index), dtype=dtype)
    return index


def varints_at(buf: np.ndarray, pos: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each position; returns (values as uint64, position after each).

    Raises WireError if a varint runs past ``end`` or past 10 bytes.
    """
    byte = buf[pos]
    value = (byte & 0x7F).astype(np.uint64)
    after = pos + 1
    more = np.flatnonzero(byte >= 0x80)  # most tags and lengths are one byte: done for those
    for j in range(1, MAX_VARINT):
        if len(more) == 0:
            break
        byte = buf[pos[more] + j]
        value[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * j)
        after[more] += 1
        more = more[byte >= 0x80]
    if len(more):
        raise WireError("varint longer than 10 bytes")
    if (after > end).any():
        raise WireError("truncated varint")
    return value, after


@dataclass(frozen=True)
class Fields:
    """Every field of a set of messages, in the order found per message.

    ``message`` is the index of the owning message, ``number`` the field
    number, ``wire`` the wire type; ``value`` holds varint and fixed values
    (uint64), ``start``/``end`` the byte range of length-delimited payloads.
    """

    message: np.ndarray
    number: np.ndarray
    wire: np.ndarray
    value: np.ndarray
    start: np.ndarray
    end: np.ndarray

    def select(self, number: int, wire: int | None = None) -> Fields:
        """The fields with this number (and wire type)."""
        keep = self.number == number
        if wire is not None:
            keep &= self.wire == wire
        at = np.flatnonzero(keep)  # one mask pass, then gathers: ~7x faster than masking each column
        return Fields(*(a[at] for a in (self.message, self.number, self.wire, self.value, self.start, self.end)))

    def scalar(self, number: int, n_messages: int, dtype=np.uint64) -> np.ndarray:
        """A varint field per message (0 where absent; the last one wins, as protobuf says)."""
        at = np.flatnonzero((self.number == number) & (self.wire == 0))
        out = np.zeros(n_messages, dtype=np.uint64)
        out[self.message[at]] = self.value[at]  # fields are in stream order per message: the last wins
        return out.view(np.int64) if dtype == np.int64 else out.astype(dtype, copy=False)


def walk(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> Fields:
    """Split messages (byte ranges ``start``..``end`` of ``buf``) into their fields."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    cursor = start.copy()
    active = np.flatnonzero(cursor < end)
    out: list[tuple] = []
    while len(active):
        pos, stop = cursor[active], end[active]
        tag, pos = varints_at(buf, pos, stop)
        number = (tag >> np.uint64(3)).astype(np.int64)
        wire = (tag & np.uint64(7)).astype(np.int64)
        if (number == 0).any():
            raise WireError("field number 0")
        value = np.zeros(len(active), dtype=np.uint64)
        p_start = np.zeros(len(active), dtype=np.int64)
        p_end = np.zeros(len(active), dtype=np.int64)
        if not ((wire == 0) | (wire == 2) | (wire == 1) | (wire == 5)).all():
            raise WireError("unsupported wire type (groups are not used by profile.proto)")
        # Positions of each wire type (gathers: faster than boolean masks on every column).
        is_var, is_len = np.flatnonzero(wire == 0), np.flatnonzero(wire == 2)
        nxt = pos.copy()
        if len(is_var):
            value[is_var], nxt[is_var] = varints_at(buf, pos[is_var], stop[is_var])
        if len(is_len):
            length, after = varints_at(buf, pos[is_len], stop[is_len])
            if (length > np.uint64(np.iinfo(np.int64).max)).any():
                raise WireError("length too large")
            p_start[is_len] = after
            p_end[is_len] = after + length.astype(np.int64)
            nxt[is_len] = p_end[is_len]
        for wire_type, width in ((1, 8), (5, 4)):
            fixed = np.flatnonzero(wire == wire_type)
            if len(fixed):
                at = pos[fixed]
                raw = buf[at[:, None] + np.arange(width)].astype(np.uint64)
                value[fixed] = np.bitwise_or.reduce(raw << (np.arange(width, dtype=np.uint64) * np.uint64(8)), axis=1)
                nxt[fixed] = at + width
        if (nxt > stop).any():
            raise WireError("field runs past the end of its message")
        out.append((active, number, wire, value, p_start, p_end))
        cursor[active] = nxt
        active = active[nxt < stop]
    if not out:
        empty = np.zeros(0, dtype=np.int64)
        return Fields(empty, empty, empty, np.zeros(0, dtype=np.uint64), empty, empty)
    cols = [np.concatenate([o[i] for o in out]) for i in range(6)]
    # Group by message, keeping stream order within each (the step order is the stream order).
    order = np.argsort(cols[0], kind="stable")
    return Fields(*(c[order] for c in cols))


def packed_varints(buf: np.ndarray, fields: Fields, n_messages: int) -> tuple[np.ndarray, np.ndarray]:
    """A repeated varint field of each message, packed or not: (values as uint64, count per message).

    Values are concatenated message by message, in stream order. Writers mix
    both encodings: Go's packs only lists of more than two values.
    """
    packed = fields.wire == 2
    single = fields.wire == 0
    if not (packed | single).all():
        raise WireError("repeated varint field with a fixed-size wire type")
    chunk_values, chunk_counts = _decode_run(buf, fields.start[packed], fields.end[packed])
    if not single.any():
        counts = np.bincount(fields.message, weights=chunk_counts, minlength=n_messages).astype(np.int64)
        return chunk_values, counts
    # Fields are in message, stream order: each unpacked value goes in after the packed values
    # of the fields before it (one pass; Go leaves only stacks of one or two locations unpacked).
    per_field = np.ones(len(fields.message), dtype=np.int64)
    per_field[packed] = chunk_counts
    packed_before = np.cumsum(per_field) - per_field - (np.cumsum(single) - single)
    values = np.insert(chunk_values, packed_before[single], fields.value[single])
    counts = np.bincount(fields.message, weights=per_field, minlength=n_messages).astype(np.int64)
    return values, counts


def _decode_run(buf: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode the varints filling each byte range: (all values, number of values per range)."""
    lengths = end - start
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(len(start), dtype=np.int64)
    nonempty = lengths > 0
    offsets = np.cumsum(lengths) - lengths
    # int32 byte indexes where they fit: the pages of a fresh array cost as much as the adds.
    raw = buf[range_indexes(start, lengths, np.int32 if len(buf) < np.iinfo(np.int32).max else np.int64)]
    last = raw < 0x80
    if not last[(offsets + lengths - 1)[nonempty]].all():
        raise WireError("truncated packed varints")
    per_range = np.zeros(len(start), dtype=np.int64)
    per_range[nonempty] = np.add.reduceat(last.view(np.uint8), offsets[nonempty], dtype=np.int32)
    ends = np.flatnonzero(last)  # each varint's last byte (a gather beats a boolean mask here)
    more = ~last
    if not (more[1:] & more[:-1]).any():
        # No varint is longer than two bytes (ids below 16,384: a stack's location ids): the
        # byte before each last byte is its first when >= 0x80. Before the first varint,
        # index -1 reads the run's last byte, which is < 0x80 (checked above): a 1-byte varint.
        values = raw[ends].astype(np.uint64)
        before = raw[ends - 1]
        two = before >= 0x80
        values <<= (two * np.uint8(7)).astype(np.uint64)
        values |= (before & (two * np.uint8(0x7F))).astype(np.uint64)
        return values, per_range
    # Varint by varint, one byte position at a time.
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    size = ends - starts + 1
    longest = int(size.max())
    if longest > MAX_VARINT:
        raise WireError("varint longer than 10 bytes")
    wide = np.uint64 if longest > 4 else np.uint32  # 4 bytes hold 28 bits
    padded = np.concatenate([raw, np.zeros(MAX_VARINT, dtype=np.uint8)])
    values = (padded[starts] & 0x7F).astype(wide)
    for j in range(1, longest):
        part = (padded[starts + j] & 0x7F).astype(wide)
        part[size <= j] = 0
        values |= part << wide(7 * j)
    return values.astype(np.uint64, copy=False), per_range
