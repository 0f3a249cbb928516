#!/usr/bin/env bash
# Regenerate data/reference-run/ (the small real run the notebooks, `crdscale report`
# and their tests use) from data/reference.toml on the local control plane:
#   bash scripts/make_reference_run.sh
# The component logs are dropped to keep the directory small (well under 10 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
tmp=$(mktemp -d data/.reference-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$BIN/crdscale" run data/reference.toml --out "$tmp" >&2
run=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -n 1)
rm -rf "$run/logs" "$run/analysis"
rm -f "$run/metrics/series.csv"   # the parquet holds the same rows
rm -rf data/reference-run
mv "$run" data/reference-run
du -sh data/reference-run >&2
echo data/reference-run
