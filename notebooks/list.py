# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # LIST cost
#
# Latency, response bytes and server cost (CPU, Go heap allocated) of each kind of LIST, and where
# the API server served it from (watch cache or etcd), read from its own counters around each
# request. Which kinds the cache serves changes across kube-apiserver and etcd versions
# (consistent reads from cache since v1.31 with etcd progress notifications). `crdscale probe list`
# also sends every LIST to a second kube-apiserver with `--watch-cache=false` on the same etcd:
# the same request on the same objects, served from etcd.

# %% tags=["parameters"]
run_dir = "runs/latest-probe-list"

# %%
import matplotlib.pyplot as plt

from crdscale.analysis.probes import list_findings
from crdscale.collect.probes.listcost import LIST_COLUMNS
from crdscale.models.probecosts import cache_vs_etcd
from crdscale.rundir import read_run

run = read_run(run_dir)
lists = run.probe_table("list")
load = run.probe_table("list", "load")
comparison = cache_vs_etcd(lists)

# %% [markdown]
# ## Findings

# %%
list_findings(lists)

# %% [markdown]
# ## The same LIST from etcd and from the watch cache
#
# Rows paired by where each server's counters say the LIST was served; ratios are etcd / cache
# (latency, kube-apiserver CPU and Go heap bytes allocated per request). `fetched_*` is how many
# objects the storage layer read to answer: etcd reads every object of the resource for a label
# selector or a field other than namespace and name, then filters.

# %%
comparison[
    [
        "resource",
        "kind",
        "items",
        "latency_cache",
        "latency_etcd",
        "latency_ratio",
        "cpu_cache",
        "cpu_etcd",
        "cpu_ratio",
        "alloc_ratio",
        "fetched_cache",
        "fetched_etcd",
        "note",
    ]
]

# %%
paired = comparison[comparison["same_response"]]
fig, ax = plt.subplots(figsize=(8, max(3, 0.25 * len(paired))))
labels = paired["resource"].str.split(".").str[0] + " " + paired["kind"]
ax.barh(labels, paired["latency_ratio"], label="latency")
ax.barh(labels, paired["cpu_ratio"], height=0.4, label="kube-apiserver CPU")
ax.axvline(1, color="grey", linewidth=0.8)
ax.set_xlabel("etcd / watch cache")
ax.invert_yaxis()
ax.legend()
plt.show()

# %% [markdown]
# ## Every request kind

# %%
# The columns `crdscale probe list` prints (a request's status is in the table too).
lists[[c for c in LIST_COLUMNS if c in lists and c != "status"]]

# %%
fig, ax = plt.subplots(figsize=(8, 4))
for place, grp in lists.groupby("served_from"):
    ax.scatter(grp["bytes"] / 2**20, grp["latency_s"] * 1000, label=place)
    for row in grp.itertuples():
        ax.annotate(row.kind, (row.bytes / 2**20, row.latency_s * 1000), fontsize=7)
ax.set_xlabel("response (MiB)")
ax.set_ylabel("latency (ms)")
ax.legend()
plt.show()

# %% [markdown]
# ## Concurrent load (if measured)

# %%
load
