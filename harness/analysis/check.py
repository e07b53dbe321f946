"""`harness check`: every figure a run folder prints, recomputed from its own raw samples.

The product is a measurement, so a wrong printed number is the worst bug. This module audits a
run folder mechanically: measurements.csv against run.json row by row, run.json's derived
fields (round medians, the kept attempt, declared FLOPs, energy) against its raw samples, the
round orders against the plan, and the figures summary.md prints (the fastest table, the
ranking, GPU vs CPU, rates, cold starts, energy lines, warnings, memory fits) against a second
computation.

Why a second computation: the report takes its statistics from harness.data.results.sample_stats
and its tables from pandas; re-using them here would only prove that one function agrees with
itself. So the statistics are recomputed with numpy (median; quartiles by linear interpolation,
the method the report documents), the work per call from the raw fields, and every printed
figure is compared within the precision it was printed with (3 significant digits for times
and ratios) so that rounding is never called a mismatch. A figure the raw data cannot place is
reported as unverifiable, never skipped silently.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, TypeGuard

import numpy as np

from harness.analysis import checkcounts, formerflops, sensitivity
from harness.analysis.ledger import (
    COPY_TOLERANCE,
    SUMMARY_FILE,
    Audit,
    Ledger,
    Mismatch,
    Printed,
    _same_number,
    _shown,
)
from harness.analysis.memoryfit import BULLET_PREFIX as MEMORY_FIT_PREFIX
from harness.analysis.memoryfit import (
    DEVICE_RESERVE_BYTES,
    HOST_CASE_FIGURE,
    REQUIRED_CASE_FIGURE,
)
from harness.analysis.plausibility import (
    bandwidth_limits,
    device_entry,
    flop_limits,
    precision_of,
)
from harness.core import registry
from harness.core.units import (
    device_kind,
    format_bytes,
    format_joules,
    format_ratio,
    format_seconds,
    format_size,
)
from harness.data.casekey import CaseKey
from harness.data.ceilings import MEMORY
from harness.data.records import CaseEnergy, EnergyRecord
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.data.store import MEASUREMENTS_FILE, load_run
from harness.spec import Status, WorkloadSpec

DERIVED_TOLERANCE = 1e-9
ENERGY_TOLERANCE = 0.01  # joules vs watts x seconds: the records round far below 1%
NOISY_FRACTION = 0.10  # IQR / median above which the report calls a case noisy

# A round order checker: (cells that ran, rounds, seed) -> the orders the seeded shuffle gives.
# The shuffle lives in the layer above (harness.run.rounds); the CLI passes it in.
Shuffle = Callable[[int, int, int], list[list[int]]]


def median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def quartiles(values: list[float]) -> tuple[float, float] | None:
    """(q1, q3) by linear interpolation between the sorted values (numpy's default)."""
    if not values:
        return None
    low, high = np.percentile(np.asarray(values, dtype=float), [25.0, 75.0])
    return float(low), float(high)


# --- printed numbers and their precision -------------------------------------------------------

SECOND_SCALES = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
JOULE_SCALES = {"kJ": 1e3, "J": 1.0, "mJ": 1e-3, "uJ": 1e-6}
SECONDS_TEXT = r"[\d.,]+ (?:ns|us|ms|s)"
RATIO_TEXT = r"[\d.,]+x"


def _digits_tolerance(value: float, digits: int) -> float:
    """Half a unit of the DIGITS-th significant digit of VALUE."""
    if value == 0:
        return 0.5 * 10.0 ** -digits
    return 0.5 * 10.0 ** (math.floor(math.log10(abs(value))) - digits + 1)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def printed_seconds(text: str) -> Printed:
    """'2.31 ms' (harness.core.units.format_seconds: 3 significant digits)."""
    number, unit = text.strip().split(" ")
    value = _number(number) * SECOND_SCALES[unit]
    return Printed(text.strip(), value, _digits_tolerance(value, 3))


def printed_joules(text: str) -> Printed:
    number, unit = text.strip().split(" ")
    value = _number(number) * JOULE_SCALES[unit]
    return Printed(text.strip(), value, _digits_tolerance(value, 3))


BYTE_SCALES = {"B": 1.0, "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30, "TiB": 2.0**40}


def printed_bytes(text: str) -> Printed:
    """'21.8 MiB' (format_bytes: 3 significant digits, whole bytes below 1000 B)."""
    number, unit = text.strip().split(" ")
    scale = BYTE_SCALES[unit]
    value = _number(number) * scale
    tolerance = 0.5 if unit == "B" else _digits_tolerance(_number(number), 3) * scale
    return Printed(text.strip(), value, tolerance)


def printed_ratio(text: str) -> Printed:
    """'3.48x' (format_ratio: 2 significant digits below 1, 3 below 100, whole above)."""
    value = _number(text.strip().rstrip("x"))
    tolerance = (_digits_tolerance(value, 2) if value < 1 else
                 _digits_tolerance(value, 3) if value < 100 else 0.5)
    return Printed(text.strip(), value, tolerance)


def printed_fixed(text: str, decimals: int, scale: float = 1.0, unit: str = "") -> Printed:
    """A number printed with a fixed count of decimals ('143.1', '35%' with scale 0.01);
    UNIT is shown after it ('143.1 GFLOP/s')."""
    value = _number(text.strip().rstrip("%")) * scale
    shown = f"{text.strip()} {unit}" if unit else text.strip()
    return Printed(shown, value, 0.5 * 10.0 ** -decimals * scale)


def printed_general(text: str, digits: int) -> Printed:
    """A number printed with :.{digits}g."""
    value = _number(text.strip().rstrip("x"))
    return Printed(text.strip(), value, _digits_tolerance(value, digits))


def fixed(decimals: int, suffix: str = "") -> Callable[[float], str]:
    return lambda value: f"{value:,.{decimals}f}{suffix}"


def percent(value: float) -> str:
    return f"{value:.0%}"


# --- one measured case, seen from its raw samples ----------------------------------------------

@dataclass(frozen=True)
class Measured:
    """A case of a cell of a run, with its figures recomputed from the raw samples."""

    document: RunDocument
    cell: CellResult
    case: CaseResult

    @property
    def sweep(self) -> str:
        return self.document.sweep

    @property
    def machine(self) -> str:
        return self.document.machine

    @property
    def key(self) -> CaseKey:
        return CaseKey.in_run(self.document, self.cell, self.case)

    @property
    def size_label(self) -> str:
        return self.key.size_label

    @property
    def size_text(self) -> str:
        """The size as the report prints it ('' for a case outside the sweep)."""
        label = self.size_label
        return format_size(label, self.sweep) if label else ""

    @property
    def size_value(self) -> float | None:
        """The size as a number; a case outside the sweep counts as size 0 (as the report's)."""
        label = self.size_label
        if not label:
            return 0.0
        try:
            return float(label)
        except ValueError:
            return None

    @property
    def size_number(self) -> float | None:
        """The size as a number, None outside the sweep (sorts last, as pandas' NaN does)."""
        return self.size_value if self.size_label else None

    @property
    def cell_name(self) -> str:
        return f"{self.cell.framework} {self.cell.device} {self.cell.variant}"

    @property
    def subject(self) -> str:
        size = f" {self.sweep}={self.size_label}" if self.size_label else ""
        return self.cell_name + size

    @property
    def kind(self) -> str:
        return device_kind(self.cell.device)

    @property
    def steps(self) -> float:
        """Steps in one call (1 where the workload counts none): per step = per call / steps."""
        steps = self.case.extra.get("steps_per_call")
        return float(steps) if isinstance(steps, (int, float)) and steps > 0 else 1.0

    @property
    def valid(self) -> bool:
        return self.case.status == Status.OK and bool(self.case.samples)

    @property
    def per_step(self) -> list[float]:
        return [float(seconds) / self.steps for seconds in self.case.samples]

    @property
    def median_step(self) -> float | None:
        return median(self.per_step)

    @property
    def iqr_step(self) -> float | None:
        found = quartiles(self.per_step)
        return None if found is None else found[1] - found[0]

    @property
    def median_call(self) -> float | None:
        return median([float(seconds) for seconds in self.case.samples])

    @property
    def noise(self) -> float | None:
        middle, iqr = self.median_step, self.iqr_step
        return iqr / middle if middle and iqr is not None else None


def expected_work(spec: WorkloadSpec | None, case: CaseResult) -> dict[str, float | None]:
    """FLOPs and bytes of one timed call from the raw fields: the worker's own count first,
    then the spec's formulas on what one call did (None: does not apply or cannot say)."""
    counted = case.extra.get("flops_per_call")
    flops = float(counted) if counted else None
    bytes_moved = None
    if spec is not None:
        if flops is None and spec.flops is not None:
            formula = spec.flops(case.case)
            flops = None if formula is None else float(formula)
        if spec.bytes_moved is not None:
            moved = spec.bytes_moved(case.case)
            bytes_moved = None if moved is None else float(moved)
    return {"flops": flops, "bytes": bytes_moved}


def load_spec(workload: str) -> tuple[WorkloadSpec | None, str]:
    """The workload's spec, or None and why (a plugin not installed here)."""
    try:
        return registry.load_workload(workload), ""
    except Exception as exc:  # noqa: BLE001 - an unknown workload makes figures unverifiable
        return None, f"workload {workload!r} cannot be loaded here ({exc})"


# --- a: measurements.csv against run.json ------------------------------------------------------

CsvRow = tuple[int, dict[str, str]]  # (row number as a spreadsheet counts it, the row)


def read_csv(path: Path) -> tuple[list[str], list[CsvRow]]:
    with path.open(newline="") as stream:
        reader = csv.DictReader(stream)
        rows = [(reader.line_num, dict(row)) for row in reader]
        return list(reader.fieldnames or []), rows


def _param_text(value: Any) -> str:
    """A parameter as harness.data.store writes it into a param_* column."""
    if isinstance(value, (list, tuple)):
        return "x".join(str(part) for part in value)
    return "" if value is None else str(value)


# A CSV row belongs to a case of run.json when the case's key and every parameter it names
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
        expected = ({"cold": 1, "warm": len(case.samples), "epoch": len(case.call_seconds)}
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
        case = measured.case
        for line, row in rows:
            number = _csv_float(row.get("sample"))
            index = int(number) if number is not None and number == number else 0
            if not 1 <= index <= len(case.samples):
                self.ledger.verdict(measured.subject, "sample number", f"{self.where} row {line}",
                                    False, str(row.get("sample")),
                                    f"1 to {len(case.samples)}")
                continue
            seconds = case.samples[index - 1]
            self.expect(measured, f"seconds of warm sample {index}", line, row, "seconds",
                        seconds)
            self.expect(measured, f"round of warm sample {index}", line, row, "round",
                        float(case.round_of(index)))
            self.expect(measured, "calls_per_sample", line, row, "calls_per_sample",
                        float(case.calls_per_sample))
            block = case.block_steps(index)
            self.expect(measured, f"block_steps of warm sample {index}", line, row,
                        "block_steps", None if block is None else float(block))
            self.expect(measured, f"time_s of warm sample {index}", line, row, "time_s",
                        seconds / measured.steps, DERIVED_TOLERANCE)

    def epochs(self, measured: Measured, rows: list[CsvRow]) -> None:
        calls = measured.case.call_seconds
        for line, row in rows:
            number = _csv_float(row.get("sample"))
            index = int(number) if number is not None and number == number else 0
            expected = calls[index - 1] if 1 <= index <= len(calls) else None
            self.expect(measured, f"seconds of epoch {index}", line, row, "seconds", expected)
            rounds = measured.case.call_rounds
            if rounds and "round" in row and 1 <= index <= len(rounds):
                self.expect(measured, f"round of epoch {index}", line, row, "round",
                            float(rounds[index - 1]))

    def cell_rows(self, rows: list[CsvRow]) -> None:
        """Rows no case claimed: a cell's status row, or a row with no case in run.json."""
        cells = {(c.variant, c.framework, c.device): c for c in self.document.cells}
        for line, row in rows:
            key = (row.get("variant", ""), row.get("framework", ""), row.get("device", ""))
            cell = cells.get(key)
            is_status = row.get("phase") == "none" and not row.get("size")
            if cell is None or not is_status or (cell.cases and not cell.stopped_short):
                self.ledger.verdict(" ".join(key), "row", f"{self.where} row {line}", False,
                                    "a row", "no such case in run.json")
                continue
            self.ledger.verdict(f"{cell.framework} {cell.device} {cell.variant}",
                                "cell status", f"{self.where} row {line}",
                                row.get("status") == cell.status.value,
                                str(row.get("status")), cell.status.value)


# --- b: run.json's derived fields ----------------------------------------------------------------

def check_derived(ledger: Ledger, document: RunDocument, spec: WorkloadSpec | None,
                  spec_why: str = "") -> None:
    if spec is None and any(case.measured for cell in document.cells for case in cell.cases):
        ledger.cannot("", "the spec's FLOP and byte counts of each case", "run.json", spec_why)
    for cell in document.cells:
        for case in cell.cases:
            measured = Measured(document, cell, case)
            check_rounds_of_case(ledger, measured)
            check_attempts(ledger, measured)
            check_declared_flops(ledger, measured, spec)
            check_energy(ledger, measured)
            sensitivity.recheck(ledger, measured.subject, case.check, case.extra,
                                case.status.value)


def _round_samples(case: CaseResult) -> dict[int, list[float]]:
    """Each round's samples, by round (a case without rounds: all round 0)."""
    rounds = case.sample_rounds or [0] * len(case.samples)
    found: dict[int, list[float]] = {}
    for number, seconds in zip(rounds, case.samples):
        found.setdefault(int(number), []).append(float(seconds))
    return found


def check_rounds_of_case(ledger: Ledger, measured: Measured) -> None:
    case, subject, where = measured.case, measured.subject, "run.json"
    if case.sample_rounds:
        ledger.verdict(subject, "sample_rounds length", where,
                       len(case.sample_rounds) == len(case.samples),
                       str(len(case.sample_rounds)), f"{len(case.samples)} (one per sample)")
    if case.sample_steps:
        ledger.verdict(subject, "sample_steps length", where,
                       len(case.sample_steps) == len(case.samples),
                       str(len(case.sample_steps)), f"{len(case.samples)} (one per sample)")
    if not case.round_medians:
        return
    by_round = _round_samples(case)
    medians = [median(by_round[number]) for number in sorted(by_round)]
    ledger.verdict(subject, "round medians count", where, len(medians) == len(case.round_medians),
                   str(len(case.round_medians)), f"{len(medians)} (rounds with samples)")
    for position, (stored, recomputed) in enumerate(zip(case.round_medians, medians), start=1):
        ledger.number(subject, f"round median {position}", where, stored, recomputed,
                      DERIVED_TOLERANCE, format_seconds)


def check_attempts(ledger: Ledger, measured: Measured) -> None:
    """The kept attempt's median and count are those of the samples of its round."""
    by_round = _round_samples(measured.case)
    for attempt in measured.case.attempts:
        if not attempt.kept:
            continue
        samples = by_round.get(attempt.round, [])
        figure = f"kept attempt {attempt.number} (round {attempt.round + 1})"
        ledger.number(measured.subject, f"{figure} median", "run.json", attempt.median_s,
                      median(samples), DERIVED_TOLERANCE, format_seconds)
        ledger.verdict(measured.subject, f"{figure} samples", "run.json",
                       attempt.samples == len(samples), str(attempt.samples), str(len(samples)))


def check_declared_flops(ledger: Ledger, measured: Measured, spec: WorkloadSpec | None) -> None:
    """The spec's count of what one call did equals the call's own stored count."""
    if spec is None or spec.flops is None or not measured.case.measured:
        return
    declared = spec.flops(measured.case.case)
    if declared is None:
        return
    counted = measured.case.extra.get("flops_per_call")
    if counted is None:
        # Nothing printed to recompute: a run from before the worker kept its own count
        # prints its FLOPs in measurements.csv alone, checked there against the formula.
        return
    ledger.number(measured.subject, "flops_per_call vs the spec's count of the case",
                  "run.json", counted, float(declared), DERIVED_TOLERANCE, lambda v: f"{v:.4g}")


def check_energy(ledger: Ledger, measured: Measured) -> None:
    energy = CaseEnergy.read(measured.case.extra.get("energy"))
    if energy is None:
        return
    for name, record in (("device", energy.device), ("host", energy.host)):
        if record is not None and record.ok:
            check_energy_record(ledger, measured, name, record)


def check_energy_record(ledger: Ledger, measured: Measured, name: str,
                        record: EnergyRecord) -> None:
    """Joules against watts x seconds / calls, per call, per step and above idle (1%)."""
    subject, where = f"{measured.subject} {name} energy", "run.json"
    window, calls, watts = record.window_s, record.calls, record.watts_mean
    if not (window and calls and watts is not None):
        ledger.cannot(subject, "energy per call", where, "window, calls or power not stored")
        return
    per_call = watts * window / calls
    checks: list[tuple[str, float | None, float | None]] = [
        ("joules per call (= W x window / calls)", record.joules_per_call, per_call),
              ("joules total (= W x window)", record.joules_total, watts * window)]
    steps = record.steps_per_call or 1.0
    checks.append(("joules per step (= per call / steps)", record.joules_per_step,
                   None if record.joules_per_call is None else record.joules_per_call / steps))
    checks.append(("steps per call of the energy record", record.steps_per_call,
                   measured.steps))
    if record.idle_watts is not None and record.joules_total is not None:
        above = (record.joules_total - record.idle_watts * window) / calls
        checks += [("joules per call above idle", record.joules_per_call_above_idle, above),
                   ("joules per step above idle", record.joules_per_step_above_idle,
                    above / steps)]
    for figure, stored, recomputed in checks:
        if stored is None:
            ledger.cannot(subject, figure, where, "not stored")
            continue
        ledger.number(subject, figure, where, stored, recomputed, ENERGY_TOLERANCE,
                      lambda v: f"{v:.4g}")


# --- c: round orders ---------------------------------------------------------------------------

def _had_worker(result: CellResult) -> bool:
    """Whether a cell ran in a worker: its cost counts the workers; a run from before costs
    were kept tells by its status (refused without a worker: unavailable with no cases). The
    cost decides where present, since a worker may itself answer unavailable (no such device)."""
    if result.cost is not None:
        return result.cost.workers > 0
    return not (result.status == Status.UNAVAILABLE and not result.cases)


def _worker_cells(document: RunDocument, unreached: bool = False) -> list[int]:
    """Plan indices of the cells that ran in a worker (not refused without one); `unreached`:
    also those a stopped run never reached (no result), which its rounds had shuffled too."""
    results = {(c.variant, c.framework, c.device): c for c in document.cells}
    found = []
    for index, planned in enumerate(document.planned_cells):
        key = (str(planned.get("variant", "")), str(planned.get("framework", "")),
               str(planned.get("device", "")))
        result = results.get(key)
        if (result is not None and _had_worker(result)) or (result is None and unreached):
            found.append(index)
    return found


def check_round_orders(ledger: Ledger, document: RunDocument, shuffle: Shuffle | None) -> None:
    orders, where = document.round_orders, "run.json round_orders"
    if not orders:
        if document.rounds > 1:
            ledger.cannot("", "round orders", "run.json", "not stored")
        return
    planned = len(document.planned_cells)
    for number, order in enumerate(orders, start=1):
        ledger.verdict("", f"round {number} order: distinct indices", where,
                       len(set(order)) == len(order), str(order), "each index once")
        ledger.verdict("", f"round {number} order: indices into planned_cells", where,
                       all(0 <= index < planned for index in order), str(order),
                       f"0 to {planned - 1}")
    workers = _worker_cells(document)
    ran = sorted({index for order in orders for index in order})
    ledger.verdict("", "cells in the round orders", where, ran == workers, str(ran),
                   f"{workers} (the cells that have workers)")
    if shuffle is None or document.seed is None or document.resumed:
        return
    shuffled = _worker_cells(document, unreached=document.interrupted)
    expected = [[shuffled[position] for position in order]
                for order in shuffle(len(shuffled), document.rounds, document.seed)]
    ran_rounds = len(orders)
    # A run stopped within a round ran that round's shuffled order only up to where it
    # stopped: the last recorded order is then the shuffle's cells that ran, in its order.
    last_cut = document.interrupted and ran_rounds and orders[-1] != expected[ran_rounds - 1]
    matches = orders[:-1] == expected[:ran_rounds - 1] and (
        orders[-1] == expected[ran_rounds - 1] if not last_cut else
        orders[-1] == [index for index in expected[ran_rounds - 1] if index in orders[-1]])
    ledger.verdict("", "round orders vs the seeded shuffle", where, matches, str(orders),
                   str(expected[:ran_rounds]) + (" (the last round stopped: the cells of its "
                                                 "order that ran)" if last_cut else ""))


# --- d: summary.md, parsed ---------------------------------------------------------------------

EXPONENT = re.compile(r"(?<![\w.])\d+(?:\.\d+)?e[+-]?\d+\b")
UNIT_AFTER = re.compile(r"\s?(?:ns|us|ms|s|B|KiB|MiB|GiB|TiB|kJ|J|mJ|uJ|W|x|%|GFLOP/s|GB/s)\b")
CODE_SPAN = re.compile(r"`[^`]*`")
TABLE_SPLIT = re.compile(r"(?<!\\)\|")
FASTEST_HEADING = re.compile(r"^### Fastest framework x device, variant (?P<variant>\S+)"
                             r"(?: on (?P<machine>.+))?$")
RANKED = re.compile(rf"(?P<rank>\d+)\. (?P<framework>\S+) (?P<time>{SECONDS_TEXT})/\w+"
                    rf"(?: \((?P<ratio>{RATIO_TEXT}) the fastest;)?")
VERDICT = re.compile(
    r"(?:^|: |; )(?:variant (?P<variant>\S+): )?(?P<verdict>GPU faster from (?P<from>.+?) up"
    r"|GPU faster at every \S+ measured|no crossover in range: CPU faster at every \S+ measured"
    r"|no crossover in range: GPU leads only at some sizes, not the largest"
    r"|(?:GPU|CPU) faster at the one size measured|no sizes measured on both CPU and GPU)"
    rf"(?: \(GPU/CPU speedup (?P<ratio>{RATIO_TEXT})(?: at (?P<where>[^)]+))?\))?"
    r"(?P<any> vs the best CPU cell of any variant)?")
COLD = re.compile(rf"^- Cold start on (?P<machine>.+) \((?P<kind>CPU|GPU)\): the first \w+ of a "
                  rf"cell took up to (?P<cold>{SECONDS_TEXT}) \((?P<fw>\S+) (?P<dev>\S+) "
                  rf"(?P<variant>\S+)\) vs (?P<warm>{SECONDS_TEXT}) for a warm")
WHY = re.compile(rf"^- Why the GPU loses at small sizes \((?P<fw>\S+), (?P<variant>\S+), "
                 rf"(?P<machine>.+)\): from (?P<sweep>[^=]+)=(?P<low>.+?) to (?P<high>.+?) the "
                 rf"work grows (?P<work>[\d,]+)x but the GPU time per \w+ only "
                 rf"(?P<time>[\d.e+-]+)x, ~flat at (?P<level>{SECONDS_TEXT})")
NOISY = re.compile(r"^- noisy \(IQR/median > 10%\): (?P<rest>.+) at (?P<sweep>[^=]+)="
                   r"(?P<sizes>.+) \(worst (?P<worst>\d+)%\)")
OVERHEAD = re.compile(r"harness overhead: (?P<over>[\d.]+) s of (?P<wall>[\d.]+) s \("
                      r"(?P<timed>[\d.]+) s inside the timed calls, (?P<workers>\d+) worker")
ENERGY_CASE = re.compile(
    r"^- (?P<workload>\S+) (?P<fw>\S+) (?P<dev>\S+) (?P<variant>\S+), size (?P<size>[^:]*): "
    r"(?P<joules>[\d.,]+ \w?J) per step over the energy window \((?P<watts>[\d,]+) W mean x "
    rf"(?P<window>{SECONDS_TEXT}) per step, (?P<total>[\d.e+-]+) s in all;.*\); "
    rf"(?P<timed>{SECONDS_TEXT}) per step timed \((?P<pooled>[^)]+)\)")
ENERGY_VERDICT = re.compile(
    r"^- (?P<workload>\S+) (?P<fw>\S+) (?P<variant>\S+), size (?P<size>.*?) \((?P<machine>.+?)"
    rf"\): (?P<gpu>\S+) vs (?P<cpu>\S+): GPU (?P<speed>{RATIO_TEXT}) (?P<way>faster|slower)"
    rf"(?:.*?; (?P<energy>{RATIO_TEXT}) (?P<less>less|more) energy per step"
    r"(?: \((?P<gj>[\d.,]+ \w?J) GPU board vs (?P<cj>[\d.,]+ \w?J) CPU packages\))?)?")
RATE = re.compile(r"^(?P<rate>[\d.,]+) (?P<metric>GFLOP/s|GB/s)$")
IMPLAUSIBLE = re.compile(r"^- IMPLAUSIBLE: (?P<machine>.+?), (?P<fw>\S+) (?P<dev>\S+) "
                         r"(?P<variant>\S+)(?: at [^=]+=(?P<size>.+?))? reaches (?P<rate>[\d,]+) "
                         r"(?P<metric>GFLOP/s|GB/s)")
PROBE_LOW = re.compile(r"^- The ceiling probe was low on (?P<machine>.+) (?P<dev>\S+): it "
                       r"measured (?P<probe>[\d,]+) (?P<metric>GFLOP/s|GB/s), but (?P<fw>\S+) "
                       r"(?P<variant>\S+)(?: at [^=]+=(?P<size>.+?))? reached (?P<rate>[\d,]+) ")
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
KIND_OF_VERDICT = (("GPU faster from", "crossover"), ("GPU faster at every", "gpu-always"),
                   ("CPU faster at every", "cpu-always"), ("GPU leads only", "mixed"),
                   ("GPU faster at the one", "gpu-always"), ("CPU faster at the one", "cpu-always"),
                   ("no sizes measured", "no-overlap"))


def exponent_figures(line: str) -> list[str]:
    """Numbers in exponent notation that a reader takes for a figure: followed by a unit, or
    alone in a table cell (code spans, such as a command line, are the user's text; a check's
    '4.2e-07' error bound in prose is a number of another kind)."""
    text = CODE_SPAN.sub("", line)
    found = []
    for match in EXPONENT.finditer(text):
        unit = UNIT_AFTER.match(text, match.end())
        if unit is not None or _alone_in_cell(text, match):
            found.append(match.group(0) + (unit.group(0) if unit is not None else ""))
    return found


def _alone_in_cell(text: str, match: re.Match[str]) -> bool:
    if not text.startswith("|"):
        return False
    before, after = text[:match.start()].rstrip(), text[match.end():].lstrip()
    return before.endswith("|") and after.startswith("|")


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
                 and (not machine or m.machine == machine)
                 and (not variant or m.cell.variant == variant)
                 and (not framework or m.cell.framework == framework)
                 and (not device or m.cell.device == device)
                 and (size is None or size in (m.size_text, m.size_label))
                 and (not valid or m.valid)]
        return _latest(found)

    def one(self, **where: Any) -> Measured | str:
        """The one case that matches, or why there is not exactly one."""
        found = self.select(**where)
        if len(found) == 1:
            return found[0]
        named = ", ".join(f"{k}={v}" for k, v in where.items() if v not in ("", None))
        return f"{'no' if not found else len(found)} case(s) in run.json match {named}"

    def machine_prefix(self, text: str) -> tuple[str, str] | None:
        """(machine, rest) where TEXT starts with a machine's name."""
        for machine in self.machines:
            if text.startswith(machine):
                return machine, text[len(machine):]
        return None


def _latest(found: list[Measured]) -> list[Measured]:
    """Of a case measured by several runs on one machine, the latest run's (as the report)."""
    newest: dict[CaseKey, Measured] = {}
    for item in found:
        current = newest.get(item.key)
        if current is None or (item.document.started or 0.0) > (current.document.started or 0.0):
            newest[item.key] = item
    return [item for item in found if newest[item.key] is item]


@dataclass
class Place:
    """Where in summary.md the parser is: the section, the table and what its heading said."""

    experiment: str = ""
    table: str = ""
    headers: list[str] = field(default_factory=list)
    variant: str = ""
    machine: str = ""


def table_cells(line: str) -> list[str]:
    return [cell.strip().replace("\\|", "|") for cell in TABLE_SPLIT.split(line.strip())[1:-1]]


class SummaryCheck:
    """summary.md line by line: every figure it prints that a parser knows, recomputed."""

    def __init__(self, ledger: Ledger, pool: Pool, lines: list[str]) -> None:
        self.ledger, self.pool, self.lines = ledger, pool, lines
        self.place = Place()
        self.number = 0
        self.run_id = ""  # the run whose bullet in "Drawn from ..." the lines below belong to
        self.warned: list[str] = []  # experiments whose warnings section was read
        self.disputed_named: set[tuple[str, ...]] = set()  # cases a DISPUTED line named

    @property
    def where(self) -> str:
        return f"{SUMMARY_FILE} line {self.number}"

    def run(self) -> None:
        handlers: list[tuple[str, Callable[[str], None]]] = [
            ("## ", self.section), ("### ", self.subsection), ("|", self.table_row),
            ("- `", self.run_line), ("- **", self.bullet), ("- Cold start on ", self.cold),
            ("- Why the GPU loses", self.why), ("- noisy (IQR/median", self.noisy),
            ("- IMPLAUSIBLE: ", self.implausible), ("- The ceiling probe was low", self.probe),
            ("- Distinct training samples: ", self.distinct),
            (checkcounts.LINE_PREFIX, self.disputed),
            (MEMORY_FIT_PREFIX, self.memory_fit), ("- ", self.energy)]
        for number, line in enumerate(self.lines, start=1):
            self.number = number
            self.exponents(line)
            if not line.startswith("|"):
                self.place.headers = []  # the next table row is a new table's header
            if "harness overhead:" in line:
                self.parsed(self.overhead, line)
            if "-sample call (" in line:
                self.parsed(self.call_share, line)
            handler = next((handler for prefix, handler in handlers
                            if line.startswith(prefix)), None)
            if handler is not None:
                self.parsed(handler, line)
        checkcounts.check_omissions(self.ledger, self.pool, SUMMARY_FILE, self.disputed_named,
                                    self.warned)

    def disputed(self, line: str) -> None:
        """'- DISPUTED FLOP count: M, fw dev variant at n=8: parts; ...': the stored record's
        disputed parts, each with both figures (harness.analysis.checkcounts)."""
        named = checkcounts.check_line(self.ledger, self.pool, self.where,
                                       self.place.experiment, line)
        if named is not None:
            self.disputed_named.add(named)

    def parsed(self, handler: Callable[[str], None], line: str) -> None:
        """Run one line's parser; a line in a shape it does not expect is unverifiable (a
        report whose wording changed must say so, not stop the audit or pass silently)."""
        try:
            handler(line)
        except (ValueError, KeyError, IndexError, ZeroDivisionError) as exc:
            self.ledger.cannot("", "line", self.where,
                               f"not in the shape its parser reads ({type(exc).__name__}: "
                               f"{exc})")

    # -- the case behind a figure --

    def case(self, figure: str, experiment: str | None = None,
             **where: Any) -> Measured | None:
        """The one case a printed figure names, or None (noted as unverifiable)."""
        label = self.place.experiment if experiment is None else experiment
        found = self.pool.one(experiment=label, **where)
        if isinstance(found, str):
            self.ledger.cannot(_subject_of(where), figure, self.where, found)
            return None
        return found

    def seconds(self, subject: str, figure: str, text: str, value: float | None) -> None:
        self.ledger.printed(subject, figure, self.where, printed_seconds(text), value,
                            format_seconds)

    def ratio(self, subject: str, figure: str, text: str, value: float | None) -> None:
        self.ledger.printed(subject, figure, self.where, printed_ratio(text), value, format_ratio)

    def order(self, subject: str, figure: str, faster: float | None,
              slower: float | None) -> None:
        if faster is None or slower is None:
            return
        self.ledger.verdict(subject, figure, self.where, faster <= slower * (1 + 1e-12),
                            format_seconds(faster), f"not above {format_seconds(slower)}")

    # -- headings and tables --

    def section(self, line: str) -> None:
        heading = line[3:].strip()
        self.place = Place(heading, "memory" if heading == "Peak memory" else "")

    def subsection(self, line: str) -> None:
        heading = line[4:].strip()
        experiment = self.place.experiment
        fastest = FASTEST_HEADING.match(line)
        if fastest:
            self.place = Place(experiment, "fastest", [], fastest["variant"],
                               fastest["machine"] or "")
        elif heading == "GPU vs CPU":
            self.place = Place(experiment, "gpu")
        elif heading.startswith("Variants compared"):
            self.place = Place(experiment, "variants")
        elif heading == "Warnings":
            self.warned.append(experiment)
            self.place = Place(experiment, "")
        elif heading.startswith("Throughput vs the machine's measured ceilings"):
            self.place = Place(experiment, "ceilings")
        elif heading.startswith("Accuracy and data"):
            self.place = Place(experiment, "accuracy")
        elif heading == "Where the time goes" or heading.startswith(
                "Where the time goes (cross-check"):
            self.place = Place(experiment, "breakdown")
        elif heading.endswith(": where the time goes, measured"):
            self.place = Place(heading.removesuffix(": where the time goes, measured"),
                               "devicetime")
        else:
            self.place = Place(experiment, "")

    def table_row(self, line: str) -> None:
        cells = table_cells(line)
        if not self.place.headers:
            self.place.headers = cells
            return
        if all(set(cell) <= {"-", ":"} for cell in cells):
            return
        row = dict(zip(self.place.headers, cells))
        handler = {"fastest": self.fastest_row, "gpu": self.gpu_row,
                   "variants": self.variant_row, "ceilings": self.ceiling_row,
                   "devicetime": self.devicetime_row, "memory": self.memory_row,
                   "accuracy": self.accuracy_row}.get(self.place.table)
        if handler is not None and len(cells) == len(self.place.headers):
            handler(row, cells)

    def fastest_row(self, row: dict[str, str], cells: list[str]) -> None:
        machine = row.get("machine", self.place.machine)
        offset = 1 if "machine" in row else 0
        size, best_name, best_text, runner_name, runner_text, ratio_text = cells[
            offset:offset + 6]
        framework, device = best_name.split(" (not compared")[0].split(" ")[:2]
        best = self.case("fastest median", machine=machine, variant=self.place.variant,
                         framework=framework, device=device, size=size)
        if best is None:
            return
        median_text, _, iqr_text = best_text.partition(" (")
        self.seconds(best.subject, "median per step", median_text, best.median_step)
        if iqr_text:
            self.seconds(best.subject, "IQR per step", iqr_text.rstrip(")"), best.iqr_step)
        others = self.pool.select(self.place.experiment, best.machine, best.cell.variant,
                                  size=size, valid=True)
        quickest = min((m.median_step for m in others if m.median_step is not None),
                       default=None)
        self.order(best.subject, "fastest of its size", best.median_step, quickest)
        if runner_name == "-":
            return
        runner_fw, runner_dev = runner_name.split(" ")[:2]
        runner = self.case("runner-up median", machine=machine, variant=self.place.variant,
                           framework=runner_fw, device=runner_dev, size=size)
        if runner is None:
            return
        self.seconds(runner.subject, "runner-up median per step", runner_text,
                     runner.median_step)
        self.faster_by(best, runner, ratio_text, "faster by")

    def faster_by(self, best: Measured, runner: Measured, text: str, figure: str) -> None:
        fast, slow = best.median_step, runner.median_step
        self.ratio(best.subject, f"{figure} (vs {runner.cell_name})", text,
                   slow / fast if fast and slow is not None else None)
        self.order(best.subject, f"ahead of {runner.cell_name}", fast, slow)

    def gpu_row(self, row: dict[str, str], cells: list[str]) -> None:
        compared = row.get("compared", "")
        speedup = next((text for name, text in row.items()
                        if name.startswith("GPU speedup at the largest")), "-")
        framework = "" if compared.startswith("best GPU cell") else compared.split(" ")[0]
        self.gpu_verdict(row.get("machine", ""), row.get("variant", ""), framework,
                         "(CPU of the other variants)" in compared, row.get("verdict", ""),
                         speedup)

    def gpu_verdict(self, machine: str, variant: str, framework: str, any_variant: bool,
                    verdict: str, speedup: str) -> None:
        """A GPU-vs-CPU verdict and its speedup at the largest size, recomputed from the best
        (or the framework's) per-step medians of each device at each size."""
        subject = f"{framework or 'best'} GPU vs CPU, {machine}, variant {variant}"
        curves = self.curves(machine, variant, framework, any_variant)
        if curves is None:
            self.ledger.cannot(subject, "GPU vs CPU verdict", self.where,
                               "no GPU and CPU cases of it in run.json")
            return
        kind, size = crossover(curves)
        sweep = self.sweep()
        stated = next((name for phrase, name in KIND_OF_VERDICT if phrase in verdict), "")
        if stated:
            self.ledger.verdict(subject, "GPU vs CPU verdict", self.where, stated == kind,
                                stated, kind)
        found = re.search(r"GPU faster from [^=]+=(?P<size>.+?) up", verdict)
        if found and kind == "crossover" and size is not None:
            self.ledger.verdict(subject, "crossover size", self.where,
                                found["size"] == format_size(size, sweep), found["size"],
                                format_size(size, sweep))
        if speedup in ("", "-"):
            return
        both = [(size, cpu, gpu) for size, cpu, gpu in curves if cpu and gpu]
        if not both:
            self.ledger.cannot(subject, "GPU/CPU speedup", self.where, "no size on both")
            return
        largest, cpu_s, gpu_s = both[-1]
        ratio_text, _, at = speedup.partition(" at ")
        self.ratio(subject, "GPU/CPU speedup at the largest size", ratio_text, cpu_s / gpu_s)
        shown = format_size(largest, sweep) if largest else ""
        printed = at.partition("=")[2] if "=" in at else at
        self.ledger.verdict(subject, "largest size compared", self.where, printed == shown,
                            printed or "none", shown or "none")

    def sweep(self) -> str:
        """The swept parameter of the experiment in force."""
        return next((m.sweep for m in self.pool.select(self.place.experiment)), "")

    def curves(self, machine: str, variant: str, framework: str,
               any_variant: bool) -> list[tuple[float, float | None, float | None]] | None:
        """(size, fastest CPU median, fastest GPU median) per size, valid cases only.

        The CPU side is the variant's own CPU cells, or every variant's where the line says so
        or the variant has no CPU case on the machine (a GPU-only precision: older summaries
        did not say so at a glance). What the line says decides, not today's hints: a hint
        that changed since the report was drawn must not turn its figure into a mismatch."""
        own_cpu = [m for m in self.pool.select(self.place.experiment, machine, variant)
                   if m.kind == "cpu"]
        any_variant = any_variant or not own_cpu
        gpu = self.pool.select(self.place.experiment, machine, variant, framework, valid=True)
        cpu = self.pool.select(self.place.experiment, machine, "" if any_variant else variant,
                               framework, valid=True)
        gpu_best = _fastest_by_size([m for m in gpu if m.kind == "gpu"])
        cpu_best = _fastest_by_size([m for m in cpu if m.kind == "cpu"])
        if not gpu_best or not cpu_best:
            return None
        sizes = sorted(set(gpu_best) | set(cpu_best))
        return [(size, cpu_best.get(size), gpu_best.get(size)) for size in sizes]

    def variant_row(self, row: dict[str, str], cells: list[str]) -> None:
        framework, device = row.get("cell", " ").split(" ")[:2]
        size = cells[3]
        measured = self.case("variant median", machine=row.get("machine", ""),
                             variant=row.get("variant", ""), framework=framework,
                             device=device, size=size)
        if measured is None:
            return
        self.seconds(measured.subject, "median per step", row.get("median", "-"),
                     measured.median_step)
        versus = row.get("vs best", "")
        if versus == "best":
            return
        match = re.match(rf"({RATIO_TEXT}) slower than (\S+)", versus)
        if match is None:
            return
        best = self.case("variant ratio", machine=measured.machine, variant=match[2],
                         framework=framework, device=device, size=size)
        if best is not None and best.median_step and measured.median_step is not None:
            self.ratio(measured.subject, f"slower than {match[2]}", match[1],
                       measured.median_step / best.median_step)

    def ceiling_row(self, row: dict[str, str], cells: list[str]) -> None:
        """'| M | fw dev variant | size | 91.3 GFLOP/s | 260.8 | 35% |'."""
        parts = row.get("cell", "").split(" ")
        rate = RATE.match(row.get("best rate", ""))
        if len(parts) < 3 or rate is None:
            return
        measured = self.case(f"rate {rate['metric']}", machine=row.get("machine", ""),
                             framework=parts[0], device=parts[1], variant=parts[2],
                             size=cells[2])
        if measured is None or checkcounts.check_share(self.ledger, measured, self.where,
                                                       rate["metric"],
                                                       row.get("% of ceiling", "")):
            return
        recomputed = self.rate_figure(measured, "rate", rate["metric"],
                                      printed_fixed(rate["rate"], 1, unit=rate["metric"]),
                                      fixed(1, f" {rate['metric']}"))
        ceiling_text = row.get("ceiling", "").split(" (")[0]
        share = row.get("% of ceiling", "").split(" ")[0]
        if recomputed is None or not ceiling_text or not share.endswith("%"):
            return
        printed = printed_fixed(ceiling_text, 1)
        probes = self.probes(measured, rate["metric"])
        stored = next((probe for probe in probes if printed.matches(probe, fixed(1))), None)
        if "probe low" not in row.get("ceiling", ""):
            self.ledger.verdict(measured.subject, f"ceiling {rate['metric']}", self.where,
                                stored is not None, ceiling_text,
                                " or ".join(fixed(1)(probe) for probe in probes) or "none stored")
        # The share of a ceiling known only as printed carries that rounding too.
        ceiling = stored if stored is not None else printed.value
        spread = 0.0 if stored is not None else recomputed * printed.tolerance / ceiling ** 2
        share_printed = printed_fixed(share, 0, 0.01)
        self.ledger.printed(measured.subject, "% of ceiling", self.where,
                            Printed(share_printed.text, share_printed.value,
                                    share_printed.tolerance + spread),
                            recomputed / ceiling, percent)

    def probes(self, measured: Measured, metric: str) -> list[float]:
        """The machine's probes for this case stored by the runs of its experiment (a merged
        report shows the latest run's; any of them is a stored figure)."""
        found = []
        for document in self.pool.documents:
            if document.machine != measured.machine or not _experiment_matches(
                    self.place.experiment or measured.document.workload, document):
                continue
            entry = device_entry(document.ceilings, measured.cell.device)
            hints = document.hints
            if metric == "GFLOP/s":
                precisions = hints.get("variant_precision") or {}
                probe = flop_limits(entry, precision_of(measured.cell.variant, precisions))[0]
            else:
                probe = bandwidth_limits(entry, hints.get("bandwidth_ceiling")
                                         or MEMORY)[0]
            if probe is not None:
                found.append(float(probe))
        return found

    def rate(self, measured: Measured, metric: str) -> float | None:
        """FLOP/s or bytes/s of the case, in G, from the call's own work and its median."""
        spec, _ = load_spec(measured.document.workload)
        work = expected_work(spec, measured.case)
        amount = work["flops"] if metric == "GFLOP/s" else work["bytes"]
        call = measured.median_call
        return amount / call / 1e9 if amount is not None and call else None

    def rate_figure(self, measured: Measured, figure: str, metric: str, printed: Printed,
                    shown: Callable[[float], str]) -> float | None:
        """A printed rate against the recomputed one; None where it cannot be recomputed.

        A run that kept no FLOP count of its own is recomputed with today's formula, or with
        the formula of the day it started where that was another (formerflops); where neither
        agrees the figure is unverifiable (the formula may have changed since)."""
        recomputed = self.rate(measured, metric)
        own_count = metric != "GFLOP/s" or bool(measured.case.extra.get("flops_per_call"))
        if not own_count and recomputed is not None and not printed.matches(recomputed, shown):
            former = self.rate_of_its_day(measured)
            if former is not None and printed.matches(former[0], shown):
                self.ledger.printed(measured.subject, f"{figure} ({former[1]})", self.where,
                                    printed, former[0], shown)
                return former[0]
        if recomputed is None or own_count or printed.matches(recomputed, shown):
            same = self.ledger.printed(measured.subject, figure, self.where, printed,
                                       recomputed, shown)
            return recomputed if same or own_count else None
        self.ledger.cannot(measured.subject, figure, self.where,
                           f"printed {printed.text}, today's FLOP formula gives "
                           f"{shown(recomputed)} ({printed.value / recomputed:.3g}x); the run "
                           "kept no flops_per_call, so what it counted cannot be recomputed")
        return None

    def rate_of_its_day(self, measured: Measured) -> tuple[float, str] | None:
        """GFLOP/s by the FLOP formula of the day the run started, where it was not today's
        (harness.analysis.formerflops), and that formula's label."""
        former = formerflops.count_of_its_day(measured.document.workload, measured.case.case,
                                              measured.document.started)
        call = measured.median_call
        return (former.flops / call / 1e9, former.label) if former is not None and call else None

    def devicetime_row(self, row: dict[str, str], cells: list[str]) -> None:
        if "CPU best" in row:
            self.best_per_device_row(row)
            return
        parts = row.get("cell", "").split(" ")
        wall = next((text for name, text in row.items() if name.startswith("wall / ")), "-")
        if len(parts) < 3 or wall == "-":
            return
        measured = self.case("wall per step", framework=parts[0], device=parts[1],
                             variant=parts[2], size=row.get("size", ""))
        if measured is None:
            return
        call = measured.median_call
        self.seconds(measured.subject, "wall per step", wall,
                     None if call is None else call / measured.steps)
        cold = row.get("cold / warm", "-")
        if cold != "-" and call and measured.case.cold_seconds is not None:
            self.ledger.printed(measured.subject, "cold / warm", self.where,
                                printed_general(cold, 3), measured.case.cold_seconds / call,
                                lambda value: f"{value:.3g}x")

    def best_per_device_row(self, row: dict[str, str]) -> None:
        """'| torch | 1024 | CPU as written | CPU best (variant) | GPU ... | GPU 3.1x faster |'."""
        framework, size = row.get("framework", ""), row.get("size", "")
        cases = [m for m in self.pool.select(self.place.experiment, framework=framework,
                                             size=size, valid=True) if m.median_step is not None]
        written = next(iter(dict.fromkeys(m.cell.variant for m in self.pool.select(
            self.place.experiment))), "")
        best: dict[str, float] = {}
        for kind in ("cpu", "gpu"):
            own = [m for m in cases if m.kind == kind]
            label = kind.upper()
            mine = [m.median_step or 0.0 for m in own if m.cell.variant == written]
            if mine and row.get(f"{label} as written", "-") != "-":
                self.seconds(f"{framework} {kind}", f"{label} as written", row[
                    f"{label} as written"], min(mine))
            text, _, variant = row.get(f"{label} best", "").partition(" (")
            named = [m.median_step or 0.0 for m in own if m.cell.variant == variant.rstrip(")")]
            if named:
                self.seconds(f"{framework} {kind}", f"{label} best", text, min(named))
                best[kind] = min(named)
                self.order(f"{framework} {kind} {variant.rstrip(')')}", f"best {label} variant",
                           min(named), min(m.median_step or 0.0 for m in own))
        verdict = re.match(r"(GPU|CPU) ([\d.,e+]+)x faster", row.get("verdict", ""))
        if verdict and len(best) == 2:
            speedup = best["cpu"] / best["gpu"]
            value = speedup if verdict[1] == "GPU" else 1 / speedup
            self.ledger.printed(f"{framework} size {size}", f"{verdict[1]} faster by",
                                self.where, printed_general(verdict[2], 3), value,
                                lambda number: f"{number:.3g}")

    def memory_row(self, row: dict[str, str], cells: list[str]) -> None:
        """Peak memory per cell: the worker's RSS, and the largest case's device peaks."""
        parts = row.get("cell", "").split(" ")
        if len(parts) < 3:
            return
        found = [cell for document in self.pool.documents
                 if _experiment_matches(row.get("experiment", ""), document)
                 and document.machine == row.get("machine") for cell in document.cells
                 if (cell.framework, cell.device, cell.variant) == tuple(parts[:3])]
        subject = " ".join(parts[:3])
        if len(found) != 1:
            self.ledger.cannot(subject, "peak memory", self.where,
                               f"{len(found)} cells in run.json match")
            return
        cell = found[0]
        figures = {"host peak RSS": cell.peak_host_memory_bytes,
                   "device peak allocated": _largest(c.peak_device_allocated_bytes
                                                     for c in cell.cases),
                   "device peak reserved": _largest(c.peak_device_reserved_bytes
                                                    for c in cell.cases)}
        for name, value in figures.items():
            text = row.get(name, "-")
            if text == "-" or value is None:
                self.ledger.verdict(subject, name, self.where, (text == "-") == (value is None),
                                    text, format_bytes(value))
                continue
            self.ledger.printed(subject, name, self.where, printed_bytes(text), float(value),
                                format_bytes)

    def accuracy_row(self, row: dict[str, str], cells: list[str]) -> None:
        measured = self.case("accuracy", machine=row.get("machine", ""),
                             variant=row.get("variant", ""), framework=row.get("framework", ""),
                             device=row.get("device", ""), size=cells[4])
        if measured is None:
            return
        stored = measured.case.extra.get("accuracy")
        check = measured.case.check or {}
        if stored is None and "accuracy" in str(check.get("metric", "")):
            stored = check.get("value")
        self.ledger.printed(measured.subject, "accuracy", self.where, printed_fixed(cells[5], 4),
                            None if stored is None else float(stored), fixed(4))

    def distinct(self, line: str) -> None:
        """'Distinct training samples: 1000 (repeated to 3,000 per call: ...)': the distinct
        samples stored, and what one timed call trained (the case's own share, not the plan)."""
        match = re.match(r"- Distinct training samples: (?P<distinct>[\d, ]+?)"
                         r"(?: \(repeated to (?P<train>[\d,]+) per (?P<per>\w+))?[.:]", line)
        if match is None:
            return
        cases = self.pool.select(self.place.experiment)
        distinct = sorted({int(m.case.extra["samples_distinct"]) for m in cases
                           if isinstance(m.case.extra.get("samples_distinct"), (int, float))})
        shown = ", ".join(map(str, distinct))
        self.ledger.verdict("", "distinct training samples", self.where,
                            match["distinct"].strip() == shown, match["distinct"].strip(),
                            shown or "none stored")
        if match["train"] is None:
            return
        document = cases[0].document if cases else self.pool.documents[0]
        spec, _ = load_spec(document.workload)
        name = str(document.hints.get("epoch_samples_param")  # older runs: today's hint
                   or (spec.report_hints() if spec is not None else {}).get("epoch_samples_param")
                   or "")
        trained = sorted({float(value) for m in cases if m.case.measured
                          and isinstance(value := m.case.case.get(name), (int, float))})
        self.ledger.verdict("", f"training samples per {match['per']}", self.where,
                            [_number(match["train"])] == trained, match["train"],
                            ", ".join(f"{value:,.0f}" for value in trained) or "none")

    def breakdown(self, line: str) -> None:
        """'- M, fw dev variant: 40% of each step goes to NAME (A of B; ...)': B the cell's
        median, A its difference to the variant without the cost."""
        found = self.pool.machine_prefix(line[2:])
        match = None if found is None else re.match(
            rf", (?P<fw>\S+) (?P<dev>\S+) (?P<variant>\S+): (?P<share>\d+)% of each \w+ goes "
            rf"to (?P<name>.+) \((?P<over>{SECONDS_TEXT}) of (?P<total>{SECONDS_TEXT});",
            found[1])
        if found is None or match is None:
            return
        pairs = [pair for document in self.pool.documents
                 for pair in document.hints.get("overhead_pairs") or []]
        without = next((pair[1] for pair in pairs if pair[0] == match["variant"]
                        and pair[2] == match["name"]), None)
        headline = self.headline_of(found[0], match)
        if headline is None or without is None:
            return
        other = self.case("overhead", machine=found[0], variant=without, framework=match["fw"],
                          device=match["dev"], size=headline.size_text)
        if other is None or not headline.median_step or other.median_step is None:
            return
        overhead = max(headline.median_step - other.median_step, 0.0)
        subject = headline.subject
        self.seconds(subject, "median per step", match["total"], headline.median_step)
        self.seconds(subject, f"{match['name']} (vs {without})", match["over"], overhead)
        self.ledger.printed(subject, f"share of {match['name']}", self.where,
                            printed_fixed(match["share"] + "%", 0, 0.01),
                            overhead / headline.median_step, percent)

    def headline_of(self, machine: str, match: re.Match[str]) -> Measured | None:
        """The case a breakdown line speaks of: its cell's only valid case with a median, or
        the one whose median the line prints (the headline size)."""
        cases = self.pool.select(self.place.experiment, machine, match["variant"], match["fw"],
                                 match["dev"], valid=True)
        total = printed_seconds(match["total"])
        fitting = [m for m in cases if m.median_step is not None
                   and total.matches(m.median_step, format_seconds)]
        if len(cases) == 1 or len(fitting) == 1:
            return cases[0] if len(cases) == 1 else fitting[0]
        self.ledger.cannot(f"{match['fw']} {match['dev']} {match['variant']}", "overhead share",
                           self.where, "the headline size cannot be told from the line")
        return None

    # -- bullets --

    def bullet(self, line: str) -> None:
        head, _, rest = line[4:].partition("**")
        if rest.startswith(": "):
            self.glance(head, rest[2:])
        elif rest.startswith(", "):
            self.ranking(head, rest[2:])

    def glance(self, experiment: str, sentence: str) -> None:
        self.place = Place(experiment=experiment)
        if sentence.startswith("fastest on "):
            self.glance_fastest(sentence[len("fastest on "):])
        elif sentence.startswith("no verdict on "):
            self.glance_fastest(sentence[len("no verdict on "):])
        elif sentence.startswith("on "):
            found = self.pool.machine_prefix(sentence[3:])
            if found is not None and found[1].startswith(": "):
                self.glance_gpu(found[0], found[1][2:])

    def glance_fastest(self, text: str) -> None:
        found = self.pool.machine_prefix(text)
        if found is None:
            self.ledger.cannot("", "fastest cell", self.where, "no run of this machine")
            return
        machine, rest = found
        match = re.match(r"(?: at [^=]+=(?P<size>[^,:]+))?(?:, variant (?P<variant>\S+))?: .*?"
                         rf"(?P<fw>\S+) (?P<dev>\S+) \((?P<time>{SECONDS_TEXT}) per \w+\)"
                         rf"(?:, (?P<ratio>{RATIO_TEXT}) ahead of (?P<rfw>\S+) (?P<rdev>\S+) )?",
                         rest)
        if match is None:
            return
        variant = match["variant"] or self.only_variant()
        size = match["size"] or ""
        best = self.case("fastest median", machine=machine, variant=variant,
                         framework=match["fw"], device=match["dev"], size=size)
        if best is None:
            return
        self.seconds(best.subject, "median per step", match["time"], best.median_step)
        if match["ratio"]:
            runner = self.case("runner-up", machine=machine, variant=variant,
                               framework=match["rfw"], device=match["rdev"], size=size)
            if runner is not None:
                self.faster_by(best, runner, match["ratio"], "ahead by")

    def only_variant(self) -> str:
        variants = {m.cell.variant for m in self.pool.select(self.place.experiment)}
        return next(iter(variants)) if len(variants) == 1 else ""

    def glance_gpu(self, machine: str, sentence: str) -> None:
        for match in VERDICT.finditer(sentence):
            variant = match["variant"] or self.only_variant()
            speedup = (f"{match['ratio']} at {match['where']}" if match["where"]
                       else match["ratio"] or "-")
            if not variant:
                self.ledger.cannot(machine, "GPU vs CPU verdict", self.where,
                                   "the sentence names no variant and the runs hold several")
                continue
            self.gpu_verdict(machine, variant, "", bool(match["any"]), match["verdict"],
                             speedup)

    def ranking(self, device: str, rest: str) -> None:
        machine = ""
        found = self.pool.machine_prefix(rest)
        if found is not None and found[1].startswith(", variant "):
            machine, rest = found[0], found[1][2:]
        match = re.match(r"variant (?P<variant>\S+)(?: at [^=]+=(?P<size>[^:]+))?: (?P<list>.*)",
                         rest)
        if match is None:
            return
        ranked: list[Measured | None] = []
        for entry in RANKED.finditer(match["list"]):
            measured = self.case("ranked median", machine=machine, variant=match["variant"],
                                 framework=entry["framework"], device=device,
                                 size=match["size"] or "")
            if measured is None:
                ranked.append(None)
                continue
            self.seconds(measured.subject, f"rank {entry['rank']} median per step",
                         entry["time"], measured.median_step)
            ranked.append(measured)
            fastest, above = ranked[0], ranked[-2] if len(ranked) > 1 else None
            if entry["ratio"] and fastest is not None and fastest.median_step:
                self.ratio(measured.subject, "times the fastest", entry["ratio"],
                           (measured.median_step or math.nan) / fastest.median_step)
            if above is not None:
                self.order(above.subject, f"ranked above {measured.cell_name}",
                           above.median_step, measured.median_step)

    def cold(self, line: str) -> None:
        match = COLD.match(line)
        if match is None:
            return
        cells = [m for m in self.pool.select(self.place.experiment, match["machine"], valid=True)
                 if m.kind == match["kind"].lower() and m.case.cold_seconds is not None]
        first = _first_case_per_cell(cells)
        named = [m for m in first if (m.cell.framework, m.cell.device, m.cell.variant)
                 == (match["fw"], match["dev"], match["variant"])]
        if not named:
            self.ledger.cannot(f"{match['fw']} {match['dev']} {match['variant']}", "cold start",
                               self.where, "no such valid case in run.json")
            return
        case = named[0]
        self.seconds(case.subject, "cold call", match["cold"], case.case.cold_seconds)
        self.seconds(case.subject, "warm call median", match["warm"], case.median_call)
        worst = max(m.case.cold_seconds or 0.0 for m in first)
        self.order(case.subject, "largest cold call of its kind", worst,
                   case.case.cold_seconds)

    def why(self, line: str) -> None:
        match = WHY.match(line)
        if match is None:
            return
        gpu = [m for m in self.pool.select(self.place.experiment, match["machine"],
                                           match["variant"], match["fw"], valid=True)
               if m.kind == "gpu" and m.size_number is not None]
        ends = [next((m for m in gpu if m.size_text == match[name]), None)
                for name in ("low", "high")]
        subject = f"{match['fw']} GPU {match['variant']}"
        if ends[0] is None or ends[1] is None:
            self.ledger.cannot(subject, "flat GPU time", self.where, "sizes not in run.json")
            return
        low, high = ends[0].size_number or 0.0, ends[1].size_number or 0.0
        span = sorted((m for m in gpu if low <= (m.size_number or 0.0) <= high),
                      key=lambda m: m.size_number or 0.0)
        medians = [m.median_step for m in span if m.median_step is not None]
        work = [self.work_of(m) for m in (span[0], span[-1])]
        if work[0] and work[1]:
            self.ledger.printed(subject, "work growth", self.where,
                                printed_fixed(match["work"], 0), work[1] / work[0], fixed(0))
        if medians:
            self.ledger.printed(subject, "GPU time growth", self.where,
                                printed_general(match["time"], 2), max(medians) / min(medians),
                                lambda value: f"{value:.2g}")
            self.seconds(subject, "flat level", match["level"], median(medians))

    def work_of(self, measured: Measured) -> float | None:
        spec, _ = load_spec(measured.document.workload)
        work = expected_work(spec, measured.case)
        for amount in (work["flops"], work["bytes"]):
            if amount:
                return amount
        return measured.size_value

    def noisy(self, line: str) -> None:
        match = NOISY.match(line)
        found = None if match is None else self.pool.machine_prefix(match["rest"])
        if match is None or found is None:
            return
        machine, rest = found
        parts = rest.removeprefix(", ").split(" ")
        if len(parts) != 3:
            return
        cases = [m for m in self.pool.select(self.place.experiment, machine, parts[2], parts[0],
                                             parts[1], valid=True)]
        noisy = [m for m in cases if len(m.case.samples) >= 2 and (m.noise or 0) > NOISY_FRACTION]
        subject = " ".join(parts)
        listed = match["sizes"].split(", ")
        expected = [m.size_text for m in noisy if m.size_text] or ["-"]
        self.ledger.verdict(subject, "noisy sizes", self.where,
                            sorted(listed) == sorted(expected), ", ".join(listed),
                            ", ".join(expected) or "none")
        worst = max((m.noise or 0.0 for m in noisy), default=None)
        self.ledger.printed(subject, "worst IQR/median", self.where,
                            printed_fixed(match["worst"] + "%", 0, 0.01), worst, percent)

    def implausible(self, line: str) -> None:
        match = IMPLAUSIBLE.match(line)
        if match is not None:
            self.printed_rate(match, "rate reached")

    def probe(self, line: str) -> None:
        """'The ceiling probe was low on M cpu: it measured 86 GFLOP/s, but numpy fp32 at
        n=256 reached 243': the probe stored in run.json, and the case's rate."""
        match = PROBE_LOW.match(line)
        if match is None:
            return
        self.printed_rate(match, "rate reached")
        measured = self.pool.one(experiment=self.place.experiment, machine=match["machine"],
                                 variant=match["variant"], framework=match["fw"],
                                 device=match["dev"], size=match["size"] or "")
        if isinstance(measured, Measured):
            printed = printed_fixed(match["probe"], 0)
            probes = self.probes(measured, match["metric"])
            self.ledger.verdict(measured.subject, f"probe {match['metric']}", self.where,
                                any(printed.matches(probe, fixed(0)) for probe in probes),
                                match["probe"], " or ".join(map(fixed(0), probes)) or "none")

    def printed_rate(self, match: re.Match[str], figure: str) -> None:
        measured = self.case(figure, machine=match["machine"], variant=match["variant"],
                             framework=match["fw"], device=match["dev"],
                             size=match["size"] or "")
        if measured is not None:
            self.rate_figure(measured, f"{figure} ({match['metric']})", match["metric"],
                             printed_fixed(match["rate"], 0), fixed(0))

    def energy(self, line: str) -> None:
        if self.place.table == "breakdown":
            self.breakdown(line)
            return
        case_line = ENERGY_CASE.match(line)
        if case_line is not None:
            self.energy_case(case_line)
            return
        verdict = ENERGY_VERDICT.match(line)
        if verdict is not None:
            self.energy_verdict(verdict)

    def energy_case(self, match: re.Match[str]) -> None:
        measured = self.case("energy per step", experiment=match["workload"],
                             variant=match["variant"],
                             framework=match["fw"], device=match["dev"], size=match["size"])
        if measured is None:
            return
        energy = CaseEnergy.read(measured.case.extra.get("energy"))
        record = None if energy is None else energy.primary(measured.kind)
        subject = measured.subject
        if record is None or not record.ok or not record.window_s or not record.calls:
            self.ledger.cannot(subject, "energy per step", self.where, "no energy record")
            return
        steps = record.steps_per_call or 1.0
        window_step = record.window_s / record.calls / steps
        self.ledger.printed(subject, "joules per step", self.where,
                            printed_joules(match["joules"]), record.joules_per_step,
                            format_joules)
        self.ledger.printed(subject, "mean power", self.where, printed_fixed(match["watts"], 0),
                            record.watts_mean, fixed(0))
        self.seconds(subject, "energy window per step", match["window"], window_step)
        printed = printed_joules(match["joules"])
        power = printed_fixed(match["watts"], 0)
        product = power.value * printed_seconds(match["window"]).value
        slack = Printed(printed.text, printed.value, printed.tolerance
                        + ENERGY_TOLERANCE * printed.value + power.tolerance * window_step)
        self.ledger.printed(subject, "joules = watts x seconds per step", self.where, slack,
                            product, format_joules)
        self.ledger.printed(subject, "energy window", self.where,
                            printed_general(match["total"], 2), record.window_s,
                            lambda value: f"{value:.2g}")
        above = re.search(r"; ([\d.,]+ \w?J) above the ([\d,]+) W idle", match.group(0))
        if above is not None:
            self.ledger.printed(subject, "joules per step above idle", self.where,
                                printed_joules(above[1]), record.joules_per_step_above_idle,
                                format_joules)
            self.ledger.printed(subject, "idle power", self.where, printed_fixed(above[2], 0),
                                record.idle_watts, fixed(0))
        self.seconds(subject, "pooled median per step", match["timed"], measured.median_step)
        pooled = ("median of all rounds' samples" if len(measured.case.round_medians) > 1
                  else "median of the timed samples")
        self.ledger.verdict(subject, "label of the pooled median", self.where,
                            match["pooled"] == pooled, match["pooled"], pooled)

    def energy_verdict(self, match: re.Match[str]) -> None:
        where = {"machine": match["machine"], "variant": match["variant"],
                 "framework": match["fw"], "size": match["size"]}
        gpu = self.case("GPU vs CPU speed", match["workload"], device=match["gpu"], **where)
        cpu = self.case("GPU vs CPU speed", match["workload"], device=match["cpu"], **where)
        if gpu is None or cpu is None or not gpu.median_step or not cpu.median_step:
            return
        speed = cpu.median_step / gpu.median_step
        shown = speed if match["way"] == "faster" else 1 / speed
        self.ratio(gpu.subject, f"GPU {match['way']} than {cpu.cell_name}", match["speed"],
                   shown)
        self.ledger.verdict(gpu.subject, "GPU faster or slower", self.where,
                            (speed >= 1) == (match["way"] == "faster"), match["way"],
                            "faster" if speed >= 1 else "slower")
        if match["energy"]:
            self.energy_ratio(match, gpu, cpu)

    def energy_ratio(self, match: re.Match[str], gpu: Measured, cpu: Measured) -> None:
        """'2.1x less energy per step (62 mJ GPU board vs 130 mJ CPU packages)'."""
        gpu_j, cpu_j = _joules_per_step(gpu), _joules_per_step(cpu)
        if not gpu_j or cpu_j is None:
            self.ledger.cannot(gpu.subject, "energy ratio", self.where, "no energy records")
            return
        ratio = cpu_j / gpu_j
        self.ratio(gpu.subject, f"{match['less']} energy per step than {cpu.cell_name}",
                   match["energy"], ratio if match["less"] == "less" else 1 / ratio)
        for name, text, value in (("GPU board", match["gj"], gpu_j),
                                  ("CPU packages", match["cj"], cpu_j)):
            if text:
                self.ledger.printed(gpu.subject, f"{name} joules per step", self.where,
                                    printed_joules(text), value, format_joules)

    def call_share(self, line: str) -> None:
        """'one 1,000-sample call (1/3 epoch)': what one timed call trained, and its share of
        the planned epoch, from the cases' own parameters and the plan."""
        match = re.search(r"([\d,]+)-sample call \(([\d/.]+) epoch\)", line)
        cases = [m for m in self.pool.select(self.place.experiment) if m.case.measured]
        if match is None or not cases:
            return
        document = cases[0].document
        spec, _ = load_spec(document.workload)
        name = str(document.hints.get("epoch_samples_param")
                   or (spec.report_hints() if spec is not None else {}).get("epoch_samples_param")
                   or "")
        per_call = [float(m.case.case[name]) for m in cases
                    if isinstance(m.case.case.get(name), (int, float))]
        planned = document.params.get(name)
        if not per_call or not isinstance(planned, (int, float)):
            self.ledger.cannot("", "samples per call", self.where,
                               f"no {name or 'epoch samples'} parameter stored")
            return
        samples = max(per_call)
        self.ledger.verdict("", "samples per call", self.where,
                            _number(match[1]) == samples, match[1], f"{samples:,.0f}")
        parts = planned / samples
        share = (f"1/{parts:.0f}" if abs(parts - round(parts)) < 1e-9
                 else f"{samples / planned:.2g}")
        self.ledger.verdict("", "share of the planned epoch", self.where, match[2] == share,
                            match[2], share)

    def memory_fit(self, line: str) -> None:
        """A memory fit's bullet: its line refitted with numpy from the run's peaks."""
        match = MEMORY_FIT.match(line)
        if match is None:
            return  # 'no memory fit: why' says no figure
        document = next((d for d in self.pool.documents if d.run_id == match["run"]), None)
        cells = [] if document is None else [
            cell for cell in document.cells if (cell.framework, cell.device) ==
            (match["fw"], match["dev"]) and match["variant"] in (None, cell.variant)]
        subject = f"{match['fw']} {match['dev']} {match['variant'] or ''}".strip()
        if document is None or len(cells) != 1:
            self.ledger.cannot(subject, "memory fit", self.where,
                               f"{len(cells)} cells of run {match['run']} match")
            return
        check_memory_fit(self.ledger, self.where, subject, document, cells[0], match)

    def run_line(self, line: str) -> None:
        self.run_id = line[3:].partition("`")[0]

    def overhead(self, line: str) -> None:
        """'harness overhead: A s of B s (C s inside the timed calls, N worker processes)'."""
        match = OVERHEAD.search(line)
        document = next((d for d in self.pool.documents if d.run_id == self.run_id), None)
        if match is None:
            return
        if document is None:
            self.ledger.cannot(self.run_id, "harness overhead", self.where,
                               "the run is not among those checked")
            return
        costs = [cell.cost for cell in document.cells if cell.cost is not None]
        timed = sum(cost.timed_s for cost in costs)
        walls = sum(cost.wall_s for cost in costs)
        elapsed = ((document.finished - document.started)
                   if document.finished is not None and document.started is not None else 0.0)
        wall = max(elapsed, walls)
        workers = sum(cost.workers for cost in costs)
        one = fixed(1)
        self.ledger.printed("", "harness overhead: run wall time", self.where,
                            printed_fixed(match["wall"], 1), wall, one)
        self.ledger.printed("", "harness overhead: inside the timed calls", self.where,
                            printed_fixed(match["timed"], 1), timed, one)
        self.ledger.printed("", "harness overhead", self.where, printed_fixed(match["over"], 1),
                            wall - timed, one)
        self.ledger.verdict("", "harness overhead: worker processes", self.where,
                            int(match["workers"]) == workers, match["workers"], str(workers))

    # -- e: exponent notation --

    def exponents(self, line: str) -> None:
        for text in exponent_figures(line):
            self.ledger.verdict("", "number in exponent notation", self.where, False, text,
                                "a plain number (harness.core.units.three_digits)")


def _joules_per_step(measured: Measured) -> float | None:
    """The energy per step of the cell's own device (GPU board, or CPU packages)."""
    energy = CaseEnergy.read(measured.case.extra.get("energy"))
    record = None if energy is None else energy.primary(measured.kind)
    return record.joules_per_step if record is not None and record.ok else None


def _largest(values: Iterable[int | None]) -> int | None:
    known = [value for value in values if value is not None]
    return max(known) if known else None


def _subject_of(where: dict[str, Any]) -> str:
    parts = [str(where.get(name) or "") for name in ("framework", "device", "variant")]
    size = where.get("size")
    return " ".join(part for part in parts if part) + (f" size {size}" if size else "")


def _fastest_by_size(cases: list[Measured]) -> dict[float, float]:
    best: dict[float, float] = {}
    for item in cases:
        value, middle = item.size_value, item.median_step
        if value is None or middle is None:
            continue
        best[value] = min(middle, best.get(value, math.inf))
    return best


def crossover(curves: list[tuple[float, float | None, float | None]]) -> tuple[str, float | None]:
    """(kind, size) over the sizes both devices measured, smallest first: the smallest size
    from which the GPU is faster at every larger size."""
    both = [(size, cpu, gpu) for size, cpu, gpu in curves if cpu is not None and gpu is not None]
    if not both:
        return "no-overlap", None
    gpu_faster = [gpu < cpu for _, cpu, gpu in both]
    if all(gpu_faster):
        return "gpu-always", both[0][0]
    if not any(gpu_faster):
        return "cpu-always", None
    if not gpu_faster[-1]:
        return "mixed", None
    last_slower = max(index for index, faster in enumerate(gpu_faster) if not faster)
    return "crossover", both[last_slower + 1][0]


def _first_case_per_cell(cases: list[Measured]) -> list[Measured]:
    """Each cell's smallest valid case (the report's cold-start line reads that one)."""
    first: dict[tuple[str, str, str, str], Measured] = {}
    for item in sorted(cases, key=lambda m: (m.size_number if m.size_number is not None
                                             else math.inf, m.size_label)):
        key = (item.machine, item.cell.framework, item.cell.device, item.cell.variant)
        first.setdefault(key, item)
    return list(first.values())


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


# --- the whole audit ---------------------------------------------------------------------------

def audit_run(run_dir: Path, shuffle: Shuffle | None = None) -> Audit:
    """Every check on one run folder (StoreError when it is not one)."""
    run_dir = Path(run_dir)
    document = load_run(run_dir)
    ledger = Ledger(run_dir.name)
    spec, why = load_spec(document.workload)
    CsvCheck(ledger, document, spec, why, run_dir / MEASUREMENTS_FILE).run()
    check_derived(ledger, document, spec, why)
    check_round_orders(ledger, document, shuffle)
    summary = run_dir / SUMMARY_FILE
    # No summary.md (--no-report, or a report drawn over several runs elsewhere: check it
    # with --summary) prints no figure here; "figures per file" shows it was not read.
    if summary.is_file():
        SummaryCheck(ledger, Pool([document]), summary.read_text().splitlines()).run()
    return ledger.audit


def audit_summary(summary: Path, run_dirs: list[Path]) -> Audit:
    """A summary.md drawn from several runs (harness report A B --out DIR), against them all."""
    documents = [load_run(Path(run_dir)) for run_dir in run_dirs]
    ledger = Ledger(str(summary))
    SummaryCheck(ledger, Pool(documents), Path(summary).read_text().splitlines()).run()
    audit = ledger.audit
    audit.runs = 0  # the runs themselves are counted by audit_run
    return audit


def check_run(run_dir: Path, shuffle: Shuffle | None = None) -> list[Mismatch]:
    """The mismatches of one run folder (an empty list: every figure checked agreed)."""
    return audit_run(run_dir, shuffle).mismatches
