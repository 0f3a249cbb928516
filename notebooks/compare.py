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
# # Comparing runs: what one CRD costs here and there
#
# Two or more runs of the same CRD set on API servers that differ in one thing (the
# kube-apiserver version, `GOGC`, a patch). The first run is the **reference**. For every cause
# of heap growth, the bytes per served CRD of each run is its growth from its first heap profile
# to its last, and **their difference** has a 95% interval of its own
# (`crdscale.analysis.compare.per_crd_differences`): each run's variance comes from the spread of
# its step increments (Go's heap sampling makes the profiles' errors a random walk, so the steps,
# not the points, are independent) and the two are combined with Welch's degrees of freedom.
# Repeated runs of one configuration are pooled, their spread giving the interval.

# %% tags=["parameters"]
run_dirs = ["../data/reference-run", "../data/reference-run-v1.24.0"]
labels = None

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

from crdscale.analysis.compare import compare_runs, differences_table, series_table
from crdscale.report import plots
from crdscale.report.compare import headline, provenance_table

pd.set_option("display.max_colwidth", 120)
comparison = compare_runs(run_dirs, labels)
Markdown(f"**{headline(comparison)}**" + "".join(f"\n\n> Warning: {w}" for w in comparison.warnings))

# %% [markdown]
# ## What was run
#
# Versions, binaries, flags, Go environment, CRD set (with its sha256: the runs compare only if it
# is the same) and machine of each run.

# %%
provenance_table(comparison)

# %% [markdown]
# ## Heap per served CRD by cause
#
# KiB per CRD in each run, the difference from the reference with its 95% confidence interval,
# and the relative change. An interval that excludes 0 is a difference the profiles resolve.

# %%
differences_table(comparison).set_index(["run", "cause"])

# %%
fig, ax = plt.subplots(figsize=(10, 4.5), layout="constrained")
plots.plot_difference_bars(ax, comparison.joint)
plt.show()

# %% [markdown]
# ## Memory against CRDs
#
# RSS (red) and heap in use (blue) at the end of each step, one line style per run. Parallel
# lines cost the same per CRD; a steeper line is the run whose CRDs cost more.

# %%
fig, ax = plt.subplots(figsize=(10, 4.5), layout="constrained")
plots.plot_runs_against_crds(ax, comparison.series_points)
plt.show()

# %% [markdown]
# ## The process: per CRD, at the end, at peak
#
# `per_crd`: slope against CRDs (bytes, goroutines, fds or CPU seconds per CRD); for the runs
# compared with the reference, `difference_low`/`difference_high` bound their difference.
# `end` is the last value (for CPU: the CPU seconds the run used), `peak` the largest.
# `establish_seconds`: how long CRDs waited to be Established, per CRD and in total.

# %%
series_table(comparison).set_index(["run", "metric"])

# %% [markdown]
# ## Where the heap differs: the last served profiles, diffed
#
# `go tool pprof -diff_base=<reference> <run>` of the last heap profiles taken after serving,
# by function, divided by the number of CRDs: positive `flat_per_crd` is heap (bytes per CRD)
# the run holds in that function and the reference does not.

# %%
shown = comparison.profile_diff
shown = shown.assign(_abs=shown["flat"].abs()).sort_values("_abs", ascending=False).head(25)
shown[["run", "name", "flat_per_crd", "cum_per_crd", "flat", "cum"]].reset_index(drop=True)
