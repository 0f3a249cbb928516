#!/usr/bin/env bash
# `make test`, after `make bootstrap` with BOOTSTRAP_EXTRAS=later:
#   1. the unit tests, on every core (pytest-xdist), and meanwhile the integration tests marked alongside
#      (they wait on the network, not on the cores, and time nothing the unit tests could disturb);
#   2. the integration tests one at a time, but those marked alongside, extra_binaries or extra_versions;
#   3. those marked extra_binaries (a test node's kubelet and kube-scheduler, versitygw), once built;
#   4. those marked extra_versions (EXTRA_KUBE_VERSIONS, EXTRA_KUBECTL_VERSIONS), once built.
# Meanwhile scripts/bootstrap.sh builds those binaries, the cheap ones first (BOOTSTRAP_ONLY=extras-tools,
# then extras-versions; cold, ~15 minutes of Go builds), so a cold CI does not wait for them to test.
# Arguments go to every pytest run. Exits non-zero when a run fails or when no test ran at all.
set -uo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
PYTEST="$VENV/bin/pytest"
log="${CRDSCALE_CACHE:-$HOME/.cache/crdscale}/extras-build.log"
mkdir -p "$(dirname "$log")"
state=$(mktemp -d)

say() { printf 'test: %s\n' "$*" >&2; }

# Its own process group (job control), so a failed test run stops the whole build, go and all.
# 10 nicer than the tests while the unit tests run: they then get ~90% of the cores they ask for, not half (a Go build
# takes both cores), and the build takes what they leave. Back at the tests' priority for the integration
# tests (renice below), which leave it more, and during which it has always finished.
base=$(nice)
low=$((base + 10 > 19 ? 19 : base + 10))
set -m
(
  renice --priority "$low" -p "$BASHPID" >/dev/null 2>&1 || true
  BOOTSTRAP_ONLY=extras-tools bash scripts/bootstrap.sh
  echo $? >"$state/tools"
  BOOTSTRAP_ONLY=extras-versions bash scripts/bootstrap.sh
  echo $? >"$state/versions"
) >"$log" 2>&1 &
builds=$!
set +m
alongside=""
# SIGINT for the alongside tests: pytest then tears their fixtures down (a containerd, ...).
trap 'kill -TERM -- "-$builds" 2>/dev/null; [ -z "$alongside" ] || kill -INT -- "-$alongside" 2>/dev/null; rm -rf "$state"' EXIT
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

# Wait until the build part $1 (tools, versions) is done; fail when it failed.
built() {
  local started
  started=$(date +%s)
  while [ ! -f "$state/$1" ] && kill -0 "$builds" 2>/dev/null; do sleep 2; done
  if [ "$(cat "$state/$1" 2>/dev/null)" != 0 ]; then
    tail -n 30 "$log" >&2
    say "building the extra binaries ($1) failed (log: $log)"
    exit 1
  fi
  say "extra binaries ($1) ready, waited $(($(date +%s) - started)) s"
}

# Its own process group too: a background job of a script without job control would ignore SIGINT.
set -m
"$PYTEST" tests/integration -m "alongside and not extra_binaries and not extra_versions" "$@" >"$state/alongside.log" 2>&1 &
alongside=$!
set +m
run tests/unit -n "${UNIT_WORKERS:-auto}" --dist worksteal "$@"
wait "$alongside"
rc=$?
alongside=""
cat "$state/alongside.log"
case "$rc" in
  0) ran=1 ;;
  5) ;; # none selected
  *) exit "$rc" ;;
esac
# Lowering a niceness needs root (CI's case); elsewhere the build stays at 10 and only goes slower.
if [ "$low" != "$base" ]; then
  renice --priority "$base" -g "$builds" >/dev/null 2>&1 || say "the extra binaries keep building at nice $low (lowering a niceness needs root)"
fi
run tests/integration -m "not alongside and not extra_binaries and not extra_versions" "$@"
built tools
run tests/integration -m extra_binaries "$@"
built versions
wait "$builds"
grep -v '^bootstrap:' "$log" | grep -v '^crdscale: ' >&2
run tests/integration -m extra_versions "$@"
[ "$ran" -eq 1 ] || { say "no test ran"; exit 5; }
