"""The peak-memory table's figures (harness.report.views.memory MEMORY_FAMILY): a cell's host
peak RSS (one per worker) and the largest device peaks of its cases, as run.json stored them;
'-' held to a cell that has no such peak."""

from __future__ import annotations

from collections.abc import Iterable

from harness.audit.ledger import Ledger
from harness.audit.pool import Pool, _experiment_matches, _subject_of
from harness.audit.printed import printed_bytes
from harness.core.units import format_bytes
from harness.report.figure import Figure
from harness.report.views.memory import MEMORY_COLUMNS


def check_peak(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    subject = figure.subject
    cell_name = tuple(subject.get(name) for name in ("framework", "device", "variant"))
    found = [cell for document in pool.documents
             if _experiment_matches(subject.get("experiment", ""), document)
             and document.machine == subject.get("machine") for cell in document.cells
             if (cell.framework, cell.device, cell.variant) == cell_name]
    label = _subject_of(dict(subject))
    if len(found) != 1:
        ledger.cannot(label, figure.name, where, f"{len(found)} cells in run.json match")
        return
    cell = found[0]
    value = {MEMORY_COLUMNS["peak_host_memory_bytes"]: cell.peak_host_memory_bytes,
             MEMORY_COLUMNS["peak_device_allocated_bytes"]: _largest(
                 c.peak_device_allocated_bytes for c in cell.cases),
             MEMORY_COLUMNS["peak_device_reserved_bytes"]: _largest(
                 c.peak_device_reserved_bytes for c in cell.cases)}.get(figure.name)
    if figure.text == "-" or value is None:
        ledger.verdict(label, figure.name, where, (figure.text == "-") == (value is None),
                       figure.text, format_bytes(value))
        return
    ledger.printed(label, figure.name, where, printed_bytes(figure.text), float(value),
                   format_bytes)


def _largest(values: Iterable[int | None]) -> int | None:
    known = [value for value in values if value is not None]
    return max(known) if known else None
