# Everything runs from .venv, created from pyproject.toml on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint typecheck unit bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/pytest

demo: $(STAMP)
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python -m harness.demo

bench: $(STAMP)
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/dispatch_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
