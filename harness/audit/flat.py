"""Why the GPU loses at small sizes (harness.report.views.crossover FLAT_FAMILY): over the span
of GPU sizes a record names, how much the work and the GPU time per step grew, and the median
level the time stayed at, recomputed from the cases' own work and raw samples."""

from __future__ import annotations

from harness.audit.ledger import FigureCheck
from harness.audit.measured import Measured, expected_work, load_spec, median
from harness.audit.pool import Pool
from harness.audit.printed import SECONDS, fixed_reading, general_reading
from harness.report.views.crossover import FLAT_LEVEL, TIME_GROWTH, WORK_GROWTH


def check_flat(check: FigureCheck, pool: Pool) -> None:
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
    medians = [m.median_step for m in span if m.median_step is not None]
    if check.figure.name == WORK_GROWTH:
        work = [_work_of(m) for m in (span[0], span[-1])]
        check.reads(fixed_reading(0), work[1] / work[0] if work[0] and work[1] else None)
    elif check.figure.name == TIME_GROWTH:
        check.reads(general_reading(2), max(medians) / min(medians) if medians else None)
    elif check.figure.name == FLAT_LEVEL:
        check.reads(SECONDS, median(medians))


def _work_of(measured: Measured) -> float | None:
    """FLOPs of a call, else its bytes, else its size (what the sweep grows)."""
    spec, _ = load_spec(measured.document.workload)
    work = expected_work(spec, measured.case)
    for amount in (work["flops"], work["bytes"]):
        if amount:
            return amount
    return measured.size_value
