"""One name means one thing: no public name (a top-level def or class not starting with _) is
defined in two modules of harness/. A Protocol class is a contract, not a second meaning; the
few names below are the same thing under one name on purpose, each with its reason."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1] / "harness"

ALLOWED: dict[str, str] = {
    # `python -m harness.x`: every child module's entry point has the name Python's idiom gives.
    "main": "the entry point of a module run as `python -m`",
    # `harness.compare()` and `harness.load()` import harness.api on first call, so that
    # `import harness` stays light: the same function, reached from the package.
    "compare": "harness/__init__.py's lazy door to harness.api.compare",
    "load": "harness/__init__.py's lazy door to harness.api.load",
}


def is_protocol(node: ast.ClassDef) -> bool:
    return any((isinstance(base, ast.Name) and base.id == "Protocol")
               or (isinstance(base, ast.Attribute) and base.attr == "Protocol")
               for base in node.bases)


def public_definitions(source: str) -> list[str]:
    """The module's public top-level functions and classes, Protocol classes aside."""
    return [node.name for node in ast.parse(source).body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and not node.name.startswith("_")
            and not (isinstance(node, ast.ClassDef) and is_protocol(node))]


def defined_twice(paths: list[Path], root: Path) -> dict[str, list[str]]:
    """{name: the modules (under ROOT) defining it} of every name defined in two or more."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        for name in public_definitions(path.read_text()):
            where[name].append(str(path.relative_to(root)))
    return {name: found for name, found in where.items() if len(found) > 1}


def test_no_public_name_is_defined_in_two_modules() -> None:
    # rglob does not enter the links to backends/ and workloads/: harness/ itself.
    twice = defined_twice(sorted(HARNESS.rglob("*.py")), HARNESS.parent)
    unexplained = {name: found for name, found in twice.items() if name not in ALLOWED}
    assert not unexplained, f"one name, two meanings: {unexplained}"
    stale = set(ALLOWED) - set(twice)
    assert not stale, f"defined once now, so remove from ALLOWED: {sorted(stale)}"


def test_the_scan_sees_a_second_definition_and_lets_a_protocol_pass(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def predict():\n    pass\n\nclass _Hidden:\n    pass\n")
    (tmp_path / "b.py").write_text("class predict:\n    pass\n\ndef _hidden():\n    pass\n")
    (tmp_path / "c.py").write_text("from typing import Protocol\n\n"
                                   "class Task(Protocol):\n    pass\n")
    (tmp_path / "d.py").write_text("class Task:\n    pass\n")
    found = {name: len(where) for name, where in
             defined_twice(sorted(tmp_path.glob("*.py")), tmp_path).items()}
    assert found == {"predict": 2}

