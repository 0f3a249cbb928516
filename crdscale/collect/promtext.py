"""The one parser of Prometheus text exposition (format 0.0.4), as kube-apiserver and etcd serve on ``/metrics``.

kube-apiserver exposes tens of thousands of sample lines; callers almost always
want a handful of metrics, so the parser takes the wanted names and skips
every other line before any regular expression runs.

Label values are unescaped as the format defines (``\\\\``, ``\\"``, ``\\n``;
any other backslash stays as written, as ``prometheus_client`` does) and are
read as text, so UTF-8 values come back as the characters they spell.
``tests/unit/test_promtext.py`` holds the result to ``prometheus_client``'s
parser on a recorded kube-apiserver body.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Iterator

Sample = tuple[str, dict[str, str], float]
Samples = dict[str, list[tuple[dict[str, str], float]]]
"""Samples grouped by metric name: ``{name: [(labels, value), ...]}``."""

_SAMPLE_RE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)[ \t]*"
    r'(?:\{(?P<labels>(?:[^"}]|"(?:[^"\\]|\\.)*")*)\})?'
    r"[ \t]+(?P<value>\S+)(?:[ \t]+\S+)?[ \t]*$"
)
_LABEL_RE = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*,?')
_ESCAPE_RE = re.compile(r"\\(.)")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _ESCAPE_RE.sub(lambda m: _ESCAPES.get(m[1], m[0]), value)


def _name_end(line: str) -> int:
    """Index just past the metric name (the first ``{``, space or tab)."""
    end = len(line)
    for sep in ("{", " ", "\t"):
        i = line.find(sep, 0, end)
        if i >= 0:
            end = i
    return end


def parse_exposition(text: str, names: Collection[str] | None = None, *, prefixes: bool = False) -> Iterator[Sample]:
    """Yield ``(name, labels, value)`` for each sample line of ``text``, in order.

    Parameters:
        text: a ``/metrics`` body.
        names: only samples of these metric names (``None``: all). Histogram and
            summary series are named as exposed (``x_bucket``, ``x_sum``, ``x_count``).
        prefixes: treat ``names`` as name prefixes (``"process_"``, or ``"x"`` for
            ``x`` and its ``_sum``/``_count``/``_bucket`` series).

    Values are floats (``+Inf``, ``-Inf`` and ``NaN`` included); timestamps are
    dropped. Lines that are not valid samples are skipped.
    """
    exact = set(names) if names is not None and not prefixes else None
    starts = tuple(names) if names is not None and prefixes else None
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        # Filter on the name before the regex: most lines of a scrape are unwanted.
        if exact is not None and line[: _name_end(line)] not in exact:
            continue
        if starts is not None and not line.startswith(starts):
            continue
        m = _SAMPLE_RE.match(line)
        if not m:
            if line.strip() and line.lstrip()[0] != "#":
                m = _SAMPLE_RE.match(line.strip())
            if not m:
                continue
        try:
            value = float(m["value"])
        except ValueError:
            continue
        raw = m["labels"]
        labels = {k: _unescape(v) for k, v in _LABEL_RE.findall(raw)} if raw else {}
        yield m["name"], labels, value


def samples_by_name(text: str, names: Collection[str] | None = None, *, prefixes: bool = False) -> Samples:
    """:func:`parse_exposition` grouped by metric name: ``{name: [(labels, value), ...]}``."""
    out: Samples = defaultdict(list)
    for name, labels, value in parse_exposition(text, names, prefixes=prefixes):
        out[name].append((labels, value))
    return dict(out)
