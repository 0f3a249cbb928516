"""YAML streams to Python objects, fast and bounded: libyaml's parser, objects built from its events.

PyYAML's ``CSafeLoader`` parses in C but composes nodes and constructs objects in
Python, calling a resolver per scalar; on 1,848 real provider CRDs (17 MB) that is
~3.5 s of a footprint prediction. :func:`load_all` takes libyaml's events (C) and
builds dicts and lists in one loop, resolving plain scalars as PyYAML's safe
resolver does, once per distinct value: the same objects (a unit test compares
them on every fixture), ~3x faster. A stream using what that loop does not handle
(an explicit tag on a collection: ``!!set``, ``!!omap``...) is loaded by PyYAML itself.

Aliases are bounded: a 1.4 KB "billion laughs" schema, nine levels of aliases
of aliases, expands to ~10^9 nodes; every later pass over it (properties, JSON
size, the API server's own decoder) pays for each. Each alias adds the expanded
size of what it names, and a document whose aliases add more than
:data:`MAX_ALIAS_NODES` nodes is refused. Without aliases, a document's size is
bounded by its text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml
from yaml import events

# Every node of a JSON document takes at least one byte (a scalar one character, a
# collection its brackets), so a document whose aliases add more nodes than the bytes
# etcd accepts in one request (--max-request-bytes, 1.5 MiB by default) cannot be stored:
# refusing it loses nothing a server would take.
MAX_ALIAS_NODES = 1_572_864


# Real CRDs nest a few dozen levels (a property level is two: ``properties`` and the property);
# Go's decoders allow 10,000, but every later pass here (properties, JSON size) recurses in Python.
MAX_NESTING = 400


class NestingError(yaml.YAMLError):
    """A document nested deeper than :data:`MAX_NESTING`."""


class AliasBombError(yaml.YAMLError):
    """A document whose aliases expand past :data:`MAX_ALIAS_NODES`."""


class _Fallback(Exception):
    """The stream uses a feature the event loop leaves to PyYAML."""


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_IMPLICIT = yaml.resolver.Resolver.yaml_implicit_resolvers
_CONSTRUCTOR = yaml.constructor.SafeConstructor()


class _MergeKey:
    """Stands for a plain ``<<`` key until its mapping ends."""


_MERGE_KEY = _MergeKey()
_NO_KEY = object()


def _plain(value: str, cache: dict[str, Any]) -> Any:
    """A plain (unquoted, untagged) scalar as the safe resolver and constructor make it."""
    try:
        return cache[value]
    except KeyError:
        pass
    tag = _STR
    for candidate, regexp in _IMPLICIT.get(value[0] if value else "", ()):
        if regexp.match(value):
            tag = candidate
            break
    if tag == _STR:
        out = value
    elif tag == _MERGE:
        out = _MERGE_KEY
    else:
        out = _scalar(tag, value)
    cache[value] = out
    return out


def _scalar(tag: str, value: str) -> Any:
    construct = _CONSTRUCTOR.yaml_constructors.get(tag)
    if construct is None:
        raise _Fallback  # PyYAML names the unknown tag in its own error
    return construct(_CONSTRUCTOR, yaml.ScalarNode(tag, value))


def _load_events(text: str | bytes) -> Iterator[Any]:
    parser = yaml._yaml.CParser(text)
    cache: dict[str, Any] = {}
    try:
        get = parser.get_event
        stack: list[tuple[Any, Any, list | None, int, str | None]] = []
        current: Any = None  # the open dict or list
        key: Any = _NO_KEY  # in a dict: the key waiting for its value
        merges: list | None = None  # in a dict: values of its << keys
        anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (object, its expanded nodes)
        nodes = 0  # nodes of the document, aliases expanded
        added = 0  # of which added by aliases
        start = 0  # nodes when the open collection started
        anchor: str | None = None  # the open collection's anchor
        root: Any = None
        while True:
            event = get()
            if event is None:
                return
            kind = event.__class__
            if kind is events.ScalarEvent:
                nodes += 1
                tag = event.tag
                if tag is None or tag == "!":
                    value = _plain(event.value, cache) if event.implicit[0] else event.value
                else:
                    value = _scalar(tag, event.value)
                if event.anchor is not None:
                    anchors[event.anchor] = (value, 1)
            elif kind is events.MappingStartEvent or kind is events.SequenceStartEvent:
                mapping = kind is events.MappingStartEvent
                if event.tag not in (None, "!", _MAP if mapping else _SEQ):
                    raise _Fallback
                nodes += 1
                if len(stack) >= MAX_NESTING:
                    raise NestingError(f"it nests deeper than {MAX_NESTING} levels, more than crdscale measures")
                stack.append((current, key, merges, start, anchor))
                current = {} if mapping else []
                key, merges, start, anchor = _NO_KEY, [] if mapping else None, nodes, event.anchor
                if anchor is not None:
                    # Visible to aliases inside it (a recursive structure), as PyYAML allows.
                    anchors[anchor] = (current, 0)
                continue
            elif kind is events.MappingEndEvent or kind is events.SequenceEndEvent:
                value = current
                if merges:
                    value = _merged(value, merges)
                if anchor is not None:
                    anchors[anchor] = (value, nodes - start + 1)
                current, key, merges, start, anchor = stack.pop()
            elif kind is events.AliasEvent:
                try:
                    value, size = anchors[event.anchor]
                except KeyError:
                    raise yaml.composer.ComposerError(
                        None, None, f"found undefined alias {event.anchor!r}", event.start_mark
                    ) from None
                nodes += size
                added += size
                if added > MAX_ALIAS_NODES:
                    raise AliasBombError(
                        f"its aliases expand it by more than {MAX_ALIAS_NODES:,} nodes (a YAML alias bomb?): "
                        f"more than the 1.5 MiB etcd accepts in one request"
                    )
            elif kind is events.DocumentStartEvent:
                anchors, nodes, added, root = {}, 0, 0, None
                continue
            elif kind is events.DocumentEndEvent:
                yield root
                continue
            else:
                continue
            # Place the finished value.
            if current is None:
                root = value
            elif merges is None:
                current.append(value)
            elif key is _NO_KEY:
                if isinstance(value, (dict, list)):
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", None, "found unhashable key", event.start_mark
                    )
                key = value
            else:
                if key is _MERGE_KEY:
                    merges.append(value)
                else:
                    current[key] = value
                key = _NO_KEY
    finally:
        parser.dispose()


def _merged(mapping: dict, merges: list) -> dict:
    """``mapping`` with its ``<<`` values merged under it (its own keys win; among merged ones the first)."""
    out: dict = {}
    for value in reversed(merges):
        for item in reversed(value) if isinstance(value, list) else (value,):
            if not isinstance(item, dict):
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", None, "expected a mapping for merging", None
                )
            out.update(item)
    out.update(mapping)
    return out


def load_all(text: str | bytes) -> Iterator[Any]:
    """Yield each document of a YAML stream (``None`` for an empty one), as ``yaml.safe_load_all`` would.

    Raises ``yaml.YAMLError`` for invalid YAML, :class:`AliasBombError` for a document
    whose aliases expand past :data:`MAX_ALIAS_NODES`.
    """
    done = 0
    try:
        if not yaml.__with_libyaml__:
            raise _Fallback
        for document in _load_events(text):
            done += 1
            yield document
    except _Fallback:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        for index, document in enumerate(yaml.load_all(text, Loader=loader)):
            if index >= done:
                _check_expansion(document)
                yield document


def _check_expansion(document: Any) -> None:
    """Raise :class:`AliasBombError` when ``document``, expanded, has more than :data:`MAX_ALIAS_NODES`
    nodes beyond its distinct ones (shared objects are what aliases make)."""
    sizes: dict[int, int] = {}
    distinct = 0

    def size(obj: Any) -> int:
        nonlocal distinct
        if not isinstance(obj, (dict, list)):
            return 1
        known = sizes.get(id(obj))
        if known is not None:
            return known
        sizes[id(obj)] = 1  # a recursive structure counts its back reference once
        children = list(obj.values()) if isinstance(obj, dict) else obj
        distinct += 1 + sum(not isinstance(c, (dict, list)) for c in children)
        total = 1 + sum(size(c) for c in children)
        sizes[id(obj)] = total
        if total - distinct > MAX_ALIAS_NODES:
            raise AliasBombError(f"its aliases expand it by more than {MAX_ALIAS_NODES:,} nodes (a YAML alias bomb?)")
        return total

    size(document)
