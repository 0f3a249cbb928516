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
# # A history of releases: what a CRD and a custom resource cost, release by release
#
# One workload run on every release of a history directory (`crdscale history`), each release's repeats
# pooled: their mean, with a 95% interval from their spread that is never narrower than the runs' own
# intervals allow. A **changepoint** is a pair of consecutive releases whose difference's interval
# excludes 0 and is at least 10% of the older release's value: a change surely there, and large
# enough to matter. Its frames are the functions whose heap per CRD moved most (`go tool pprof
# -diff_base` of the two releases' last served profiles, as growth per CRD), in the profiles of the
# process it is about: kube-apiserver, kube-controller-manager or etcd.

# %% tags=["parameters"]
run_dir = "../tests/data/history-small"  # a history directory (crdscale history); this one: a recorded small one
pair = None  # two releases to set side by side below, e.g. ("v1.24.17", "v1.25.16"); default: the last two

# %%
import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown

from crdscale.analysis import history as h
from crdscale.analysis.compare import compare_runs, differences_table
from crdscale.report.history import (
    changepoint_rows,
    headline,
    load_history,
    plot_component_curves,
    plot_release_curves,
    release_rows,
    seed_rows,
)
from crdscale.rundir import read_run

pd.set_option("display.max_colwidth", 160)
history = load_history(run_dir)
Markdown(f"**{headline(history)}**\n\n`{history.command()}`")

# %% [markdown]
# ## Per release
#
# Totals with their 95% intervals. kube-apiserver's heap per CRD and per custom resource come from its heap
# profiles; RSS and CPU per CRD from the served steps' series; peak and settled RSS from the whole run.
# kube-controller-manager's and etcd's heap and RSS per CRD come from their own heap profiles and /proc
# samples at every step (empty for runs that did not profile them).

# %%
release_rows(history)

# %% [markdown]
# ## Heap per CRD by cause
#
# One line per cause (the largest six, and the total in black), its band the 95% interval. A cause that
# drops to zero between two releases is a change upstream; a band that widens is a release whose repeats
# disagree.

# %%
fig, ax = plt.subplots(figsize=(10, 4.5), layout="constrained")
plot_release_curves(ax, history.releases, h.HEAP_PER_CRD)
plt.show()

# %% [markdown]
# ## Heap per custom resource, RSS and CPU
#
# The same for each custom resource (when the workload adds them), and for the process: RSS and CPU
# seconds per CRD, peak and settled RSS.

# %%
apiserver = history.releases[history.releases["component"] == h.APISERVER]
quantities = [q for q in (h.HEAP_PER_CR, h.RSS_PER_CRD, h.CPU_PER_CRD, h.RSS_PEAK, h.RSS_SETTLED)
              if (apiserver["quantity"] == q).any()]  # fmt: skip
fig, axes = plt.subplots(len(quantities), 1, figsize=(10, 3.5 * len(quantities)), layout="constrained", squeeze=False)
for ax, quantity in zip(axes[:, 0], quantities):
    plot_release_curves(ax, history.releases, quantity)
plt.show()

# %% [markdown]
# ## kube-controller-manager and etcd
#
# What a CRD costs the other two processes, release by release: their heap per CRD (from their own heap
# profiles; no causes, the attribution rules describe kube-apiserver's code) and RSS per CRD, each with its
# 95% interval.

# %%
others = history.releases[history.releases["component"] != h.APISERVER]
drawn = [q for q in (h.HEAP_PER_CRD, h.RSS_PER_CRD) if (others["quantity"] == q).any()]
if drawn:
    fig, axes = plt.subplots(len(drawn), 1, figsize=(10, 3.5 * len(drawn)), layout="constrained", squeeze=False)
    for ax, quantity in zip(axes[:, 0], drawn):
        plot_component_curves(ax, history.releases, quantity)
    plt.show()
else:
    print("no run of this history profiled kube-controller-manager or etcd")

# %% [markdown]
# ## Changepoints
#
# Consecutive releases whose difference is sure (its interval excludes 0) and large (10% or more), largest
# first, with the frames that moved most and the upstream change they point to, when known.

# %%
changepoint_rows(history)

# %% [markdown]
# ## Beside the seeds
#
# What the seeds quote per CRD for a release (the one-pager's and Upbound's, measured on 1.23), beside this
# history's measurement at that release (its minor, else the nearest release the history holds) and at the
# newest one.

# %%
seed_rows(history)

# %% [markdown]
# ## One release against the next
#
# Two releases compared as `crdscale compare` does (repeats pooled): heap per CRD by cause with the
# difference's interval, then the functions whose heap per CRD moved most. Set `pair` above for another
# pair; a history of one release compares its repeats.

# %%
older, newer = pair or (history.versions[-2:] if len(history.versions) > 1 else history.versions * 2)
# Labelled by their cells (kube_version=...,repeat=N), so each release's repeats are pooled; one release: its repeats.
comparison = compare_runs(list(dict.fromkeys([*history.runs[older], *history.runs[newer]])))
differences_table(comparison).set_index(["run", "cause"])

# %%
diff = comparison.profile_diff
moved = diff.reindex(diff["flat_per_crd"].abs().sort_values(ascending=False).index).head(15)
moved.assign(KiB_per_crd=moved["flat_per_crd"] / 1024).set_index("name")[["KiB_per_crd"]]

# %% [markdown]
# The same for kube-controller-manager and etcd: each one's last served heap profile of the newer release
# against the older's, as growth per CRD (empty when a release's runs did not profile it).

# %%
frames = []
for component in ("kube-controller-manager", "etcd"):
    d = h.component_profile_diff(read_run(history.runs[older][0]), read_run(history.runs[newer][0]), component)
    if d.empty:
        print(f"{component}: no profiles of it in both releases")
        continue
    top = d.reindex(d["flat_per_crd"].abs().sort_values(ascending=False).index).head(8)
    frames.append(top.assign(component=component, KiB_per_crd=top["flat_per_crd"] / 1024))
pd.concat(frames).set_index(["component", "name"])[["KiB_per_crd"]] if frames else None
