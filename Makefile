# Every target creates what it needs: the .venv, bubblewrap (the notebook sandbox), the PostgreSQL
# cluster, Chromium, npm packages. `make serve` installs only what serving needs (the server and
# notebook extras), saying what it does; `make test` and the other targets add the development tools.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
SUM    := $(shell cksum pyproject.toml | cut -d' ' -f1)
STAMP  := $(VENV)/.installed-$(SUM)
SERVE_STAMP := $(VENV)/.serve-$(SUM)

.PHONY: serve test interop lint typecheck unit bench clean postgres e2e-deps sandbox web-assets cluster cluster-down test-cluster

$(BIN)/python:
	@echo "==> Creating a virtual environment in $(VENV) ($$($(PYTHON) --version))"
	@$(PYTHON) -m venv $(VENV)

# Everything, development tools included (ruff, mypy, pytest, schemathesis, …).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -e ".[dev]"
	@rm -f $(VENV)/.installed-* $(VENV)/.serve-* && touch $(STAMP) $(SERVE_STAMP)

# Only what `turnstream serve` needs, with pip's own progress on screen.
$(SERVE_STAMP): pyproject.toml | $(BIN)/python
	@echo "==> Updating pip in $(VENV) (its resolver is much faster than the one Python ships)"
	@$(BIN)/pip install -q --disable-pip-version-check -U pip
	@echo "==> Installing turnstream with its server and notebook extras into $(VENV) (first run only)"
	@$(BIN)/pip install --disable-pip-version-check --progress-bar on -e ".[server,notebook]"
	@rm -f $(VENV)/.serve-* && touch $(SERVE_STAMP)

# The web page's syntax highlighter (highlight.js) and the notebook's code editor (CodeMirror 6, bundled
# by esbuild), pinned by web/package-lock.json, are put into the package here, at make time; the
# server serves them as plain files, so nothing needs Node at run time.
# Without npm (or offline) the page works: code shows without colours, cells edit in text boxes.
VENDOR := turnstream/server/static/vendor
web-assets: $(VENDOR)/.stamp
$(VENDOR)/.stamp: web/package-lock.json web/src/editor.js scripts/copy-web-assets.sh
	@if command -v npm >/dev/null 2>&1; then \
	  echo "==> Fetching the web page's syntax highlighter and code editor (npm ci in web/)"; \
	  if (cd web && npm ci --no-audit --no-fund --loglevel=error) && bash scripts/copy-web-assets.sh $(VENDOR); then \
	    touch $@; else echo "    (could not fetch them: code shows without colours, cells edit in plain text boxes)"; fi; \
	else echo "==> npm not found: code shows without colours, cells edit in plain text boxes"; fi

serve: $(if $(wildcard $(STAMP)),$(STAMP),$(SERVE_STAMP)) web-assets sandbox
	@echo "==> Starting the server (Ctrl-C stops it)"
	@$(BIN)/turnstream serve

# Every notebook kernel runs in a bubblewrap sandbox (docs/security.md).
sandbox:
	@bash scripts/ensure-package.sh bubblewrap bwrap "the notebook sandbox"

postgres:
	@bash scripts/ensure-postgres.sh

# Browser and AI SDK tests: Debian's Chromium and the npm packages pinned by the lockfiles.
NPM_DIRS := tests/e2e/aisdk tests/e2e/agui tests/e2e/web
e2e-deps:
	@bash scripts/ensure-chromium.sh
	@for d in $(NPM_DIRS); do \
	  if [ ! -d $$d/node_modules ] || [ $$d/package-lock.json -nt $$d/node_modules/.package-lock.json ]; then \
	    echo "npm ci in $$d"; (cd $$d && npm ci --no-audit --no-fund --loglevel=error) || exit 1; \
	  fi; \
	done

lint: $(STAMP)
	$(BIN)/ruff check turnstream tests bench
	$(BIN)/ruff format --check turnstream || true

typecheck: $(STAMP)
	$(BIN)/mypy turnstream

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

test: $(STAMP) sandbox postgres e2e-deps web-assets
	$(BIN)/ruff check turnstream tests bench
	$(BIN)/mypy turnstream
	$(BIN)/pytest -q -p no:cacheprovider

# Third-party servers (LiteLLM proxy, open-responses-server, Portkey's gateway) in front of the mock
# provider. Each runs from its own hash-locked venv (Python) or `npm ci` tree (Node.js) under .interop/,
# made on the first run (about a minute and a half) and kept.
interop: $(STAMP)
	TURNSTREAM_INTEROP=1 $(BIN)/pytest -q -p no:cacheprovider tests/interop

# Several processes behind a load balancer, on this machine (docs/deploy.md; needs root): a
# PostgreSQL of its own, three `turnstream serve` each in a network namespace of its own, and
# HAProxy (deploy/haproxy.cfg) on 127.0.0.1:8000. It keeps running; `make cluster-down` removes it.
cluster: $(STAMP) sandbox postgres web-assets
	@bash scripts/ensure-package.sh haproxy haproxy "the cluster's load balancer"
	@$(BIN)/python -m tests.support.cluster up $(CLUSTER_ARGS)

cluster-down:
	@$(BIN)/python -m tests.support.cluster down

# The cluster suite (tests/cluster): real nodes, HAProxy and PostgreSQL, one cluster per test (root).
test-cluster: $(STAMP) sandbox postgres
	@bash scripts/ensure-package.sh haproxy haproxy "the cluster's load balancer"
	TURNSTREAM_CLUSTER=1 $(BIN)/pytest -q -p no:cacheprovider tests/cluster

bench: $(STAMP)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .interop .mypy_cache .pytest_cache .ruff_cache web/node_modules $(VENDOR)/highlight $(VENDOR)/codemirror $(VENDOR)/.stamp
