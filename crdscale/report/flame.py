"""Icicle (top-down flame graph) layout of a profile: rectangles, no drawing.

:func:`icicle_layout` turns folded stacks (:func:`crdscale.analysis.export.folded_stacks`)
into one rectangle per call-tree node: ``depth`` (0 = root frame), ``x0`` and
``width`` as fractions of the profile total, the frame's ``name`` and
``value`` (in the profile's unit), and the ``cause`` that holds most of the
node's value (:mod:`crdscale.analysis.attribution`), so a plot can colour by
cause. :func:`crdscale.report.plots.plot_icicle` draws it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import pandas as pd

from crdscale.analysis.attribution import RULES, Rule, classify_stack

ICICLE_COLUMNS = ["depth", "x0", "width", "name", "short_name", "value", "cause"]

# Package path and generic brackets add width, not information, in a box a few pixels wide.
_PACKAGE = re.compile(r"^.*/")


def short_name(function: str) -> str:
    """``k8s.io/apiserver/pkg/storage/cacher.(*Cacher).Watch`` -> ``cacher.(*Cacher).Watch``."""
    return _PACKAGE.sub("", function.split("[", 1)[0]) or function


def stack_causes(folded: pd.DataFrame, rules: Sequence[Rule] = RULES) -> pd.Series:
    """The cause of each folded stack (root;...;leaf), by the attribution table."""
    return pd.Series(
        [classify_stack(stack.split(";")[::-1], rules) for stack in folded["stack"]],
        index=folded.index,
        name="cause",
        dtype=object,
    )


class _Node:
    __slots__ = ("children", "value", "causes")

    def __init__(self):
        self.children: dict[str, _Node] = {}
        self.value = 0
        self.causes: Counter = Counter()


def icicle_layout(
    folded: pd.DataFrame, causes: pd.Series | None = None, *, max_depth: int = 40, min_fraction: float = 0.003
) -> pd.DataFrame:
    """Rectangles of the call tree of ``folded`` (columns ``stack``, ``value``).

    Children sit under their parent, largest first, from left to right.
    Nodes below ``min_fraction`` of the total and frames deeper than
    ``max_depth`` are left out (their parent's box still counts them).
    ``causes`` (one per row of ``folded``, e.g. :func:`stack_causes`) names
    each node's dominant cause; without it ``cause`` is empty. Negative
    values (a diff) are ignored.
    """
    root = _Node()
    causes_list = list(causes) if causes is not None else [""] * len(folded)
    for stack, value, cause in zip(folded["stack"], folded["value"], causes_list):
        if value <= 0:
            continue
        node = root
        node.value += value
        node.causes[cause] += value
        for frame in stack.split(";")[:max_depth]:
            child = node.children.get(frame)
            if child is None:
                child = node.children[frame] = _Node()
            child.value += value
            child.causes[cause] += value
            node = child
    total = root.value
    rows: list[tuple] = []
    if total <= 0:
        return pd.DataFrame(columns=ICICLE_COLUMNS)
    cutoff = min_fraction * total
    todo = [(root, -1, 0.0)]
    while todo:
        node, depth, x0 = todo.pop()
        x = x0
        for name, child in sorted(node.children.items(), key=lambda kv: -kv[1].value):
            if child.value < cutoff:
                break  # sorted: every later sibling is smaller still
            width = child.value / total
            rows.append(
                (depth + 1, x, width, name, short_name(name), int(child.value), child.causes.most_common(1)[0][0])
            )
            todo.append((child, depth + 1, x))
            x += width
    frame = pd.DataFrame(rows, columns=ICICLE_COLUMNS)
    frame.attrs["total"] = int(total)
    return frame.sort_values(["depth", "x0"], kind="stable").reset_index(drop=True)
