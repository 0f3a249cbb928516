#!/usr/bin/env bash
# Bootstrap everything crdscale needs on a fresh machine, idempotently:
#   1. system packages from Debian (prometheus; etcd-server 3.4 as the alternative etcd)
#   2. a Python venv in .venv with crdscale and its dependencies
#   3. kube-apiserver and etcd built from Go modules, cached per version outside the clone
# Re-running is cheap: each step is skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
# Versions `make test` needs beyond the defaults (the old-version integration test).
EXTRA_KUBE_VERSIONS=${EXTRA_KUBE_VERSIONS:-}
# kubectl versions `make test` builds (the discovery probe's kubectl test).
EXTRA_KUBECTL_VERSIONS=${EXTRA_KUBECTL_VERSIONS:-}

say() { printf 'bootstrap: %s\n' "$*" >&2; }

# --- 1. Debian packages -------------------------------------------------------
need_pkgs=()
command -v prometheus >/dev/null 2>&1 || need_pkgs+=(prometheus)
[ -x /usr/bin/etcd ] || need_pkgs+=(etcd-server)
# `crdscale image build`: the image's Debian base (tests/integration/test_image.py).
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
if [ "${#need_pkgs[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian packages: ${need_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null
  else
    say "warning: missing ${need_pkgs[*]} and cannot apt-get install (not root); Prometheus-based collection falls back to direct scraping"
  fi
fi

# --- 1b. Chromium (report tests: the HTML report in a headless browser) --------
# Owned by the report (issue 6); idempotent. Without it the browser test is skipped.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian package: chromium (headless checks of the HTML report)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends chromium >/dev/null \
      || say "warning: could not install chromium; tests/unit/test_report_browser.py will be skipped"
  else
    say "warning: chromium missing and cannot apt-get install (not root); the HTML report browser test will be skipped"
  fi
fi
# --- end 1b --------------------------------------------------------------------

# --- 1c. A test node (tests/integration/test_node_cluster.py, `crdscale up --node`) ----
# containerd 1.6 and runc run the pods, the CNI plugins give them the node's bridge; gcc
# compiles the pause binary. Without them (or without root) the node test is skipped.
node_pkgs=()
command -v containerd >/dev/null 2>&1 || node_pkgs+=(containerd)
command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || node_pkgs+=(runc)
[ -x /usr/lib/cni/bridge ] || node_pkgs+=(containernetworking-plugins)
command -v gcc >/dev/null 2>&1 || node_pkgs+=(gcc libc6-dev)
NODE=""
if [ "$(id -u)" = 0 ]; then
  NODE=--node
  if [ "${#node_pkgs[@]}" -gt 0 ]; then
    say "installing Debian packages for a test node: ${node_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${node_pkgs[@]}" >/dev/null \
      || { say "warning: could not install ${node_pkgs[*]}; the test node's test will be skipped"; NODE=""; }
  fi
else
  say "not root: no test node (its integration test will be skipped)"
fi
# --- end 1c --------------------------------------------------------------------

if ! command -v go >/dev/null 2>&1; then
  say "error: Go is required to build kube-apiserver and etcd from Go modules (install Go >= 1.22)"
  exit 3
fi

# --- 2. Python venv -------------------------------------------------------------
# The venv holds exactly requirements.lock (what CI tested, for Python 3.11; scripts/lock.sh
# regenerates it), then crdscale itself without resolving anything. The stamp covers the lock,
# pyproject.toml and the interpreter: when one changes, the venv is rebuilt from scratch, so
# packages dropped from the lock do not linger.
LOCK=requirements.lock
LOCK_PYTHON=3.11
PIP_VERSION=26.3
py_version="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
stamp="$VENV/.crdscale-installed"
want="$(cat "$LOCK" pyproject.toml | sha256sum | cut -c1-16) python$py_version"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  say "creating Python venv in $VENV from $LOCK"
  "$PYTHON" -m venv --clear "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check "pip==$PIP_VERSION"
  if [ "$py_version" = "$LOCK_PYTHON" ]; then
    "$VENV/bin/pip" install -q --no-deps -r "$LOCK"
    "$VENV/bin/pip" install -q --no-deps -e .
    "$VENV/bin/pip" check >&2
  else
    say "warning: $LOCK is for Python $LOCK_PYTHON, this is $py_version: installing the newest versions within pyproject.toml's ranges (not what CI tested)"
    "$VENV/bin/pip" install -q -e '.[dev,report,lab,docs]'
  fi
  # py:percent notebooks open as notebooks in this venv's JupyterLab (jupytext's default viewer).
  "$VENV/bin/python" -c 'from crdscale.report.lab import install_lab_settings; install_lab_settings()'
  echo "$want" > "$stamp"
fi

# `make lint` needs only the venv: stop here rather than build Go binaries it never runs.
if [ "${BOOTSTRAP_ONLY:-}" = python ]; then exit 0; fi

# --- 3. Binaries ---------------------------------------------------------------
# BOOTSTRAP_ONLY=extras builds the extras below and nothing else; extras-tools and extras-versions
# their two parts (scripts/test.sh runs them one after the other while the tests run).
case "${BOOTSTRAP_ONLY:-}" in
  extras | extras-tools | extras-versions) only_extras=yes ;;
  *) only_extras="" ;;
esac

# What every cell and most tests need: the default kube-apiserver and kube-controller-manager (one go
# build), etcd, crdscale-client (client-go informers for serve=watch, discovery, cache memory: after
# kube-apiserver, whose build already compiled the same client-go packages) and prometheus.
if [ -z "$only_extras" ]; then
  "$VENV/bin/crdscale" binaries --client --prometheus >&2
fi

# The extras, which only some integration tests need. `make test` sets BOOTSTRAP_EXTRAS=later and
# scripts/test.sh builds them while the other tests run: cold, ~15 minutes of Go builds.
if [ "${BOOTSTRAP_EXTRAS:-now}" != later ] || [ -n "$only_extras" ]; then
  # First the cheap ones: as root the kubelet and kube-scheduler of a test node (1-2 min each: Go's
  # cache has the packages they share with the default kube-apiserver), and versitygw (the real
  # S3-compatible server of tests/integration/test_results_s3.py, ~3 min cold).
  if [ "${BOOTSTRAP_ONLY:-}" != extras-versions ]; then
    "$VENV/bin/crdscale" binaries $NODE --versitygw >&2
  fi
  # Then the EXTRA_* versions (the old-version tests' v1.24.0, a kubectl at a seed's version).
  args=()
  for v in $EXTRA_KUBE_VERSIONS; do args+=(--kube-version "$v"); done
  for v in $EXTRA_KUBECTL_VERSIONS; do args+=(--kubectl-version "$v"); done
  if [ "${BOOTSTRAP_ONLY:-}" != extras-tools ] && [ "${#args[@]}" -gt 0 ]; then
    "$VENV/bin/crdscale" binaries "${args[@]}" >&2
  fi
fi
