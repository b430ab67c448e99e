# `make test` and `make demo` create .venv when it is missing, then run. A second run installs nothing.
# Order matters: torch first, then the pinned dependencies, then fairseq-fixed without build
# isolation and without CUDA_HOME (its build would otherwise pull a CUDA torch into the build
# environment), then biofairseq itself in editable mode.
#
# TORCH picks the torch version, TORCH_INDEX the wheel index it comes from (only torch: the other requirements come
# from the default index). Without TORCH_INDEX pip takes the index it is configured with (on the machines this
# project is developed on, the CPU build on their disk). On a GPU machine name the CUDA build's index, for example
#   make test TORCH_INDEX="<the PyTorch wheel index for your CUDA version>"
# and `make clean` first if .venv already exists.

PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
TORCH_INDEX ?=
FAIRSEQ ?= fairseq-fixed==0.12.3.1
PIP_FLAGS ?= --quiet --disable-pip-version-check
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: test test-fast lint demo install clean

# Two workers (pytest-xdist), one test file each at a time, so that a file's module fixtures are built once, in the
# order of tests/conftest.py (longest first); the 10 slowest tests are printed at the end.
test: $(INSTALLED)
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=10

# The subset for the edit-test loop (pytest -m fast): in-process tests on a small shared corpus, under a minute.
test-fast: $(INSTALLED)
	$(BIN)/python -m pytest -n 2 --dist loadfile --no-loadscope-reorder -m fast --durations=5

# ruff on every Python file (its settings: pyproject.toml); CI runs it before the tests.
lint: $(INSTALLED)
	$(BIN)/ruff check .

# The bundled end-to-end recipe on the sample in examples/: about 11 minutes on 2 CPU cores. RUN_DIR, NUM_GPUS
# and the recipe's other variables pass through the environment (see the top of recipes/bsc_bio_es.sh).
demo: $(INSTALLED)
	PATH="$(abspath $(BIN)):$$PATH" PYTHON="$(abspath $(BIN))/python" PRESET=tiny bash recipes/bsc_bio_es.sh

install: $(INSTALLED)

$(INSTALLED): requirements.txt setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_FLAGS) $(TORCH) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	$(BIN)/pip install $(PIP_FLAGS) $(TORCH) -r requirements.txt
	env -u CUDA_HOME $(BIN)/pip install $(PIP_FLAGS) --no-build-isolation --no-deps $(FAIRSEQ)
	$(BIN)/pip install $(PIP_FLAGS) --no-build-isolation --no-deps -e .
	touch $@

clean:
	rm -rf $(VENV) build *.egg-info
