"""Diagnosis kinds are one enum (harness/core/diagnosis.py): no module of the product spells
one as a string literal, and a member is the very string run.json and the advice record hold."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from harness.core.diagnosis import BOUND_KINDS, DiagnosisKind
from tests.test_architecture import docstring_ids

ROOT = Path(__file__).resolve().parents[1]
HOME = ROOT / "harness" / "core" / "diagnosis.py"
SCANNED = [path for tree in ("harness", "backends", "workloads")
           for path in sorted((ROOT / tree).rglob("*.py")) if path != HOME]
# A kind as a whole string, or opening one ("launch-bound: busy 0.2 ms ..."): the word spelled
# where the member belongs. Prose that mentions a kind mid-sentence is not a kind.
SPELLED = re.compile(r"^\s*(" + "|".join(re.escape(kind.value) for kind in DiagnosisKind)
                     + r")(?![\w-])")


def spelled_kinds(source: str) -> list[tuple[int, str]]:
    """(line, string) of every string constant that spells a diagnosis kind (docstrings aside)."""
    tree = ast.parse(source)
    skipped = docstring_ids(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in skipped and SPELLED.match(node.value)]


def test_no_module_spells_a_diagnosis_kind() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for path in SCANNED
             for line, text in spelled_kinds(path.read_text())]
    assert not found, "use harness.core.diagnosis.DiagnosisKind:\n" + "\n".join(found)


def test_the_scan_catches_a_literal_and_a_text_that_opens_with_one() -> None:
    assert spelled_kinds('KIND = "launch-bound"\n')
    assert spelled_kinds('line = f"compute-bound near the ceiling: {x}"\n')
    assert spelled_kinds('NEEDS = {"copy-bound": "remove copies"}\n')
    assert not spelled_kinds('why = "a host-bound step gains nothing"\n')
    assert not spelled_kinds('def f():\n    """launch-bound: prose."""\n')


def test_a_member_is_its_stored_string() -> None:
    assert json.dumps({"kind": DiagnosisKind.LAUNCH}) == '{"kind": "launch-bound"}'
    assert f"{DiagnosisKind.HOST}: the CPU" == "host-bound: the CPU"
    assert DiagnosisKind("transfer-bound") is DiagnosisKind.TRANSFER
    assert {DiagnosisKind.MEMORY: 1}["memory-bound"] == 1  # a kind read back finds its entry
    assert DiagnosisKind.UNPROFILED not in BOUND_KINDS and len(BOUND_KINDS) == 7
