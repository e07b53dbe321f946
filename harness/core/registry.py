"""Where workloads and frameworks come from: name -> "module:attribute", loaded on first use.

Three sources, later ones overriding earlier ones:
1. the built-in tables below (so a source checkout works without `pip install`);
2. Python entry points, groups `harness.workloads` and `harness.frameworks`: how an installed
   plugin package adds its own (see examples/harness-softmax), as pytest and benchopt do;
3. modules named in $HARNESS_PLUGINS (comma-separated) with WORKLOADS / FRAMEWORKS dicts: for
   quick experiments and the test suite's fault-injection backend.
Lazy on purpose (AlgoPerf's import_workload): the CLI process never imports a framework, and a
framework or plugin that cannot load becomes an `unavailable` row with its reason, never a
traceback. Loading a FrameworkSpec or WorkloadSpec imports plain data only.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

from harness.spec import BadInput, FrameworkSpec, WorkloadSpec

WORKLOAD_GROUP = "harness.workloads"
FRAMEWORK_GROUP = "harness.frameworks"
PLUGINS_ENV = "HARNESS_PLUGINS"

BUILTIN_WORKLOADS: dict[str, str] = {
    "matmul": "workloads.matmul:SPEC",
    "mnist-small": "workloads.mnist:SMALL",
    "mnist-wide": "workloads.mnist:WIDE",
    "mnist-ddp": "workloads.mnist_ddp:SPEC",
    "jacobian": "workloads.jacobian:SPEC",
    "elementwise": "workloads.elementwise:SPEC",
    "transfer": "workloads.transfer:SPEC",
}
BUILTIN_FRAMEWORKS: dict[str, str] = {
    "torch": "backends.torch:FRAMEWORK",
    "tensorflow": "backends.tensorflow:FRAMEWORK",
    "numpy": "backends.numpy:FRAMEWORK",
    "jax": "backends.jax:FRAMEWORK",
    "keras-jax": "backends.keras_jax:FRAMEWORK",
    "keras-torch": "backends.keras_torch:FRAMEWORK",
    "keras-tensorflow": "backends.keras_tensorflow:FRAMEWORK",
}

WORKLOADS: dict[str, str] = dict(BUILTIN_WORKLOADS)
# Values: "module:attr" of a FrameworkSpec, or (backend package, import name) from old plugins.
FRAMEWORKS: dict[str, Any] = dict(BUILTIN_FRAMEWORKS)
# Plugin problems found while registering: shown once as warning lines, never raised.
LOAD_WARNINGS: list[str] = []


class PluginUnavailable(BadInput):
    """A registered workload or framework whose module failed to load (reason in message)."""


def _entry_points(group: str) -> dict[str, str]:
    try:
        found = importlib.metadata.entry_points(group=group)
    except Exception as exc:  # noqa: BLE001 - broken metadata must not break the CLI
        LOAD_WARNINGS.append(f"entry points of {group} unreadable: {exc}")
        return {}
    return {entry.name: entry.value for entry in found}


def _env_plugins() -> None:
    """Merge WORKLOADS / FRAMEWORKS from modules named in $HARNESS_PLUGINS.

    Why the environment: worker processes must see the same plugins as the CLI.
    """
    for module_name in filter(None, (part.strip() for part in
                                     os.environ.get(PLUGINS_ENV, "").split(","))):
        try:
            plugin = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - one warning line, the rest still works
            LOAD_WARNINGS.append(f"plugin module {module_name!r} ($HARNESS_PLUGINS) failed to "
                                 f"import: {type(exc).__name__}: {exc}")
            continue
        WORKLOADS.update(getattr(plugin, "WORKLOADS", {}))
        FRAMEWORKS.update(getattr(plugin, "FRAMEWORKS", {}))


def _register() -> None:
    WORKLOADS.update(_entry_points(WORKLOAD_GROUP))
    FRAMEWORKS.update(_entry_points(FRAMEWORK_GROUP))
    _env_plugins()


_register()


def _load_attribute(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    module = importlib.import_module(module_name)
    return getattr(module, attribute) if attribute else module


def load_workload(name: str) -> WorkloadSpec:
    """The spec registered under `name`; BadInput if unknown, PluginUnavailable if broken."""
    if name not in WORKLOADS:
        raise BadInput(f"unknown workload {name!r}; valid: {', '.join(WORKLOADS)}")
    try:
        spec = _load_attribute(WORKLOADS[name])
    except Exception as exc:  # noqa: BLE001 - a broken plugin is a reason, not a traceback
        raise PluginUnavailable(f"workload {name!r} ({WORKLOADS[name]}) failed to load: "
                                f"{type(exc).__name__}: {exc}") from None
    if not isinstance(spec, WorkloadSpec):
        raise PluginUnavailable(f"workload {name!r}: {WORKLOADS[name]} is not a WorkloadSpec")
    return spec


def load_framework(name: str) -> FrameworkSpec:
    """The FrameworkSpec registered under `name` (old (package, import) tuples converted)."""
    check_framework_name(name)
    target = FRAMEWORKS[name]
    if isinstance(target, (tuple, list)):
        package, import_name = target
        return FrameworkSpec(name=name, import_name=import_name, package=package,
                             install_hint=f"pip install 'harness[{name}]'")
    try:
        spec = _load_attribute(target)
    except Exception as exc:  # noqa: BLE001
        raise PluginUnavailable(f"framework {name!r} ({target}) failed to load: "
                                f"{type(exc).__name__}: {exc}") from None
    if not isinstance(spec, FrameworkSpec):
        raise PluginUnavailable(f"framework {name!r}: {target} is not a FrameworkSpec")
    return spec


def check_framework_name(name: str) -> None:
    if name not in FRAMEWORKS:
        raise BadInput(f"unknown framework {name!r}; valid: {', '.join(FRAMEWORKS)}")


def framework_installed(name: str) -> tuple[bool, str]:
    """Whether the framework can be imported, found without importing it."""
    try:
        spec = load_framework(name)
    except PluginUnavailable as exc:
        return False, str(exc)
    for import_name in (spec.import_name, *spec.also_requires):
        if importlib.util.find_spec(import_name) is None:
            hint = spec.install_hint or f"pip install {import_name}"
            return False, f"{import_name} is not installed ({hint})"
    return True, ""


def backend_module(framework: str, module: str) -> ModuleType:
    """Import <framework's backend package>.<module> (in a worker process only)."""
    return importlib.import_module(f"{load_framework(framework).package}.{module}")


def backend_has_module(framework: str, module: str) -> bool:
    return importlib.util.find_spec(f"{load_framework(framework).package}.{module}") is not None


def implementation_name(spec: WorkloadSpec, framework: str) -> str:
    return spec.implementation(framework, load_framework(framework).package)


def implementation_module(spec: WorkloadSpec, framework: str) -> ModuleType:
    """The module that runs `spec` in `framework` (in a worker process only)."""
    return importlib.import_module(implementation_name(spec, framework))


def warn_once(stream: Any = None) -> None:
    """Print each plugin warning once, as one line (the CLI calls this before a command)."""
    while LOAD_WARNINGS:
        print(f"harness: warning: {LOAD_WARNINGS.pop(0)}", file=stream or sys.stderr)
