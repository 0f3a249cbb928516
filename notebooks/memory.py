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
# # Memory and CPU of kube-apiserver as CRDs pile up
#
# How the API server's memory, CPU, goroutines and file descriptors moved while a run installed
# CRDs step by step, from the Prometheus series recorded every scrape interval
# (`metrics/series.parquet`) and the run's event log (`events.jsonl`). It reproduces the memory,
# CPU and goroutine plots of the Crossplane CRD-scaling one-pager ("API Server Resource
# Consumption") on any run, and explains the gap between RSS and the Go heap.
#
# Time runs from the moment metrics collection started. Shading marks what the run was doing:
# **orange** while a step's CRDs were being created (until all were Established), **green** while
# their resources were LISTed and watched, **grey** while the server settled before the heap profile.

# %% tags=["parameters"]
run_dir = "../data/reference-run"

# %%
import matplotlib.pyplot as plt
from IPython.display import Markdown

from crdscale.report import figures, plots, series
from crdscale.report.findings import provenance, provenance_markdown
from crdscale.rundir import read_run

data = read_run(run_dir)
start = data.start
memory = series.memory_frame(data.series, start)
activity = series.activity_frame(data.series, start)
phases = series.phase_intervals(data.events, start)
steps = series.crd_count_steps(data.events, start)
marks = series.at_marks(memory, data.profile_marks())
go_version = data.manifest.versions.kube_apiserver_go
apiserver_env = dict(data.manifest.scenario.target.env)
label = figures.run_label(data)  # version and CRD count, in each figure's title

# %% [markdown] tags=["summary"]
# ## What was run

# %% tags=["summary"]
Markdown(provenance_markdown(provenance(data.manifest)))

# %% [markdown]
# ## Memory over time
#
# * **RSS** (red) is what the kernel charges the process: the number that gets a pod OOM-killed.
# * **Heap in use** (dark blue) counts heap spans holding objects; **heap alloc** (light blue) the
#   objects themselves, live or not yet collected. Heap alloc saw-tooths: it climbs as garbage
#   accumulates and drops at each GC. Its lows are the live heap; the steps between lows are what
#   the new CRDs keep.
# * The **GC goal** (dashed) is the heap size that triggers the next GC (`GOGC=100`: twice the live
#   heap), so a growing live heap lets the process hold more memory between collections.
# * **Heap idle - released** (orange) is memory the Go runtime holds for reuse but no object uses.
# * The purple step line (right axis) is the number of CRDs installed.

# %%
figures.memory_over_time_figure(memory, phases, steps, label=label)
plt.show()

# %% [markdown]
# First, last and peak value of each series (MiB):

# %%
series.memory_summary(memory).set_index("series").round(1)

# %% [markdown]
# ## The same against the number of CRDs
#
# Each point is the value at a heap profile: filled at the end of a step (after its resources
# were served and the server settled), hollow right after the step's CRDs were Established.
# A straight line means a constant cost per CRD; its slope is the per-CRD cost that
# `crdscale analyze` and the attribution notebook fit.

# %%
figures.memory_vs_crds_figure(marks, label=label)
plt.show()

# %%
series.marks_table(marks)

# %% [markdown]
# ## RSS beyond heap and stacks
#
# In the one-pager, RSS settled at ~3.2 GB while the heap held ~1.4 GB: the heap and stacks did
# not account for RSS. The explanation was `MADV_FREE`: from Go 1.12 the runtime returned freed
# pages to Linux with `MADV_FREE`, which lets the kernel reclaim them *later, under memory
# pressure*; until then they still count in the process's RSS. Memory the Go runtime has
# released but the kernel has not reclaimed therefore shows up as RSS that no Go statistic
# explains.
#
# The shaded band below is RSS - (heap in use + stacks). The dashed orange line is the part the
# runtime itself still holds (`heap_idle - heap_released`); the rest of the band is runtime
# metadata (GC bitmaps, spans), the binary's code and data, and, with `MADV_FREE`, released
# pages the kernel has not taken back.

# %%
Markdown(series.release_advice(go_version, apiserver_env))

# %%
fig, ax = plt.subplots(figsize=(11, 4.5), layout="constrained")
plots.plot_gap(
    ax,
    memory,
    phases=phases,
    title=f"RSS - (heap in use + stacks): memory RSS holds beyond live spans and stacks ({label})",
)
plt.show()

# %% [markdown]
# ## CPU, garbage collection and goroutines
#
# CPU is the rate of `process_cpu_seconds_total` (cores busy); installing CRDs costs CPU for
# schema conversion, OpenAPI aggregation and the new storage. GC cycles per second rise while
# CRDs are created (allocation churn). Goroutines grow with every served resource: each one
# brings watch-cache and etcd-watch goroutines, and every open watch adds more.

# %%
fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), layout="constrained")
plots.plot_activity(
    axes[0], activity, "cpu_cores", ylabel="cores", title="CPU used (cores)", phases=phases, color="#d62728"
)
plots.plot_activity(
    axes[1],
    activity,
    "gc_per_s",
    ylabel="GC cycles per second",
    title="Garbage collections per second",
    phases=phases,
    color="#9467bd",
)
plots.plot_activity(
    axes[2], activity, "goroutines", ylabel="goroutines", title="Goroutines", phases=phases, color="#2ca02c"
)
fig.suptitle(label)
plt.show()

# %% [markdown]
# ## Open file descriptors
#
# Each served CRD version gets its own etcd client storage; connections and watches show up as
# file descriptors. A process hitting its `ulimit -n` fails to open new connections.

# %%
fig, ax = plt.subplots(figsize=(11, 3.5), layout="constrained")
plots.plot_activity(
    ax,
    activity,
    "open_fds",
    ylabel="open file descriptors",
    title="Open file descriptors",
    phases=phases,
    color="#1f77b4",
)
plots.plot_crd_steps(ax, steps)
plt.show()
