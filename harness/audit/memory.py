"""The peak-memory table's figures (harness.report.views.memory MEMORY_FAMILY): a cell's host
peak RSS (one per worker) and the largest device peaks of its cases, as run.json stored them;
'-' held to a cell that has no such peak."""

from __future__ import annotations

from collections.abc import Iterable

from harness.audit.ledger import FigureCheck
from harness.audit.pool import Pool, _experiment_matches
from harness.audit.printed import BYTES
from harness.core.units import format_bytes
from harness.report.views.memory import MEMORY_COLUMNS


def check_peak(check: FigureCheck, pool: Pool) -> None:
    subject = check.figure.subject
    found = pool.cells_named(subject, [
        document for document in pool.documents if document.machine == subject.get("machine")
        and _experiment_matches(subject.get("experiment", ""), document)])
    if len(found) != 1:
        check.cannot(f"{len(found)} cells in run.json match")
        return
    cell, text = found[0], check.figure.text
    value = {MEMORY_COLUMNS["peak_host_memory_bytes"]: cell.peak_host_memory_bytes,
             MEMORY_COLUMNS["peak_device_allocated_bytes"]: _largest(
                 c.peak_device_allocated_bytes for c in cell.cases),
             MEMORY_COLUMNS["peak_device_reserved_bytes"]: _largest(
                 c.peak_device_reserved_bytes for c in cell.cases)}.get(check.figure.name)
    if text == "-" or value is None:
        check.verdict((text == "-") == (value is None), text, format_bytes(value))
    else:
        check.reads(BYTES, float(value))


def _largest(values: Iterable[int | None]) -> int | None:
    known = [value for value in values if value is not None]
    return max(known) if known else None
