"""The rates' figures (harness.report.views.peak_share RATE_FAMILY): a case's FLOP/s or GB/s,
the ceiling it was judged against, its share of that ceiling and a low probe, recomputed from
the work of one call over its median and from the probes the runs stored."""

from __future__ import annotations

from harness.analysis.plausibility import (
    bandwidth_limits,
    device_entry,
    flop_limits,
    precision_of,
)
from harness.audit import checkcounts, formerflops
from harness.audit.ledger import FigureCheck, Reading
from harness.audit.measured import Measured, expected_work, load_spec, median_call
from harness.audit.medians import named_case
from harness.audit.pool import Pool, _experiment_matches
from harness.audit.printed import PERCENT, fixed, printed_fixed
from harness.data.ceilings import MEMORY
from harness.report.views.peak_share import (
    BEST_CEILING,
    CEILING,
    CEILING_OF,
    PROBE,
    RATE,
    SHARE,
)


def check_rate(check: FigureCheck, pool: Pool) -> None:
    """One record: the rate, a ceiling or a probe the runs stored, or the share of one."""
    case = named_case(check, pool)
    if case is None:
        return
    figure, check = check.figure, check.about(case.subject)
    metric = figure.subject.get("metric", "")
    if figure.name == RATE:
        _check_rate(check, case, metric)
    elif figure.name in (CEILING, PROBE):
        decimals = _decimals(figure.text)
        experiment = figure.subject.get("experiment", "")
        # A low probe's ceiling is the best rate a case of the device reached.
        probes = [rate for m in pool.select(experiment, case.document.machine,
                                            device=case.cell.device, valid=True)
                  for rate in [counted_rate(m, metric)[0]] if rate is not None] \
            if figure.subject.get(CEILING_OF) == BEST_CEILING \
            else probes_of(pool, case, metric, experiment)
        printed = printed_fixed(figure.text, decimals)
        check.verdict(any(printed.matches(probe, fixed(decimals)) for probe in probes),
                      figure.text, " or ".join(map(fixed(decimals), probes)) or "none stored",
                      f"{figure.name} {metric}")
    elif figure.name == SHARE:
        # A share of a disputed FLOP count is a mismatch in itself.
        if not checkcounts.check_share(check, case, metric):
            rate, _label = counted_rate(case, metric)
            ceiling = float(figure.subject.get(CEILING, "nan"))
            check.reads(PERCENT, None if rate is None else rate / ceiling)
    else:
        check.cannot("no recomputation for this figure")


def _decimals(text: str) -> int:
    """The decimals a number was printed with ('91.3' 1, '1,234' 0)."""
    return len(text.partition(".")[2])


def _check_rate(check: FigureCheck, case: Measured, metric: str) -> None:
    """A printed rate against the recomputed one; where the run kept no FLOP count of its own
    and the count it was printed with cannot be recomputed, unverifiable (counted_rate)."""
    decimals = _decimals(check.figure.text)
    shown = fixed(decimals, f" {metric}")
    reading: Reading = (lambda text: printed_fixed(text, decimals, unit=metric), shown)
    printed = reading[0](check.figure.text)
    recomputed, label = counted_rate(case, metric)
    own_count = metric != "GFLOP/s" or bool(case.case.extra.get("flops_per_call"))
    if recomputed is None or own_count or printed.matches(recomputed, shown):
        check.reads(reading, recomputed, f"{RATE} {metric}{label}")
        return
    check.cannot(f"printed {printed.text}, the FLOP formula gives {shown(recomputed)} "
                 f"({printed.value / recomputed:.3g}x); the run kept no flops_per_call, so "
                 "what it counted cannot be recomputed", f"{RATE} {metric}")


def counted_rate(case: Measured, metric: str) -> tuple[float | None, str]:
    """The rate with the FLOP count the run was made with, and that count's label: its own
    count, else the formula of the day it started where that was not today's (formerflops),
    else today's formula."""
    former = None if metric != "GFLOP/s" or case.case.extra.get("flops_per_call") else \
        formerflops.count_of_its_day(case.document.workload, case.case.case,
                                     case.document.started)
    call = median_call(case.case)
    if former is not None and call:
        return former.flops / call / 1e9, f" ({former.label})"
    return rate_of(case, metric), ""


def rate_of(case: Measured, metric: str) -> float | None:
    """FLOP/s or bytes/s of the case, in G, from the call's own work and its median."""
    spec, _ = load_spec(case.document.workload)
    work = expected_work(spec, case.case)
    amount = work["flops"] if metric == "GFLOP/s" else work["bytes"]
    call = median_call(case.case)
    return amount / call / 1e9 if amount is not None and call else None


def probes_of(pool: Pool, case: Measured, metric: str, experiment: str) -> list[float]:
    """The machine's probes for this case stored by the runs of its experiment (a merged
    report shows the latest run's; any of them is a stored figure)."""
    found = []
    for document in pool.documents:
        if document.machine != case.document.machine or not _experiment_matches(
                experiment or case.document.workload, document):
            continue
        entry = device_entry(document.ceilings, case.cell.device)
        hints = document.hints
        if metric == "GFLOP/s":
            precisions = hints.get("variant_precision") or {}
            probe = flop_limits(entry, precision_of(case.cell.variant, precisions))[0]
        else:
            probe = bandwidth_limits(entry, hints.get("bandwidth_ceiling") or MEMORY)[0]
        if probe is not None:
            found.append(float(probe))
    return found

