# thunderlab: `make demo` sets up .venv and compiles the built-in nanoGPT block;
# `make test` sets up .venv and runs every test (the model zoo's fast subset);
# `make zoo` runs the whole model zoo, `make zoo-bench` its table and step ratios.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# exactly this torch: the CPU wheel this machine carries (a looser pin pulls a CUDA build)
TORCH  := torch==2.13.0

.PHONY: setup demo test bench zoo zoo-bench clean views browser graphviz

$(BIN)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check $(TORCH)
	$(BIN)/pip install -q --disable-pip-version-check $(TORCH) -e '.[test]'
	touch $@

setup: $(BIN)/.installed

# the views (HTML report, notebook widget) are TypeScript in extension/; their built bundles are
# committed in thunderlab/*/static, so users never need node; this rebuilds and tests them
extension/node_modules/.installed: extension/package.json extension/package-lock.json
	cd extension && npm ci --no-audit --no-fund --loglevel=error
	touch $@

views: extension/node_modules/.installed
	cd extension && npm run --silent typecheck && npm run --silent build && npm test

# UI tests drive Debian's Chromium (Playwright downloads no browser)
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

# Graph.to_svg draws with Graphviz's dot program (Debian's graphviz package)
graphviz:
	@command -v dot >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq graphviz >/dev/null)

demo: setup
	$(BIN)/python -m thunderlab demo

test: setup views browser graphviz
	$(BIN)/python -m pytest

# every zoo architecture with each attention implementation, in every mode (tests/zoo; about an hour on 2 cores)
zoo: setup
	THUNDERLAB_ZOO=full $(BIN)/python -m pytest tests/zoo

zoo-bench: setup
	$(BIN)/python benchmarks/zoo.py

bench: setup
	$(BIN)/python benchmarks/compile_and_overhead.py
	$(BIN)/python benchmarks/training.py
	$(BIN)/python benchmarks/fusion.py
	$(BIN)/python benchmarks/inspection.py
	$(BIN)/python benchmarks/kernels.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache extension/node_modules extension/build-test
