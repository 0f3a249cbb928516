#!/usr/bin/env bash
# Regenerate a reference run (the small real runs the notebooks, `crdscale report`,
# `crdscale compare` and their tests use) from data/reference.toml on the local control plane:
#   bash scripts/make_reference_run.sh            # kube-apiserver v1.37.1 -> data/reference-run/
#   bash scripts/make_reference_run.sh 1.24.0     # same scenario on v1.24.0 -> data/reference-run-v1.24.0/
# The component logs, the local Prometheus's TSDB and the direct-scrape chunks are dropped to
# keep each directory small (~1.3 MB): metrics/series.parquet holds the same rows.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.venv/bin}
DEFAULT_VERSION=1.37.1
version=${1:-$DEFAULT_VERSION}
version=${version#v}
if [ "$version" = "$DEFAULT_VERSION" ]; then
  dest=data/reference-run
else
  dest=data/reference-run-v$version
fi
# The description names the version, so it follows the argument.
description=$(sed -n 's/^description = "\(.*\)"$/\1/p' data/reference.toml | sed "s/v$DEFAULT_VERSION/v$version/")
tmp=$(mktemp -d data/.reference-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$BIN/crdscale" run data/reference.toml --out "$tmp" \
  --set "target.kube_version=\"$version\"" --set "description=\"$description\"" >&2
run=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -n 1)
# Names as in crdscale/rundir/layout.py (LOGS, ANALYSIS, PROMETHEUS_TSDB, SERIES_CHUNKS, SERIES_CSV).
rm -rf "$run/logs" "$run/analysis" "$run/metrics/prometheus" "$run/metrics/chunks"
rm -f "$run/metrics/series.csv"   # the parquet holds the same rows
rm -rf "$dest"
mv "$run" "$dest"
du -sh "$dest" >&2
# tests/unit/test_report_compare.py checks crdscale's profile diff of the two reference runs against
# `go tool pprof -diff_base`, recorded here whenever both runs exist (and Go is on PATH).
old=data/reference-run-v1.24.0
new=data/reference-run
last=profiles/heap-step04-crds0160.pb.gz
if command -v go >/dev/null && [ -f "$old/$last" ] && [ -f "$new/$last" ]; then
  mkdir -p tests/data/compare
  args="-top -nodecount=40 -unit=B -diff_base=$new/$last $old/$last"
  { echo "# args: $args"; go tool pprof $args; } > tests/data/compare/v1.24.0-diff-v1.37.1.top.txt
fi
echo "$dest"
