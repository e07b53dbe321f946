"""The best-per-device table's figures (harness.report.views.devicetime BEST_FAMILY): per
framework, size and device kind the fastest median of the variant as written and of the best
variant (no variant of the kind faster), and the best GPU's speedup over the best CPU."""

from __future__ import annotations

from harness.audit.ledger import FigureCheck
from harness.audit.measured import Measured
from harness.audit.pool import Pool
from harness.audit.printed import SECONDS, general_reading
from harness.report.views.devicetime import BEST, FASTER, WRITTEN


def check_best(check: FigureCheck, pool: Pool) -> None:
    figure, subject = check.figure, check.figure.subject
    experiment, kind = subject.get("experiment", ""), subject.get("kind", "")
    check = check.about(f"{subject.get('framework')} {kind} size {subject.get('size')}")
    cases = [m for m in pool.select(experiment, subject.get("machine", ""),
                                    framework=subject.get("framework", ""),
                                    size=subject.get("size", ""), valid=True)
             if m.median_step is not None]
    best = {own: _fastest([m for m in cases if m.kind == own]) for own in ("cpu", "gpu")}
    if figure.name == FASTER:
        cpu, gpu = best["cpu"], best["gpu"]
        speedup = cpu / gpu if cpu is not None and gpu else None
        check.reads(general_reading(3), speedup if kind == "gpu" or speedup is None
                    else 1 / speedup, f"{kind.upper()} {FASTER}")
        return
    own = [m for m in cases if m.kind == kind]
    if figure.name == f"{kind} {WRITTEN}":
        # The variant as written: the experiment's first (its cases' order in run.json).
        variant = next(iter(dict.fromkeys(m.cell.variant for m in pool.select(experiment))), "")
    else:
        variant = subject.get("variant", "")
        check.about(f"{check.subject} {variant}").verdict(
            _fastest([m for m in own if m.cell.variant == variant]) == best[kind], variant,
            "a faster variant of this kind", f"{kind} {BEST} variant")
    check.reads(SECONDS, _fastest([m for m in own if m.cell.variant == variant]))


def _fastest(cases: list[Measured]) -> float | None:
    return min((m.median_step for m in cases if m.median_step is not None), default=None)

