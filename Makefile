# Two entry points, each creating .venv with pinned versions when it is missing:
#   make demo   -> set up, then run the main job (harness compare on the embedded MNIST data)
#   make test   -> set up, then run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# Which pinned set to install: requirements/choose-constraints.py prints "cpu", "cuda13" or
# "cuda12" and why (an NVIDIA GPU that `nvidia-smi -L` lists, and its driver's CUDA version).
# HARNESS_SET=cpu|cuda13|cuda12 forces a set, CONSTRAINTS=FILE another constraints file for it
# (docs/gpu.md: when the automatic choice is wrong).
HARNESS_SET ?= auto
CHOICE := $(shell $(PYTHON) requirements/choose-constraints.py $(HARNESS_SET))
SET := $(or $(word 1,$(CHOICE)),cpu)
WHY := $(wordlist 2,999,$(CHOICE))
# Per set: its constraints file, the project's extras, requirements beside them, and its name.
CONSTRAINTS_cpu := requirements/constraints.txt
EXTRAS_cpu := all,test
REQUIRE_cpu :=
NAME_cpu := the CPU set
CONSTRAINTS_cuda13 := requirements/constraints-gpu.txt
EXTRAS_cuda13 := torch,jax,keras,slurm,gpu,test
REQUIRE_cuda13 := 'tensorflow[and-cuda]' 'jax[cuda13]'
NAME_cuda13 := the GPU set for CUDA 13
CONSTRAINTS_cuda12 := requirements/constraints-gpu-cuda12.txt
EXTRAS_cuda12 := torch,jax,keras,slurm,gpu,test
REQUIRE_cuda12 := 'tensorflow[and-cuda]' 'jax[cuda12]'
NAME_cuda12 := the GPU set for CUDA 12
CONSTRAINTS ?= $(CONSTRAINTS_$(SET))
EXTRAS ?= $(EXTRAS_$(SET))
# One 60,000-sample epoch per framework, shared out over 3 rounds (worker processes, cells in a
# new random order each round): each round trains one epoch of 20,000 samples in 16 blocks of
# steps, so every verdict is judged against the drift between rounds too (docs/methodology.md,
# "Rounds"). 3 rounds, not the default 5: two fewer framework imports per cell keep the
# fresh-clone demo near 4 minutes on 2 cores, and 3 rounds gave no contradicted verdict either.
# No ceiling probe: for MNIST it sizes a ~6,800^2 matmul per library, longer than an epoch.
DEMO_ARGS ?= --workload mnist-wide --param epochs=1 --no-ceilings --rounds 3

.PHONY: demo test lint venv clean-venv browser slurm FORCE

venv: $(STAMP)

# The stamp holds "SET CONSTRAINTS INSTALLED" (INSTALLED: the set in the venv, "cpu" after a
# fallback). Another set or constraints file than the stamp's reinstalls; another set than the
# venv holds (a CPU venv on a machine that now has a GPU, or the reverse) starts a new venv, since
# tensorflow and tensorflow-cpu, or two jaxlib builds, cannot share one. An empty stamp is one
# made before the sets existed: the CPU set.
INSTALLED := $(or $(shell cat $(STAMP) 2>/dev/null),cpu $(CONSTRAINTS_cpu) cpu)
ifneq ($(wordlist 1,2,$(INSTALLED)),$(SET) $(CONSTRAINTS))
$(STAMP): FORCE
endif
FORCE:

# A GPU set that cannot be installed (no wheel for this platform or Python, no network, pip
# fails) says so in one line, then the CPU set goes into a new venv, so the demo still runs.
# pip compiles each installed file to bytecode one after another (torch, TensorFlow and JAX
# hold ~20k files); compileall afterwards uses every core (2-core VM, 2026-11-28: pip with its
# compile 180 s on a busy machine; without it 67 s, then compileall 44 s). A file it cannot
# compile (a Python 2 fixture inside a package) stays uncompiled, as under pip. Compiled at
# install, not at the first import, so the demo's warm processes do not each compile what they
# import (torch: 9.8 s from an empty cache against 2.8 s compiled, on 2 cores).
PIP_INSTALL := $(BIN)/python -m pip install -q --no-compile
COMPILE := $(BIN)/python -m compileall -q -j 0 $(VENV)/lib >/dev/null 2>&1 || true

$(STAMP): pyproject.toml $(CONSTRAINTS) $(CONSTRAINTS_cpu) requirements/choose-constraints.py
	@if test -x $(BIN)/python && test -e $(STAMP) && test '$(word 3,$(INSTALLED))' != '$(SET)'; then \
		echo "the venv holds $(NAME_$(word 3,$(INSTALLED))); this machine gets $(NAME_$(SET)): a new $(VENV)"; \
		rm -rf $(VENV); \
	fi
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# a venv made before the distribution was renamed holds the old "harness" one: drop it
	$(BIN)/python -m pip uninstall -y -q harness >/dev/null 2>&1 || true
	@echo 'installing $(NAME_$(SET)) ($(CONSTRAINTS)): $(WHY)'
	@if $(PIP_INSTALL) -c $(CONSTRAINTS) -e '.[$(EXTRAS)]' $(REQUIRE_$(SET)); then \
		$(COMPILE); echo '$(SET) $(CONSTRAINTS) $(SET)' > $(STAMP); \
	elif test '$(SET)' = cpu; then \
		exit 1; \
	else \
		echo '$(NAME_$(SET)) could not be installed (pip above): installing the CPU set ($(CONSTRAINTS_cpu)) in a new $(VENV) instead; docs/gpu.md says how to choose by hand'; \
		rm -rf $(VENV) && $(PYTHON) -m venv $(VENV) \
		&& $(PIP_INSTALL) -c $(CONSTRAINTS_cpu) -e '.[$(EXTRAS_cpu)]' \
		&& { $(COMPILE); echo '$(SET) $(CONSTRAINTS) cpu' > $(STAMP); }; \
	fi

demo: $(STAMP)
	$(BIN)/harness compare $(DEMO_ARGS)

# Two pytest processes, each test file whole on one (its module fixtures run once; the SLURM
# tests share one cluster): 442 s against 768 s in one process on the 2-core VM.
TEST_WORKERS ?= 2

test: $(STAMP) lint browser slurm
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=25

# ruff's rules and mypy's settings are in pyproject.toml ([tool.ruff.lint], [tool.mypy]); a
# lint or type error fails `make test`.
lint: $(STAMP)
	$(BIN)/ruff check harness backends workloads tests benchmarks/predictlab
	$(BIN)/mypy

# The report.html test opens the page in headless Chromium. Install Debian's chromium when it
# is missing and apt is usable (root); otherwise say so and go on: that one test then skips.
browser:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium with apt-get (for the report.html browser test)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 \
		|| { apt-get update -q >/dev/null 2>&1 \
		     && apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1; } \
		|| echo "chromium could not be installed: the browser test will skip"; \
	else \
		echo "no chromium and no root apt-get: the report.html browser test will skip"; \
	fi

# The SLURM tests start a one-node cluster (munged, slurmctld, slurmd) for this host. Install
# Debian's slurm-wlm and munge when missing and apt is usable (root; ~10 s); otherwise say so and
# go on: those tests then skip and say why.
slurm:
	@if command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 \
		&& command -v munged >/dev/null 2>&1; then \
		:; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing slurm-wlm and munge with apt-get (for the SLURM executor tests)"; \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null 2>&1 \
		|| { apt-get update -q >/dev/null 2>&1 \
		     && apt-get install -y -q --no-install-recommends slurm-wlm munge >/dev/null 2>&1; } \
		|| echo "slurm-wlm could not be installed: the SLURM cluster tests will skip"; \
	else \
		echo "no SLURM and no root apt-get: the SLURM cluster tests will skip"; \
	fi

clean-venv:
	rm -rf $(VENV)
