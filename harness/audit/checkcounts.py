"""`harness check` on disputed FLOP counts: the second opinion's verdict recomputed from the
figures the run stored, and every place that shows it held to that verdict.

A second implementation, as the rest of the audit (harness.audit): the stored
record (extra['flops_second_opinion']: parts, each with the op-level figure and the second
count's range, and the margin) is read and judged here without harness.data.secondopinion,
whose verdict made the printed lines. Held to it: measurements.csv's flops_disputed column,
summary.md's disputed-count records (harness.report.views.warnings DISPUTED_FAMILY: each part
named, with both figures and their ratio, and no disputed case left out) and the ceilings
table (no share of a peak from a disputed count).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.audit.ledger import FigureCheck, Ledger
from harness.audit.measured import Measured, median_call
from harness.audit.medians import named_case
from harness.audit.pool import Pool
from harness.audit.printed import RATIO
from harness.report.figure import CASE_FIELDS, Figure
from harness.report.views.warnings import (
    COUNT_RATIO,
    COUNTED,
    DISPUTED_FAMILY,
    MORE_PARTS,
    PART,
    SECOND_HIGH,
    SECOND_LOW,
)

RECORD = "flops_second_opinion"
NAMED = 3  # parts a line names before "and N more parts"


@dataclass(frozen=True)
class Dispute:
    """A stored part whose op-level figure lies outside the margin around the second count."""

    name: str
    counted: int
    low: int
    high: int

    def ratio(self) -> float | None:
        nearer = self.high if self.counted > self.high else self.low
        return self.counted / nearer if nearer else None


def disputes(extra: Mapping[str, object]) -> list[Dispute]:
    """The disputed parts of a case's stored second opinion, in stored order."""
    record = extra.get(RECORD)
    if not isinstance(record, dict) or not isinstance(record.get("parts"), list):
        return []
    margin = record.get("margin")
    margin = float(margin) if isinstance(margin, (int, float)) else 0.10
    found = []
    for part in record["parts"]:
        try:
            counted, low, high = (int(part[key]) for key in ("counted", "low", "high"))
        except (KeyError, TypeError, ValueError):
            continue
        if counted < low - margin * low or counted > high + margin * high:
            found.append(Dispute(str(part["name"]), counted, low, high))
    return found


def check_column(ledger: Ledger, measured: Measured, where: str, stored: str) -> None:
    """measurements.csv's flops_disputed: filled exactly where a part is disputed, naming the
    parts it has room for."""
    found = disputes(measured.case.extra)
    expected = "; ".join(item.name for item in found[:NAMED]) or "nothing"
    named = all(item.name in stored for item in found[:NAMED])
    ledger.verdict(measured.subject, "flops_disputed (the count is disputed)", where,
                   bool(stored) == bool(found) and named, stored or "nothing", expected)


def check_disputed(check: FigureCheck, pool: Pool) -> None:
    """One figure of a disputed count's line against the case's stored second opinion."""
    case = named_case(check, pool)
    if case is None:
        return
    figure, check = check.figure, check.about(case.subject)
    found = disputes(case.case.extra)
    if figure.name == MORE_PARTS:
        check.text_is(f"{len(found) - NAMED} more part")
        return
    part = next((item for item in found[:NAMED] if item.name == figure.subject.get(PART)), None)
    name = f"{figure.name} ({figure.subject.get(PART)})"
    if part is None:
        check.verdict(False, figure.text, "no such disputed part", name)
    elif figure.name == COUNT_RATIO:
        check.reads(RATIO, part.ratio(), name)
    else:
        stored = {COUNTED: part.counted, SECOND_LOW: part.low, SECOND_HIGH: part.high}
        check.text_is(f"{stored.get(figure.name, 0):,}", name)


def identity(measured: Measured) -> tuple[str, ...]:
    return (measured.document.machine, measured.document.workload, measured.cell.variant,
            measured.cell.framework, measured.cell.device, measured.key.size_label)


def check_omissions(ledger: Ledger, pool: Pool, where: str, figures: list[Figure]) -> None:
    """Every valid case with a disputed count has its records, naming the parts it has room
    for and counting the rest."""
    named: dict[tuple[str, ...], list[str]] = {}
    for figure in figures:
        if figure.family != DISPUTED_FAMILY:
            continue
        case = pool.one(experiment=figure.subject.get("experiment", ""),
                        **{name: figure.subject.get(name, "") for name in CASE_FIELDS})
        if not isinstance(case, str):
            parts = named.setdefault(identity(case), [])
            part = figure.subject.get(PART, MORE_PARTS)
            parts += [] if part in parts else [part]
    for measured in pool.select(valid=True):
        found = disputes(measured.case.extra)
        if not found or median_call(measured.case) is None:
            continue
        expected = [item.name for item in found[:NAMED]] + (
            [MORE_PARTS] if len(found) > NAMED else [])
        printed = named.get(identity(measured))
        if printed is None:
            ledger.verdict(measured.subject, "DISPUTED FLOP count line", where, False,
                           "no line", "; ".join(expected))
        else:
            ledger.verdict(measured.subject, "disputed parts", where, printed == expected,
                           "; ".join(printed), "; ".join(expected))


def check_share(check: FigureCheck, measured: Measured, metric: str) -> bool:
    """A share of the ceiling printed for a FLOP rate whose count is disputed is a mismatch.
    Returns whether the count is disputed (then no share should be checked further)."""
    if metric != "GFLOP/s" or not disputes(measured.case.extra):
        return False
    check.about(measured.subject).verdict(False, check.figure.text, "none: the count is disputed",
                                          "% of ceiling from a disputed FLOP count")
    return True
