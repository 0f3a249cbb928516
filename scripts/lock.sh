#!/usr/bin/env bash
# Regenerate requirements.lock, the exact Python environment CI tests and scripts/bootstrap.sh
# installs: every package of crdscale and its extras dev, report, lab, docs and s3, for CPython 3.11 on
# Linux x86_64, resolved within the ranges of pyproject.toml.
#
# Versions already in the lock are kept: a version moves only when asked, on purpose.
#   scripts/lock.sh                          # after editing pyproject.toml: add/remove what changed
#   scripts/lock.sh --upgrade-package pandas # move one package (and what it needs) to its newest
#   scripts/lock.sh --upgrade                # move everything to the newest within the ranges
# Then `make bootstrap` (the venv is rebuilt from the new lock) and `make test` before committing it.
set -euo pipefail
cd "$(dirname "$0")/.."

LOCK_PYTHON=3.11
LOCK_PLATFORM=x86_64-unknown-linux-gnu
UV_VERSION=0.13.9
tools="${CRDSCALE_CACHE:-$HOME/.cache/crdscale}/tools/uv-$UV_VERSION"

# uv resolves for a target Python and platform without installing anything; it lives in a
# venv of its own so the locked environment never contains it.
if [ ! -x "$tools/bin/uv" ]; then
  python3 -m venv "$tools"
  "$tools/bin/pip" install -q "uv==$UV_VERSION"
fi

"$tools/bin/uv" pip compile pyproject.toml \
  --extra dev --extra report --extra lab --extra docs --extra s3 \
  --python-version "$LOCK_PYTHON" --python-platform "$LOCK_PLATFORM" \
  --quiet \
  --custom-compile-command "scripts/lock.sh" \
  --output-file requirements.lock "$@"
echo "wrote requirements.lock ($(grep -c '==' requirements.lock) packages, Python $LOCK_PYTHON)" >&2
