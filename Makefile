# Every target creates what it needs: the .venv, the PostgreSQL cluster, Chromium, npm packages.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: serve test lint typecheck unit bench clean postgres

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -U pip
	$(BIN)/pip install -q -e ".[dev]"
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

serve: $(STAMP)
	$(BIN)/turnstream serve

postgres:
	@bash scripts/ensure-postgres.sh

lint: $(STAMP)
	$(BIN)/ruff check turnstream tests bench
	$(BIN)/ruff format --check turnstream || true

typecheck: $(STAMP)
	$(BIN)/mypy turnstream

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

test: $(STAMP) postgres
	$(BIN)/ruff check turnstream tests bench
	$(BIN)/mypy turnstream
	$(BIN)/pytest -q -p no:cacheprovider

bench: $(STAMP)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
