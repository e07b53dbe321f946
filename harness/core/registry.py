"""Where workloads and frameworks come from: name -> "module:attribute", loaded on first use.

Three sources, later ones overriding earlier ones:
1. the built-in tables below (so a source checkout works without `pip install`);
2. Python entry points, groups `harness.workloads` and `harness.frameworks`: how an installed
   plugin package adds its own (see examples/harness-softmax), as pytest and benchopt do;
3. the plugin modules of the run's settings (harness.core.settings: HARNESS_PLUGINS,
   comma-separated module names, importable from PYTHONPATH, or paths of .py files) with
   WORKLOADS / FRAMEWORKS dicts, whose values are "module:attribute" strings or the
   WorkloadSpec / FrameworkSpec objects themselves: for quick experiments and the test suite's
   fault-injection backend. A module that fails to import is one warning line and a workload
   of its name that lists as `unavailable` with the reason. They are merged by whoever holds
   the settings (`use_plugins`: the plan, a worker from its argument list), and HARNESS_PLUGINS's
   at the first lookup, so a worker loads the plugins its settings name, never the ones of an
   environment it inherited (the runner keeps the variable from it).
A workload is known by the name it is registered under (an entry point's name, a WORKLOADS
key), whatever its spec's `name` says. `model-<stem>`, where no workload of that name is
registered, names a user's model file
(`harness compare --model FILE`, the workload plugin in workloads/usermodel/, reached through
`model_plugin` by name, as any workload is).
Lazy on purpose (AlgoPerf's import_workload): the CLI process never imports a framework, and a
framework or plugin that cannot load becomes an `unavailable` row with its reason, never a
traceback. Loading a FrameworkSpec or WorkloadSpec imports plain data only.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from types import ModuleType
from typing import Any

from harness.core import settings
from harness.core.fixes import Catalogue, Fix
from harness.spec import BadInput, FrameworkSpec, WorkloadSpec

WORKLOAD_GROUP = "harness.workloads"
FRAMEWORK_GROUP = "harness.frameworks"
MODEL_PREFIX = "model-"
# The your-own-model workload plugin: its spec for `model-<stem>` names, and the modules the
# CLI and API call for --model (plan: inspect and prepare in child processes; describe).
MODEL_PLUGIN = "harness.workloads.usermodel"
MODEL_SPEC = f"{MODEL_PLUGIN}.spec:spec_for_name"
# Its fix catalogue (harness.core.fixes.Catalogue), which plugin modules' FIXES extend.
MODEL_FIXES = f"{MODEL_PLUGIN}.fixes:CATALOGUE"

BUILTIN_WORKLOADS: dict[str, str] = {
    "matmul": "harness.workloads.matmul:SPEC",
    "mnist-small": "harness.workloads.mnist:SMALL",
    "mnist-wide": "harness.workloads.mnist:WIDE",
    "mnist-ddp": "harness.workloads.mnist_ddp:SPEC",
    "jacobian": "harness.workloads.jacobian:SPEC",
    "elementwise": "harness.workloads.elementwise:SPEC",
    "transfer": "harness.workloads.transfer:SPEC",
}
BUILTIN_FRAMEWORKS: dict[str, str] = {
    "torch": "harness.backends.torch:FRAMEWORK",
    "tensorflow": "harness.backends.tensorflow:FRAMEWORK",
    "numpy": "harness.backends.numpy:FRAMEWORK",
    "jax": "harness.backends.jax:FRAMEWORK",
    "keras-jax": "harness.backends.keras_jax:FRAMEWORK",
    "keras-torch": "harness.backends.keras_torch:FRAMEWORK",
    "keras-tensorflow": "harness.backends.keras_tensorflow:FRAMEWORK",
}

# Values: "module:attr" (or "path/to/file.py:attr") of a WorkloadSpec, or the spec itself.
WORKLOADS: dict[str, str | WorkloadSpec] = dict(BUILTIN_WORKLOADS)
# Values: "module:attr" of a FrameworkSpec, the spec itself, or (backend package, import name)
# from old plugins.
FRAMEWORKS: dict[str, str | FrameworkSpec | tuple[str, str]] = dict(BUILTIN_FRAMEWORKS)
# Plugin problems found while registering: shown once as warning lines, never raised.
LOAD_WARNINGS: list[str] = []
# The plugin modules merged so far, each once.
PLUGINS_LOADED: list[str] = []
# Fixes the plugin modules add to the user-model catalogue (their FIXES), in load order.
PLUGIN_FIXES: list[Fix] = []


class PluginUnavailable(BadInput):
    """A registered workload or framework whose module failed to load (reason in message)."""


def _entry_points(group: str) -> dict[str, str]:
    try:
        found = importlib.metadata.entry_points(group=group)
    except Exception as exc:  # noqa: BLE001 - broken metadata must not break the CLI
        LOAD_WARNINGS.append(f"entry points of {group} unreadable: {exc}")
        return {}
    return {entry.name: entry.value for entry in found}


def use_plugins(module_names: tuple[str, ...] | list[str]) -> None:
    """Merge WORKLOADS / FRAMEWORKS from these plugin modules (each once per process)."""
    for module_name in module_names:
        if module_name in PLUGINS_LOADED:
            continue
        PLUGINS_LOADED.append(module_name)
        try:
            plugin = _import(module_name)
        except Exception as exc:  # noqa: BLE001 - one warning line, the rest still works
            LOAD_WARNINGS.append(f"plugin module {module_name!r} (HARNESS_PLUGINS) failed to "
                                 f"import: {type(exc).__name__}: {exc}")
            # Listed as unavailable under its own name, the reason found again on loading.
            WORKLOADS.setdefault(_plugin_label(module_name), f"{module_name}:WORKLOADS")
            continue
        WORKLOADS.update(getattr(plugin, "WORKLOADS", {}))
        FRAMEWORKS.update(getattr(plugin, "FRAMEWORKS", {}))
        PLUGIN_FIXES.extend(item for item in getattr(plugin, "FIXES", ()) if isinstance(item, Fix))


def _register() -> None:
    WORKLOADS.update(_entry_points(WORKLOAD_GROUP))
    FRAMEWORKS.update(_entry_points(FRAMEWORK_GROUP))


def _with_plugins() -> None:
    """HARNESS_PLUGINS's modules merged (harness.core.settings.environment_plugins); a run's
    own settings' plugins are merged by whoever holds them (the plan, a resumed session, a
    worker, a helper child), with use_plugins."""
    use_plugins(settings.environment_plugins())


def workload_names() -> list[str]:
    """Every registered workload's name, plugins included."""
    _with_plugins()
    return list(WORKLOADS)


def framework_names() -> list[str]:
    """Every registered framework's name, plugins included."""
    _with_plugins()
    return list(FRAMEWORKS)


def _plugin_label(module_name: str) -> str:
    """A plugin's name in listings: the module name, or a file's stem."""
    return os.path.splitext(os.path.basename(module_name))[0] if module_name.endswith(".py") \
        else module_name


def _import(module_name: str) -> ModuleType:
    """A module by dotted name, or a .py file by path (loaded once, under its stem's name)."""
    if not module_name.endswith(".py"):
        return importlib.import_module(module_name)
    path = os.path.abspath(module_name)
    unique = "harness_plugin_" + _plugin_label(path)
    if unique in sys.modules:
        return sys.modules[unique]
    found = importlib.util.spec_from_file_location(unique, path)
    if found is None or found.loader is None or not os.path.isfile(path):
        raise ImportError(f"no such plugin file: {path}")
    module = importlib.util.module_from_spec(found)
    sys.modules[unique] = module
    try:
        found.loader.exec_module(module)
    except BaseException:
        del sys.modules[unique]
        raise
    return module


def _load_attribute(target: Any) -> Any:
    if not isinstance(target, str):  # the object itself (a spec in a plugin's WORKLOADS)
        return target
    # "package.module:attr", or "path/to/file.py:attr" (a path may hold colons of its own)
    module_name, _, attribute = target.rpartition(":") if ".py:" in target \
        else target.partition(":")
    module = _import(module_name)
    return getattr(module, attribute) if attribute else module


def load_workload(name: str) -> WorkloadSpec:
    """The spec registered under `name`; BadInput if unknown, PluginUnavailable if broken.

    The spec answers to the registered name even where its own `name` differs (an entry point
    named otherwise), so every cell's worker finds it again by that name.
    """
    _with_plugins()
    if name.startswith(MODEL_PREFIX) and name not in WORKLOADS:  # a user's model file
        return _load_attribute(MODEL_SPEC)(name)
    if name not in WORKLOADS:
        raise BadInput(f"unknown workload {name!r}; valid: {', '.join(WORKLOADS)}")
    try:
        spec = _load_attribute(WORKLOADS[name])
    except Exception as exc:  # noqa: BLE001 - a broken plugin is a reason, not a traceback
        raise PluginUnavailable(f"workload {name!r} ({WORKLOADS[name]}) failed to load: "
                                f"{type(exc).__name__}: {exc}") from None
    if not isinstance(spec, WorkloadSpec):
        raise PluginUnavailable(f"workload {name!r}: {WORKLOADS[name]} is not a WorkloadSpec")
    return spec if spec.name == name else dataclasses.replace(spec, name=name)


def model_plugin(module: str) -> ModuleType:
    """A module of the your-own-model plugin (`plan`, `describe`), imported on first use."""
    return importlib.import_module(f"{MODEL_PLUGIN}.{module}")


def fix_catalogue() -> Catalogue:
    """The user-model workload's fix catalogue, with the fixes of the settings' plugins after
    its own (PluginUnavailable where it cannot load or is not a Catalogue)."""
    _with_plugins()
    try:
        found = _load_attribute(MODEL_FIXES)
    except Exception as exc:  # noqa: BLE001 - a broken plugin is a reason, not a traceback
        raise PluginUnavailable(f"the fix catalogue ({MODEL_FIXES}) failed to load: "
                                f"{type(exc).__name__}: {exc}") from None
    if not isinstance(found, Catalogue):
        raise PluginUnavailable(f"{MODEL_FIXES} is not a harness.core.fixes.Catalogue")
    return found.with_fixes(PLUGIN_FIXES) if PLUGIN_FIXES else found


def load_framework(name: str) -> FrameworkSpec:
    """The FrameworkSpec registered under `name` (old (package, import) tuples converted)."""
    check_framework_name(name)
    target = FRAMEWORKS[name]
    if isinstance(target, (tuple, list)):
        package, import_name = target
        return FrameworkSpec(name=name, import_name=import_name, package=package,
                             install_hint=f"pip install 'crossframe-harness[{name}]'")
    try:
        spec = _load_attribute(target)
    except Exception as exc:  # noqa: BLE001
        raise PluginUnavailable(f"framework {name!r} ({target}) failed to load: "
                                f"{type(exc).__name__}: {exc}") from None
    if not isinstance(spec, FrameworkSpec):
        raise PluginUnavailable(f"framework {name!r}: {target} is not a FrameworkSpec")
    return spec


def check_framework_name(name: str) -> None:
    _with_plugins()
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
    """The module that runs `spec` in `framework` (in a worker process only); a dotted name
    or the path of a .py file."""
    return _import(implementation_name(spec, framework))


def warn_once(stream: Any = None) -> None:
    """Print each plugin warning once, as one line (the CLI calls this before a command)."""
    while LOAD_WARNINGS:
        print(f"harness: warning: {LOAD_WARNINGS.pop(0)}", file=stream or sys.stderr)


_register()  # last: it uses the loaders above (plugins: at the first lookup)
