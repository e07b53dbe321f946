"""One measured case as the advice reads it, and the diagnosis of an as-written case.

A stored run's cases (harness.data.results) per step (a Keras call is many steps), with their
noise, check and device-busy profile; the diagnosis names what bounds the as-written step
(harness.measure.devicetime on a GPU, the host on a CPU), which ranks the fixes to try
(harness.analysis.fixchoice) and explains those measured (harness.analysis.advice).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.analysis.fixchoice import HOST_BOUND, UNPROFILED
from harness.analysis.noise import CaseNoise
from harness.analysis.plausibility import bandwidth_limits, device_entry, flop_limits
from harness.core.units import device_kind, format_seconds
from harness.data.ceilings import MEMORY, Ceilings
from harness.data.results import CaseResult, CellResult, RunDocument
from harness.measure.devicetime import Diagnosis, attribute, diagnose
from harness.spec import Status


@dataclass(frozen=True)
class Measured:
    """One case of one cell at one batch: its time per step, noise, check and device figures."""

    variant: str
    framework: str
    device: str
    size: Any
    status: str
    reason: str
    noise: CaseNoise | None  # per step; None without warm samples
    steps: float
    check: dict[str, Any] | None
    profile: dict[str, Any] | None  # the device-busy pass per call (or {"reason": ...})
    flops: float | None  # per call
    cold_s: float | None
    # The cell's status: a worker stopped from outside (the budget's deadline, --timeout, a
    # stop signal) leaves a timeout or interrupted cell whose finished cases read ok.
    cell_status: str = ""
    suspect: str = ""  # why the worker's timing guard doubts this time ('' when it does not)

    @property
    def median_s(self) -> float | None:
        return self.noise.median if self.noise is not None and self.noise.samples else None

    @property
    def call_median_s(self) -> float | None:
        median = self.median_s
        return None if median is None else median * self.steps

    @property
    def passed(self) -> bool | None:
        """The check's verdict (None: no check ran, or it compared nothing)."""
        if not self.check or self.check.get("metric") == "not_compared":
            return None
        return bool(self.check.get("passed"))

    @property
    def valid(self) -> bool:
        return self.median_s is not None and self.status in (Status.OK.value,
                                                              Status.INVALID.value)


def measured_case(cell: CellResult, case: CaseResult, sweep: str) -> Measured:
    """The advice's view of one stored case: samples per step (a Keras call is many steps)."""
    steps = float(case.extra.get("steps_per_call") or 1.0) or 1.0
    per_step = {number: [seconds / steps for seconds in part]
                for number, part in case.samples_by_round().items()}
    noise = CaseNoise.of(per_step) if per_step else None
    flops = case.extra.get("flops_per_call")
    return Measured(cell.variant, cell.framework, cell.device, case.case.get(sweep),
                    case.status.value, case.reason or cell.reason, noise, steps, case.check,
                    case.device_profile, float(flops) if flops else None, case.cold_seconds,
                    cell.status.value, case.suspect)


def measured_cases(document: RunDocument) -> list[Measured]:
    """Every case of every cell of a run; a cell that stopped before its cases, one row."""
    found = []
    for cell in document.cells:
        cases = [measured_case(cell, case, document.sweep) for case in cell.cases]
        if not cases:
            cases = [Measured(cell.variant, cell.framework, cell.device, None,
                              cell.status.value, cell.reason, None, 1.0, None, None, None,
                              None, cell.status.value)]
        found += cases
    return found



def profiled(case: Measured) -> bool:
    return (case.profile or {}).get("busy_seconds") is not None and bool(case.call_median_s)


def diagnosis_at(case: Measured, cases: Sequence[Measured],
                 ceilings: Ceilings | None = None) -> Diagnosis:
    """diagnosis_of CASE, or where its GPU profile is missing (left out: a call of seconds,
    harness.run.casepasses pass_too_long) that of the same cell at another batch, which says so:
    what bounds a step (launches, copies, compute) rarely changes between two batches of one
    sweep, and an unprofiled diagnosis argues for no fix and against none."""
    if device_kind(case.device) == "cpu" or profiled(case):
        return diagnosis_of(case, ceilings)
    others = [other for other in cases if other is not case and profiled(other)
              and (other.framework, other.device, other.variant)
              == (case.framework, case.device, case.variant)]
    if not others:
        return diagnosis_of(case, ceilings)
    stand_in = min(others, key=lambda other: other.call_median_s or 0.0)  # the cheapest
    found = diagnosis_of(stand_in, ceilings)
    why = (case.profile or {}).get("reason") or "no device-busy pass"
    return Diagnosis(found.kind, f"{found.text} (at batch {stand_in.size}; at {case.size} "
                                 f"{why})")


def diagnosis_of(case: Measured, ceilings: Ceilings | None = None) -> Diagnosis:
    """What bounds the as-written case: the device profile's split on a GPU, host on a CPU."""
    median = case.median_s
    if device_kind(case.device) == "cpu":
        timed = f" ({format_seconds(median)} per step)" if median is not None else ""
        return Diagnosis(HOST_BOUND, f"{HOST_BOUND}: the CPU side does all the work{timed}")
    profile = case.profile or {}
    busy = profile.get("busy_seconds")
    wall = case.call_median_s
    if busy is None or not wall:
        why = profile.get("reason") or "no device-busy pass in this run"
        return Diagnosis(UNPROFILED, f"{UNPROFILED}: {why}")
    parts = attribute(wall, float(busy), float(profile.get("copy_seconds") or 0.0),
                      case.cold_s)
    entry = device_entry(ceilings or Ceilings(), case.device)
    peak, _ = flop_limits(entry, "fp32")
    bandwidth, _ = bandwidth_limits(entry, MEMORY)
    return diagnose(parts, profile.get("kernels_per_call"), case.flops, None, peak, bandwidth)

