"""The energy lines' figures (harness.report.views.energy ENERGY_FAMILY): joules, power and
window per step of a case, its pooled median, and a GPU cell against the CPU cell of its
framework, variant and size, recomputed from the case's stored energy record and raw samples."""

from __future__ import annotations

from harness.audit.ledger import FigureCheck, Reading
from harness.audit.measured import Measured, median_step
from harness.audit.pool import Pool
from harness.audit.printed import JOULE, RATIO, SECONDS, fixed_reading, general_reading
from harness.data.records import CaseEnergy, EnergyRecord
from harness.report.figure import VERSUS
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
READINGS: dict[str, Reading] = {
    JOULES: JOULE, ABOVE_IDLE: JOULE, HOST_JOULES: JOULE, POWER: fixed_reading(0),
    IDLE: fixed_reading(0), WINDOW_STEP: SECONDS, TIMED: SECONDS, WINDOW: general_reading(2)}


def check_energy(check: FigureCheck, pool: Pool) -> None:
    """One record: a case's own figure, or a GPU-vs-CPU ratio of two cases."""
    case = _case(check, pool)
    if case is None:
        return
    if check.figure.name in (SPEED, ENERGY_RATIO):
        other = _case(check, pool, VERSUS)
        if other is not None:
            _check_pair(check.about(case.subject), case, other)
        return
    reading = READINGS.get(check.figure.name)
    if reading is None:
        check.about(case.subject).cannot("no recomputation for this figure")
        return
    check.about(case.subject).reads(reading, _recomputed(check.figure.name, case))


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


def _check_pair(check: FigureCheck, gpu: Measured, cpu: Measured) -> None:
    """GPU 'faster'/'slower' by the ratio of the medians; 'less'/'more' energy per step."""
    name = check.figure.name
    if name == SPEED:
        top, bottom = median_step(cpu.case), median_step(gpu.case)
        good = "faster"
    else:
        top, bottom = _recomputed(JOULES, cpu), _recomputed(JOULES, gpu)
        good = "less"
    if top is None or not bottom:
        check.cannot("no value to recompute it from")
        return
    ratio = top / bottom
    way = check.figure.subject.get(WAY, "")
    check.verdict((ratio >= 1) == (way == good), way, good if ratio >= 1 else "the other way",
                  f"{name}: which way")
    check.reads(RATIO, ratio if way == good else 1 / ratio, f"{name} ({way})")


def _case(check: FigureCheck, pool: Pool, prefix: str = "") -> Measured | None:
    """The case of the record's run (with PREFIX: its second case), or None, noted."""
    subject = check.figure.subject
    wanted = {name: subject.get(prefix + name, subject.get(name, ""))
              for name in ("run", "framework", "device", "variant", "size")}
    found = [m for m in pool.cases if m.document.run_id == wanted["run"]
             and (m.cell.framework, m.cell.device, m.cell.variant, m.key.size_label) ==
             (wanted["framework"], wanted["device"], wanted["variant"], wanted["size"])]
    if len(found) != 1:
        check.about(" ".join(wanted.values())).cannot(f"{len(found)} cases of run.json match")
        return None
    return found[0]
