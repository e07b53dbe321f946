"""The accuracy table's and data lines' figures (harness.report.views.epochs ACCURACY_FAMILY):
a case's accuracy as its run stored it, the distinct training samples stored, and what one
timed call trained (the cases' own share of the epoch, not the plan)."""

from __future__ import annotations

from harness.audit.ledger import Ledger
from harness.audit.measured import load_spec
from harness.audit.medians import named_case
from harness.audit.pool import Pool
from harness.audit.printed import fixed, printed_fixed
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
        document = cases[0].document
        spec, _ = load_spec(document.workload)
        name = str(document.hints.get("epoch_samples_param")  # older runs: today's hint
                   or (spec.report_hints() if spec is not None else {}).get("epoch_samples_param")
                   or "")
        trained = sorted({float(value) for m in cases if m.case.measured
                          and isinstance(value := m.case.case.get(name), (int, float))})
        ledger.verdict("", TRAINED, where, trained == [figure.value], figure.text,
                       ", ".join(f"{value:,.0f}" for value in trained) or "none")
    else:
        ledger.cannot("", figure.name, where, "no case of it in run.json")
