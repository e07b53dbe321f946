"""Name -> "module:attribute" tables, imported only when a name is used.

Lazy on purpose (AlgoPerf's import_workload): the CLI process must never import a framework,
and a framework that is not installed becomes an `unavailable` row, not an ImportError.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from types import ModuleType

from harness.spec import BadInput, WorkloadSpec

WORKLOADS: dict[str, str] = {
    "matmul": "workloads.matmul:SPEC",
    "mnist-small": "workloads.mnist:SMALL",
    "mnist-wide": "workloads.mnist:WIDE",
    "mnist-ddp": "workloads.mnist_ddp:SPEC",
    "jacobian": "workloads.jacobian:SPEC",
    "elementwise": "workloads.elementwise:SPEC",
    "transfer": "workloads.transfer:SPEC",
}

# Framework name -> (backend package, the import names it needs, comma-separated).
FRAMEWORKS: dict[str, tuple[str, str]] = {
    "torch": ("backends.torch", "torch"),
    "tensorflow": ("backends.tensorflow", "tensorflow"),
    "numpy": ("backends.numpy", "numpy"),
    # --- issue 18: JAX, and Keras 3 on each of its backends (one process per backend) ---
    "jax": ("backends.jax", "jax,optax"),
    "keras-jax": ("backends.keras_jax", "keras,jax"),
    "keras-torch": ("backends.keras_torch", "keras,torch"),
    "keras-tensorflow": ("backends.keras_tensorflow", "keras,tensorflow"),
}

# Import name -> the pyproject extra that installs it, for the `unavailable` reason's hint
# (a framework whose import name is not listed is hinted with its own name).
INSTALL_EXTRAS: dict[str, str] = {"jax": "jax", "optax": "jax", "keras": "keras",
                                  "torch": "torch", "tensorflow": "tensorflow"}

# Backends whose folders must mirror each other file for file (numpy is a CPU baseline only).
MIRRORED_FRAMEWORKS = ("torch", "tensorflow")

PLUGINS_ENV = "HARNESS_PLUGINS"


def _load_plugins() -> None:
    """Merge WORKLOADS / FRAMEWORKS from modules named in $HARNESS_PLUGINS (comma-separated).

    Why: extra workloads and backends (the test suite's fault-injection backend, a user's own
    workload) must reach worker processes too; the environment is what both processes share.
    """
    for module_name in filter(None, os.environ.get(PLUGINS_ENV, "").split(",")):
        plugin = importlib.import_module(module_name.strip())
        WORKLOADS.update(getattr(plugin, "WORKLOADS", {}))
        FRAMEWORKS.update(getattr(plugin, "FRAMEWORKS", {}))


_load_plugins()


def load_workload(name: str) -> WorkloadSpec:
    """The spec registered under `name`; BadInput naming the valid ones otherwise."""
    if name not in WORKLOADS:
        raise BadInput(f"unknown workload {name!r}; valid: {', '.join(WORKLOADS)}")
    module_name, attribute = WORKLOADS[name].split(":")
    return getattr(importlib.import_module(module_name), attribute)


def check_framework_name(name: str) -> None:
    if name not in FRAMEWORKS:
        raise BadInput(f"unknown framework {name!r}; valid: {', '.join(FRAMEWORKS)}")


def framework_installed(name: str) -> tuple[bool, str]:
    """Whether every package the framework needs can be imported, found without importing."""
    for import_name in FRAMEWORKS[name][1].split(","):
        if importlib.util.find_spec(import_name) is None:
            extra = INSTALL_EXTRAS.get(import_name, name)
            return False, f"{import_name} is not installed (pip install 'harness[{extra}]')"
    return True, ""


def backend_module(framework: str, module: str) -> ModuleType:
    """Import backends/<framework>/<module>.py (in a worker process only)."""
    package = FRAMEWORKS[framework][0]
    return importlib.import_module(f"{package}.{module}")


def backend_has_module(framework: str, module: str) -> bool:
    package = FRAMEWORKS[framework][0]
    return importlib.util.find_spec(f"{package}.{module}") is not None
