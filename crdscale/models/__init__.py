"""Pure models of Kubernetes behaviour, shared by the probes (which measure it) and
the analysis (which predicts it): client-go's token bucket, APF's LIST work estimators and what a
/metrics scrape costs kube-apiserver (the collector picks its cadence with it); and the costs the
probes derive from their own rows (``probecosts``), which the probes report and the analysis quotes.

They import nothing from crdscale's flow (cluster, crds, collect, analysis, ...),
so any stage may use them.
"""
