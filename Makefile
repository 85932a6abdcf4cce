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
# The native CPU ops compile once into the persistent cache ($$PYG_AGG_CACHE/native);
# a failed build is reported and the pure-torch backend runs.
$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[test,docs]'
	$(BIN)/python -m pyg_agg.ops || echo "WARNING: native ops not built; the torch backend runs"
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

# The whole suite on the default backends ("auto"), then the layers and the
# kernels again on each other backend, so every backend passes them.
pytest: install
	$(BIN)/python -m pytest -q
	PYG_AGG_BACKEND=torch $(BIN)/python -m pytest -q tests/nn tests/ops
	PYG_AGG_BACKEND=native $(BIN)/python -m pytest -q tests/nn tests/ops
	if $(BIN)/python -c "import torch_scatter" 2>/dev/null; then \
	  PYG_AGG_BACKEND=torch_scatter $(BIN)/python -m pytest -q tests/nn tests/ops; fi

test: fast lint docs pytest

clean:
	rm -rf $(VENV) site .pytest_cache
