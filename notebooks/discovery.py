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
# # Discovery and client-side throttling
#
# Legacy discovery fetches `/api`, `/apis` and then every group-version's resource list in
# parallel, each request taking a token from client-go's token bucket. The sweep adds CRDs in
# new groups up to 192 and 368 group-versions (the Crossplane one-pager's clusters) and compares
# the measured extra time with the token-bucket model.

# %% tags=["parameters"]
run_dir = "runs/latest-probe-discovery"

# %%
import matplotlib.pyplot as plt

from crdscale.analysis.probes import discovery_findings
from crdscale.models import tokenbucket
from crdscale.rundir import read_run

run = read_run(run_dir)
sweep = run.probe_table("discovery")
requests = run.probe_table("discovery", "requests")

# %% [markdown]
# ## Findings

# %%
discovery_findings(sweep) if "measured_delay_s" in sweep else sweep

# %% [markdown]
# ## The model alone: the one-pager's table as predicted delays (seconds)

# %%
tokenbucket.prediction_table().pivot(index="limit", columns="group_versions", values="predicted_delay_s")

# %% [markdown]
# ## When each request went out
# Each dot is one request: when it was issued versus when the limiter let it go.

# %%
if not requests.empty and "group_versions" in requests:
    groups = list(requests.groupby(["group_versions", "limit"]))
    fig, axes = plt.subplots(1, len(groups), figsize=(4 * len(groups), 3), sharey=True, squeeze=False)
    for ax, ((gv, limit), grp) in zip(axes[0], groups):
        ax.plot(range(len(grp)), grp.sort_values("start_s")["start_s"], ".", ms=2)
        ax.set_title(f"{gv} GVs, {limit}", fontsize=9)
        ax.set_xlabel("request #")
    axes[0][0].set_ylabel("sent at (s)")
    fig.tight_layout()
