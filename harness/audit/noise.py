"""A noisy cell's warning (harness.report.views.warnings NOISE_FAMILY): the sizes whose IQR over
median is above NOISY_FRACTION and the worst of them, recomputed from the raw samples."""

from __future__ import annotations

from harness.audit.ledger import FigureCheck
from harness.audit.measured import NOISY_FRACTION
from harness.audit.pool import Pool
from harness.audit.printed import PERCENT
from harness.report.views.warnings import NOISY_SIZES, WORST_NOISE


def check_noise(check: FigureCheck, pool: Pool) -> None:
    subject = check.figure.subject
    cases = pool.select(subject.get("experiment", ""), subject.get("machine", ""),
                        subject.get("variant", ""), subject.get("framework", ""),
                        subject.get("device", ""), valid=True)
    noisy = [m for m in cases if len(m.case.samples) >= 2 and (m.noise or 0) > NOISY_FRACTION]
    if check.figure.name == NOISY_SIZES:
        expected = [m.size_text for m in noisy if m.size_text] or ["-"]
        check.verdict(sorted(check.figure.text.split(", ")) == sorted(expected),
                      check.figure.text, ", ".join(expected))
    elif check.figure.name == WORST_NOISE:
        check.reads(PERCENT, max((m.noise or 0.0 for m in noisy), default=None))
