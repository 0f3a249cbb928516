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
# # APF seats of LIST requests
#
# The object-count estimator (1 seat per 100 objects processed, at most 10) against the
# size-based one (1 seat per 100 KB held in memory, streamed cache responses capped at 10,
# at most 100), on the seed's response sizes and on the LISTs measured by the probe; and the
# seats the server itself estimated (`apiserver_flowcontrol_work_estimated_seats`) for a
# non-exempt user.

# %% tags=["parameters"]
run_dir = "runs/latest-probe-apf"

# %%
from crdscale.analysis.probes import apf_findings
from crdscale.models import apf
from crdscale.rundir import read_run

seats = read_run(run_dir).probe_table("apf")

# %% [markdown]
# ## Findings

# %%
apf_findings(seats) if not seats.empty else "no APF table in this run"

# %% [markdown]
# ## The seed's response sizes

# %%
apf.seed_table().pivot_table(
    index=["response", "objects"], columns="served_from", values=["object_count_seats", "size_based_seats"]
)

# %% [markdown]
# ## Measured LISTs

# %%
seats
