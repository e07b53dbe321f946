"""measurements.csv against the run.json it was written from, cheaply: every line parses and
each case has the rows its samples make. A read command (report, diff, export, harness.load)
refuses a CSV that fails this instead of drawing from partial data; `harness check` (the audit,
harness.audit.csvcheck) compares every value.
"""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Any

from harness.data.results import RunDocument

# Rows are counted by case and phase: (variant, framework, device, size, phase).
RowCount = Counter[tuple[str, str, str, str, str]]
KEY_COLUMNS = ("variant", "framework", "device", "size", "phase")


def _size_text(value: Any) -> str:
    """A swept value as the CSV holds it (harness.data.store._format), a number as its float:
    run.json's 0.1234567 and the CSV's "0.1234567", or 64 and "64.0", are one size."""
    text = "x".join(map(str, value)) if isinstance(value, (list, tuple)) else (
        "" if value is None else str(value).strip())
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else repr(number)


def expected_rows(document: RunDocument) -> RowCount:
    """The rows harness.data.store.measurement_rows writes for the run's cells, counted."""
    counts: RowCount = Counter()
    for cell in document.cells:
        cell_key = (cell.variant, cell.framework, cell.device)
        if not cell.cases or cell.stopped_short:
            counts[(*cell_key, "", "none")] += 1
        for case in cell.cases:
            size = _size_text(case.case.get(document.sweep))
            if not case.measured:
                counts[(*cell_key, size, "none")] += 1
                continue
            counts[(*cell_key, size, "cold")] += 1
            counts[(*cell_key, size, "warm")] += len(case.warm_samples())
            if case.whole_calls:
                counts[(*cell_key, size, "epoch")] += len(case.whole_calls)
    return counts


def counted_rows(path: Path) -> tuple[RowCount | None, str | None]:
    """The CSV's rows counted like expected_rows, or the first line that does not parse (a
    different number of fields than the header: a garbage line, a line cut short); no count
    where the CSV lacks the columns to count by."""
    counts: RowCount = Counter()
    with path.open(newline="") as stream:
        reader = csv.reader(stream)
        header = next(reader, [])
        where = {name: header.index(name) for name in KEY_COLUMNS if name in header}
        if len(where) < len(KEY_COLUMNS):
            return None, None  # read_measurements names the missing columns
        for record in reader:
            if not record:
                continue  # a blank line holds no row (pandas skips it too)
            if len(record) != len(header):
                return counts, (f"line {reader.line_num} has {len(record)} fields, the header "
                                f"{len(header)}")
            variant, framework, device, size, phase = (record[where[name]].strip()
                                                       for name in KEY_COLUMNS)
            counts[(variant, framework, device, _size_text(size), phase)] += 1
    return counts, None


def mismatch(path: Path, document: RunDocument) -> str | None:
    """What is wrong with the CSV at PATH against DOCUMENT, in a few words; None if nothing."""
    found, unparsed = counted_rows(path)
    if unparsed is not None or found is None:
        return unparsed
    expected = expected_rows(document)
    wrong = sorted(key for key in expected.keys() | found.keys()
                   if expected[key] != found[key])
    if not wrong:
        return None
    variant, framework, device, size, phase = wrong[0]
    case = " ".join(part for part in (framework, device, variant, size) if part)
    more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
    return (f"{case}: {found[wrong[0]]} {phase} rows, run.json holds "
            f"{expected[wrong[0]]}{more}")
