"""The best-per-device table's figures (harness.report.views.devicetime BEST_FAMILY): per
framework, size and device kind the fastest median of the variant as written and of the best
variant (no variant of the kind faster), and the best GPU's speedup over the best CPU."""

from __future__ import annotations

from harness.audit.ledger import Ledger
from harness.audit.measured import Measured, median_step
from harness.audit.pool import Pool
from harness.audit.printed import printed_general, printed_seconds
from harness.core.units import format_seconds
from harness.report.figure import Figure
from harness.report.views.devicetime import BEST, FASTER, WRITTEN


def check_best(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    subject = figure.subject
    experiment, kind = subject.get("experiment", ""), subject.get("kind", "")
    label = f"{subject.get('framework')} {kind} size {subject.get('size')}"
    cases = [m for m in pool.select(experiment, subject.get("machine", ""),
                                    framework=subject.get("framework", ""),
                                    size=subject.get("size", ""), valid=True)
             if median_step(m.case) is not None]
    best = {own: _fastest([m for m in cases if m.kind == own]) for own in ("cpu", "gpu")}
    if figure.name == FASTER:
        cpu, gpu = best["cpu"], best["gpu"]
        speedup = cpu / gpu if cpu is not None and gpu else None
        value = speedup if kind == "gpu" or speedup is None else 1 / speedup
        ledger.printed(label, f"{kind.upper()} {FASTER}", where,
                       printed_general(figure.text, 3), value, lambda number: f"{number:.3g}")
        return
    own = [m for m in cases if m.kind == kind]
    if figure.name == f"{kind} {WRITTEN}":
        # The variant as written: the experiment's first (its cases' order in run.json).
        variant = next(iter(dict.fromkeys(m.cell.variant for m in pool.select(experiment))), "")
    else:
        variant = subject.get("variant", "")
        ledger.verdict(f"{label} {variant}", f"{kind} {BEST} variant", where,
                       _fastest([m for m in own if m.cell.variant == variant]) == best[kind],
                       variant, "a faster variant of this kind")
    ledger.printed(label, figure.name, where, printed_seconds(figure.text),
                   _fastest([m for m in own if m.cell.variant == variant]), format_seconds)


def _fastest(cases: list[Measured]) -> float | None:
    return min((value for m in cases if (value := median_step(m.case)) is not None),
               default=None)

