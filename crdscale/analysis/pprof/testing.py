"""Test fixtures for pprof profiles: build, trim and encode ``profile.proto``.

Not used by crdscale itself: tests, ``scripts/make_run_fixture.py`` and
examples build small profiles here, and :func:`encode_profile` writes them
as files that ``go tool pprof`` reads.
"""

from __future__ import annotations

import gzip

import numpy as np
import pandas as pd

from crdscale.analysis.pprof.decode import TABLES, Profile, ProfileMeta, ValueType, unique_names
from crdscale.analysis.pprof.schema import profile_message_class
from crdscale.units import is_missing


def encode_profile(profile: Profile, *, compress: bool = True, prune: bool = True) -> bytes:
    """Serialize a Profile back to ``profile.proto`` bytes (gzip unless ``compress=False``).

    With ``prune`` only the locations, functions and mappings the samples
    reference are written, which keeps trimmed fixtures small. Labels,
    metadata and values are written as they are.
    """
    msg = profile_message_class()()
    strings: dict[str, int] = {"": 0}

    def sid(s) -> int:
        s = "" if s is None else str(s)
        if s not in strings:
            strings[s] = len(strings)
        return strings[s]

    meta = profile.meta
    for t in meta.sample_types:
        msg.sample_type.add(type=sid(t.type), unit=sid(t.unit))
    stacks = profile.stacks
    locs = profile.locations
    if prune:
        used_locs = np.unique(stacks["location"].to_numpy())
        locs = locs[np.isin(locs["location"].to_numpy(), used_locs)]
    used_fns = set(locs["function"].tolist())
    used_maps = set(locs["mapping"].tolist())
    for m in profile.mappings.itertuples(index=False):
        if prune and m.mapping not in used_maps:
            continue
        msg.mapping.add(
            id=int(m.mapping),
            memory_start=int(m.memory_start),
            memory_limit=int(m.memory_limit),
            file_offset=int(m.file_offset),
            filename=sid(m.filename),
            build_id=sid(m.build_id),
            has_functions=bool(m.has_functions),
            has_filenames=bool(m.has_filenames),
            has_line_numbers=bool(m.has_line_numbers),
            has_inline_frames=bool(m.has_inline_frames),
        )
    loc_msgs: dict[int, object] = {}
    for r in locs.itertuples(index=False):
        loc = loc_msgs.get(r.location)
        if loc is None:
            loc = msg.location.add(id=int(r.location), mapping_id=int(r.mapping), address=int(r.address))
            loc_msgs[r.location] = loc
        if r.function:
            loc.line.add(function_id=int(r.function), line=int(r.line), column=int(r.column))
    for f in profile.functions.itertuples(index=False):
        if prune and f.function not in used_fns:
            continue
        msg.function.add(
            id=int(f.function),
            name=sid(f.name),
            system_name=sid(f.system_name),
            filename=sid(f.filename),
            start_line=int(f.start_line),
        )
    loc_by_sample = (
        np.split(
            stacks["location"].to_numpy(),
            np.cumsum(np.bincount(stacks["sample"].to_numpy(), minlength=len(profile.samples)))[:-1],
        )
        if len(profile.samples)
        else []
    )
    labels_by_sample: dict[int, list] = {}
    for lab in profile.labels.itertuples(index=False):
        labels_by_sample.setdefault(int(lab.sample), []).append(lab)
    values = profile.samples.to_numpy(dtype=np.int64)
    for i in range(len(profile.samples)):
        sm = msg.sample.add(location_id=loc_by_sample[i].tolist(), value=values[i].tolist())
        for lab in labels_by_sample.get(i, ()):
            if not is_missing(lab.str):
                sm.label.add(key=sid(lab.key), str=sid(lab.str))
            else:
                sm.label.add(key=sid(lab.key), num=int(lab.num), num_unit=sid(lab.num_unit))
    if meta.period_type is not None:
        msg.period_type.type = sid(meta.period_type.type)
        msg.period_type.unit = sid(meta.period_type.unit)
    msg.period = meta.period
    msg.time_nanos = meta.time_nanos
    msg.duration_nanos = meta.duration_nanos
    msg.comment.extend(sid(c) for c in meta.comments)
    msg.default_sample_type = sid(meta.default_sample_type)
    msg.drop_frames = sid(meta.drop_frames)
    msg.keep_frames = sid(meta.keep_frames)
    msg.doc_url = sid(meta.doc_url)
    msg.string_table.extend(s.encode("utf-8") for s in strings)
    data = msg.SerializeToString()
    return gzip.compress(data, mtime=0) if compress else data


def truncate_stacks(profile: Profile, max_depth: int = 32) -> Profile:
    """A copy whose stacks keep only the ``max_depth`` locations nearest the leaf.

    This is what heap profiles from Go before 1.23 look like (their stacks are
    cut at 32 frames); used to check that attribution still works on them.
    """
    stacks = profile.stacks[profile.stacks["depth"].to_numpy() < max_depth].reset_index(drop=True)
    return Profile(
        profile.samples,
        stacks,
        profile.locations,
        profile.functions,
        profile.mappings,
        profile.labels,
        profile.meta,
        source=profile.source,
    )


def synthetic_profile(
    stacks: list[tuple[list[str], list[int]]],
    sample_types: list[tuple[str, str]] = (("inuse_objects", "count"), ("inuse_space", "bytes")),
    *,
    time_nanos: int = 0,
    labels: list[dict] | None = None,
) -> Profile:
    """Build a Profile from ``(function names from leaf to root, values)`` pairs.

    One location per function name (no inlining), values in the order of
    ``sample_types``. For tests and examples; :func:`encode_profile` turns it
    into a file ``go tool pprof`` reads. ``labels`` (one dict per sample) maps
    a key to a string label, an int (numeric label) or an ``(int, unit)`` pair.
    """
    names: dict[str, int] = {}
    stack_rows, values = [], []
    for i, (frames, vals) in enumerate(stacks):
        for depth, name in enumerate(frames):
            stack_rows.append((i, depth, names.setdefault(name, len(names) + 1)))
        values.append(list(vals))
    ids = np.arange(1, len(names) + 1, dtype=np.int64)
    functions = pd.DataFrame(
        {
            "function": ids,
            "name": list(names),
            "system_name": list(names),
            "filename": ["synthetic.go"] * len(names),
            "start_line": np.ones(len(names), dtype=np.int64),
        }
    )
    locations = pd.DataFrame(
        {
            "location": ids,
            "address": (ids * 16).astype(np.uint64),
            "mapping": np.zeros(len(ids), dtype=np.int64),
            "inline_depth": np.zeros(len(ids), dtype=np.int64),
            "function": ids,
            "line": np.ones(len(ids), dtype=np.int64),
            "column": np.zeros(len(ids), dtype=np.int64),
        }
    )
    mappings = pd.DataFrame(columns=list(TABLES["mappings"]))
    samples = pd.DataFrame(
        np.asarray(values, dtype=np.int64).reshape(len(stacks), len(sample_types)),
        columns=unique_names([t for t, _ in sample_types]),
    )
    samples.index.name = "sample"
    stacks_df = pd.DataFrame(stack_rows or None, columns=["sample", "depth", "location"]).astype(np.int64)
    label_rows = []
    for i, sample_labels in enumerate(labels or []):
        for key, value in sample_labels.items():
            if isinstance(value, str):
                label_rows.append((i, key, value, 0, ""))
            else:
                num, unit = value if isinstance(value, tuple) else (value, "")
                label_rows.append((i, key, None, int(num), unit))
    labels = pd.DataFrame(label_rows, columns=["sample", "key", "str", "num", "num_unit"]).astype(
        {"sample": np.int64, "num": np.int64}
    )
    meta = ProfileMeta(
        sample_types=tuple(ValueType(t, u) for t, u in sample_types),
        default_sample_type="",
        period_type=ValueType("space", "bytes"),
        period=524288,
        time_nanos=time_nanos,
        duration_nanos=0,
    )
    return Profile(samples, stacks_df, locations, functions, mappings, labels, meta, source="<synthetic>")
