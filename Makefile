# Everything runs from .venv, created from pyproject.toml on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-fast demo demo-cli demo-cluster demo-browser bench clean

# uv installs what pip would (the same resolution, byte code compiled as pip does) in about
# 10 s on a fresh clone against pip's 22: `make test` and `make demo` start that much sooner.
# pip stays in the venv, upgraded (the packaging tests build wheels with it).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet uv
	# A .venv made before the distribution was renamed holds `harness`: both claim bin/harness.
	$(BIN)/pip uninstall --quiet --yes harness 2>/dev/null || true
	$(BIN)/uv pip install --quiet --python $(BIN)/python --compile-bytecode \
		--upgrade-package pip pip -e '.[test]'
	touch $(STAMP)

# pytest on pytest-xdist's workers: JOBS=5 by default on the two cores of the machines we run
# on, two of them lanes for the tests marked `waits`, which mostly wait out real windows
# (tests/lanes.py), three for the rest. The suite is bound by the CPU of the processes it
# starts: the real CLI's runs (about 440, half of it) and the harness's own, which tests fork
# from a fork server that imported the harness once (harness/testing/spawn.py). With three
# workers and no lanes the cores were idle a fifth of the run (170 of 890 CPU-s; 57 to 69%
# busy in the first two minutes, when the longest tests, most of them waiting, ran together);
# with the lanes 2% (18 of 796): 413 s against 459 and 464 s in the same hour (-n 5 without
# lanes 413 and 428 s, -n 4 with lanes 444 s: bench/RESULTS.md). JOBS=0 runs it in this process.
# Bytecode is cached (__pycache__/, ignored by git) even where PYTHONDONTWRITEBYTECODE is set:
# else every worker, and every harness process a test starts, compiles and assert-rewrites
# every module again, seconds each.
JOBS ?= 5
# The fast tier is in-process tests only: two workers fill two cores; a third only pays
# collection again (-n 3: 57.9 CPU-s and no sooner, against 51.5 at -n 2).
FAST_JOBS ?= 2
PYTEST := env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy -u PYTHONDONTWRITEBYTECODE \
	$(BIN)/pytest

# The browser test (tests/bot/test_emulator_in_a_browser.py) drives Debian's chromium:
# installed with apt-get (as root) when missing.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	apt-get install -y chromium || (apt-get update && apt-get install -y chromium)

# mypy runs beside pytest: on a fresh clone (no .mypy_cache) it is about 13 CPU-s, which the
# cores absorb beside the tests (tests/harness/runtime with a fresh mypy beside it ended 21 to
# 23 s sooner than one after the other, the tests no slower). Its report comes after pytest's;
# either failing fails the target.
test: $(STAMP) $(CHROMIUM)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	log=$$(mktemp); $(BIN)/mypy >"$$log" 2>&1 & typing=$$!; \
	$(PYTEST) -n $(JOBS); tests=$$?; \
	wait $$typing; typed=$$?; cat "$$log"; rm -f "$$log"; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

# The edit-test loop: the fast tier (pure and in-process tests; `slow` says what is left out).
test-fast: $(STAMP)
	$(PYTEST) -m "not slow" -n $(FAST_JOBS)

# The demos are offline whatever is exported; REAL=1 uses the Slack tokens and model key set
# (only 1, yes or true: REAL=0 stays offline).
DEMO_FLAGS := $(if $(filter 1 yes true,$(REAL)),--real)

# The terminal-only demo: a planned task and a follow-up agent that builds on it.
demo-cli: $(STAMP)
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python -m harness.cli.demo $(DEMO_FLAGS)

demo: $(STAMP)
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python -m bot.demo $(DEMO_FLAGS)

# The same, with the agents on two `harness worker` processes behind a local NATS server.
demo-cluster: $(STAMP)
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python -m bot.demo --cluster $(DEMO_FLAGS)

# The bot against the local Slack emulator, used from a browser (the page's address is printed).
demo-browser: $(STAMP)
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/harness bot --emulator $(DEMO_FLAGS)

bench: $(STAMP)
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/dispatch_overhead.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/tools.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/slack.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/tasks.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/workspaces.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/approvals.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/orphans.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/reliability.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/remote.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/surfaces.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/sessions.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/sandbox.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/pull_requests.py
	env -u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy $(BIN)/python bench/mcp_server.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
