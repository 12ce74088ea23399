# Two commands do everything on a fresh machine: `make demo` and `make test`.
# Each builds .venv and installs dragoman with the CPU engine and the dev tools first.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.dragoman-installed
# pytest workers for the fast suite; the engine tests run after it, on their own.
TEST_WORKERS ?= 2

.PHONY: demo test test-fast test-e2e docs reference install browser gettext clean bench-enqueue compose-env

install: $(STAMP)

# torchvision/torchaudio/torchcodec come along with vLLM and break `transformers` imports next
# to the CPU torch build ("operator torchvision::nms does not exist"), so they are removed.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[cpu,dev]'
	$(BIN)/pip uninstall --quiet --yes torchvision torchaudio torchcodec 2>/dev/null || true
	touch $(STAMP)

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

test: $(STAMP) browser gettext
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(MAKE) docs
	$(BIN)/pytest -m "not e2e" -n $(TEST_WORKERS)
	$(BIN)/pytest -m e2e

test-fast: $(STAMP) browser gettext
	$(BIN)/pytest -m "not e2e" -n $(TEST_WORKERS)

test-e2e: $(STAMP) gettext
	$(BIN)/pytest -m e2e

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
	rm -rf $(VENV) .dragoman .pytest_cache .mypy_cache site
