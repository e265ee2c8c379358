# Everything runs from .venv, created from pyproject.toml on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test test-fast demo demo-cli demo-cluster demo-browser bench clean

# uv installs what pip would (the same resolution, byte code compiled as pip does) in about
# 10 s on a fresh clone against pip's 22: `make test` and `make demo` start that much sooner.
# The venv is made without pip (ensurepip alone is about 4 s) and uv put in it by the
# interpreter's own pip (`pip --python`, pip 22.3 on); where that fails, pip is bootstrapped
# into the venv for it. uv installs pip there, upgraded (the packaging tests build wheels with
# it).
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv --without-pip $(VENV)
	test -x $(BIN)/uv || $(PY) -m pip --python $(BIN)/python install --quiet uv \
		|| { $(BIN)/python -m ensurepip --default-pip && $(BIN)/python -m pip install --quiet uv; }
	# A .venv made before the distribution was renamed holds `harness`: both claim bin/harness.
	$(BIN)/uv pip uninstall --quiet --python $(BIN)/python harness 2>/dev/null || true
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

# Tests keep their scratch folders (task stores, worktrees, sockets) on a RAM-backed tmpfs
# where the machine has one that runs programs (/dev/shm), in a folder of each run's own: on
# an ext4 disk every atomic write's fsync commits the journal and every removed worktree is
# discarded, kernel work that the fast tier paid 9.5 CPU-s for against 3.7 on tmpfs (25.4 s
# against 19-20 s) and the whole suite about a minute (392.7 s against 330.5 s, one run after
# the other: bench/RESULTS.md).
# A whole run holds at most about 50 MB there at once: a /dev/shm with less than 512 MB free
# (a container's 64 MB), or one that runs no programs, leaves TMPDIR (or /tmp) as it is. The
# folder goes when the tests pass; a failed test's tmp_path is kept for a look, and the folder
# named.
SCRATCH = $(shell d=$$(mktemp -d /dev/shm/ht.XXXXXX 2>/dev/null) && cp /bin/true "$$d/x" \
	&& "$$d/x" 2>/dev/null && [ "$$(df -Pk /dev/shm | awk 'NR == 2 {print $$4}')" -gt 524288 ] \
	&& echo /dev/shm || echo "$${TMPDIR:-/tmp}"; [ -z "$$d" ] || rm -rf "$$d")
# The recipe's lines that make that folder, and drop it once the tests ($$tests) passed.
NEW_SCRATCH = scratch=$$(mktemp -d "$(SCRATCH)/ht.XXXXXX")
DROP_SCRATCH = if [ $$tests -eq 0 ]; then rm -rf "$$scratch"; \
	else echo "the failed tests' folders are in $$scratch"; fi

# A fresh clone has no byte code yet: pytest rewrites the asserts of every test module as it
# imports it (collecting cold takes 9.5 CPU-s, warm 3.9), which the five workers would each do
# at once, beside mypy. One collection first writes it for them: with mypy beside, the
# workers had collected and mypy was done 27 s after the start, against 29 and 35 s.
WARM_TESTS = [ -d tests/__pycache__ ] || TMPDIR="$$scratch" $(PYTEST) --collect-only -q \
	>/dev/null 2>&1 || true

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
	$(NEW_SCRATCH); $(WARM_TESTS); \
	TMPDIR="$$scratch" $(PYTEST) -n $(JOBS); tests=$$?; $(DROP_SCRATCH); \
	wait $$typing; typed=$$?; cat "$$log"; rm -f "$$log"; \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

# The edit-test loop: the fast tier (pure and in-process tests; `slow` says what is left out).
test-fast: $(STAMP)
	$(NEW_SCRATCH); TMPDIR="$$scratch" $(PYTEST) -m "not slow" -n $(FAST_JOBS); tests=$$?; \
	$(DROP_SCRATCH); exit $$tests

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
