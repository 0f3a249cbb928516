#!/usr/bin/env bash
# `make test`, after `make bootstrap` with BOOTSTRAP_EXTRAS=later:
#   1. the unit tests, on every core (pytest-xdist);
#   2. the integration tests one at a time, but those marked extra_binaries;
#   3. the integration tests marked extra_binaries, once their binaries are there.
# Meanwhile scripts/bootstrap.sh builds those binaries (BOOTSTRAP_ONLY=extras: the EXTRA_* versions and
# versitygw; cold, ~15 minutes of Go builds), so a cold CI does not wait for them before testing.
# Arguments go to every pytest run. Exits non-zero when a run fails or when no test ran at all.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTEST="$VENV/bin/pytest"
log="${CRDSCALE_CACHE:-$HOME/.cache/crdscale}/extras-build.log"
mkdir -p "$(dirname "$log")"

say() { printf 'test: %s\n' "$*" >&2; }

# Its own process group (job control), so a failed test run stops the whole build, go and all.
set -m
BOOTSTRAP_ONLY=extras bash scripts/bootstrap.sh >"$log" 2>&1 &
builds=$!
set +m
trap 'kill -TERM -- "-$builds" 2>/dev/null' EXIT
say "building the extra binaries meanwhile (pid $builds, log: $log)"

ran=0
# pytest exits 5 when its selection is empty (e.g. -k naming only unit tests): not a failure of one
# run, but at least one run must have run something.
run() {
  "$PYTEST" "$@" && ran=1 && return 0
  local rc=$?
  [ "$rc" -eq 5 ] && return 0
  exit "$rc"
}

run tests/unit -n "${UNIT_WORKERS:-auto}" --dist worksteal "$@"
run tests/integration -m "not extra_binaries" "$@"
started=$(date +%s)
if ! wait "$builds"; then
  tail -n 30 "$log" >&2
  say "building the extra binaries failed (log: $log)"
  exit 1
fi
say "extra binaries ready (waited $(($(date +%s) - started)) s):"
grep -v '^bootstrap:' "$log" | tail -n 12 >&2
run tests/integration -m extra_binaries "$@"
[ "$ran" -eq 1 ] || { say "no test ran"; exit 5; }
