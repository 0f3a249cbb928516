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
# # What the heap is made of, per CRD
#
# A heap profile (`gc=1`: taken right after a garbage collection, so it counts live objects) was
# taken before the first CRD and at every step. Every sampled allocation is attributed to a
# **cause** by crdscale's rule table (`crdscale.analysis.attribution.RULES`: zap counters, watch
# caches, OpenAPI, CRD schemas, etcd clients...). Fitting heap in use against the number of CRDs
# gives **bytes per CRD by cause**, with 95% confidence intervals. What no rule claims is
# `other`; its share says how much of the growth is still unexplained.

# %% tags=["parameters"]
run_dir = "../data/reference-run"

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

from crdscale.analysis.attribution import rules_table
from crdscale.analysis.export import folded_stacks
from crdscale.analysis.percrd import unattributed_share
from crdscale.analysis.pprof import diff
from crdscale.analysis.run import analyze_run
from crdscale.report import figures, plots
from crdscale.report.findings import key_numbers, numbers_markdown, per_crd_table
from crdscale.report.flame import icicle_layout, stack_causes
from crdscale.rundir import read_run
from crdscale.units import fmt_bytes

pd.set_option("display.max_colwidth", 120)  # long Go function names and rule explanations
run = read_run(run_dir)
analysis = analyze_run(run)
fits = analysis.fits
phase = "served" if "served" in analysis.phases else analysis.phases[-1]
for warning in analysis.warnings:  # a run that did not complete, profiles the fits leave out
    print(f"warning: {warning}")
heap = run.heap_profiles()  # file, step, crds, phase, timestamp: by step
heap = heap[[str(run.path / f) in analysis.profiles for f in heap["file"]]]  # those the fits used
first_file = heap["file"].iloc[0]
last_file = heap.loc[heap["phase"].isna(), "file"].iloc[-1]
first, last = run.read_profile(first_file), run.read_profile(last_file)
label = figures.run_label(run)  # version and CRD count, in each figure's title

# %% [markdown] tags=["summary"]
# ## Key numbers

# %% tags=["summary"]
Markdown(numbers_markdown(key_numbers(analysis)))

# %% [markdown]
# ## Heap by cause against the number of CRDs
#
# Each band is one cause; its thickness at a CRD count is the heap it held in that profile
# (after serving). A band that widens to the right grows with CRDs; a band of constant
# thickness is a fixed cost of the server. The bars on the right are the slopes: heap per CRD
# by cause, with 95% confidence intervals (wide when a cause grows unevenly between steps).

# %%
figures.heap_by_cause_figure(analysis.points, fits, phase=phase, label=label)
plt.show()

# %% [markdown]
# ## Bytes per CRD by cause
#
# `per CRD` is the growth from the first profile to the last (KiB per CRD), `95% CI` its
# interval from the spread of the step increments (see `crdscale.analysis.intervals`), `share of
# growth` the cause's part of the total, `at 0 CRDs` the line's fixed part (MiB), `r2` how
# straight the points are around that line. The `installed` phase (CRDs Established, nothing served yet) shows
# what serving adds: watch caches fill only once a resource is listed or watched.

# %%
per_crd_table(fits, phase).set_index("cause")

# %%
fits[fits["metric"] == "bytes"].pivot_table(index="cause", columns="phase", values="per_crd").div(1024).round(
    1
).sort_values(phase, ascending=False).rename_axis(columns="KiB per CRD, by phase")

# %% [markdown]
# ## What no rule explains

# %%
Markdown(
    f"**{100 * unattributed_share(fits, phase):.1f}%** of the heap growth per CRD ({phase} phase) "
    f"falls in `other`: no attribution rule claims it. Above ~10%, look at the functions below "
    f"and add a rule to `crdscale/analysis/attribution.py`."
)

# %%
rules_table().set_index("order")[["cause", "decides", "why"]]

# %% [markdown]
# ## Functions whose heap grew between the first and the last profile
#
# `go tool pprof -top -diff_base` of the last profile against the baseline: `flat` is the heap
# allocated by the function itself, `cum` including its callees (MiB grown).

# %%
growth = diff(last, first, "inuse_space")
Markdown(f"From `{first_file}` to `{last_file}`: heap in use grew by **{fmt_bytes(growth.attrs['shown_total'])}**.")

# %%
growth.head(20).assign(
    flat=(growth["flat"] / 2**20).round(2),
    cum=(growth["cum"] / 2**20).round(2),
    flat_pct=growth["flat_pct"].round(1),
    cum_pct=growth["cum_pct"].round(1),
).rename(columns={"flat": "flat (MiB)", "cum": "cum (MiB)", "flat_pct": "flat %", "cum_pct": "cum %"}).set_index(
    "name"
)[["flat (MiB)", "flat %", "cum (MiB)", "cum %"]]

# %%
fig, ax = plt.subplots(figsize=(11, 5), layout="constrained")
plots.plot_top_growth(ax, growth, n=15, title=f"The 15 functions whose own heap grew the most ({label})")
plt.show()

# %% [markdown]
# ## Icicle of the last profile
#
# The whole heap in use of the last profile as a call tree: the root at the top, callees below;
# a box's width is the share of the heap allocated under that call path, its colour the cause
# the attribution rules give to most of it. Wide boxes deep down are where memory is allocated;
# the same view opens interactively with `go tool pprof -http=: ` on the profile file.

# %%
folded = folded_stacks(last, "inuse_space")
rects = icicle_layout(folded, stack_causes(folded), max_depth=30, min_fraction=0.004)
fig, ax = plt.subplots(figsize=(14, 8), layout="constrained")
plots.plot_icicle(
    ax, rects, colors=plots.cause_palette(fits, phase), title=f"Heap in use by call path: {last_file} ({label})"
)
plt.show()
