"""measurements.csv row by row against the run.json it was written from."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.audit import checkcounts, formerflops
from harness.audit.ledger import (
    COPY_TOLERANCE,
    Ledger,
    _same_number,
    _shown,
)
from harness.audit.measured import (
    DERIVED_TOLERANCE,
    Measured,
    _param_text,
    expected_work,
    steps_per_call,
)
from harness.data.casekey import CaseKey
from harness.data.results import RunDocument
from harness.data.store import MEASUREMENTS_FILE
from harness.spec import WorkloadSpec

CsvRow = tuple[int, dict[str, str]]  # (row number as a spreadsheet counts it, the row)


def read_csv(path: Path) -> tuple[list[str], list[CsvRow]]:
    with path.open(newline="") as stream:
        reader = csv.DictReader(stream)
        rows = [(reader.line_num, dict(row)) for row in reader]
        return list(reader.fieldnames or []), rows



# match: a row whose other parameters were changed by hand is nobody's case. The key is taken on
# any machine (a row's machine may be blank) and at no size: the parameters hold the swept
# value as the CSV writes it, which a size label would round (0.1234567 -> 0.123457).
RowMatch = tuple[CaseKey, frozenset[tuple[str, str]]]


def case_match(key: CaseKey, params: Iterable[tuple[str, str]]) -> RowMatch:
    return (key.without("machine", "size_label"),
            frozenset((k, v) for k, v in params if v != ""))


def _row_key(row: dict[str, str]) -> RowMatch:
    params = ((name[len("param_"):], text) for name, text in row.items()
              if name.startswith("param_") and text is not None)
    return case_match(CaseKey.from_row(row), params)


def _csv_float(text: str | None) -> float | None:
    if text is None or text == "":
        return None
    try:
        return float(text)
    except ValueError:
        return math.nan


class CsvCheck:
    """measurements.csv row by row against the run.json it was written from."""

    def __init__(self, ledger: Ledger, document: RunDocument, spec: WorkloadSpec | None,
                 spec_why: str, path: Path) -> None:
        self.ledger, self.document, self.spec, self.spec_why = ledger, document, spec, spec_why
        self.where = MEASUREMENTS_FILE
        self.columns, self.rows = read_csv(path)

    def run(self) -> None:
        by_key: dict[RowMatch, list[CsvRow]] = {}
        for line, row in self.rows:
            by_key.setdefault(_row_key(row), []).append((line, row))
        claimed: set[int] = set()
        for cell in self.document.cells:
            for case in cell.cases:
                measured = Measured(self.document, cell, case)
                key = case_match(measured.key,
                                 ((k, _param_text(v)) for k, v in case.case.items()))
                rows = by_key.get(key, [])
                claimed.update(line for line, _ in rows)
                self.case_rows(measured, rows)
        self.cell_rows([(line, row) for line, row in self.rows if line not in claimed])

    def case_rows(self, measured: Measured, rows: list[CsvRow]) -> None:
        subject = measured.subject
        if not rows:
            self.ledger.verdict(subject, "rows", self.where, False, "no rows",
                                "at least one row (the case is in run.json)")
            return
        case = measured.case
        phases: dict[str, list[CsvRow]] = {}
        for line, row in rows:
            phases.setdefault(row.get("phase", ""), []).append((line, row))
        expected = ({"cold": 1, "warm": len(case.samples), "epoch": len(case.whole_calls)}
                    if case.measured else {"none": 1})
        for phase in sorted(set(expected) | set(phases)):
            count, found = expected.get(phase, 0), len(phases.get(phase, []))
            if phase == "epoch" and count == 0 and found == 0:
                continue
            self.ledger.verdict(subject, f"{phase} rows", self.where, count == found,
                                str(found), str(count))
        work = self.work(measured)
        for line, row in rows:
            self.common(measured, line, row, work)
        if case.measured:
            self.cold(measured, phases.get("cold", []))
            self.warm(measured, phases.get("warm", []))
            self.epochs(measured, phases.get("epoch", []))

    def work(self, measured: Measured) -> dict[str, float | None]:
        work = expected_work(self.spec, measured.case)
        if self.spec is None:
            for name in ("bytes", *(() if work["flops"] is not None else ("flops",))):
                work[name] = math.inf  # cannot say: marks the column unverifiable below
        return work

    def expect(self, measured: Measured, figure: str, line: int, row: dict[str, str],
               column: str, expected: Any, tolerance: float = COPY_TOLERANCE) -> None:
        where = f"{self.where} row {line}"
        if column not in self.columns:
            # time_s is derived by the report, not stored: checked only where a writer kept it.
            if expected not in (None, 0, "") and column != "time_s":
                self.ledger.cannot("", f"{column} column", self.where,
                                   "no such column (written before it existed)")
            return
        if expected == math.inf:
            if row.get(column):
                self.ledger.cannot(measured.subject, column, self.where, self.spec_why)
            return
        self.ledger.number(measured.subject, figure, where, _csv_float(row.get(column)),
                           expected, tolerance)

    def common(self, measured: Measured, line: int, row: dict[str, str],
               work: dict[str, float | None]) -> None:
        case = measured.case
        self.ledger.verdict(measured.subject, "status", f"{self.where} row {line}",
                            row.get("status") == case.status.value, str(row.get("status")),
                            case.status.value)
        if case.extra.get("flops_per_call") or work["flops"] in (None, math.inf):
            self.expect(measured, "flops", line, row, "flops", work["flops"])
        else:
            self.formula_flops(measured, line, row, work["flops"])
        self.expect(measured, "bytes", line, row, "bytes", work["bytes"])
        self.coverage(measured, line, row)
        if "flops_disputed" in self.columns:
            checkcounts.check_column(self.ledger, measured, f"{self.where} row {line}",
                                     row.get("flops_disputed") or "")
        steps = case.extra.get("steps_per_call")
        self.expect(measured, "steps_per_call", line, row, "steps_per_call",
                    float(steps) if isinstance(steps, (int, float)) else None)

    def coverage(self, measured: Measured, line: int, row: dict[str, str]) -> None:
        """A count the counter says is incomplete is marked as a lower bound (flops_gaps)."""
        coverage = measured.case.extra.get("flops_coverage")
        if "flops_gaps" not in self.columns or not isinstance(coverage, dict):
            return
        incomplete = not coverage.get("complete", True)
        marked = bool(row.get("flops_gaps"))
        self.ledger.verdict(measured.subject, "flops_gaps (the count is a lower bound)",
                            f"{self.where} row {line}", marked == incomplete,
                            row.get("flops_gaps") or "nothing",
                            "the uncounted ops" if incomplete else "nothing")

    def formula_flops(self, measured: Measured, line: int, row: dict[str, str],
                      formula: float | None) -> None:
        """A run that kept no count of its own: its flops column against today's formula.
        Equal is a figure checked; unequal cannot be called wrong (the formula may have changed
        since the run), so it is unverifiable and says by how much it differs."""
        stored = _csv_float(row.get("flops"))
        if "flops" not in self.columns or _same_number(stored, formula, COPY_TOLERANCE):
            self.expect(measured, "flops", line, row, "flops", formula)
            return
        former = formerflops.count_of_its_day(self.document.workload, measured.case.case,
                                              self.document.started)
        if former is not None and _same_number(stored, former.flops, COPY_TOLERANCE):
            self.expect(measured, f"flops ({former.label})", line, row, "flops", former.flops)
            return
        ratio = (f" ({stored / formula:.3g}x)" if stored is not None and formula
                 and math.isfinite(stored) else "")
        self.ledger.cannot(measured.subject, "flops", self.where,
                           f"stored {_shown(stored, repr)}, today's formula gives "
                           f"{_shown(formula, repr)}{ratio}; the run kept no flops_per_call, "
                           "so what it counted cannot be recomputed")

    def cold(self, measured: Measured, rows: list[CsvRow]) -> None:
        for line, row in rows[:1]:
            self.expect(measured, "cold seconds", line, row, "seconds",
                        measured.case.cold_seconds)
            self.expect(measured, "cold round", line, row, "round", 0.0)

    def warm(self, measured: Measured, rows: list[CsvRow]) -> None:
        placed = measured.case.warm_samples()
        for line, row in rows:
            number = _csv_float(row.get("sample"))
            index = int(number) if number is not None and number == number else 0
            if not 1 <= index <= len(placed):
                self.ledger.verdict(measured.subject, "sample number", f"{self.where} row {line}",
                                    False, str(row.get("sample")), f"1 to {len(placed)}")
                continue
            record, position = placed[index - 1]
            seconds = record.samples[position]
            self.expect(measured, f"seconds of warm sample {index}", line, row, "seconds",
                        seconds)
            self.expect(measured, f"round of warm sample {index}", line, row, "round",
                        float(record.round))
            self.expect(measured, "calls_per_sample", line, row, "calls_per_sample",
                        float(record.calls_per_sample))
            block = record.block_steps(position)
            self.expect(measured, f"block_steps of warm sample {index}", line, row,
                        "block_steps", None if block is None else float(block))
            self.expect(measured, f"time_s of warm sample {index}", line, row, "time_s",
                        seconds / steps_per_call(measured.case), DERIVED_TOLERANCE)

    def epochs(self, measured: Measured, rows: list[CsvRow]) -> None:
        calls = measured.case.whole_calls
        for line, row in rows:
            number = _csv_float(row.get("sample"))
            index = int(number) if number is not None and number == number else 0
            round_number, seconds = calls[index - 1] if 1 <= index <= len(calls) else (0, None)
            self.expect(measured, f"seconds of epoch {index}", line, row, "seconds", seconds)
            if "round" in row and seconds is not None:
                self.expect(measured, f"round of epoch {index}", line, row, "round",
                            float(round_number))

    def cell_rows(self, rows: list[CsvRow]) -> None:
        """Rows no case claimed: a cell's status row, or a row with no case in run.json."""
        machine = self.document.machine
        cells = {CaseKey.of_cell(cell, machine): cell for cell in self.document.cells}
        for line, row in rows:
            key = CaseKey.from_row(row)
            cell = cells.get(key.without("size_label"))
            is_status = row.get("phase") == "none" and not key.size_label
            if cell is None or not is_status or (cell.cases and not cell.stopped_short):
                self.ledger.verdict(f"{key.variant} {key.framework} {key.device}", "row",
                                    f"{self.where} row {line}", False, "a row",
                                    "no such case in run.json")
                continue
            self.ledger.verdict(f"{cell.framework} {cell.device} {cell.variant}",
                                "cell status", f"{self.where} row {line}",
                                row.get("status") == cell.status.value,
                                str(row.get("status")), cell.status.value)

