# Two commands set up everything: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CONFIG ?= config/pointcast.toml

.PHONY: run test lint serve soak bench bench-deps clean

# setup.py builds the compiled rendering steps (src/pointcast/_render.c) in place where gcc and
# the Python headers are at hand; without them pointcast renders the same bytes in numpy.
$(BIN)/pointcast: pyproject.toml setup.py src/pointcast/_render.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

run: $(BIN)/pointcast
	$(BIN)/pointcast run --config $(CONFIG)

# The slowest tests are listed after the run: the suite must stay under 10 minutes on 2 cores.
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE=1):
# every `pointcast` process, dask worker and fork server of the tests would compile pointcast
# again (0.45 s each), and each test process rewrite every test module (collection 11 s to 6 s).
test: $(BIN)/pointcast
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=25

# Static checks, run by CI before the tests: the import layers and no import cycle
# (lint-imports, [tool.importlinter]), style (ruff: pyflakes, isort, pyupgrade, bugbear) and
# types (mypy on src/); pyproject.toml configures all three.
lint: $(BIN)/pointcast
	$(BIN)/lint-imports
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy src

serve: $(BIN)/pointcast
	$(BIN)/pointcast serve --config $(CONFIG)

# Two simulated days of 3-hourly cycles with the clock set, a model stopping in the middle
# (docs/operations.md, "Soak test"); the suite runs a short version of it.
SOAK_CYCLES ?= 16
soak: $(BIN)/pointcast
	POINTCAST_SOAK_CYCLES=$(SOAK_CYCLES) $(BIN)/python -m pytest -q -p no:xdist -s tests/flows/test_soak.py

# The reference benchmark (bench/README.md). BENCH_SCALE=quick (reduced workload) or a sample
# scale (1 = full operational size, the default); BENCH_ARGS passes further options.
BENCH_SCALE ?= 1
bench: $(BIN)/pointcast
	$(BIN)/python -m bench --scale $(BENCH_SCALE) $(BENCH_ARGS)

# nginx and wrk for the server_vs_nginx figure (Debian packages; needs root). The bench itself
# installs nothing and skips that figure when they are absent.
bench-deps:
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends nginx wrk

clean:
	rm -rf $(VENV) output/runs output/current output/zarr output/cache src/pointcast/*.so
