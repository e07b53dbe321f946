"""The energy lines' figures (harness.report.views.energy ENERGY_FAMILY): joules, power and
window per step of a case, its pooled median, and a GPU cell against the CPU cell of its
framework, variant and size, recomputed from the case's stored energy record and raw samples."""

from __future__ import annotations

from collections.abc import Callable

from harness.audit.ledger import Ledger, Printed
from harness.audit.measured import Measured, median_step
from harness.audit.pool import Pool
from harness.audit.printed import (
    fixed,
    printed_fixed,
    printed_general,
    printed_joules,
    printed_ratio,
    printed_seconds,
)
from harness.core.units import format_joules, format_ratio, format_seconds
from harness.data.records import CaseEnergy, EnergyRecord
from harness.report.figure import VERSUS, Figure
from harness.report.views.energy import (
    ABOVE_IDLE,
    ENERGY_RATIO,
    HOST_JOULES,
    IDLE,
    JOULES,
    POWER,
    SPEED,
    TIMED,
    WAY,
    WINDOW,
    WINDOW_STEP,
)

# How each figure of a case is printed: its text read back, and the value formatted alike.
Reading = tuple[Callable[[str], Printed], Callable[[float], str]]
SECONDS: Reading = (printed_seconds, format_seconds)
JOULE: Reading = (printed_joules, format_joules)
WATTS: Reading = (lambda text: printed_fixed(text, 0), fixed(0))
READINGS: dict[str, Reading] = {
    JOULES: JOULE, ABOVE_IDLE: JOULE, HOST_JOULES: JOULE, POWER: WATTS, IDLE: WATTS,
    WINDOW_STEP: SECONDS, TIMED: SECONDS,
    WINDOW: (lambda text: printed_general(text, 2), lambda value: f"{value:.2g}")}


def check_energy(ledger: Ledger, pool: Pool, where: str, figure: Figure) -> None:
    """One record: a case's own figure, or a GPU-vs-CPU ratio of two cases."""
    case = _case(ledger, pool, where, figure)
    if case is None:
        return
    if figure.name in (SPEED, ENERGY_RATIO):
        other = _case(ledger, pool, where, figure, VERSUS)
        if other is not None:
            _check_pair(ledger, where, figure, case, other)
        return
    reading = READINGS.get(figure.name)
    if reading is None:
        ledger.cannot(case.subject, figure.name, where, "no recomputation for this figure")
        return
    ledger.printed(case.subject, figure.name, where, reading[0](figure.text),
                   _recomputed(figure.name, case), reading[1])


def _recomputed(name: str, case: Measured) -> float | None:
    """The figure from the case's stored energy records (the primary one of its device, the
    host's for HOST_JOULES) or its raw samples."""
    if name == TIMED:
        return median_step(case.case)
    energy = CaseEnergy.read(case.case.extra.get("energy"))
    record = None if energy is None else (energy.host if name == HOST_JOULES
                                          else energy.primary(case.kind))
    if record is None or not record.ok:
        return None
    return {JOULES: record.joules_per_step, HOST_JOULES: record.joules_per_step,
            ABOVE_IDLE: record.joules_per_step_above_idle, POWER: record.watts_mean,
            IDLE: record.idle_watts, WINDOW: record.window_s,
            WINDOW_STEP: _window_step(record)}.get(name)


def _window_step(record: EnergyRecord) -> float | None:
    if not record.window_s or not record.calls:
        return None
    return record.window_s / record.calls / (record.steps_per_call or 1.0)


def _check_pair(ledger: Ledger, where: str, figure: Figure, gpu: Measured,
                cpu: Measured) -> None:
    """GPU 'faster'/'slower' by the ratio of the medians; 'less'/'more' energy per step."""
    if figure.name == SPEED:
        top, bottom = median_step(cpu.case), median_step(gpu.case)
        good = "faster"
    else:
        top, bottom = _recomputed(JOULES, cpu), _recomputed(JOULES, gpu)
        good = "less"
    if top is None or not bottom:
        ledger.cannot(gpu.subject, figure.name, where, "no value to recompute it from")
        return
    ratio = top / bottom
    way = figure.subject.get(WAY, "")
    ledger.verdict(gpu.subject, f"{figure.name}: which way", where, (ratio >= 1) == (way == good),
                   way, good if ratio >= 1 else "the other way")
    ledger.printed(gpu.subject, f"{figure.name} ({way})", where, printed_ratio(figure.text),
                   ratio if way == good else 1 / ratio, format_ratio)


def _case(ledger: Ledger, pool: Pool, where: str, figure: Figure,
          prefix: str = "") -> Measured | None:
    """The case of the record's run (with PREFIX: its second case), or None, noted."""
    subject = figure.subject
    wanted = {name: subject.get(prefix + name, subject.get(name, ""))
              for name in ("run", "framework", "device", "variant", "size")}
    found = [m for m in pool.cases if m.document.run_id == wanted["run"]
             and (m.cell.framework, m.cell.device, m.cell.variant, m.key.size_label) ==
             (wanted["framework"], wanted["device"], wanted["variant"], wanted["size"])]
    if len(found) != 1:
        ledger.cannot(" ".join(wanted.values()), figure.name, where,
                      f"{len(found)} cases of run.json match")
        return None
    return found[0]
