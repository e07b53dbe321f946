"""The diagnosis of an as-written case: what bounds its step.

The cases are rows of the run's case table (harness.analysis.casetable.run_rows: per step, a
Keras call is many steps, with their noise, check and device-busy profile); the diagnosis
names what bounds the as-written step (harness.measure.devicetime on a GPU, the host on a
CPU), which ranks the fixes to try (harness.analysis.fixchoice) and explains those measured
(harness.analysis.advice).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.analysis.casetable import CaseRow
from harness.analysis.fixchoice import HOST_BOUND, UNPROFILED
from harness.analysis.plausibility import bandwidth_limits, device_entry, flop_limits
from harness.core.units import device_kind, format_seconds
from harness.data.ceilings import MEMORY, Ceilings
from harness.measure.devicetime import Diagnosis, attribute, diagnose


def profiled(case: CaseRow) -> bool:
    return (case.profile or {}).get("busy_seconds") is not None and _call_s(case) is not None


def _call_s(case: CaseRow) -> float | None:
    """The case's median per call; None without warm samples, or a median of 0."""
    return case.call_median_s if case.samples and case.call_median_s else None


def diagnosis_at(case: CaseRow, cases: Sequence[CaseRow],
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
    stand_in = min(others, key=lambda other: _call_s(other) or 0.0)  # the cheapest
    found = diagnosis_of(stand_in, ceilings)
    why = (case.profile or {}).get("reason") or "no device-busy pass"
    return Diagnosis(found.kind, f"{found.text} (at batch {stand_in.size}; at {case.size} "
                                 f"{why})")


def diagnosis_of(case: CaseRow, ceilings: Ceilings | None = None) -> Diagnosis:
    """What bounds the as-written case: the device profile's split on a GPU, host on a CPU."""
    if device_kind(case.device) == "cpu":
        timed = f" ({format_seconds(case.median_s)} per step)" if case.samples else ""
        return Diagnosis(HOST_BOUND, f"{HOST_BOUND}: the CPU side does all the work{timed}")
    profile = case.profile or {}
    busy = profile.get("busy_seconds")
    wall = _call_s(case)
    if busy is None or not wall:
        why = profile.get("reason") or "no device-busy pass in this run"
        return Diagnosis(UNPROFILED, f"{UNPROFILED}: {why}")
    parts = attribute(wall, float(busy), float(profile.get("copy_seconds") or 0.0),
                      case.cold_call_s)
    entry = device_entry(ceilings or Ceilings(), case.device)
    peak, _ = flop_limits(entry, "fp32")
    bandwidth, _ = bandwidth_limits(entry, MEMORY)
    return diagnose(parts, profile.get("kernels_per_call"), case.flops, None, peak, bandwidth)

