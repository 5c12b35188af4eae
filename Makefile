# Two commands set up everything: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
CONFIG ?= config/pointcast.toml

.PHONY: run test serve bench clean

$(BIN)/pointcast: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

run: $(BIN)/pointcast
	$(BIN)/pointcast run --config $(CONFIG)

test: $(BIN)/pointcast
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

serve: $(BIN)/pointcast
	$(BIN)/pointcast serve --config $(CONFIG)

clean:
	rm -rf $(VENV) output/runs output/current output/zarr output/cache
