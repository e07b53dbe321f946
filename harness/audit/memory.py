"""The memory figures, recomputed from the peaks run.json stored: the peak-memory table's
(harness.report.views.memory MEMORY_FAMILY: a cell's host peak RSS, one per worker, and the
largest device peaks of its cases; '-' held to a cell that has no such peak), and the memory
fits' (FIT_FAMILY), refitted with numpy: the line's sizes, fixed part, per-sample part and
residual, the capacity, the largest batch predicted to fit and the stored predicted
crossover's side of it."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TypeGuard

import numpy as np

from harness.analysis.memoryfit import (
    DEVICE_RESERVE_BYTES,
    HOST_CASE_FIGURE,
    REQUIRED_CASE_FIGURE,
)
from harness.audit.ledger import FigureCheck
from harness.audit.pool import Pool, _experiment_matches
from harness.audit.printed import BYTES, _number, printed_general
from harness.core.units import device_kind, format_bytes
from harness.data.results import CellResult, RunDocument
from harness.report.views.memory import (
    CAPACITY,
    CROSSOVER,
    FIXED,
    LARGEST_BATCH,
    LARGEST_SIZE,
    MEMORY_COLUMNS,
    PER_SAMPLE,
    RESIDUAL,
    SIDE,
    SIZES,
)


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


def _memory_points(document: RunDocument, cell: CellResult) -> list[tuple[float, float]]:
    """(batch, bytes) of each case: on a GPU the memory its step must hold where two batch
    sizes or more have it (REQUIRED_CASE_FIGURE), else the device's reserved peak where known,
    else the allocated one; the case's own host peak on a CPU."""
    on_gpu = device_kind(cell.device) == "gpu"
    needed = [(float(batch), float(figure)) for batch, figure in
              ((case.case.get(document.sweep), case.extra.get(REQUIRED_CASE_FIGURE))
               for case in cell.cases)
              if _positive(batch) and _positive(figure)]
    if on_gpu and len({batch for batch, _ in needed}) >= 2:
        return needed
    points = []
    for case in cell.cases:
        batch = case.case.get(document.sweep)
        peak = (case.peak_device_reserved_bytes or case.peak_device_allocated_bytes
                if on_gpu else case.extra.get(HOST_CASE_FIGURE))
        if isinstance(batch, (int, float)) and not isinstance(batch, bool) and batch > 0 \
                and isinstance(peak, (int, float)) and peak > 0:
            points.append((float(batch), float(peak)))
    return points


def _positive(value: object) -> TypeGuard[float]:
    """A number above 0 (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def memory_capacity(document: RunDocument, cell: CellResult) -> float | None:
    """The bytes a cell may fill as the run recorded them (a GPU: less the assumed reserve)."""
    host = cell.host or document.host
    if device_kind(cell.device) != "gpu":
        total = host.get("memory_bytes")
        return float(total) if isinstance(total, (int, float)) else None
    totals = host.get("gpu_memory_bytes") or []
    index = int(cell.device.partition(":")[2] or 0)
    return (float(totals[index]) - DEVICE_RESERVE_BYTES
            if index < len(totals) and isinstance(totals[index], (int, float)) else None)


def check_memory_fit(check: FigureCheck, pool: Pool) -> None:
    """One figure of a memory fit's line against a numpy least-squares refit of its cell."""
    figure, subject = check.figure, check.figure.subject
    check = check.about(f"{subject.get('framework')} {subject.get('device')} "
                        f"{subject.get('variant')}")
    document = pool.document(subject.get("run", ""))
    cells = [] if document is None else pool.cells_named(subject, [document])
    if document is None or len(cells) != 1:
        check.cannot(f"{len(cells)} cells of run {subject.get('run')} match")
        return
    points = _memory_points(document, cells[0])
    batches = np.array([batch for batch, _ in points])
    peaks = np.array([peak for _, peak in points])
    sizes = len(set(batches.tolist()))
    if figure.name == SIZES:
        check.text_is(str(sizes))
        return
    if sizes < 2:
        check.cannot(f"{sizes} batch size(s) of the cell in run.json")
        return
    slope, fixed_bytes = (float(value) for value in np.polyfit(batches, peaks, 1))
    fitted = {FIXED: fixed_bytes, PER_SAMPLE: slope,
              RESIDUAL: float(np.abs(peaks - (fixed_bytes + slope * batches)).max()),
              CAPACITY: memory_capacity(document, cells[0])}
    if figure.name in fitted:
        check.reads(BYTES, fitted[figure.name])
    elif figure.name == LARGEST_SIZE:
        check.text_is(f"{int(batches.max()):,}")
    else:
        capacity = fitted[CAPACITY]
        largest = (max(0, math.floor((capacity - fixed_bytes) / slope))
                   if slope > 0 and capacity is not None else None)
        check_largest(check, document, cells[0], largest)


def check_largest(check: FigureCheck, document: RunDocument, cell: CellResult,
                  largest: int | None) -> None:
    """The largest batch predicted to fit, and the stored crossover's side of it."""
    if largest is None:
        check.cannot("no capacity recorded or memory did not grow")
    elif check.figure.name == LARGEST_BATCH:
        # Printed rounded down to 3 significant digits; agreeing within one unit of the third
        # covers a refit whose last bits put the batch across a rounding step.
        step = 10 ** max(0, len(str(largest)) - 3)
        check.verdict(largest - step < _number(check.figure.text) <= largest,
                      check.figure.text, f"{largest:,}")
    elif check.figure.name in (CROSSOVER, SIDE):
        check_memory_crossover(check, document, cell, largest)
    else:
        check.cannot("no such figure of a memory fit")


def check_memory_crossover(check: FigureCheck, document: RunDocument, cell: CellResult,
                           largest: int) -> None:
    """The stored predicted crossover and its side of the largest batch predicted to fit."""
    stored = next((record.get("size") for record in document.predictions
                   if (record.get("framework"), record.get("variant")) ==
                   (cell.framework, cell.variant) and record.get("kind") == "crossover"), None)
    if not isinstance(stored, (int, float)):
        check.cannot("run.json stores no predicted crossover for this cell")
    elif check.figure.name == CROSSOVER:
        check.reads((lambda text: printed_general(text, 2), lambda value: f"{value:,.0f}"),
                    float(stored))
    else:
        check.text_is("below" if stored <= largest else "above")
