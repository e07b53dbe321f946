"""Energy per call and per step, from the hardware's own energy counters: the records.

A counter (harness.measure.energycounters: NVML on a GPU, RAPL on the host) is read around the
timed samples. It advances in steps (every 20-100 ms), so a window shorter than MIN_WINDOW_S is
not reported from the samples: an energy pass of more calls runs after the check
(harness.measure.edgepass, the power between two observed counter updates), or the record says
`not measured` and why. The counter holds the whole board's energy, idle included (~80 W on an
H200 at rest), so the idle power measured before the cell (harness.measure.idlepower) is stored
beside it, and both figures are kept: the total (what the board drew per call: the one
reported) and the share above idle (what the work added).
"""

from __future__ import annotations

from dataclasses import replace

from harness.core.units import digits
from harness.data.records import EnergyRecord
from harness.measure.edgepass import EdgePass
from harness.measure.energycounters import EnergyCounter, EnergyWindow
from harness.measure.idlepower import IdlePower, idle_origin

# A window must be this long for a counter that advances every 20-100 ms to be within ~10%.
MIN_WINDOW_S = 1.0
REPORTED = "total (idle included)"


def window_record(window: EnergyWindow, steps_per_call: float | None,
                  idle: IdlePower | None, source: str) -> EnergyRecord:
    """Energy per call and per step from one window, total and above idle."""
    joules, calls = window.joules, window.calls
    if joules is None:
        return EnergyRecord.not_measured(f"{window.counter.name} gave no reading")
    if calls <= 0:
        return EnergyRecord.not_measured("no warm calls in the window")
    if window.seconds < MIN_WINDOW_S:
        return EnergyRecord.not_measured(
            f"window too short: {digits(window.seconds, 2)} s < {MIN_WINDOW_S} s for a counter "
            "that advances every 20-100 ms")
    return figures_record(window.counter.name, window.seconds, calls, joules, steps_per_call,
                          idle, source)


def edge_record(counter: EnergyCounter, found: EdgePass, name: str,
                steps_per_call: float | None, idle: IdlePower | None,
                source: str) -> EnergyRecord:
    """Energy per call from the edge-aligned pass: the power between the counter's two updates
    x the pass's own seconds per call. window_s and calls stay the pass's (so joules = W x
    window / calls holds, as `harness check` recomputes it); the span is in edge_* fields.
    Falls back to the two reads around the pass (window_record) where no span was seen."""
    span = found.spans.get(name)
    if span is None:
        return window_record(found.windows[name], steps_per_call, idle, source)
    if found.calls <= 0:
        return EnergyRecord.not_measured("no warm calls in the window")
    record = figures_record(counter.name, found.seconds, found.calls,
                            span.watts * found.seconds, steps_per_call, idle, source)
    return replace(record, edge_span_s=span.seconds, edge_joules=span.joules,
                   edge_updates=span.updates, edge_resolution_s=span.resolution_s,
                   edge_error_bound=span.error_bound,
                   counter_period_s=found.periods.get(name), poll_s=found.poll_s)


def figures_record(counter_name: str, seconds: float, calls: float, joules: float,
                   steps_per_call: float | None, idle: IdlePower | None,
                   source: str) -> EnergyRecord:
    """The record of JOULES over SECONDS and CALLS: per call and per step, total and above
    idle."""
    steps = steps_per_call or 1
    idle_watts = idle.watts if idle else None
    above = None if idle_watts is None else joules - idle_watts * seconds
    remembered_from, measured_at = idle_origin(idle if above is not None else None)
    return EnergyRecord(
        status="ok", counter=counter_name, source=source, reported=REPORTED,
        window_s=seconds, calls=calls, joules_total=joules,
        watts_mean=joules / seconds, joules_per_call=joules / calls,
        joules_per_step=joules / calls / steps, steps_per_call=steps,
        idle_watts=idle_watts,
        idle_window_s=None if idle is None or above is None else idle.window_s,
        idle_settled=None if idle is None or above is None else idle.settled,
        joules_per_call_above_idle=None if above is None else above / calls,
        joules_per_step_above_idle=None if above is None else above / calls / steps,
        idle_remembered_from=remembered_from, idle_measured_at=measured_at)
