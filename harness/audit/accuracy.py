"""The accuracy table's and data lines' figures (harness.report.views.epochs ACCURACY_FAMILY):
a case's accuracy as its run stored it, the distinct training samples stored, and what one
timed call trained (the cases' own share of the epoch, not the plan); and where the rounds
shared an epoch out (harness.report.context CALL_FAMILY), the samples one call trained and its
share of the planned epoch."""

from __future__ import annotations

from harness.audit.ledger import FigureCheck
from harness.audit.measured import Measured, load_spec
from harness.audit.medians import named_case
from harness.audit.pool import Pool
from harness.audit.printed import fixed_reading
from harness.data.results import RunDocument
from harness.report.context import EPOCH_SHARE, SAMPLES_PER_CALL
from harness.report.views.epochs import ACCURACY, DISTINCT, TRAINED


def check_accuracy(check: FigureCheck, pool: Pool) -> None:
    figure, check = check.figure, check.about("")
    if figure.name == ACCURACY:
        case = named_case(check, pool)
        if case is None:
            return
        stored = case.case.extra.get("accuracy")
        stored_check = case.case.check or {}
        if stored is None and "accuracy" in str(stored_check.get("metric", "")):
            stored = stored_check.get("value")
        check.about(case.subject).reads(fixed_reading(4), None if stored is None
                                        else float(stored))
        return
    cases = pool.select(figure.subject.get("experiment", ""))
    if figure.name == DISTINCT:
        distinct = sorted({int(m.case.extra["samples_distinct"]) for m in cases
                           if isinstance(m.case.extra.get("samples_distinct"), (int, float))})
        shown = ", ".join(map(str, distinct))
        check.text_is(shown, shown=shown or "none stored")
    elif figure.name == TRAINED and cases:
        trained = sorted(set(_trained_per_call(cases)))
        check.verdict(trained == [figure.value], figure.text,
                      ", ".join(f"{value:,.0f}" for value in trained) or "none")
    else:
        check.cannot("no case of it in run.json")


def check_call_share(check: FigureCheck, pool: Pool) -> None:
    """What one timed call trained and its share of the planned epoch, from the cases' own
    parameters and the plan."""
    check = check.about("")
    cases = [m for m in pool.select(check.figure.subject.get("experiment", ""))
             if m.case.measured]
    per_call = _trained_per_call(cases)
    planned = cases[0].document.params.get(epoch_param(cases[0].document)) if cases else None
    if not per_call or not isinstance(planned, (int, float)):
        check.cannot("no samples per call stored with the plan")
        return
    samples = max(per_call)
    if check.figure.name == SAMPLES_PER_CALL:
        check.text_is(f"{samples:,.0f}")
    elif check.figure.name == EPOCH_SHARE:
        parts = planned / samples
        check.text_is(f"1/{parts:.0f}" if abs(parts - round(parts)) < 1e-9
                      else f"{samples / planned:.2g}")


def epoch_param(document: RunDocument) -> str:
    """The parameter that holds the samples of one epoch (older runs: today's hint)."""
    spec, _ = load_spec(document.workload)
    return str(document.hints.get("epoch_samples_param")
               or (spec.report.as_dict() if spec is not None else {}).get("epoch_samples_param")
               or "")


def _trained_per_call(cases: list[Measured]) -> list[float]:
    """The samples each timed case's call trained, as its case parameters store them."""
    if not cases:
        return []
    name = epoch_param(cases[0].document)
    return [float(value) for m in cases if m.case.measured
            and isinstance(value := m.case.case.get(name), (int, float))]
