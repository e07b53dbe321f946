"""The package layout holds: imports inside harness/ point one way, from the CLI to the spec,
and the backends and workloads (backends/, workloads/) reach the engine only through the
contract below them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "harness"

# The step features a backend records in its worker (a record, the recording's own clock, the
# host-speed loops, the device profiles it prices against, XLA's program text): measurement,
# so they sit with harness.measure, below the backends that record them.
RECORDING = ("harness.predict.features", "harness.predict.hlo", "harness.predict.hostspeed",
             "harness.predict.jaxfeatures", "harness.predict.profile", "harness.predict.timed")
# The plug-ins: framework adapters and workloads (harness/backends and harness/workloads are
# links to backends/ and workloads/). Above the contract (spec, backend, core, data, measure),
# below everything that runs, predicts and reports: they reach the engine only through it.
PLUGINS = ("harness.backends", "harness.workloads")

# Lowest first: a module may import its own layer and the layers below it, never above.
LAYERS = [
    ("harness.spec", "harness.variants", "harness.backend", "harness.core.units"),
    ("harness.core",),
    ("harness.data",),
    ("harness.measure", *RECORDING),
    PLUGINS,
    ("harness.analysis",),
    ("harness.run",),
    ("harness.predict",),
    ("harness.report",),
    ("harness.audit",),
    ("harness.api",),
    ("harness.cli", "harness"),
]


def layer_of(module: str) -> int:
    """The layer of a dotted module name: the longest prefix that a layer names."""
    best, best_length = None, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    if best is None:
        raise AssertionError(f"{module} is in no layer; add its package to LAYERS")
    return best


ROOT = HARNESS.parent
# The plug-ins' own trees, imported as harness.backends.* and harness.workloads.*.
PLUGIN_TREES = [ROOT / "backends", ROOT / "workloads"]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] != "harness":  # backends/x.py is harness.backends.x
        parts = ["harness", *parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


# "module" or "module:attribute", the forms of registry entries, entry points and child modules.
MODULE_STRING = re.compile(r"^(harness(?:\.\w+)*)(?::[\w.]+)?$")
# Where the core names the plug-ins: the registry's entry points (strings, loaded on demand).
ENTRY_POINTS = "harness.core.registry"


def is_plugin(module: str) -> bool:
    return any(module == top or module.startswith(top + ".") for top in PLUGINS)


def module_exists(name: str) -> bool:
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def resolved(name: str) -> str | None:
    """The longest prefix of a dotted name that is a module file or package in this repository."""
    while name and not module_exists(name):
        name = name.rpartition(".")[0]
    return name or None


def docstring_ids(tree: ast.AST) -> set[int]:
    """ids of docstring nodes: documentation, not a reference the code follows."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def referenced_modules(source: str) -> list[tuple[str, str]]:
    """(module, how) for every harness or backends module the source reaches, how in
    {"import", "string"}: import statements (lazy ones inside functions included), and string
    constants naming a module, such as "harness.usermodel.spec:spec_for_name" in a registry,
    importlib.import_module("harness.x") or run_json_child("harness.x", ...). Names are cut back
    to the module that exists, so "from harness.data import store" and "harness.data.store:load"
    both name harness.data.store; a string naming no module ("harness.workloads", an entry-point
    group) is no reference."""
    tree = ast.parse(source)
    skipped = docstring_ids(tree)
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        how = "import"
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in skipped and (match := MODULE_STRING.match(node.value))):
            names, how = [match.group(1)], "string"
        for name in names:
            if name.split(".")[0] != "harness":
                continue
            module = resolved(name)
            if module is None or (how == "string" and module != name):
                continue  # a string counts only when it names a whole module
            found.append((module, how))
    return found


# Known violations, each a (module, the module it reaches) pair. The last ones went when
# harness/usermodel/ moved out of the core (its framework code to backends/, its spec to
# workloads/usermodel/). Any reference not listed here fails.
KNOWN_VIOLATIONS: set[tuple[str, str]] = set()  # none left: keep it that way


def imported_modules(path: Path, here: str = "") -> list[str]:
    """Every harness module the file reaches, by import statement or by a module string; the
    registry's entry points (HERE the registry, a string naming a plug-in) are the door the
    core opens to the plug-ins, not an import."""
    return [module for module, how in referenced_modules(path.read_text())
            if module.split(".")[0] == "harness"
            and not (here == ENTRY_POINTS and how == "string" and is_plugin(module))]


CORE_MODULES = sorted(HARNESS.rglob("*.py"))  # rglob does not enter the two links
PLUGIN_MODULES = sorted(path for tree in PLUGIN_TREES for path in tree.rglob("*.py"))
MODULES = CORE_MODULES + PLUGIN_MODULES


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(HARNESS.parent)))
def test_imports_point_down_the_layers(path: Path) -> None:
    here = module_name(path)
    upward = []
    for target in imported_modules(path, here):
        # `from harness.report import figures` names a module; `from harness import api` too.
        if target == "harness" or layer_of(target) <= layer_of(here):
            continue
        if here.startswith(target + "."):  # a package's own parent, e.g. lazily through harness
            continue
        if (here, target) in KNOWN_VIOLATIONS:
            continue
        upward.append(target)
    assert not upward, f"{here} (layer {layer_of(here)}) imports upward: {upward}"


def test_the_layer_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The check itself can fail: a measure module importing the report is an upward import."""
    planted = tmp_path / "bad.py"
    planted.write_text("from harness.report.tables import sort_cells\n")
    targets = imported_modules(planted)
    assert any(layer_of(t) > layer_of("harness.measure.timing") for t in targets)


def test_the_layer_check_catches_a_module_named_in_a_string() -> None:
    """A module path written as a string is an import: a registry entry, import_module, a child."""
    here = layer_of("harness.core.units")
    for planted in ('X = "harness.report.views:foo"\n',
                    'importlib.import_module("harness.report.tables")\n',
                    'run_json_child("harness.report.summary", [], cell, 5)\n'):
        targets = imported_modules_of(planted)
        assert targets and all(layer_of(target) > here for target in targets), planted
    # Names of no module are not references: entry-point groups, commands, prose.
    # ("harness.workloads", the other group, is also the workloads package's name now.)
    assert imported_modules_of('G = "harness.frameworks"\nC = ["harness.compare"]\n') == []


def imported_modules_of(source: str) -> list[str]:
    return [module for module, _ in referenced_modules(source) if module.startswith("harness")]


# --- the core reaches backends/ only through the registry's declared entry points -----------

def declared_framework_packages() -> set[str]:
    """The packages of the registry's built-in framework entries
    ("harness.backends.torch:FRAMEWORK"),
    the same strings pyproject.toml declares as `harness.frameworks` entry points: a backend's
    top-level package, whose __init__ holds only its FrameworkSpec."""
    from harness.core.registry import BUILTIN_FRAMEWORKS

    packages = {value.partition(":")[0] for value in BUILTIN_FRAMEWORKS.values()}
    assert all(package.count(".") == 2 for package in packages), packages
    return packages


def backend_references(module: str, source: str) -> list[str]:
    """The backends modules a harness module reaches other than through a declared entry point
    written in the registry: framework code is imported only by a worker, via the registry."""
    declared = declared_framework_packages()
    bad = []
    for target, how in referenced_modules(source):
        if not target.startswith("harness.backends."):
            continue
        if module == "harness.core.registry" and how == "string" and target in declared:
            continue
        if (module, target) not in KNOWN_VIOLATIONS:
            bad.append(f"{target} ({how})")
    return bad


def test_every_plugin_module_is_checked() -> None:
    """The layer check walks backends/ and workloads/ too: no folder is left out."""
    names = {module_name(path) for path in MODULES}
    assert {"harness.backends.torch.features", "harness.workloads.usermodel.plan"} <= names
    assert all(layer_of(module_name(path)) == LAYERS.index(PLUGINS) for path in PLUGIN_MODULES)


def test_a_plugin_importing_the_engine_is_caught() -> None:
    """A workload reaching the runner, or a backend the analysis, is an upward import."""
    here = layer_of("harness.workloads.usermodel.plan")
    for planted in ("from harness.run.runner import run_json_child\n",
                    "from harness.analysis.fixchoice import choose\n",
                    'PRELOAD = ("torch", "harness.run.worker")\n'):
        targets = imported_modules_of(planted)
        assert targets and all(layer_of(target) > here for target in targets), planted


@pytest.mark.parametrize("path", CORE_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_core_imports_no_backend(path: Path) -> None:
    here = module_name(path)
    bad = backend_references(here, path.read_text())
    assert not bad, f"{here} reaches backends/ outside the registry's entry points: {bad}"


def test_the_backend_check_catches_imports_and_strings() -> None:
    assert backend_references("harness.run.worker", "from harness.backends.torch.device import x\n")
    source = 'M = "harness.backends.torch.mnist:make_task"\n'
    assert backend_references("harness.run.worker", source)
    assert backend_references("harness.core.registry", 'M = "harness.backends.torch.mnist"\n')
    source = 'F = "harness.backends.torch:FRAMEWORK"\n'
    assert not backend_references("harness.core.registry", source)


def test_every_known_violation_still_occurs() -> None:
    """A pair that no longer occurs is removed from KNOWN_VIOLATIONS, so the list only shrinks."""
    seen = {(module_name(path), target) for path in MODULES
            for target, _ in referenced_modules(path.read_text())}
    stale = KNOWN_VIOLATIONS - seen
    assert not stale, f"fixed, so remove from KNOWN_VIOLATIONS: {sorted(stale)}"
