"""The timing figures of cases, recomputed with numpy from the raw samples of the cases a record
names: a case's median and IQR per step and the ratio or difference of two cases' medians
(harness.report.figure MEDIAN, SPREAD, RATIO, DIFFERENCE), with the order a record claims (the
fastest of its size, not faster than the case it is compared with); the cold-start figures
(crossover COLD_FAMILY); the best-per-device table (devicetime BEST_FAMILY); why the GPU loses at
small sizes (crossover FLAT_FAMILY); and a noisy cell's warning (warnings NOISE_FAMILY)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from harness.audit.ledger import FigureCheck
from harness.audit.measured import (
    NOISY_FRACTION,
    Measured,
    expected_work,
    iqr_step,
    load_spec,
    median_call,
    median_or_none,
    median_step,
    noise_fraction,
)
from harness.audit.pool import Pool, _subject_of
from harness.audit.printed import PERCENT, RATIO, SECONDS, fixed_reading, general_reading
from harness.core.units import format_seconds
from harness.report.figure import CASE_FIELDS, CLAIM, FASTEST, VERSUS
from harness.report.views.crossover import COLD_IN_WARM, FLAT_LEVEL, TIME_GROWTH, WORK_GROWTH
from harness.report.views.devicetime import BEST, FASTER, WRITTEN
from harness.report.views.warnings import NOISY_SIZES, WORST_NOISE


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
    check.about(case.subject).reads(SECONDS, median_step(case.case))
    subject = check.figure.subject
    if subject.get(CLAIM) == FASTEST:
        others = pool.select(subject.get("experiment", ""), case.document.machine,
                             case.cell.variant, size=case.key.size_label, valid=True)
        quickest = min((step for m in others if (step := median_step(m.case)) is not None),
                       default=None)
        _order(check.about(case.subject), FASTEST, median_step(case.case), quickest)
    if compared(subject):
        other = named_case(check, pool, VERSUS)
        if other is not None:
            _order(check.about(other.subject), f"not slower than {case.cell_name}",
                   median_step(other.case), median_step(case.case))


def check_spread(check: FigureCheck, pool: Pool) -> None:
    case = named_case(check, pool)
    if case is not None:
        check.about(case.subject).reads(SECONDS, iqr_step(case.case))


def check_ratio(check: FigureCheck, pool: Pool) -> None:
    """The case's median over the second case's."""
    case, other = named_case(check, pool), named_case(check, pool, VERSUS)
    if case is None or other is None:
        return
    top, bottom = median_step(case.case), median_step(other.case)
    check.about(case.subject).reads(RATIO, top / bottom if top is not None and bottom else None)


def check_difference(check: FigureCheck, pool: Pool) -> None:
    """The case's median less the second case's (what the second one does without), in
    seconds or as a share of the case's median."""
    case, other = named_case(check, pool), named_case(check, pool, VERSUS)
    if case is None or other is None:
        return
    top, bottom = median_step(case.case), median_step(other.case)
    difference = None if top is None or bottom is None else max(top - bottom, 0.0)
    if check.figure.unit == "%":
        check.about(case.subject).reads(
            PERCENT, difference / top if difference is not None and top else None)
    else:
        check.about(case.subject).reads(SECONDS, difference,
                                        f"{check.figure.name} (vs {other.cell.variant})")


def _order(check: FigureCheck, name: str, faster: float | None, slower: float | None) -> None:
    """An order a record claims: FASTER (a median, a cold call) not above SLOWER."""
    if faster is not None and slower is not None:
        check.verdict(faster <= slower * (1 + 1e-12), format_seconds(faster),
                      f"not above {format_seconds(slower)}", name)


def check_cold(check: FigureCheck, pool: Pool) -> None:
    """A cold call is the largest first call of its device kind; the warm median is the named
    cell's, both of each cell's smallest valid case (the one the report reads)."""
    if check.figure.name == COLD_IN_WARM:
        case = named_case(check, pool)
        if case is not None:
            call, cold = median_call(case.case), case.case.cold_seconds
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
        check.reads(SECONDS, median_call(case.case))
        return
    check.reads(SECONDS, case.case.cold_seconds)
    _order(check, "largest cold call of its kind", max(m.case.cold_seconds or 0.0 for m in first),
           case.case.cold_seconds or 0.0)


def _first_case_per_cell(cases: list[Measured]) -> list[Measured]:
    """Each cell's smallest valid case (the report's cold-start line reads that one)."""
    first: dict[tuple[str, str, str, str], Measured] = {}
    for item in sorted(cases, key=lambda m: (m.size_number if m.size_number is not None
                                             else math.inf, m.key.size_label)):
        key = (item.document.machine, item.cell.framework, item.cell.device, item.cell.variant)
        first.setdefault(key, item)
    return list(first.values())


def check_best(check: FigureCheck, pool: Pool) -> None:
    """Per framework, size and device kind: the fastest median of the variant as written and of
    the best variant (no variant of the kind faster); the best GPU's speedup over the best CPU."""
    figure, subject = check.figure, check.figure.subject
    experiment, kind = subject.get("experiment", ""), subject.get("kind", "")
    check = check.about(f"{subject.get('framework')} {kind} size {subject.get('size')}")
    cases = [m for m in pool.select(experiment, subject.get("machine", ""),
                                    framework=subject.get("framework", ""),
                                    size=subject.get("size", ""), valid=True)
             if median_step(m.case) is not None]
    best = {own: _fastest([m for m in cases if m.kind == own]) for own in ("cpu", "gpu")}
    if figure.name == FASTER:
        cpu, gpu = best["cpu"], best["gpu"]
        speedup = cpu / gpu if cpu is not None and gpu else None
        check.reads(general_reading(3), speedup if kind == "gpu" or speedup is None
                    else 1 / speedup, f"{kind.upper()} {FASTER}")
        return
    own = [m for m in cases if m.kind == kind]
    if figure.name == f"{kind} {WRITTEN}":
        # The variant as written: the experiment's first (its cases' order in run.json).
        variant = next(iter(dict.fromkeys(m.cell.variant for m in pool.select(experiment))), "")
    else:
        variant = subject.get("variant", "")
        check.about(f"{check.subject} {variant}").verdict(
            _fastest([m for m in own if m.cell.variant == variant]) == best[kind], variant,
            "a faster variant of this kind", f"{kind} {BEST} variant")
    check.reads(SECONDS, _fastest([m for m in own if m.cell.variant == variant]))


def _fastest(cases: list[Measured]) -> float | None:
    return min((step for m in cases if (step := median_step(m.case)) is not None),
               default=None)


def check_flat(check: FigureCheck, pool: Pool) -> None:
    """Over the span of GPU sizes a record names: how much the work and the GPU time per step
    grew, and the median level the time stayed at."""
    subject = check.figure.subject
    gpu = [m for m in pool.select(subject.get("experiment", ""), subject.get("machine", ""),
                                  subject.get("variant", ""), subject.get("framework", ""),
                                  valid=True)
           if m.kind == "gpu" and m.size_number is not None]
    ends = [next((m for m in gpu if m.size_text == subject.get(name)), None)
            for name in ("from", "to")]
    check = check.about(f"{subject.get('framework')} GPU {subject.get('variant')}")
    if ends[0] is None or ends[1] is None:
        check.cannot("sizes not in run.json")
        return
    low, high = ends[0].size_number or 0.0, ends[1].size_number or 0.0
    span = sorted((m for m in gpu if low <= (m.size_number or 0.0) <= high),
                  key=lambda m: m.size_number or 0.0)
    medians = [step for m in span if (step := median_step(m.case)) is not None]
    if check.figure.name == WORK_GROWTH:
        work = [_work_of(m) for m in (span[0], span[-1])]
        check.reads(fixed_reading(0), work[1] / work[0] if work[0] and work[1] else None)
    elif check.figure.name == TIME_GROWTH:
        check.reads(general_reading(2), max(medians) / min(medians) if medians else None)
    elif check.figure.name == FLAT_LEVEL:
        check.reads(SECONDS, median_or_none(medians))


def _work_of(measured: Measured) -> float | None:
    """FLOPs of a call, else its bytes, else its size (what the sweep grows)."""
    spec, _ = load_spec(measured.document.workload)
    work = expected_work(spec, measured.case)
    for amount in (work["flops"], work["bytes"]):
        if amount:
            return amount
    return measured.size_value


def check_noise(check: FigureCheck, pool: Pool) -> None:
    """The sizes whose IQR over median is above NOISY_FRACTION, and the worst of them."""
    subject = check.figure.subject
    cases = pool.select(subject.get("experiment", ""), subject.get("machine", ""),
                        subject.get("variant", ""), subject.get("framework", ""),
                        subject.get("device", ""), valid=True)
    noisy = [m for m in cases
             if len(m.case.samples) >= 2 and (noise_fraction(m.case) or 0) > NOISY_FRACTION]
    if check.figure.name == NOISY_SIZES:
        expected = [m.size_text for m in noisy if m.size_text] or ["-"]
        check.verdict(sorted(check.figure.text.split(", ")) == sorted(expected),
                      check.figure.text, ", ".join(expected))
    elif check.figure.name == WORST_NOISE:
        check.reads(PERCENT, max((noise_fraction(m.case) or 0.0 for m in noisy), default=None))
