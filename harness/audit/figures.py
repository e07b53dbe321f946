"""The figure records summary.md was made from (figures.json), each recomputed by its family.

A record names its family, its subject (the cases it is of), its value and the text printed;
the family's check recomputes it from the runs' raw data. The words around a figure are never
read: a reworded sentence changes nothing here. What is held to the prose is only that each
record's text is printed on the line the record says.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.audit import medians
from harness.audit.accuracy import check_accuracy, check_call_share
from harness.audit.checkcounts import check_disputed, check_omissions
from harness.audit.energy import check_energy
from harness.audit.gpucpu import check_gpu_vs_cpu
from harness.audit.ledger import SUMMARY_FILE, FigureCheck, Ledger
from harness.audit.memory import check_memory_fit, check_peak
from harness.audit.overhead import check_overhead
from harness.audit.pool import Pool, _subject_of
from harness.audit.predictedgpu import check_predicted_vs_measured
from harness.audit.predictions import check_printed_prediction, check_ranking
from harness.audit.rates import check_rate
from harness.predict.answer import FAMILY as PREDICTED_FAMILY
from harness.predict.ranking import RANKING_FAMILY
from harness.predict.versus import FAMILY as VERSUS_FAMILY
from harness.report.context import CALL_FAMILY
from harness.report.figure import (
    DIFFERENCE,
    FIGURES_FILE,
    MEDIAN,
    RATIO,
    SPREAD,
    read_figures,
)
from harness.report.summary import OVERHEAD_FAMILY
from harness.report.views.crossover import COLD_FAMILY, FLAT_FAMILY, GPU_FAMILY
from harness.report.views.devicetime import BEST_FAMILY
from harness.report.views.energy import ENERGY_FAMILY
from harness.report.views.epochs import ACCURACY_FAMILY
from harness.report.views.memory import FIT_FAMILY, MEMORY_FAMILY
from harness.report.views.peak_share import RATE_FAMILY
from harness.report.views.warnings import DISPUTED_FAMILY, NOISE_FAMILY

FamilyCheck = Callable[[FigureCheck, Pool], None]
FAMILIES: dict[str, FamilyCheck] = {
    COLD_FAMILY: medians.check_cold, MEDIAN: medians.check_median, SPREAD: medians.check_spread,
    RATIO: medians.check_ratio, DIFFERENCE: medians.check_difference,
    GPU_FAMILY: check_gpu_vs_cpu, ENERGY_FAMILY: check_energy, RATE_FAMILY: check_rate,
    ACCURACY_FAMILY: check_accuracy, MEMORY_FAMILY: check_peak, BEST_FAMILY: medians.check_best,
    FLAT_FAMILY: medians.check_flat, NOISE_FAMILY: medians.check_noise,
    PREDICTED_FAMILY: check_printed_prediction, CALL_FAMILY: check_call_share,
    FIT_FAMILY: check_memory_fit, DISPUTED_FAMILY: check_disputed,
    OVERHEAD_FAMILY: check_overhead, VERSUS_FAMILY: check_predicted_vs_measured,
    RANKING_FAMILY: check_ranking}


def check_figures(ledger: Ledger, pool: Pool, summary: Path) -> None:
    """Every record of the figures.json beside SUMMARY, against its line and its family."""
    figures = read_figures(summary.parent / FIGURES_FILE)
    if figures is None:
        ledger.cannot("", "figure records", SUMMARY_FILE,
                      f"no {FIGURES_FILE} beside it (drawn before the report recorded its "
                      "figures): draw it again with harness report")
        return
    lines = summary.read_text().splitlines()
    for figure in figures:
        check = FigureCheck(ledger, figure, f"{SUMMARY_FILE} line {figure.line}",
                            _subject_of(dict(figure.subject)))
        printed = lines[figure.line - 1] if 0 < figure.line <= len(lines) else ""
        if not printed_on(figure.text, printed):
            check.verdict(False, printed[:120] or "no such line", figure.text,
                          f"{figure.name} printed")
            continue
        family = FAMILIES.get(figure.family)
        if family is None:
            check.about("").cannot(f"no recomputation for family {figure.family!r}")
            continue
        try:
            family(check, pool)
        except (ValueError, KeyError, IndexError) as exc:  # a text its unit does not read
            check.cannot(f"its text {figure.text!r} does not read as {figure.unit} ({exc})")
    check_omissions(ledger, pool, SUMMARY_FILE, figures)


def printed_on(text: str, line: str) -> bool:
    """Whether TEXT is printed on LINE as a whole: not part of a longer number ('240' is not
    printed in '2401' nor in '1,240')."""
    start = line.find(text)
    while start >= 0:
        end = start + len(text)
        if not (_number_goes_on(line[start - 1::-1] if start else "")
                or _number_goes_on(line[end:])):
            return True
        start = line.find(text, start + 1)
    return False


def _number_goes_on(beyond: str) -> bool:
    """Whether BEYOND (the text past one end of a figure, read away from it) continues a
    number: a digit, or a separator followed by one."""
    return beyond[:1].isdigit() or (beyond[:1] in (",", ".") and beyond[1:2].isdigit())
