# The two commands of the README's quick start:
#   make demo   - bootstrap, then run the default scenario on a local control plane
#   make test   - bootstrap, then run unit (on every core) and integration tests
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Only the tests need a second kube-apiserver: the old-version test brings up v1.24.0.
test integration: export EXTRA_KUBE_VERSIONS ?= 1.24.0
# ... and one kubectl at a seed's version (the kubectl discovery test); v1.24.0 reuses
# most of that kube-apiserver's compiled packages.
test integration: export EXTRA_KUBECTL_VERSIONS ?= 1.24.0

.PHONY: bootstrap venv demo test unit integration lint format docs docs-figure clean-runs

bootstrap:
	bash scripts/bootstrap.sh

# The Python venv alone (what lint and format need), without the Go builds.
venv:
	BOOTSTRAP_ONLY=python bash scripts/bootstrap.sh

demo: bootstrap
	$(BIN)/python scripts/demo.py

# The unit tests on every core (pytest-xdist: an idle worker takes tests queued for a busy one), then
# the integration tests one at a time: they share a control plane and time what they measure.
# UNIT_WORKERS=0 runs the unit tests in one process.
UNIT_WORKERS ?= auto
UNIT_XDIST = -n $(UNIT_WORKERS) --dist worksteal

# Cold, the binaries only some integration tests need (the EXTRA_* versions, versitygw, a test node's
# kubelet and kube-scheduler) build while the other tests run, and those tests run after them (scripts/test.sh).
test: export BOOTSTRAP_EXTRAS = later
test: bootstrap
	UNIT_WORKERS=$(UNIT_WORKERS) bash scripts/test.sh $(PYTEST_ARGS)

# ruff's lint rules and formatter, configured in pyproject.toml; `make format` applies them. Then the
# layers contract: no import cycle, no import up the layers (crdscale/layers.py says which and why).
lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m crdscale.layers

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The docs site: reference pages generated from the code and results pages from docs/results/*.toml
# (scripts/gen_docs_reference.py; it fails when a committed results page was stale, after updating it),
# then mkdocs --strict into site/. Needs the venv only, not the Go builds.
docs: venv
	$(BIN)/python scripts/gen_docs_reference.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# The figure of the README and the docs' home page, from the committed reference run.
docs-figure: venv
	$(BIN)/crdscale report data/reference-run --out /tmp/crdscale-docs-figure
	cp /tmp/crdscale-docs-figure/headline.png docs/assets/reference-run-headline.png

unit:
	$(BIN)/pytest tests/unit $(UNIT_XDIST) $(PYTEST_ARGS)

integration: bootstrap
	$(BIN)/pytest tests/integration $(PYTEST_ARGS)

clean-runs:
	rm -rf runs/
