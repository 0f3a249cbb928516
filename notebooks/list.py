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
# Latency and response bytes of each kind of LIST, and where the API server served it from
# (watch cache or etcd), read from its own counters around each request. Which kinds the cache
# serves changes across kube-apiserver and etcd versions (consistent reads from cache since
# v1.31 with etcd progress notifications).

# %% tags=["parameters"]
run_dir = "runs/latest-probe-list"

# %%
import matplotlib.pyplot as plt

from crdscale.analysis.probes import list_findings
from crdscale.rundir import read_run

run = read_run(run_dir)
lists = run.probe_table("list")
load = run.probe_table("list", "load")

# %% [markdown]
# ## Findings

# %%
list_findings(lists)

# %% [markdown]
# ## Every request kind

# %%
lists[["resource", "kind", "items", "pages", "bytes", "latency_s", "served_from", "expected_from_cache"]]

# %%
fig, ax = plt.subplots(figsize=(8, 4))
for place, grp in lists.groupby("served_from"):
    ax.scatter(grp["bytes"] / 1e6, grp["latency_s"] * 1000, label=place)
    for row in grp.itertuples():
        ax.annotate(row.kind, (row.bytes / 1e6, row.latency_s * 1000), fontsize=7)
ax.set_xlabel("response (MB)")
ax.set_ylabel("latency (ms)")
ax.legend()

# %% [markdown]
# ## Concurrent load (if measured)

# %%
load
