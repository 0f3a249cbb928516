# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # An A/B of a change: what it does per CRD, pair by pair, frame by frame
#
# `crdscale ab` ran the scenario as released (**base**) and with a change (**changed**: a diff, a build
# tag, a feature gate, a flag) in interleaved pairs: base then changed, then changed then base, so drift
# on a shared machine hits both sides. Each side's repeats are pooled: a cause's bytes per served CRD
# (or per custom resource, for runs that grow objects) is the mean of its runs, and the difference's
# 95% interval comes from how far the runs of each side are apart (`crdscale.analysis.compare`).
# `verdict.md` in the A/B directory says the same in at most 60 lines, to paste into the pull request.

# %% tags=["parameters"]
run_dir = "../data/ab-known-cost"

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

from crdscale.analysis.compare import differences_table, series_table
from crdscale.report import ab as abreport
from crdscale.report import plots
from crdscale.report.diffflame import FlameView
from crdscale.scenario.ab import AB

pd.set_option("display.max_colwidth", 100)
ab = AB.open(run_dir)
comparison = ab.comparison()

# %% tags=["summary"]
Markdown(abreport.ab_verdict(ab, comparison).markdown())

# %% [markdown]
# ## The difference by cause
#
# KiB per served CRD on each side (the mean of its runs), the difference with its 95% interval and the
# relative change. An interval that excludes 0 is a difference the pairs resolve; a cause the change did
# not touch should have one that contains 0.

# %%
differences_table(comparison).set_index(["run", "cause"])

# %%
fig, ax = plt.subplots(figsize=(10, 4.5), layout="constrained")
plots.plot_difference_bars(ax, comparison.joint, title="Heap per CRD by cause: changed minus base, 95% CI")
plt.show()

# %% [markdown]
# ## The pairs' spread
#
# Each pair's own difference (changed minus base, the per-CRD total, or per custom resource for runs
# that grow objects), and which side ran first. The pooled interval is as wide as these points are
# scattered: one pair far from the others is a run to look at (its `events.jsonl`, its machine's load),
# and a difference that follows which side ran first is drift the interleaving did not cancel.

# %%
pairs = abreport.pair_differences(ab, comparison)
pairs.assign(**{c: pairs[c] / 1024 for c in ("base", "changed", "difference")}).rename(
    columns={"base": "base KiB", "changed": "changed KiB", "difference": "difference KiB"}
)

# %%
fig, ax = plt.subplots(figsize=(10, 3.5), layout="constrained")
plots.plot_pair_differences(ax, pairs)
plt.show()

# %% [markdown]
# How much the runs of one side differ, per cause: `between_sd` is the spread of the runs' own per-CRD
# costs, `within_half_width` one run's own 95% half-width, and `repeats_for_10pct` how many pairs would
# bring the mean within ±10% at this spread.

# %%
spread = comparison.repeat_spread
spread[spread["metric"] == "bytes"].set_index(["configuration", "cause"]).drop(columns=["phase", "metric"])

# %% [markdown]
# ## The process: RSS, CPU, per CRD and at the end
#
# `per_crd` is the slope against CRDs; `difference_low`/`difference_high` bound the changed side's
# difference from the base; `end` is the last value (for CPU: the CPU seconds used), `peak` the largest.

# %%
series_table(comparison).set_index(["run", "metric"])

# %% [markdown]
# ## The frames that changed
#
# Heap growth per CRD by function (the stack's leaf, as `go tool pprof -diff_base` shows it), each side
# the mean of its runs, with the cause the attribution rules give its stacks: the frames that grew and
# shrank most.

# %%
frames = abreport.frames_changed(ab).head(20)
frames.assign(**{c: frames[c] / 1024 for c in ("base", "changed", "difference")}).rename(
    columns={"base": "base KiB/CRD", "changed": "changed KiB/CRD", "difference": "difference KiB/CRD"}
)

# %% [markdown]
# ## The differential flame graph
#
# Every call path of the heap's growth, root at the top: a box is as wide as the two sides' growth through
# it together (so a frame that shrank stays visible), coloured by its difference per CRD (red grew, blue
# shrank). **colour by cause** recolours the boxes by the cause of their stacks. Click a box to zoom into
# it, click the top bar to zoom out; hover for the bytes per CRD on each side.

# %%
FlameView(abreport.flame_figure(ab))
