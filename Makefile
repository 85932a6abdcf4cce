# Two entry points for a fresh machine (Python 3.10+ with pip and venv):
#   make demo   install everything and run the library's main job
#   make test   install everything (incl. the compiled `fast` extra) and run lint, docs and tests
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
TORCH  := torch==2.13.0
# Offline data beside the checkout, when present (else ./datasets or $PYG_AGG_DATA).
SHARED_DATA := $(wildcard $(abspath ../shared/datasets))
export PYG_AGG_DATA ?= $(SHARED_DATA)

.PHONY: demo test install fast lint docs pytest bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q "setuptools>=64" wheel

# The CPU build of torch goes in first and pinned: an unpinned torch
# requirement would make pip fetch a multi-GB CUDA build.
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[test,docs]'
	touch $@

install: $(VENV)/.installed

# torch-scatter / torch-sparse have no wheels here: compile against the
# installed torch (~8 + ~20 min once; pip's wheel cache makes reinstalls quick).
# If the build is impossible the extension tests skip with a visible reason.
$(VENV)/.fast: $(VENV)/.installed
	$(BIN)/pip install -q --no-build-isolation 'torch-scatter==2.1.2' \
	  || echo "WARNING: torch-scatter could not be built; its tests will be skipped"
	$(BIN)/pip install -q --no-build-isolation 'torch-sparse==0.6.18' \
	  || echo "WARNING: torch-sparse could not be built; its tests will be skipped"
	touch $@

fast: $(VENV)/.fast

demo: install
	$(BIN)/python -m pyg_agg.demo

lint: install
	$(BIN)/ruff check pyg_agg tests benchmarks examples

docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

pytest: install
	$(BIN)/python -m pytest -q

test: fast lint docs pytest

clean:
	rm -rf $(VENV) site .pytest_cache
