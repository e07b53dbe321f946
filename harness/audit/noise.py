"""A noisy cell's warning (harness.report.views.warnings NOISE_FAMILY): the sizes whose IQR over
median is above NOISY_FRACTION and the worst of them, recomputed from the raw samples."""

from __future__ import annotations

from harness.audit.ledger import Ledger
from harness.audit.measured import NOISY_FRACTION, noise_fraction
from harness.audit.pool import Pool, _subject_of
from harness.audit.printed import percent, printed_fixed
from harness.report.figure import Figure
from harness.report.views.warnings import NOISY_SIZES, WORST_NOISE


def check_noise(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    subject = figure.subject
    cases = pool.select(subject.get("experiment", ""), subject.get("machine", ""),
                        subject.get("variant", ""), subject.get("framework", ""),
                        subject.get("device", ""), valid=True)
    noisy = [m for m in cases
             if len(m.case.samples) >= 2 and (noise_fraction(m.case) or 0) > NOISY_FRACTION]
    label = _subject_of(dict(subject))
    if figure.name == NOISY_SIZES:
        listed = figure.text.split(", ")
        expected = [m.size_text for m in noisy if m.size_text] or ["-"]
        ledger.verdict(label, NOISY_SIZES, where, sorted(listed) == sorted(expected),
                       figure.text, ", ".join(expected))
    elif figure.name == WORST_NOISE:
        ledger.printed(label, WORST_NOISE, where, printed_fixed(figure.text, 0, 0.01),
                       max((noise_fraction(m.case) or 0.0 for m in noisy), default=None), percent)
