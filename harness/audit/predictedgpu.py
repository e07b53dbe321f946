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

from harness.audit.ledger import FigureCheck, Printed, Reading
from harness.audit.pool import Pool
from harness.audit.predictions import numpy_cpu_step, numpy_noise, predicted_step
from harness.audit.printed import printed_general
from harness.core.units import three_digits
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.predict.profile import ProfileError
from harness.predict.versus import HOST, NOISE_FLOOR, RIGHT, TIE, WRONG
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
    document = pool.document(subject.get("run", ""))
    if document is None:
        return None
    gpu, cpu = (pool.cells_named({**subject, "device": subject.get(key, "")}, [document])
                for key in ("device", "cpu_device"))
    return (document, gpu[0], cpu[0]) if gpu and cpu else None


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
    predicted_s, interval = predicted_step(cpu_case, profile, HOST)
    cpu_s, gpu_s = numpy_cpu_step(cpu_case), numpy_cpu_step(gpu_case)
    return Recomputed(gpu_s, cpu_s, predicted_s,
                      None if interval is None else (interval.low_s, interval.high_s),
                      judged(cpu_s, gpu_s, predicted_s, numpy_noise(cpu_case)
                             + numpy_noise(gpu_case)))


def printed_ms(text: str) -> Printed:
    """'1.47 ms' (three significant digits), in seconds."""
    shown = printed_general(text.strip().removesuffix(" ms"), 3)
    return Printed(text.strip(), shown.value * 1e-3, shown.tolerance * 1e-3)


MILLISECONDS: Reading = (printed_ms, lambda seconds: f"{three_digits(seconds * 1e3)} ms")
TIMES: Reading = (lambda text: printed_general(text, 3), lambda value: f"{three_digits(value)}x")


def check_row(check: FigureCheck, size: Recomputed) -> None:
    """One row's figure against its size recomputed."""
    name = check.figure.name
    if name == MEASURED:
        check.reads(MILLISECONDS, size.measured_s)
    elif size.predicted_s is None:
        check.cannot("the prediction recomputed is unknown")
    elif name == PREDICTED:
        check.reads(MILLISECONDS, size.predicted_s)
    elif name == RATIO:
        check.reads(TIMES, size.predicted_s / size.measured_s)
    elif name == VERDICT:
        check.text_is(size.verdict)
    elif size.interval is None:
        check.cannot("no validated interval for it now")
    elif name == INTERVAL:
        # '1.1-1.94 ms': both bounds within their printed precision.
        low_text, _, high_text = check.figure.text.removesuffix(" ms").partition("-")
        for bound, shown, value in (("low", low_text, size.interval[0]),
                                    ("high", high_text, size.interval[1])):
            check.ledger.printed(check.subject, f"{INTERVAL} ({bound})", check.where,
                                 printed_ms(f"{shown} ms"), value, MILLISECONDS[1])
    elif name == IN_INTERVAL:
        low, high = size.interval
        check.text_is(INSIDE if low <= size.measured_s <= high else OUTSIDE)
    else:
        check.cannot("no recomputation for this figure")


def check_tally(check: FigureCheck, sizes: list[Recomputed]) -> None:
    """The sentence's figures over every size both cells measured."""
    predicted = [size for size in sizes if size.predicted_s is not None]
    if check.figure.name == WITHIN:
        banded = [size for size in predicted if size.interval is not None]
        inside = sum(size.interval[0] <= size.measured_s <= size.interval[1]
                     for size in banded if size.interval is not None)
        check.text_is(f"{inside} of {len(banded)}")
    elif check.figure.name == VERDICTS:
        counted = [size for size in predicted if size.verdict != TIE]
        check.text_is(f"{sum(size.verdict == RIGHT for size in counted)} of {len(counted)}")
    elif check.figure.name == MEDIAN_RATIO and predicted:
        ratios = [(size.predicted_s or 0.0) / size.measured_s for size in predicted]
        check.reads(TIMES, float(np.median(ratios)))
    else:
        check.cannot("no recomputation for this figure")


def check_predicted_vs_measured(check: FigureCheck, pool: Pool) -> None:
    """One record of the view: its row's size, or every size for the sentence's figures."""
    subject = check.figure.subject
    check = check.about(f"{subject.get('framework')} {subject.get('device')} "
                        f"{subject.get('variant')} on {subject.get('profile')}"
                        + (f" size {subject['size']}" if "size" in subject else ""))
    found = cells_named(pool, subject)
    if found is None:
        check.cannot("no such GPU and CPU cells in run.json")
        return
    document, gpu, cpu = found
    gpu_cases, cpu_cases = (measured_cases(cell, document.sweep) for cell in (gpu, cpu))
    sizes = [size for size in cpu_cases if size in gpu_cases
             and subject.get("profile", "") in cpu_cases[size].gpu_predictions]
    if "size" in subject:
        sizes = [size for size in sizes if size == subject["size"]]
    try:
        recomputed = [recomputed_size(subject.get("profile", ""), cpu_cases[size],
                                      gpu_cases[size]) for size in sizes]
    except (KeyError, ProfileError) as why:
        check.cannot(f"cannot recompute: {why}")
        return
    if not recomputed:
        check.cannot("no size measured on both with a prediction")
    elif "size" in subject:
        check_row(check, recomputed[0])
    else:
        check_tally(check, recomputed)
