"""Which samples and frames a pprof view uses: ``-focus``, ``-ignore``, ``-show``, ``-hide``, ``-tagfocus``.

The rules are ``go tool pprof``'s (``profile/filter.go``,
``internal/driver/driver_focus.go``):

- focus/ignore select whole samples: a sample is kept if some frame matches
  ``focus`` and none matches ``ignore`` (ignore wins). A location matches if
  the regular expression is found (unanchored) in one of its functions' names
  (as pprof shows them: :mod:`.names`) or file names, or in its mapping's
  (binary's) file name.
- show/hide select frames: ``hide`` removes the matching frames of a location
  (all of them if the mapping file matches), ``show`` keeps only the matching
  ones. A location left without frames disappears from every stack.
- tagfocus keeps samples whose labels match: ``KEY=REGEXP[,REGEXP...]`` on
  string labels, or a numeric range ``[KEY=]LOW:HIGH`` with units
  (``bytes=1kb:``, ``:64``, ``32b:4kb``) on numeric labels.

Totals (the 100 % of percentages) are taken before any of this, as pprof does.
A filter that matches nothing is named in :attr:`Selection.unmatched`, where
pprof warns "Focus expression matched no samples" (``warnNoMatches``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crdscale.analysis.pprof.decode import Profile, function_arrays, function_rows
from crdscale.analysis.pprof.measurement import scale
from crdscale.errors import UsageError


@dataclass(frozen=True)
class Filters:
    """pprof's sample and frame filters; ``None`` or ``""`` means not set (regular expressions in Go syntax)."""

    focus: str | None = None
    ignore: str | None = None
    show: str | None = None
    hide: str | None = None
    tagfocus: str | None = None

    def active(self) -> list[str]:
        """pprof's "Active filters" lines (``focus=...``), in pprof's order."""
        order = ("focus", "ignore", "hide", "show", "tagfocus")
        return [f"{k}={getattr(self, k)}" for k in order if getattr(self, k)]

    def __bool__(self) -> bool:
        return bool(self.focus or self.ignore or self.show or self.hide or self.tagfocus)


# pprof's names of the filters in its "... expression matched no samples" warnings, in its order.
WARNING_NAMES = {"focus": "Focus", "ignore": "Ignore", "hide": "Hide", "show": "Show", "tagfocus": "TagFocus"}


@dataclass(frozen=True)
class Selection:
    """What a view uses of one profile.

    ``keep``: bool per sample (None: every sample). ``visible``: bool per row of
    ``profile.locations`` (None: every frame), the frames that stay in stacks.
    ``unmatched``: the filters (``focus``, ``ignore``, ``hide``, ``show``,
    ``tagfocus``) that matched nothing, as pprof decides it: focus, ignore and
    hide match no location of the profile, show leaves no frame, tagfocus
    matches no sample that focus and ignore kept.
    """

    keep: np.ndarray | None = None
    visible: np.ndarray | None = None
    unmatched: tuple[str, ...] = ()


def select(profile: Profile, filters: Filters) -> Selection:
    """Apply all ``filters`` to ``profile`` as ``go tool pprof`` does; see the module docstring."""
    if not filters:
        return Selection()
    keep = None
    unmatched = []
    if filters.focus or filters.ignore:
        keep, focus_hit, ignore_hit = _focus_ignore(profile, filters.focus, filters.ignore)
        unmatched += [k for k, hit in (("focus", focus_hit), ("ignore", ignore_hit)) if getattr(filters, k) and not hit]
    visible = None
    if filters.show or filters.hide:
        visible, hide_hit, show_hit = _show_hide(profile, filters.show, filters.hide)
        unmatched += [k for k, hit in (("hide", hide_hit), ("show", show_hit)) if getattr(filters, k) and not hit]
    if filters.tagfocus:
        tagged = tag_matches(profile, filters.tagfocus)
        keep = tagged if keep is None else keep & tagged
        if not keep.any():
            unmatched.append("tagfocus")
    return Selection(keep, visible, tuple(unmatched))


# --------------------------------------------------------------------------
# Regular expressions
# --------------------------------------------------------------------------


def compile_regex(pattern: str | None, option: str = "focus") -> re.Pattern | None:
    """Compile a Go (RE2) regular expression for Python's ``re``.

    The common RE2 syntax is the same in both; POSIX classes such as
    ``[[:alpha:]]`` and ``\\z`` are translated. Returns None for an empty
    pattern; raises UsageError if invalid.
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


def _matches(regex: re.Pattern, strings: np.ndarray) -> np.ndarray:
    """Bool per string; each distinct string is matched once (kube-apiserver profiles repeat them a lot)."""
    uniq, inverse = np.unique(strings.astype(str), return_inverse=True)
    found = np.fromiter((regex.search(s) is not None for s in uniq), dtype=bool, count=len(uniq))
    return found[inverse.reshape(-1)]


def _row_matches(profile: Profile, regex: re.Pattern) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``profile.locations``: (the row's function name or file matches,
    the location's mapping file matches)."""
    fids = profile.column("locations", "function")
    cols = function_arrays(profile)
    pos = function_rows(profile, fids)
    has_fn = fids != 0
    # pprof matches the names it shows (generic names without their parameter lists, see .names).
    line_hit = has_fn & (_matches(regex, cols["pprof_name"][pos]) | _matches(regex, cols["filename"][pos]))
    map_ids = profile.column("mappings", "mapping")
    map_files = np.append(profile.column("mappings", "filename").astype(object, copy=False), "")
    loc_maps = profile.column("locations", "mapping")
    order = np.argsort(map_ids, kind="stable")
    at = np.minimum(np.searchsorted(map_ids[order], loc_maps), max(len(map_ids) - 1, 0))
    found = map_ids[order][at] == loc_maps if len(map_ids) else np.zeros(len(loc_maps), dtype=bool)
    map_files = map_files[np.where(found, order[at] if len(map_ids) else 0, len(map_ids))]
    return line_hit, _matches(regex, map_files)


def location_matches(profile: Profile, regex: re.Pattern) -> pd.Series:
    """Bool Series indexed by location id: does the regex match any of the
    location's frames (function name or file name) or its mapping file?"""
    line_hit, map_hit = _row_matches(profile, regex)
    locs = profile.column("locations", "location")
    return pd.Series(line_hit | map_hit, index=locs).groupby(level=0).any()


# --------------------------------------------------------------------------
# Whole samples: focus / ignore / tagfocus
# --------------------------------------------------------------------------


def select_samples(profile: Profile, focus: str | None = None, ignore: str | None = None) -> np.ndarray:
    """Bool array over samples: kept by ``-focus``/``-ignore`` as ``go tool pprof`` keeps them.

    A sample is kept if at least one of its locations matches ``focus`` (any
    location when focus is empty) and none matches ``ignore``.
    """
    return _focus_ignore(profile, focus, ignore)[0]


def _focus_ignore(profile: Profile, focus: str | None, ignore: str | None) -> tuple[np.ndarray, bool, bool]:
    """:func:`select_samples`, and whether focus and ignore matched a location (pprof's
    ``fm``/``im``: any location of the profile, used by a sample or not)."""
    focus_rx = compile_regex(focus, "focus")
    ignore_rx = compile_regex(ignore, "ignore")
    n = profile.n_samples
    if focus_rx is None and ignore_rx is None:
        return np.ones(n, dtype=bool), True, False
    stack_loc = profile.column("stacks", "location")
    stack_sample = profile.column("stacks", "sample")
    ignored_locs = location_matches(profile, ignore_rx) if ignore_rx is not None else None
    focused_locs = location_matches(profile, focus_rx) if focus_rx is not None else None
    ignored = (
        ignored_locs.reindex(stack_loc).to_numpy(dtype=bool)
        if ignored_locs is not None
        else np.zeros(len(stack_loc), dtype=bool)
    )
    focused = (
        focused_locs.reindex(stack_loc).to_numpy(dtype=bool)
        if focused_locs is not None
        else np.ones(len(stack_loc), dtype=bool)
    )
    # pprof marks a location "ignored" before testing focus: ignore wins.
    focused = focused & ~ignored
    any_focused = np.bincount(stack_sample, weights=focused, minlength=n) > 0
    any_ignored = np.bincount(stack_sample, weights=ignored, minlength=n) > 0
    ignore_hit = ignored_locs is not None and bool(ignored_locs.any())
    if focused_locs is None:
        focus_hit = True
    elif ignored_locs is None:
        focus_hit = bool(focused_locs.any())
    else:
        focus_hit = bool((focused_locs & ~ignored_locs).any())
    return any_focused & ~any_ignored, focus_hit, ignore_hit


_TAG_RANGE = re.compile(r"([+-]?[0-9]+)([A-Za-z]+)?")


def tag_matches(profile: Profile, tagfocus: str) -> np.ndarray:
    """Bool per sample: kept by ``-tagfocus`` (see the module docstring)."""
    key, sep, value = tagfocus.partition("=")
    if not sep:
        key, value = "", tagfocus
    labels = profile.labels
    n = profile.n_samples
    numeric = _numeric_filter(value)
    if numeric is not None:
        nums = labels[labels["str"].isna()]
        units = num_label_units(profile)
        if key:
            nums = nums[nums["key"] == key]
        hit = np.fromiter(
            (numeric(int(v), units.get(k, k)) for v, k in zip(nums["num"], nums["key"])), dtype=bool, count=len(nums)
        )
        return np.bincount(nums["sample"].to_numpy()[hit], minlength=n) > 0
    regexes = [compile_regex(part, "tagfocus") or re.compile("") for part in value.split(",")]
    strs = labels[labels["str"].notna()]
    if key:
        vals = strs[strs["key"] == key]
        texts = vals["str"].to_numpy(dtype=str)
        hit = np.zeros(len(vals), dtype=bool)
        for rx in regexes:
            hit |= _matches(rx, texts) if len(texts) else hit
        return np.bincount(vals["sample"].to_numpy()[hit], minlength=n) > 0
    # Without a key every regexp must match some "key:value" of the sample (pprof's rule).
    texts = (strs["key"] + ":" + strs["str"]).to_numpy(dtype=str)
    keep = np.ones(n, dtype=bool)
    for rx in regexes:
        hit = _matches(rx, texts) if len(texts) else np.zeros(0, dtype=bool)
        keep &= np.bincount(strs["sample"].to_numpy()[hit], minlength=n) > 0
    return keep


def filter_notes(tagfocus: str | None, unmatched: list[str] | tuple[str, ...]) -> list[str]:
    """What ``go tool pprof`` writes to stderr about its filters, in its order: how it read
    ``-tagfocus`` when that is a numeric range (``tagfocus:Interpreted '1kb:' as range, not
    regexp``), then one ``Focus expression matched no samples`` per filter in ``unmatched``."""
    notes = []
    if tagfocus:
        _key, sep, value = tagfocus.partition("=")
        if not sep:
            value = tagfocus
        if _numeric_filter(value) is not None:
            notes.append(f"tagfocus:Interpreted '{value}' as range, not regexp")
    return notes + [f"{WARNING_NAMES[k]} expression matched no samples" for k in WARNING_NAMES if k in unmatched]


def num_label_units(profile: Profile) -> dict[str, str]:
    """pprof's unit of each numeric label key: the first unit the profile states,
    else ``bytes`` for ``alignment``/``request``, else the key itself (Go heap
    profiles' ``bytes`` label has no unit, so it is ``bytes``)."""
    nums = profile.labels[profile.labels["str"].isna()]
    units: dict[str, str] = {}
    for key, unit in zip(nums["key"], nums["num_unit"]):
        if unit and key not in units:
            units[key] = unit
    for key in nums["key"].unique():
        if not units.get(key):
            units[key] = "bytes" if key in ("alignment", "request") else key
    return units


def _numeric_filter(value: str):
    """pprof's ``parseTagFilterRange``: a predicate ``(value, unit) -> bool`` or None if not a range."""
    ranges = _TAG_RANGE.findall(value)[:2]
    if not ranges:
        return None
    matches = [m.group(0) for m in _TAG_RANGE.finditer(value)][:2]
    low, low_unit = scale(int(ranges[0][0]), ranges[0][1], ranges[0][1])

    def within(lo, hi):
        def check(v: int, unit: str) -> bool:
            sv, su = scale(v, unit, low_unit)
            return su == low_unit and (lo is None or sv >= lo) and (hi is None or sv <= hi)

        return check

    if len(ranges) == 1:
        if value == matches[0]:
            return within(low, low)
        if value == matches[0] + ":":
            return within(low, None)
        if value == ":" + matches[0]:
            return within(None, low)
        return None
    if value != matches[0] + ":" + matches[1]:
        return None
    high, high_unit = scale(int(ranges[1][0]), ranges[1][1], low_unit)
    if high_unit != low_unit:
        return None
    return within(low, high)


# --------------------------------------------------------------------------
# Frames: show / hide
# --------------------------------------------------------------------------


def visible_frames(profile: Profile, show: str | None = None, hide: str | None = None) -> np.ndarray:
    """Bool per row of ``profile.locations``: the frame stays after ``-show``/``-hide``.

    ``hide`` drops matching frames (every frame of a location whose mapping
    file matches); ``show`` keeps matching frames (every frame of a location
    whose mapping file matches). A location without line information has no
    frame to keep under ``show``.
    """
    return _show_hide(profile, show, hide)[0]


def _show_hide(profile: Profile, show: str | None, hide: str | None) -> tuple[np.ndarray, bool, bool]:
    """:func:`visible_frames`, whether hide matched a location and whether show kept a frame
    (pprof's ``hm``/``hnm``)."""
    has_fn = profile.column("locations", "function") != 0
    visible = np.ones(len(has_fn), dtype=bool)
    hide_rx = compile_regex(hide, "hide")
    show_rx = compile_regex(show, "show")
    hide_hit = show_hit = False
    if hide_rx is not None:
        line_hit, map_hit = _row_matches(profile, hide_rx)
        hidden = line_hit | map_hit
        hide_hit = bool(hidden.any())
        visible &= ~hidden
    if show_rx is not None:
        line_hit, map_hit = _row_matches(profile, show_rx)
        shown = has_fn & (line_hit | map_hit)
        # pprof applies hide, then show, location by location: a frame counts if it is shown and not hidden.
        show_hit = bool((shown & visible).any()) if hide_rx is not None else bool(shown.any())
        visible &= shown
    return visible, hide_hit, show_hit


# --------------------------------------------------------------------------
# Subsets
# --------------------------------------------------------------------------


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
