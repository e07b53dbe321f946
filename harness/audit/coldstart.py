"""The cold-start figures (harness.report.views.crossover COLD_FAMILY): a cell's first call and
its warm median, recomputed from the cases of the machine and device kind the record names;
and a case's first call in warm calls (the device-time table)."""

from __future__ import annotations

import math

from harness.audit.ledger import FigureCheck
from harness.audit.measured import Measured
from harness.audit.medians import named_case
from harness.audit.pool import Pool
from harness.audit.printed import SECONDS, general_reading
from harness.core.units import format_seconds
from harness.report.views.crossover import COLD_IN_WARM


def check_cold(check: FigureCheck, pool: Pool) -> None:
    """A cold call is the largest first call of its device kind; the warm median is the named
    cell's, both of each cell's smallest valid case (the one the report reads)."""
    if check.figure.name == COLD_IN_WARM:
        case = named_case(check, pool)
        if case is not None:
            call, cold = case.median_call, case.case.cold_seconds
            check.about(case.subject).reads(general_reading(3, "x"), cold / call
                                            if call and cold is not None else None)
        return
    subject = check.figure.subject
    cells = [m for m in pool.select(subject.get("experiment", ""), subject.get("machine", ""),
                                    valid=True)
             if m.kind == subject.get("kind") and m.case.cold_seconds is not None]
    first = _first_case_per_cell(cells)
    cell = tuple(subject.get(name) for name in ("framework", "device", "variant"))
    named = [m for m in first if (m.cell.framework, m.cell.device, m.cell.variant) == cell]
    if not named:
        check.about(" ".join(str(part) for part in cell)).cannot("no such valid case in run.json")
        return
    case, check = named[0], check.about(named[0].subject)
    if check.figure.name == "warm call median":
        check.reads(SECONDS, case.median_call)
        return
    check.reads(SECONDS, case.case.cold_seconds)
    worst = max(m.case.cold_seconds or 0.0 for m in first)
    cold = case.case.cold_seconds or 0.0
    check.verdict(worst <= cold * (1 + 1e-12), format_seconds(worst),
                  f"not above {format_seconds(cold)}", "largest cold call of its kind")


def _first_case_per_cell(cases: list[Measured]) -> list[Measured]:
    """Each cell's smallest valid case (the report's cold-start line reads that one)."""
    first: dict[tuple[str, str, str, str], Measured] = {}
    for item in sorted(cases, key=lambda m: (m.size_number if m.size_number is not None
                                             else math.inf, m.size_label)):
        key = (item.machine, item.cell.framework, item.cell.device, item.cell.variant)
        first.setdefault(key, item)
    return list(first.values())
