# thunderlab: `make demo` sets up .venv and compiles the built-in nanoGPT block;
# `make test` sets up .venv and runs every test.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# exactly this torch: the CPU wheel this machine carries (a looser pin pulls a CUDA build)
TORCH  := torch==2.13.0

.PHONY: setup demo test bench clean

$(BIN)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check $(TORCH)
	$(BIN)/pip install -q --disable-pip-version-check $(TORCH) -e '.[test]'
	touch $@

setup: $(BIN)/.installed

demo: setup
	$(BIN)/python -m thunderlab demo

test: setup
	$(BIN)/python -m pytest

bench: setup
	$(BIN)/python benchmarks/compile_and_overhead.py
	$(BIN)/python benchmarks/training.py
	$(BIN)/python benchmarks/fusion.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache
