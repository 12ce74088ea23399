# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each builds .venv from the lock file first (requirements/cpu.txt: every package, pinned and hashed),
# so a clone installs the same set any day; `make lock` rewrites the lock from pyproject.toml.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
LOCK := requirements/cpu.txt
# The locked set, then dragoman itself (editable): the second is cheap and follows pyproject.toml.
LOCKED := $(VENV)/.lock-installed
STAMP := $(VENV)/.dragoman-installed
# pytest workers for the fast suite; the engine tests run after it, on their own.
TEST_WORKERS ?= 2
# The suite's budget on the 2-core development machine (seconds, both pytest runs together).
TEST_BUDGET_S ?= 900
LATEST := .venv-latest

.PHONY: demo test test-fast test-e2e test-latest lock lock-upgrade check-lock docs reference install browser gettext clean bench-enqueue compose-env gpu-pack

install: $(STAMP)

# A new lock means a new venv: installing over an old one would keep what the lock no longer has.
# --no-deps: the lock is the whole set (torchvision, torchaudio and torchcodec, which vLLM asks for but
# which break `transformers` next to the CPU torch build, are left out of it on purpose).
$(LOCKED): $(LOCK)
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/pip install -qq --disable-pip-version-check --require-hashes --no-deps -r $(LOCK)
	touch $(LOCKED)

$(STAMP): $(LOCKED) pyproject.toml
	$(BIN)/pip install -qq --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Rewrite the locks (requirements/*.txt) from pyproject.toml: new or changed requirements are resolved,
# every other pin kept. `make lock-upgrade` takes the newest releases pyproject.toml allows instead.
lock: $(STAMP)
	UV=$(BIN)/uv requirements/compile

lock-upgrade: $(STAMP)
	UV=$(BIN)/uv requirements/compile --upgrade

# Fails, naming the packages, when pyproject.toml asks for something the locks do not hold.
check-lock: $(STAMP)
	UV=$(BIN)/uv requirements/compile --check

# requirements/gpu.txt staged for the lent GPU machine (.gpu/p0..pN, then ../shared/gpu/README.md's runs);
# GPU_PACK_DEFAULT_MODEL=1 adds the default model's packages.
gpu-pack:
	requirements/gpu-pack

# The web console's browser test drives Debian's Chromium through its ChromeDriver (`make test` installs
# both when they are missing; installing needs root, as on the CI machine, or run the apt-get line once).
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) || \
		(echo "cannot install chromium and chromium-driver: run 'apt-get install chromium chromium-driver' as root" >&2; exit 1)

# Every translated catalogue the tests produce must pass GNU gettext's `msgfmt -c` (installed like chromium).
gettext:
	@command -v msgfmt >/dev/null || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gettext >/dev/null) || \
		(echo "cannot install gettext (msgfmt): run 'apt-get install gettext' as root" >&2; exit 1)

demo: $(STAMP)
	$(BIN)/dragoman demo

# The docs build (strict) and the reference pages' check are tests of the fast suite (tests/docs/).
# Each pytest run prints its slowest tests; tests/budget.py fails the run past its share of the budget.
test: check-lock $(STAMP) browser gettext
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest -m "not e2e" -n $(TEST_WORKERS) --durations=15 --budget-s=$(TEST_BUDGET_S) --budget-share=fast
	$(BIN)/pytest -m e2e --durations=15 --budget-s=$(TEST_BUDGET_S) --budget-share=e2e

test-fast: $(STAMP) browser gettext
	$(BIN)/pytest -m "not e2e" -n $(TEST_WORKERS) --durations=15

test-e2e: $(STAMP) gettext
	$(BIN)/pytest -m e2e --durations=15

# The newest releases pyproject.toml allows, in a venv of their own (.venv-latest), through mypy and the
# fast suite: an upstream release that breaks dragoman is found here on purpose, before a lock takes it.
# Not part of `make test`; it may fail, and what it finds is the report.
test-latest: browser gettext
	$(PYTHON) -m venv --clear $(LATEST)
	$(LATEST)/bin/pip install -qq --disable-pip-version-check --upgrade -e '.[cpu,dev]'
	$(LATEST)/bin/pip uninstall --quiet --yes torchvision torchaudio torchcodec
	@$(LATEST)/bin/pip list --format=freeze --disable-pip-version-check > $(LATEST)/installed.txt
	@echo "test-latest: $$(wc -l < $(LATEST)/installed.txt) packages; against the lock:"
	@$(LATEST)/bin/python requirements/newer.py $(LOCK) $(LATEST)/installed.txt
	status=0; $(LATEST)/bin/mypy || status=1; \
	$(LATEST)/bin/pytest -m "not e2e" -n $(TEST_WORKERS) -p no:cacheprovider || status=1; exit $$status

# The docs site (mkdocs.yml): the generated reference pages must match the code, and the build is strict
# (a broken link or anchor, or a page missing from the nav, fails). The site goes to site/ (ignored).
docs: $(STAMP)
	$(BIN)/python -m cli.reference --check
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Rewrite docs/reference/ (settings, CLI, HTTP API) from the code after changing any of them.
reference: $(STAMP)
	$(BIN)/python -m cli.reference

bench-enqueue: $(STAMP)
	$(BIN)/python -m bench.enqueue

# docker compose has no default credentials: this writes random ones to .env (read by compose, never
# committed), once; an existing .env is left as it is.
compose-env: .env

.env:
	umask 077 && $(PYTHON) -c 'import secrets; names = ("REDIS_PASSWORD", "POSTGRES_PASSWORD", "GRAFANA_ADMIN_PASSWORD", "DRAGOMAN_WEBHOOK_SECRET"); print("\n".join(f"{n}={secrets.token_hex(24)}" for n in names))' > $@
	@echo "wrote $@ (credentials for docker compose)"

clean:
	rm -rf $(VENV) $(LATEST) .dragoman .pytest_cache .mypy_cache site
