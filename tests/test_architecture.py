"""The package layout holds: imports inside harness/ point one way, from the CLI down to the spec."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[1] / "harness"

# Lowest first: a module may import its own layer and the layers below it, never above.
LAYERS = [
    ("harness.spec", "harness.backend", "harness.core.units"),
    ("harness.core",),
    ("harness.data",),
    ("harness.measure",),
    ("harness.analysis",),
    ("harness.run",),
    ("harness.report",),
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


def module_name(path: Path) -> str:
    parts = list(path.relative_to(HARNESS.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path) -> list[str]:
    """Every harness module the file imports, lazy imports inside functions included."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return [name for name in names if name == "harness" or name.startswith("harness.")]


MODULES = sorted(HARNESS.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(HARNESS.parent)))
def test_imports_point_down_the_layers(path: Path) -> None:
    here = module_name(path)
    upward = []
    for target in imported_modules(path):
        # `from harness.report import figures` names a module; `from harness import api` too.
        if target == "harness" or layer_of(target) <= layer_of(here):
            continue
        if here.startswith(target + "."):  # a package's own parent, e.g. lazily through harness
            continue
        upward.append(target)
    assert not upward, f"{here} (layer {layer_of(here)}) imports upward: {upward}"


def test_the_layer_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The check itself can fail: a measure module importing the report is an upward import."""
    planted = tmp_path / "bad.py"
    planted.write_text("from harness.report.tables import sort_cells\n")
    targets = imported_modules(planted)
    assert any(layer_of(t) > layer_of("harness.measure.timing") for t in targets)
