"""The timing figures of cases (harness.report.figure MEDIAN, SPREAD and RATIO): a case's median
and IQR per step and the ratio of two cases' medians, recomputed with numpy from the raw samples
of the cases the record names; and the order a record claims (the fastest of its size, not
faster than the case it is compared with)."""

from __future__ import annotations

from collections.abc import Mapping

from harness.audit.ledger import Ledger
from harness.audit.measured import Measured, iqr_step, median_step
from harness.audit.pool import Pool, _subject_of
from harness.audit.printed import percent, printed_fixed, printed_ratio, printed_seconds
from harness.core.units import format_ratio, format_seconds
from harness.report.figure import CASE_FIELDS, CLAIM, FASTEST, VERSUS, Figure


def named_case(ledger: Ledger, pool: Pool, where: str, figure: Figure,
               prefix: str = "") -> Measured | None:
    """The one case a record's subject names (with PREFIX: its second case, by the fields
    that differ from the first), or None, noted as unverifiable."""
    subject = figure.subject
    case = {name: subject.get(prefix + name, subject.get(name, "")) for name in CASE_FIELDS}
    found = pool.one(experiment=subject.get("experiment", ""), **case)
    if isinstance(found, str):
        ledger.cannot(_subject_of(case), figure.name, where, found)
        return None
    return found


def compared(subject: Mapping[str, str]) -> bool:
    """Whether a record names a second case."""
    return any(name.startswith(VERSUS) for name in subject)


def check_median(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    """A median per step; the order its subject claims."""
    case = named_case(ledger, pool, where, figure)
    if case is None:
        return
    ledger.printed(case.subject, figure.name, where, printed_seconds(figure.text),
                   median_step(case.case), format_seconds)
    if figure.subject.get(CLAIM) == FASTEST:
        others = pool.select(figure.subject.get("experiment", ""), case.document.machine,
                             case.cell.variant, size=case.key.size_label, valid=True)
        quickest = min((value for m in others if (value := median_step(m.case)) is not None),
                       default=None)
        _order(ledger, where, case.subject, FASTEST, median_step(case.case), quickest)
    if compared(figure.subject):
        other = named_case(ledger, pool, where, figure, VERSUS)
        if other is not None:
            _order(ledger, where, other.subject, f"not slower than {case.cell_name}",
                   median_step(other.case), median_step(case.case))


def check_spread(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    case = named_case(ledger, pool, where, figure)
    if case is not None:
        ledger.printed(case.subject, figure.name, where, printed_seconds(figure.text),
                       iqr_step(case.case), format_seconds)


def check_ratio(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    """The case's median over the second case's."""
    case = named_case(ledger, pool, where, figure)
    other = named_case(ledger, pool, where, figure, VERSUS)
    if case is None or other is None:
        return
    top, bottom = median_step(case.case), median_step(other.case)
    ledger.printed(case.subject, figure.name, where, printed_ratio(figure.text),
                   top / bottom if top is not None and bottom else None, format_ratio)


def check_difference(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    """The case's median less the second case's (what the second one does without), in
    seconds or as a share of the case's median."""
    case = named_case(ledger, pool, where, figure)
    other = named_case(ledger, pool, where, figure, VERSUS)
    if case is None or other is None:
        return
    top, bottom = median_step(case.case), median_step(other.case)
    difference = None if top is None or bottom is None else max(top - bottom, 0.0)
    if figure.unit == "%":
        ledger.printed(case.subject, figure.name, where, printed_fixed(figure.text, 0, 0.01),
                       difference / top if difference is not None and top else None, percent)
    else:
        ledger.printed(case.subject, f"{figure.name} (vs {other.cell.variant})", where,
                       printed_seconds(figure.text), difference, format_seconds)


def _order(ledger: Ledger, where: str, subject: str, figure: str, faster: float | None,
           slower: float | None) -> None:
    if faster is None or slower is None:
        return
    ledger.verdict(subject, figure, where, faster <= slower * (1 + 1e-12),
                   format_seconds(faster), f"not above {format_seconds(slower)}")
