# Two entry points (README): `make demo` and `make test`. Each installs what it needs first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two pytest-xdist workers (CI has 2 cores), each taking whole test files: tests of a module share
# its fixtures (one engine, one Ray cluster) and some read what an earlier one left there.
PYTEST_ARGS ?= -n 2 --dist loadfile

.PHONY: demo test setup lint bench

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,ray]'
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

setup: $(VENV)/.installed node_modules/.installed

demo: $(VENV)/.installed
	$(BIN)/cuzk demo

lint: $(VENV)/.installed
	$(BIN)/ruff check .

# Then tests/gpu once more where no GPU is: the kernels through the host emulator (tests/gpu/kernel_emulator.py
# builds the CUDA sources as C++ with g++) and CudaBackend on the emulated device (cuzk.backends.cuda.emulated,
# a 4 GiB card), so that kernel and GPU-path changes are tested everywhere: a few minutes.
EMULATED := CUZK_TEST_KERNEL_MODULE=tests/gpu/kernel_emulator.py CUZK_EMULATED_GPUS=4GiB
test: setup lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)
	@if command -v g++ >/dev/null; then \
	    echo "$(EMULATED) pytest tests/gpu"; \
	    $(EMULATED) $(BIN)/python -m pytest tests/gpu $(PYTEST_ARGS); \
	else \
	    echo "make test: g++ not found, so tests/gpu on the kernel emulator and the emulated device did not run"; \
	fi

bench: setup
	$(BIN)/python benchmarks/cpu/bench_prove.py
