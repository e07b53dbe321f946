"""Every case of the runs a summary.md was drawn from, found by how the report names it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from harness.audit.measured import Measured, _param_text, is_valid
from harness.data.casekey import CaseKey
from harness.data.results import CellResult, RunDocument


def _experiment_matches(label: str, document: RunDocument) -> bool:
    """Whether a run belongs to the experiment a heading names ('transfer (n=200)')."""
    workload, _, rest = label.partition(" (")
    if workload != document.workload:
        return False
    for pair in rest.rstrip(")").split(", ") if rest else []:
        name, _, shown = pair.partition("=")
        value = document.params.get(name)
        if isinstance(value, str) and "/" in value:
            value = PurePath(value).name
        text = _param_text(value)
        if not (text == shown or (shown.endswith("...") and text.startswith(shown[:-3]))):
            return False
    return True


class Pool:
    """Every case of the runs a summary.md was drawn from, found by how the report names it."""

    def __init__(self, documents: list[RunDocument]) -> None:
        self.documents = documents
        self.cases = [Measured(document, cell, case) for document in documents
                      for cell in document.cells for case in cell.cases]
        self.machines = sorted({document.machine for document in documents}, key=len,
                               reverse=True)

    def select(self, experiment: str = "", machine: str = "", variant: str = "",
               framework: str = "", device: str = "", size: str | None = None,
               valid: bool = False) -> list[Measured]:
        """The cases that match (size: as printed, '' or '-' for a case outside the sweep);
        where several runs on one machine measured a case, the latest run's (as the report)."""
        size = "" if size == "-" else size
        if not any(_experiment_matches(experiment, d) for d in self.documents):
            experiment = ""  # a part of the report that spans experiments (energy, memory)
        found = [m for m in self.cases
                 if (not experiment or _experiment_matches(experiment, m.document))
                 and (not machine or m.document.machine == machine)
                 and (not variant or m.cell.variant == variant)
                 and (not framework or m.cell.framework == framework)
                 and (not device or m.cell.device == device)
                 and (size is None or size in (m.size_text, m.key.size_label))
                 and (not valid or is_valid(m.case))]
        return _latest(found)

    def document(self, run_id: str) -> RunDocument | None:
        return next((document for document in self.documents if document.run_id == run_id),
                    None)

    @staticmethod
    def cells_named(subject: Mapping[str, str],
                    documents: list[RunDocument]) -> list[CellResult]:
        """The cells of DOCUMENTS that SUBJECT names by framework, device and variant."""
        named = tuple(subject.get(name) for name in ("framework", "device", "variant"))
        return [cell for document in documents for cell in document.cells
                if (cell.framework, cell.device, cell.variant) == named]

    def one(self, **where: Any) -> Measured | str:
        """The one case that matches, or why there is not exactly one."""
        found = self.select(**where)
        if len(found) == 1:
            return found[0]
        named = ", ".join(f"{k}={v}" for k, v in where.items() if v not in ("", None))
        return f"{'no' if not found else len(found)} case(s) in run.json match {named}"


def _latest(found: list[Measured]) -> list[Measured]:
    """Of a case measured by several runs on one machine, the latest run's (as the report)."""
    newest: dict[CaseKey, Measured] = {}
    for item in found:
        current = newest.get(item.key)
        if current is None or (item.document.started or 0.0) > (current.document.started or 0.0):
            newest[item.key] = item
    return [item for item in found if newest[item.key] is item]


def _subject_of(where: dict[str, Any]) -> str:
    parts = [str(where.get(name) or "") for name in ("framework", "device", "variant")]
    size = where.get("size")
    return " ".join(part for part in parts if part) + (f" size {size}" if size else "")

