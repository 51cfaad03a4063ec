# Every target creates what it needs: the .venv, bubblewrap (the notebook sandbox), the PostgreSQL
# cluster, Chromium, npm packages.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: serve test interop lint typecheck unit bench clean postgres e2e-deps sandbox

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -e ".[dev]"
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

serve: $(STAMP) sandbox
	$(BIN)/turnstream serve

# Every notebook kernel runs in a bubblewrap sandbox (docs/security.md).
sandbox:
	@bash scripts/ensure-bubblewrap.sh

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

test: $(STAMP) sandbox postgres e2e-deps
	$(BIN)/ruff check turnstream tests bench
	$(BIN)/mypy turnstream
	$(BIN)/pytest -q -p no:cacheprovider

# Third-party servers (LiteLLM proxy, open-responses-server) in front of the mock provider. Each runs
# from its own hash-locked venv under .interop/, made on the first run (about a minute) and kept.
interop: $(STAMP)
	TURNSTREAM_INTEROP=1 $(BIN)/pytest -q -p no:cacheprovider tests/interop

bench: $(STAMP)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .interop .mypy_cache .pytest_cache .ruff_cache
