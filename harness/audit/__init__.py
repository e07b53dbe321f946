"""`harness check`: every figure a run folder prints, recomputed from its own raw samples.

The product is a measurement, so a wrong printed number is the worst bug. This package audits a
run folder mechanically: measurements.csv against run.json row by row, run.json's derived
fields (the kept attempt, block steps, declared FLOPs, energy) against its raw samples, the
round orders against the plan, and the figures summary.md prints against a second computation:
each view records the figures it prints (harness.report.figure, figures.json beside summary.md)
and harness.audit.figures recomputes every record by its family, never reading the words
around it (harness.audit.summary only scans for numbers printed in exponent notation).

Why a second computation: the report takes its statistics from harness.data.results.sample_stats
and its tables from pandas; re-using them here would only prove that one function agrees with
itself. So the statistics are recomputed with numpy (median; quartiles by linear interpolation,
the method the report documents), the work per call from the raw fields, and every printed
figure is compared within the precision it was printed with (3 significant digits for times
and ratios) so that rounding is never called a mismatch. A figure the raw data cannot place is
reported as unverifiable, never skipped silently.
"""

from __future__ import annotations

from pathlib import Path

from harness.audit.commandcost import check_command_cost
from harness.audit.csvcheck import CsvCheck
from harness.audit.figures import check_figures
from harness.audit.ledger import SUMMARY_FILE, Audit, Ledger, Mismatch
from harness.audit.measured import load_spec
from harness.audit.pool import Pool
from harness.audit.predictions import check_predictions
from harness.audit.rundoc import Shuffle, check_derived, check_round_orders
from harness.audit.summary import check_exponents
from harness.data.store import MEASUREMENTS_FILE, load_run

__all__ = ["Audit", "Ledger", "Mismatch", "audit_run", "audit_summary"]


def audit_run(run_dir: Path, shuffle: Shuffle | None = None) -> Audit:
    """Every check on one run folder (StoreError when it is not one)."""
    run_dir = Path(run_dir)
    document = load_run(run_dir)
    ledger = Ledger(run_dir.name)
    spec, why = load_spec(document.workload)
    CsvCheck(ledger, document, spec, why, run_dir / MEASUREMENTS_FILE).run()
    check_derived(ledger, document, spec, why)
    check_round_orders(ledger, document, shuffle)
    check_predictions(ledger, document)
    check_command_cost(ledger, document)
    summary = run_dir / SUMMARY_FILE
    # No summary.md (--no-report, or a report drawn over several runs elsewhere: check it
    # with --summary) prints no figure here; "figures per file" shows it was not read.
    if summary.is_file():
        check_exponents(ledger, summary.read_text().splitlines())
        check_figures(ledger, Pool([document]), summary)
    return ledger.audit


def audit_summary(summary: Path, run_dirs: list[Path]) -> Audit:
    """A summary.md drawn from several runs (harness report A B --out DIR), against them all."""
    documents = [load_run(Path(run_dir)) for run_dir in run_dirs]
    ledger = Ledger(str(summary))
    check_exponents(ledger, Path(summary).read_text().splitlines())
    check_figures(ledger, Pool(documents), Path(summary))
    audit = ledger.audit
    audit.runs = 0  # the runs themselves are counted by audit_run
    return audit
