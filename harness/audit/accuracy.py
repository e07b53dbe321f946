"""The accuracy table's and data lines' figures (harness.report.views.epochs ACCURACY_FAMILY):
a case's accuracy as its run stored it, the distinct training samples stored, and what one
timed call trained (the cases' own share of the epoch, not the plan); and where the rounds
shared an epoch out (harness.report.context CALL_FAMILY), the samples one call trained and its
share of the planned epoch."""

from __future__ import annotations

from harness.audit.ledger import Ledger
from harness.audit.measured import Measured, load_spec
from harness.audit.medians import named_case
from harness.audit.pool import Pool
from harness.audit.printed import fixed, printed_fixed
from harness.data.results import RunDocument
from harness.report.context import EPOCH_SHARE, SAMPLES_PER_CALL
from harness.report.figure import Figure
from harness.report.views.epochs import ACCURACY, DISTINCT, TRAINED


def check_accuracy(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    if figure.name == ACCURACY:
        case = named_case(ledger, pool, where, figure)
        if case is None:
            return
        stored = case.case.extra.get("accuracy")
        check = case.case.check or {}
        if stored is None and "accuracy" in str(check.get("metric", "")):
            stored = check.get("value")
        ledger.printed(case.subject, ACCURACY, where, printed_fixed(figure.text, 4),
                       None if stored is None else float(stored), fixed(4))
        return
    cases = pool.select(figure.subject.get("experiment", ""))
    if figure.name == DISTINCT:
        distinct = sorted({int(m.case.extra["samples_distinct"]) for m in cases
                           if isinstance(m.case.extra.get("samples_distinct"), (int, float))})
        shown = ", ".join(map(str, distinct))
        ledger.verdict("", DISTINCT, where, figure.text == shown, figure.text,
                       shown or "none stored")
    elif figure.name == TRAINED and cases:
        trained = sorted(set(trained_per_call(cases)))
        ledger.verdict("", TRAINED, where, trained == [figure.value], figure.text,
                       ", ".join(f"{value:,.0f}" for value in trained) or "none")
    else:
        ledger.cannot("", figure.name, where, "no case of it in run.json")


def check_call_share(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    """What one timed call trained and its share of the planned epoch, from the cases' own
    parameters and the plan."""
    cases = [m for m in pool.select(figure.subject.get("experiment", "")) if m.case.measured]
    per_call = trained_per_call(cases)
    planned = cases[0].document.params.get(epoch_param(cases[0].document)) if cases else None
    if not per_call or not isinstance(planned, (int, float)):
        ledger.cannot("", figure.name, where, "no samples per call stored with the plan")
        return
    samples = max(per_call)
    if figure.name == SAMPLES_PER_CALL:
        ledger.verdict("", SAMPLES_PER_CALL, where, figure.text == f"{samples:,.0f}",
                       figure.text, f"{samples:,.0f}")
    elif figure.name == EPOCH_SHARE:
        parts = planned / samples
        share = (f"1/{parts:.0f}" if abs(parts - round(parts)) < 1e-9
                 else f"{samples / planned:.2g}")
        ledger.verdict("", EPOCH_SHARE, where, figure.text == share, figure.text, share)


def epoch_param(document: RunDocument) -> str:
    """The parameter that holds the samples of one epoch (older runs: today's hint)."""
    spec, _ = load_spec(document.workload)
    return str(document.hints.get("epoch_samples_param")
               or (spec.report_hints() if spec is not None else {}).get("epoch_samples_param")
               or "")


def trained_per_call(cases: list[Measured]) -> list[float]:
    """The samples each timed case's call trained, as its case parameters store them."""
    if not cases:
        return []
    name = epoch_param(cases[0].document)
    return [float(value) for m in cases if m.case.measured
            and isinstance(value := m.case.case.get(name), (int, float))]
