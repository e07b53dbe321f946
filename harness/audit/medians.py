"""The timing figures of cases (harness.report.figure MEDIAN, SPREAD and RATIO): a case's median
and IQR per step and the ratio of two cases' medians, recomputed with numpy from the raw samples
of the cases the record names; and the order a record claims (the fastest of its size, not
faster than the case it is compared with)."""

from __future__ import annotations

from collections.abc import Mapping

from harness.audit.ledger import FigureCheck
from harness.audit.measured import Measured
from harness.audit.pool import Pool, _subject_of
from harness.audit.printed import PERCENT, RATIO, SECONDS
from harness.core.units import format_seconds
from harness.report.figure import CASE_FIELDS, CLAIM, FASTEST, VERSUS


def named_case(check: FigureCheck, pool: Pool, prefix: str = "") -> Measured | None:
    """The one case a record's subject names (with PREFIX: its second case, by the fields
    that differ from the first), or None, noted as unverifiable."""
    subject = check.figure.subject
    case = {name: subject.get(prefix + name, subject.get(name, "")) for name in CASE_FIELDS}
    found = pool.one(experiment=subject.get("experiment", ""), **case)
    if isinstance(found, str):
        check.about(_subject_of(case)).cannot(found)
        return None
    return found


def compared(subject: Mapping[str, str]) -> bool:
    """Whether a record names a second case."""
    return any(name.startswith(VERSUS) for name in subject)


def check_median(check: FigureCheck, pool: Pool) -> None:
    """A median per step; the order its subject claims."""
    case = named_case(check, pool)
    if case is None:
        return
    check.about(case.subject).reads(SECONDS, case.median_step)
    subject = check.figure.subject
    if subject.get(CLAIM) == FASTEST:
        others = pool.select(subject.get("experiment", ""), case.machine, case.cell.variant,
                             size=case.size_label, valid=True)
        quickest = min((m.median_step for m in others if m.median_step is not None),
                       default=None)
        _order(check.about(case.subject), FASTEST, case.median_step, quickest)
    if compared(subject):
        other = named_case(check, pool, VERSUS)
        if other is not None:
            _order(check.about(other.subject), f"not slower than {case.cell_name}",
                   other.median_step, case.median_step)


def check_spread(check: FigureCheck, pool: Pool) -> None:
    case = named_case(check, pool)
    if case is not None:
        check.about(case.subject).reads(SECONDS, case.iqr_step)


def check_ratio(check: FigureCheck, pool: Pool) -> None:
    """The case's median over the second case's."""
    case, other = named_case(check, pool), named_case(check, pool, VERSUS)
    if case is None or other is None:
        return
    top, bottom = case.median_step, other.median_step
    check.about(case.subject).reads(RATIO, top / bottom if top is not None and bottom else None)


def check_difference(check: FigureCheck, pool: Pool) -> None:
    """The case's median less the second case's (what the second one does without), in
    seconds or as a share of the case's median."""
    case, other = named_case(check, pool), named_case(check, pool, VERSUS)
    if case is None or other is None:
        return
    top, bottom = case.median_step, other.median_step
    difference = None if top is None or bottom is None else max(top - bottom, 0.0)
    if check.figure.unit == "%":
        check.about(case.subject).reads(
            PERCENT, difference / top if difference is not None and top else None)
    else:
        check.about(case.subject).reads(SECONDS, difference,
                                        f"{check.figure.name} (vs {other.cell.variant})")


def _order(check: FigureCheck, name: str, faster: float | None, slower: float | None) -> None:
    if faster is not None and slower is not None:
        check.verdict(faster <= slower * (1 + 1e-12), format_seconds(faster),
                      f"not above {format_seconds(slower)}", name)
