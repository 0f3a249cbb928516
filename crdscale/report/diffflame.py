"""A differential flame graph (an icicle, root at the top) of two runs' heap growth, drawn with plotly.

Each run's growth is its last heap profile minus its first, by stack, per CRD it installed (what
``compare`` fits, so baselines cancel). A frame's box is as wide as the two runs' growth through it
together, so frames that shrank stay visible; its colour is the difference (changed minus base, per
CRD): red grew, blue shrank. A button recolours the boxes by cause (:mod:`crdscale.analysis.attribution`).
Hovering shows the frame, its cause and both runs' bytes per CRD.

:func:`diff_icicle_nodes` is pure (folded stacks in, a node table out); :func:`diff_icicle_figure` draws
it; :func:`write_diff_flame_html` writes one self-contained HTML file (plotly.js embedded: it works
offline). In a notebook, :class:`FlameView` shows the figure both ways at once: JupyterLab draws it with
its plotly renderer, and the HTML report (``crdscale report``, nbconvert) carries it with plotly.js inside.
:func:`frame_differences` is the same growth by function, as a table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from crdscale.analysis.attribution import RULES, Rule, classify_stack
from crdscale.analysis.export import folded_stacks
from crdscale.report.flame import short_name
from crdscale.units import fmt_bytes

NODE_COLUMNS = ["id", "parent", "name", "short_name", "depth", "size", "base", "changed", "difference", "cause"]
ROOT = "all"
# A qualitative palette for causes (plotly's "Plotly" + "D3" sequences, fixed so colours do not move).
_CAUSE_COLOURS = (
    "#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880", "#ff97ff",
    "#fecb52", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a",
)  # fmt: skip


def growth_per_crd(first: pd.DataFrame, last: pd.DataFrame, crds: float) -> pd.Series:
    """Bytes per CRD by folded stack: ``last - first`` (both :func:`~crdscale.analysis.export.folded_stacks`)
    over the CRDs installed between them."""
    if crds <= 0:
        raise ValueError("growth per CRD needs a positive number of CRDs")
    grown = last.set_index("stack")["value"].sub(first.set_index("stack")["value"], fill_value=0)
    return grown / crds


def mean_growth_stacks(growths: Sequence[pd.Series]) -> pd.Series:
    """The mean of several runs' growths per CRD by folded stack (a stack missing from a run grew 0 there)."""
    if not growths:
        raise ValueError("no growths to pool")
    total = growths[0]
    for more in growths[1:]:
        total = total.add(more, fill_value=0)
    return total / len(growths)


def frame_differences(base: pd.Series, changed: pd.Series, *, rules: Sequence[Rule] = RULES) -> pd.DataFrame:
    """Bytes per CRD by function, as ``go tool pprof -diff_base`` shows them (flat: the stack's leaf),
    from two growths per CRD by folded stack (root first, as :func:`growth_per_crd` gives them):
    ``name``, ``cause`` (of the stacks carrying most of the bytes), ``base``, ``changed`` and
    ``difference`` (changed minus base), largest ``|difference|`` first."""
    stacks = pd.DataFrame({"base": base, "changed": changed}).fillna(0.0)
    frames = [str(stack).split(";") for stack in stacks.index]
    stacks = stacks.assign(
        name=[f[-1] for f in frames],
        cause=[classify_stack(f[::-1], rules) for f in frames],
        weight=stacks["base"].abs() + stacks["changed"].abs(),
    )
    by_cause = stacks.groupby(["name", "cause"])["weight"].sum().reset_index()
    cause = by_cause.sort_values("weight", ascending=False).drop_duplicates("name").set_index("name")["cause"]
    table = stacks.groupby("name")[["base", "changed"]].sum()
    table = table.assign(difference=table["changed"] - table["base"], cause=cause.reindex(table.index))
    table = table.reset_index()[["name", "cause", "base", "changed", "difference"]]
    return table.iloc[table["difference"].abs().argsort()[::-1]].reset_index(drop=True)


def diff_icicle_nodes(
    base: pd.Series, changed: pd.Series, *, rules: Sequence[Rule] = RULES, min_fraction: float = 0.002
) -> pd.DataFrame:
    """The icicle's nodes from two growths per CRD by folded stack (``stack`` -> bytes per CRD).

    A node per call path: ``size`` (the two runs' positive growth through it, for the box's width; a
    node's own plus its children's, as plotly's ``branchvalues="total"`` wants), ``base``, ``changed``
    and ``difference`` (bytes per CRD through the node), and ``cause`` (of the stacks carrying most of
    its size). Paths narrower than ``min_fraction`` of the root are folded into their parent."""
    stacks = pd.DataFrame({"base": base, "changed": changed}).fillna(0.0)
    stacks = stacks[(stacks["base"] != 0) | (stacks["changed"] != 0)]
    nodes: dict[tuple[str, ...], list] = {(): [0.0, 0.0, 0.0, {}]}
    for stack, row in stacks.iterrows():
        frames = tuple(str(stack).split(";"))
        weight = max(row["base"], 0.0) + max(row["changed"], 0.0)
        cause = classify_stack(list(frames[::-1]), rules)
        for depth in range(len(frames) + 1):
            key = frames[:depth]
            node = nodes.setdefault(key, [0.0, 0.0, 0.0, {}])
            node[0] += weight
            node[1] += row["base"]
            node[2] += row["changed"]
            node[3][cause] = node[3].get(cause, 0.0) + weight
    total = nodes[()][0] or 1.0
    kept = {key for key, node in nodes.items() if node[0] >= min_fraction * total or not key}
    ids = {key: f"n{i}" for i, key in enumerate(sorted(kept, key=len))}
    rows = []
    for key in sorted(kept, key=len):
        size, b, c, causes = nodes[key]
        parent = ids[key[:-1]] if key else ""
        name = key[-1] if key else ROOT
        cause = max(causes, key=causes.get) if causes else ""
        rows.append((ids[key], parent, name, short_name(name), len(key), size, b, c, c - b, cause))
    return pd.DataFrame(rows, columns=NODE_COLUMNS)


COLOURINGS = ("growth", "cause")


def diff_icicle_figure(
    nodes: pd.DataFrame, *, title: str = "Heap growth per CRD: changed minus base", colour: str = "growth"
):
    """A plotly icicle of :func:`diff_icicle_nodes`, coloured by difference (``colour="growth"``) or by
    cause (``"cause"``), with buttons to switch between the two."""
    if colour not in COLOURINGS:
        raise ValueError(f"colour: one of {', '.join(COLOURINGS)}")
    import plotly.graph_objects as go  # lazy: the optional report extra

    # The scale spans the frames', not the root's, difference: the root holds the sum and would wash the rest out.
    frames = nodes.loc[nodes["depth"] > 0, "difference"].abs()
    span = float(frames.quantile(0.98)) if len(frames) else 0.0
    span = span or float(nodes["difference"].abs().max() or 1.0)
    causes = sorted(c for c in nodes["cause"].unique() if c)
    palette = {c: _CAUSE_COLOURS[i % len(_CAUSE_COLOURS)] for i, c in enumerate(causes)}
    hover = [
        f"{name}<br>cause: {cause}<br>base {fmt_bytes(b)}/CRD, changed {fmt_bytes(c)}/CRD<br>"
        f"difference {'+' if d > 0 else ''}{fmt_bytes(d)}/CRD"
        for name, cause, b, c, d in nodes[["name", "cause", "base", "changed", "difference"]].itertuples(index=False)
    ]
    growth = {
        "colors": nodes["difference"].tolist(),
        "colorscale": "RdBu_r",
        "cmin": -span,
        "cmax": span,
        "cmid": 0.0,
        "showscale": True,
        "colorbar": {"title": {"text": "bytes/CRD"}},
    }
    by_cause = {"colors": [palette.get(c, "#cccccc") for c in nodes["cause"]], "showscale": False}
    figure = go.Figure(
        go.Icicle(
            ids=nodes["id"],
            parents=nodes["parent"],
            labels=nodes["short_name"],
            values=nodes["size"],
            branchvalues="total",
            marker=growth if colour == "growth" else by_cause,
            hovertext=hover,
            hoverinfo="text",
            tiling={"orientation": "v"},
            maxdepth=12,
        )
    )
    figure.update_layout(
        title={"text": title},
        margin={"t": 60, "l": 10, "r": 10, "b": 10},
        height=700,
        updatemenus=[
            {
                "type": "buttons",
                "direction": "right",
                "x": 1.0,
                "y": 1.08,
                "xanchor": "right",
                "active": COLOURINGS.index(colour),
                "buttons": [
                    {"label": "colour by growth", "method": "restyle", "args": [{"marker": [growth]}]},
                    {"label": "colour by cause", "method": "restyle", "args": [{"marker": [by_cause]}]},
                ],
            }
        ],
    )
    return figure


PLOTLY_CONFIG = {"displaylogo": False}
PLOTLY_MIME = "application/vnd.plotly.v1+json"


def write_diff_flame_html(figure, path: str | Path) -> Path:
    """One self-contained HTML file (plotly.js inside: it opens offline)."""
    path = Path(path)
    figure.write_html(path, include_plotlyjs=True, full_html=True, config=PLOTLY_CONFIG)
    return path


class FlameView:
    """A plotly figure as a notebook output both JupyterLab and an exported HTML report draw: plotly's
    own MIME type (JupyterLab's plotly renderer draws it, whether or not the notebook is trusted) and
    HTML with plotly.js inside (what nbconvert writes into the report: it opens offline, and needs no
    require.js, which the report leaves out)."""

    def __init__(self, figure):
        self.figure = figure

    def _repr_mimebundle_(self, include=None, exclude=None):
        # lazy: the optional report extra
        import plotly.io as pio

        return {
            PLOTLY_MIME: {**json.loads(pio.to_json(self.figure, validate=False)), "config": PLOTLY_CONFIG},
            "text/html": self.figure.to_html(include_plotlyjs=True, full_html=False, config=PLOTLY_CONFIG),
            "text/plain": f"<differential flame graph: {len(self.figure.data[0].ids)} frames>",
        }


def run_growth_stacks(run) -> pd.Series:
    """A run's heap growth per CRD by folded stack: its last served heap profile minus its first, over
    the CRDs installed between them (``run``: a :class:`crdscale.rundir.Run`)."""
    served = run.heap_profiles()
    served = served[served["phase"].isna()].sort_values("step")
    if len(served) < 2:
        raise ValueError(f"{run.path}: a flame graph of growth needs two served heap profiles")
    first, last = served.iloc[0], served.iloc[-1]
    return growth_per_crd(
        folded_stacks(run.read_profile(first["file"]), "inuse_space"),
        folded_stacks(run.read_profile(last["file"]), "inuse_space"),
        float(last["crds"] - first["crds"]),
    )
