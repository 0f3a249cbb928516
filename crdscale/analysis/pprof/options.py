"""The choices and defaults of pprof's options that crdscale mirrors, with no pandas or numpy:
``crdscale top --help`` shows them before any profile is read."""

GRANULARITIES = ("functions", "filefunctions", "files", "lines", "addresses")

# pprof's default node fraction: nodes whose cum is below this share of the total are left out.
PPROF_NODE_FRACTION = 0.005
# pprof's default edge fraction: edges lighter than this share of the total are
# dropped before the "(inline)" marks are decided, so we need it to match them.
PPROF_EDGE_FRACTION = 0.001
