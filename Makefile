# Two entry points, each creating .venv with pinned versions when it is missing:
#   make demo   -> set up, then run the main job (harness compare on the embedded MNIST data)
#   make test   -> set up, then run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CONSTRAINTS ?= requirements/constraints.txt
EXTRAS ?= all,test
DEMO_ARGS ?= --workload mnist-wide --param epochs=3

.PHONY: demo test venv clean-venv

venv: $(STAMP)

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q -c $(CONSTRAINTS) -e '.[$(EXTRAS)]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/harness compare $(DEMO_ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest -q

clean-venv:
	rm -rf $(VENV)
