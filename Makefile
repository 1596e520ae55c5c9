# Developer entry points. `make run` starts the stack; `make test` is what CI runs.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# pytest processes for make test (pytest-xdist); whole files go to one process, so a file's
# module-scoped servers start once. Tests isolate by unique prefixes, free ports and
# pytest-django's per-process database. TEST_WORKERS=0 runs in this one process.
TEST_WORKERS ?= 2

.PHONY: venv run test lint fmt clean

venv: $(STAMP)

# Reinstalled whenever pyproject.toml changes (the stamp is older then).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

run: venv
	$(PY) -m pool_admin.launcher

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

fmt: venv
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

# `python -m pytest` puts the repo root on sys.path, which `-p tests.harness.plugin` needs.
# pytest's exit code 5 (no tests collected) is not a failure here.
test: venv
	$(PY) -m pool_admin.localservices install --tests
	$(MAKE) --no-print-directory lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; elif [ $$rc -ne 0 ]; then exit $$rc; fi
	git diff --check

clean:
	rm -rf .run .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -not -path './$(VENV)/*' -prune -exec rm -rf {} +
