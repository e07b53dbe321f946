"""Why the GPU loses at small sizes (harness.report.views.crossover FLAT_FAMILY): over the span
of GPU sizes a record names, how much the work and the GPU time per step grew, and the median
level the time stayed at, recomputed from the cases' own work and raw samples."""

from __future__ import annotations

from harness.audit.ledger import Ledger
from harness.audit.measured import Measured, expected_work, load_spec, median, median_step
from harness.audit.pool import Pool
from harness.audit.printed import fixed, printed_fixed, printed_general, printed_seconds
from harness.core.units import format_seconds
from harness.report.figure import Figure
from harness.report.views.crossover import FLAT_LEVEL, TIME_GROWTH, WORK_GROWTH


def check_flat(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    subject = figure.subject
    gpu = [m for m in pool.select(subject.get("experiment", ""), subject.get("machine", ""),
                                  subject.get("variant", ""), subject.get("framework", ""),
                                  valid=True)
           if m.kind == "gpu" and m.size_number is not None]
    ends = [next((m for m in gpu if m.size_text == subject.get(name)), None)
            for name in ("from", "to")]
    label = f"{subject.get('framework')} GPU {subject.get('variant')}"
    if ends[0] is None or ends[1] is None:
        ledger.cannot(label, figure.name, where, "sizes not in run.json")
        return
    low, high = ends[0].size_number or 0.0, ends[1].size_number or 0.0
    span = sorted((m for m in gpu if low <= (m.size_number or 0.0) <= high),
                  key=lambda m: m.size_number or 0.0)
    medians = [value for m in span if (value := median_step(m.case)) is not None]
    if figure.name == WORK_GROWTH:
        work = [_work_of(m) for m in (span[0], span[-1])]
        ledger.printed(label, WORK_GROWTH, where, printed_fixed(figure.text, 0),
                       work[1] / work[0] if work[0] and work[1] else None, fixed(0))
    elif figure.name == TIME_GROWTH:
        ledger.printed(label, TIME_GROWTH, where, printed_general(figure.text, 2),
                       max(medians) / min(medians) if medians else None,
                       lambda value: f"{value:.2g}")
    elif figure.name == FLAT_LEVEL:
        ledger.printed(label, FLAT_LEVEL, where, printed_seconds(figure.text), median(medians),
                       format_seconds)


def _work_of(measured: Measured) -> float | None:
    """FLOPs of a call, else its bytes, else its size (what the sweep grows)."""
    spec, _ = load_spec(measured.document.workload)
    work = expected_work(spec, measured.case)
    for amount in (work["flops"], work["bytes"]):
        if amount:
            return amount
    return measured.size_value
