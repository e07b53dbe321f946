"""summary.md's memory-fit bullets refitted with numpy from the run's peaks."""

from __future__ import annotations

import math
import re
from typing import TypeGuard

import numpy as np

from harness.analysis.memoryfit import (
    DEVICE_RESERVE_BYTES,
    HOST_CASE_FIGURE,
    REQUIRED_CASE_FIGURE,
)
from harness.audit.ledger import (
    Ledger,
)
from harness.audit.printed import _number, printed_bytes, printed_general
from harness.core.units import (
    device_kind,
    format_bytes,
)
from harness.data.results import CellResult, RunDocument

BYTES_TEXT = r"-?[\d.,]+ (?:B|KiB|MiB|GiB|TiB)"
BATCH_TEXT = r"\d{1,3}(?:,\d{3})*"
MEMORY_FIT = re.compile(  # harness.analysis.memoryfit MemoryFit.line, as a summary.md bullet
    r"^- Memory fit \(run `(?P<run>[^`]+)`\): (?P<dev>\S+) \((?P<fw>[^,)]+)"
    rf"(?:, (?P<variant>[^)]+))?\): (?:the largest batch predicted to fit in "
    rf"(?P<capacity>{BYTES_TEXT})(?: \(of {BYTES_TEXT}\)| of RAM| \((?P<given>given)\))? is "
    rf"(?:~(?P<batch>{BATCH_TEXT})|none[^(]*) \(|(?:peak|required) memory )fixed "
    rf"(?P<fixed>{BYTES_TEXT}) \+ (?P<per>{BYTES_TEXT}) per sample, fitted over "
    rf"(?P<sizes>\d+) sizes up to "
    rf"(?P<largest>{BATCH_TEXT})(?:, largest residual (?P<residual>{BYTES_TEXT}))?(?:.*?; the "
    r"predicted crossover \(batch ~(?P<cross>[\d,.]+)\) lies (?P<side>below|above))?")

def memory_points(document: RunDocument, cell: CellResult) -> list[tuple[float, float]]:
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


def check_memory_fit(ledger: Ledger, where: str, subject: str, document: RunDocument,
                     cell: CellResult, match: re.Match[str]) -> None:
    """Every figure of one memory fit's line against a numpy least-squares refit."""
    points = memory_points(document, cell)
    batches = np.array([batch for batch, _ in points])
    peaks = np.array([peak for _, peak in points])
    sizes = len(set(batches.tolist()))
    ledger.verdict(subject, "memory fit: sizes", where, match["sizes"] == str(sizes),
                   match["sizes"], str(sizes))
    if sizes < 2:
        return
    slope, fixed_bytes = (float(value) for value in np.polyfit(batches, peaks, 1))
    ledger.printed(subject, "memory fit: fixed", where, printed_bytes(match["fixed"]),
                   fixed_bytes, format_bytes)
    ledger.printed(subject, "memory fit: per sample", where, printed_bytes(match["per"]),
                   slope, format_bytes)
    largest_size = f"{int(batches.max()):,}"
    ledger.verdict(subject, "memory fit: largest size", where, match["largest"] == largest_size,
                   match["largest"], largest_size)
    if match["residual"]:
        residual = float(np.abs(peaks - (fixed_bytes + slope * batches)).max())
        ledger.printed(subject, "memory fit: largest residual", where,
                       printed_bytes(match["residual"]), residual, format_bytes)
    if match["capacity"] is None:
        return
    capacity = memory_capacity(document, cell)
    if match["given"] or capacity is None:
        ledger.cannot(subject, "memory fit: largest batch", where,
                      "the capacity was given, not recorded in the run")
        return
    ledger.printed(subject, "memory fit: capacity", where, printed_bytes(match["capacity"]),
                   capacity, format_bytes)
    largest = max(0, math.floor((capacity - fixed_bytes) / slope)) if slope > 0 else None
    if match["batch"] is not None and largest is not None:
        # Printed rounded down to 3 significant digits; agreeing within one unit of the third
        # covers a refit whose last bits put the batch across a rounding step.
        step = 10 ** max(0, len(str(largest)) - 3)
        printed = _number(match["batch"])
        ledger.verdict(subject, "memory fit: largest batch", where,
                       largest - step < printed <= largest, match["batch"], f"{largest:,}")
    if match["cross"] is not None and largest is not None:
        check_memory_crossover(ledger, where, subject, document, cell, match, largest)


def check_memory_crossover(ledger: Ledger, where: str, subject: str, document: RunDocument,
                           cell: CellResult, match: re.Match[str], largest: int) -> None:
    """The stored predicted crossover and its side of the largest batch predicted to fit."""
    stored = next((record.get("size") for record in document.predictions
                   if (record.get("framework"), record.get("variant")) ==
                   (cell.framework, cell.variant) and record.get("kind") == "crossover"), None)
    if not isinstance(stored, (int, float)):
        ledger.cannot(subject, "memory fit: predicted crossover", where,
                      "run.json stores no predicted crossover for this cell")
        return
    ledger.printed(subject, "memory fit: predicted crossover", where,
                   printed_general(match["cross"], 2), float(stored),
                   lambda value: f"{value:,.0f}")
    side = "below" if stored <= largest else "above"
    ledger.verdict(subject, "memory fit: crossover side", where, match["side"] == side,
                   match["side"], side)

