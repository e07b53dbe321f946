"""The predicted-vs-measured figures (harness.report.views.predicted, family versus.FAMILY):
a GPU step predicted from a run's CPU cell against the same case measured on its GPU cell.

A second computation, from run.json alone: the prediction made again from the CPU case's
stored features and the profile it names (model.recompute, host 'this' as stored), per
recorded step; the measured GPU step, the CPU step and both cases' spreads from their raw
samples with numpy (harness.audit.predictions); the interval from the shipped error table
held to the CPU case's spread; the verdict judged by the validation's tie rule. A row's
figures are held to these within the precision printed; the sentence's counts and median
ratio are recomputed over every size both cells measured. The words around them are never
read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from harness.audit.ledger import Ledger, Printed
from harness.audit.pool import Pool
from harness.audit.predictions import numpy_cpu_step, numpy_noise
from harness.audit.printed import printed_general
from harness.core.units import three_digits
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.predict.answer import FEATURES_KEY, PREDICTIONS_KEY, STEPS_KEY
from harness.predict.features import StepFeatures
from harness.predict.interval import band_for, interval_of
from harness.predict.model import Prediction, recompute
from harness.predict.profile import ProfileError, load_profile
from harness.predict.validation import NOISE_FLOOR
from harness.predict.versus import HOST, RIGHT, TIE, WRONG
from harness.report.figure import Figure
from harness.report.views.predicted import (
    IN_INTERVAL,
    INSIDE,
    INTERVAL,
    MEASURED,
    MEDIAN_RATIO,
    OUTSIDE,
    PREDICTED,
    RATIO,
    VERDICT,
    VERDICTS,
    WITHIN,
)
from harness.spec import Status


@dataclass(frozen=True)
class Recomputed:
    """One size's figures, recomputed (predicted_s None: the model says unknown)."""

    measured_s: float
    cpu_s: float
    predicted_s: float | None
    interval: tuple[float, float] | None
    verdict: str


def cells_named(pool: Pool, subject: Mapping[str, str],
                ) -> tuple[RunDocument, CellResult, CellResult] | None:
    """The run, its GPU cell and its CPU cell a record names."""
    for document in pool.documents:
        if document.run_id != subject.get("run"):
            continue
        found = {cell.device: cell for cell in document.cells
                 if cell.framework == subject.get("framework")
                 and cell.variant == subject.get("variant")}
        gpu, cpu = found.get(subject.get("device", "")), found.get(subject.get("cpu_device", ""))
        if gpu is not None and cpu is not None:
            return document, gpu, cpu
    return None


def measured_cases(cell: CellResult, sweep: str) -> dict[str, CaseResult]:
    return {str(case.case.get(sweep)): case for case in cell.cases
            if case.status == Status.OK and case.samples}


def judged(cpu_s: float, gpu_s: float, predicted_s: float | None, noise: float) -> str:
    """RIGHT, WRONG or TIE (a measured gap within max(5%, the spreads added))."""
    if abs(cpu_s - gpu_s) / min(cpu_s, gpu_s) <= max(NOISE_FLOOR, noise):
        return TIE
    if predicted_s is None:
        return WRONG
    return RIGHT if (predicted_s < cpu_s) == (gpu_s < cpu_s) else WRONG


def recomputed_size(profile: str, cpu_case: CaseResult, gpu_case: CaseResult) -> Recomputed:
    """One size's figures (ProfileError / KeyError where the prediction cannot be made)."""
    stored = Prediction.from_dict(cpu_case.extra[PREDICTIONS_KEY][profile][HOST])
    again = recompute(stored, StepFeatures.from_dict(cpu_case.extra[FEATURES_KEY]),
                      load_profile(profile))
    predicted_s = (again.seconds / float(cpu_case.extra.get(STEPS_KEY) or 1)
                   if again.seconds is not None else None)
    cpu_s, gpu_s = numpy_cpu_step(cpu_case), numpy_cpu_step(gpu_case)
    cpu_noise = numpy_noise(cpu_case)
    interval = None
    band = band_for(profile, str(again.profile.get("identity")), HOST, again.regime)
    if band is not None and predicted_s is not None:
        found = interval_of(predicted_s, band, cpu_noise)
        interval = (found.low_s, found.high_s)
    return Recomputed(gpu_s, cpu_s, predicted_s, interval,
                      judged(cpu_s, gpu_s, predicted_s, cpu_noise + numpy_noise(gpu_case)))


def printed_ms(text: str) -> Printed:
    """'1.47 ms' (three significant digits), in seconds."""
    shown = printed_general(text.strip().removesuffix(" ms"), 3)
    return Printed(text.strip(), shown.value * 1e-3, shown.tolerance * 1e-3)


def ms_text(seconds: float) -> str:
    return f"{three_digits(seconds * 1e3)} ms"


def check_row(ledger: Ledger, label: str, where: str, figure: Figure,
              size: Recomputed) -> None:
    """One row's figure against its size recomputed."""
    if figure.name == MEASURED:
        ledger.printed(label, MEASURED, where, printed_ms(figure.text), size.measured_s, ms_text)
    elif size.predicted_s is None:
        ledger.cannot(label, figure.name, where, "the prediction recomputed is unknown")
    elif figure.name == PREDICTED:
        ledger.printed(label, PREDICTED, where, printed_ms(figure.text), size.predicted_s,
                       ms_text)
    elif figure.name == RATIO:
        ledger.printed(label, RATIO, where, printed_general(figure.text, 3),
                       size.predicted_s / size.measured_s, lambda v: f"{three_digits(v)}x")
    elif figure.name == VERDICT:
        ledger.verdict(label, VERDICT, where, figure.text == size.verdict, figure.text,
                       size.verdict)
    elif size.interval is None:
        ledger.cannot(label, figure.name, where, "no validated interval for it now")
    elif figure.name == INTERVAL:
        check_interval(ledger, label, where, figure.text, size.interval)
    elif figure.name == IN_INTERVAL:
        low, high = size.interval
        expected = INSIDE if low <= size.measured_s <= high else OUTSIDE
        ledger.verdict(label, IN_INTERVAL, where, figure.text == expected, figure.text,
                       expected)
    else:
        ledger.cannot(label, figure.name, where, "no recomputation for this figure")


def check_interval(ledger: Ledger, label: str, where: str, text: str,
                   interval: tuple[float, float]) -> None:
    """'1.1-1.94 ms': both bounds within their printed precision."""
    low_text, _, high_text = text.removesuffix(" ms").partition("-")
    for bound, shown, value in (("low", low_text, interval[0]), ("high", high_text,
                                                                  interval[1])):
        ledger.printed(label, f"{INTERVAL} ({bound})", where, printed_ms(f"{shown} ms"), value,
                       ms_text)


def check_tally(ledger: Ledger, label: str, where: str, figure: Figure,
                sizes: list[Recomputed]) -> None:
    """The sentence's figures over every size both cells measured."""
    predicted = [size for size in sizes if size.predicted_s is not None]
    if figure.name == WITHIN:
        banded = [size for size in predicted if size.interval is not None]
        inside = sum(size.interval[0] <= size.measured_s <= size.interval[1]
                     for size in banded if size.interval is not None)
        expected = f"{inside} of {len(banded)}"
        ledger.verdict(label, WITHIN, where, figure.text == expected, figure.text, expected)
    elif figure.name == VERDICTS:
        counted = [size for size in predicted if size.verdict != TIE]
        expected = f"{sum(size.verdict == RIGHT for size in counted)} of {len(counted)}"
        ledger.verdict(label, VERDICTS, where, figure.text == expected, figure.text, expected)
    elif figure.name == MEDIAN_RATIO and predicted:
        ratios = [(size.predicted_s or 0.0) / size.measured_s for size in predicted]
        ledger.printed(label, MEDIAN_RATIO, where, printed_general(figure.text, 3),
                       float(np.median(ratios)), lambda v: f"{three_digits(v)}x")
    else:
        ledger.cannot(label, figure.name, where, "no recomputation for this figure")


def check_predicted_vs_measured(ledger: Ledger, pool: Pool, where: str,
                                figure: Figure) -> None:
    """One record of the view: its row's size, or every size for the sentence's figures."""
    subject = figure.subject
    label = (f"{subject.get('framework')} {subject.get('device')} {subject.get('variant')} "
             f"on {subject.get('profile')}" + (f" size {subject['size']}" if "size" in subject
                                               else ""))
    found = cells_named(pool, subject)
    if found is None:
        ledger.cannot(label, figure.name, where, "no such GPU and CPU cells in run.json")
        return
    document, gpu, cpu = found
    gpu_cases, cpu_cases = measured_cases(gpu, document.sweep), measured_cases(cpu,
                                                                               document.sweep)
    sizes = [size for size in cpu_cases if size in gpu_cases
             and subject.get("profile", "") in (cpu_cases[size].extra.get(PREDICTIONS_KEY)
                                                or {})]
    if "size" in subject:
        sizes = [size for size in sizes if size == subject["size"]]
    try:
        recomputed = [recomputed_size(subject.get("profile", ""), cpu_cases[size],
                                      gpu_cases[size]) for size in sizes]
    except (KeyError, ProfileError) as why:
        ledger.cannot(label, figure.name, where, f"cannot recompute: {why}")
        return
    if not recomputed:
        ledger.cannot(label, figure.name, where, "no size measured on both with a prediction")
    elif "size" in subject:
        check_row(ledger, label, where, figure, recomputed[0])
    else:
        check_tally(ledger, label, where, figure, recomputed)
