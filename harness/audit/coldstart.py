"""The cold-start figures (harness.report.views.crossover COLD_FAMILY): a cell's first call and
its warm median, recomputed from the cases of the machine and device kind the record names;
and a case's first call in warm calls (the device-time table)."""

from __future__ import annotations

import math

from harness.audit.ledger import Ledger
from harness.audit.measured import Measured, median_call
from harness.audit.medians import named_case
from harness.audit.pool import Pool
from harness.audit.printed import printed_general, printed_seconds
from harness.core.units import format_seconds
from harness.report.figure import Figure
from harness.report.views.crossover import COLD_IN_WARM


def check_cold(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    """A cold call is the largest first call of its device kind; the warm median is the named
    cell's, both of each cell's smallest valid case (the one the report reads)."""
    if figure.name == COLD_IN_WARM:
        _check_cold_in_warm(ledger, pool, where, figure)
        return
    subject = figure.subject
    cells = [m for m in pool.select(subject.get("experiment", ""), subject.get("machine", ""),
                                    valid=True)
             if m.kind == subject.get("kind") and m.case.cold_seconds is not None]
    first = _first_case_per_cell(cells)
    cell = tuple(subject.get(name) for name in ("framework", "device", "variant"))
    named = [m for m in first if (m.cell.framework, m.cell.device, m.cell.variant) == cell]
    if not named:
        ledger.cannot(" ".join(str(part) for part in cell), figure.name, where,
                      "no such valid case in run.json")
        return
    case = named[0]
    printed = printed_seconds(figure.text)
    if figure.name == "warm call median":
        ledger.printed(case.subject, figure.name, where, printed, median_call(case.case),
                       format_seconds)
        return
    ledger.printed(case.subject, figure.name, where, printed, case.case.cold_seconds,
                   format_seconds)
    worst = max(m.case.cold_seconds or 0.0 for m in first)
    cold = case.case.cold_seconds or 0.0
    ledger.verdict(case.subject, "largest cold call of its kind", where,
                   worst <= cold * (1 + 1e-12), format_seconds(worst),
                   f"not above {format_seconds(cold)}")


def _check_cold_in_warm(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    case = named_case(ledger, pool, where, figure)
    if case is None:
        return
    call, cold = median_call(case.case), case.case.cold_seconds
    ledger.printed(case.subject, COLD_IN_WARM, where, printed_general(figure.text, 3),
                   cold / call if call and cold is not None else None,
                   lambda value: f"{value:.3g}x")


def _first_case_per_cell(cases: list[Measured]) -> list[Measured]:
    """Each cell's smallest valid case (the report's cold-start line reads that one)."""
    first: dict[tuple[str, str, str, str], Measured] = {}
    for item in sorted(cases, key=lambda m: (m.size_number if m.size_number is not None
                                             else math.inf, m.key.size_label)):
        key = (item.document.machine, item.cell.framework, item.cell.device, item.cell.variant)
        first.setdefault(key, item)
    return list(first.values())
