# thunderlab: `make demo` sets up .venv and compiles the built-in nanoGPT block;
# `make test` sets up .venv, runs ruff (`make lint`), then every test (the model zoo's fast subset);
# `make zoo` runs the whole model zoo, `make zoo-bench` its table and step ratios.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# exactly this torch: the CPU wheel this machine carries (a looser pin pulls a CUDA build)
TORCH  := torch==2.13.0

.PHONY: setup lint demo test test-torch bench zoo zoo-bench fuzz robustness clean views lab browser graphviz wheelhouse

$(BIN)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check $(TORCH)
	$(BIN)/pip install -q --disable-pip-version-check $(TORCH) -e '.[test]'
	touch $@

setup: $(BIN)/.installed

# the views (HTML report, notebook widget) are TypeScript in extension/; their one built bundle is
# committed as thunderlab/inspect/static/views.js, so users never need node; this rebuilds and tests it
extension/node_modules/.installed: extension/package.json extension/package-lock.json
	cd extension && npm ci --no-audit --no-fund --loglevel=error
	touch $@

views: extension/node_modules/.installed
	cd extension && npm run --silent typecheck && npm run --silent build && npm test

# the JupyterLab sidebar: TypeScript compiled, then bundled by jupyter-builder into
# thunderlab/jupyter/labextension (the wheel ships it); linked into this venv for JupyterLab
lab: setup extension/node_modules/.installed
	cd extension && PATH="$(abspath $(BIN)):$$PATH" npm run --silent build:lab
	$(BIN)/jupyter-builder develop --overwrite . >/dev/null

# UI tests drive Debian's Chromium (Playwright downloads no browser)
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null)

# Graph.to_svg draws with Graphviz's dot program (Debian's graphviz package)
graphviz:
	@command -v dot >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq graphviz >/dev/null)

demo: setup lab
	$(BIN)/python -m thunderlab demo

# ruff, configured in pyproject.toml; `make test` runs it first so a lint finding fails fast
lint: setup
	$(BIN)/ruff check .

# pytest in TEST_WORKERS processes (pytest-xdist), each given a whole test file at a time, so that what a file
# starts once (a JupyterLab server, a browser) starts in one process; TEST_WORKERS=0 runs every test in this one
TEST_WORKERS ?= 2
test: lint views lab browser graphviz
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=25

# the compiler's tests against another torch release (the package allows torch>=2.10): its own venv, torch from
# PyPI (a CUDA build there, several GB), the results in benchmarks/results/torch<version>_tests.json
TORCH_VERSION ?= 2.11.0
test-torch:
	$(PYTHON) -m venv .venv-torch$(TORCH_VERSION)
	PIP_CONSTRAINT= .venv-torch$(TORCH_VERSION)/bin/pip install -q --disable-pip-version-check \
		torch==$(TORCH_VERSION) 'networkx>=3' pytest 'transformers>=4.40' expecttest hypothesis numpy 'jsonschema>=4'
	.venv-torch$(TORCH_VERSION)/bin/python benchmarks/torch_version.py

# every zoo architecture with each attention implementation, in every mode (tests/zoo; about an hour on 2 cores)
zoo: setup
	THUNDERLAB_ZOO=full $(BIN)/python -m pytest tests/zoo

# the README's table: every zoo model against torch.compile (about 40 min on two cores with an empty Inductor cache,
# 15 min with a warm one; a subset: --models bert,llama)
zoo-bench: setup
	$(BIN)/python benchmarks/zoo.py --rounds 40 --out benchmarks/results/zoo_vs_compile_all.json

bench: setup
	$(BIN)/python benchmarks/compile_and_overhead.py
	$(BIN)/python benchmarks/training.py
	$(BIN)/python benchmarks/fusion.py
	$(BIN)/python benchmarks/inspection.py
	$(BIN)/python benchmarks/gelu_kernels.py
	$(BIN)/python benchmarks/views.py

# a larger random-pipeline campaign than `make test` runs (FUZZ_EXAMPLES draws, fresh each time)
FUZZ_EXAMPLES ?= 1000
fuzz: setup
	THUNDERLAB_FUZZ_RANDOM=1 THUNDERLAB_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -p no:warnings tests/fuzz

# memory of records, errors for bad input, and the fuzz counts: benchmarks/results/robustness.json
robustness: setup
	$(BIN)/python benchmarks/robustness.py

# a folder of wheels to install from in a room without internet (tutorials/README.md); build it on a machine
# with the students' platform and Python
wheelhouse:
	$(PYTHON) -m pip download -q --dest wheelhouse --index-url https://download.pytorch.org/whl/cpu $(TORCH)
	$(PYTHON) -m pip download -q --dest wheelhouse 'anywidget>=0.9' 'jupyterlab>=4' ipykernel 'networkx>=3' nbformat
	$(PYTHON) -m pip wheel -q --no-deps --wheel-dir wheelhouse .

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache extension/node_modules extension/build-test extension/lib thunderlab/jupyter/labextension
