"""One case of a cell: timed, timed again while contended, checked, and recorded.

A worker (harness.run.worker) runs its cell's cases one by one through run_case. Each attempt
prepares the inputs, times the calls in the spec's timing style (harness.measure.timing,
harness.measure.blocks), runs the passes after the samples (harness.run.casepasses), checks the
output and reads the case's memory and, through the CaseWatch, its energy and GPU state. A
contended attempt (other processes on the cores, a throttling GPU) is timed again after a
pause; the kept attempt then has its device profile and its check's sensitivity, and every
failure becomes a status in the record.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field, replace
from typing import Any

from harness.backend import VariantUnavailable
from harness.core.registry import load_framework
from harness.core.settings import Settings
from harness.data.results import Attempt, CaseResult, CaseRound
from harness.data.serial import JsonObject
from harness.measure import blocks
from harness.measure.casewatch import LATER_ROUND_REASON as LATER_ROUND_ENERGY_REASON
from harness.measure.casewatch import QUICK_REASON as QUICK_ENERGY_REASON
from harness.measure.casewatch import CaseWatch
from harness.measure.memory import host_peak_bytes, reset_host_peak
from harness.measure.timing import Measurement, TimingPolicy, autorange
from harness.run import sensitivity
from harness.run.casepasses import (
    BESIDE_WARMUP_PHASES,
    DEFAULT_PASS_LIMIT_S,
    DEVICE_PROFILE_PHASE,
    FEATURES_PHASE,
    OUTPUT_PHASE,
    SETUP_PHASE,
    counted_passes,
    declared_flops_record,
    device_profile_pass,
    features_pass,
)
from harness.run.failures import failure_reason
from harness.run.phaseclock import PhaseClock, phase
from harness.spec import Cell, ParamValue, Status, WorkloadSpec

# Why a run's cases carry no energy figure when its command asked for none (harness advise).
NO_ENERGY_REASON = ("not asked for: harness advise times the fixes only (no idle power, no "
                    "energy pass)")
# A check's metric when the result could not be compared (e.g. random numbers drawn in a user
# model's forward pass): the case stays ok, its reason says why, the report warns.
NOT_COMPARED = "not_compared"

# A case timed while other processes used the cores, or while the GPU throttled, is timed
# again after this pause, at most the settings' attempts in all (HARNESS_ATTEMPTS); it stays
# SUSPECT only when every attempt was contended (the record keeps each attempt and why).
# What a worker says it does while it times a case (harness.run.phaseclock): the cold call,
# the warm-up, the calibration and the samples, each said as it starts.
TIMED_CALLS_SAID = "timing"
RETRY_PAUSE_S = 1.0
QUICK_RETRY_PAUSE_S = 0.25
# A case whose timed calls took longer than this (MNIST epochs) is not timed again: a retry
# would repeat minutes of training. Its contention is recorded and it stays SUSPECT.
RETRY_MAX_TIMED_S = 20.0


@dataclass(frozen=True)
class CellContext:
    """What every case of one cell is run with: the workload, its implementation module, the
    cell, the open device, the cell's watcher (None: no GPU state or energy), the worker's
    phase clock and the run's settings (handed to the worker on its argument list: --quick,
    the attempts a contended case may have, energy, the passes' limit)."""

    spec: WorkloadSpec
    module: Any
    cell: Cell
    device: Any
    watch: CaseWatch | None = None
    clock: PhaseClock = field(default_factory=PhaseClock)
    settings: Settings = field(default_factory=Settings)


@dataclass(frozen=True)
class CasePlan:
    """One case and what the cell's first round handed a later round for it (None: find it
    here): the calls per sample its calibration found (where this round's calibration starts)
    and its FLOP record (taken instead of counting again)."""

    case: dict[str, ParamValue]
    reused: int | None = None
    counted: JsonObject | None = None
    level: float | None = None  # seconds per call the first round settled at


def _reset_peak_memory(device: Any) -> None:
    reset = getattr(device, "reset_peak_memory", None)  # optional in the Device contract
    if reset is not None:
        reset()


def device_memory_record(device: Any) -> dict[str, int | None]:
    """Peak device memory of the case just run (None on CPU or where the backend cannot tell)."""
    peaks = getattr(device, "peak_device_memory", None)
    found = peaks() if peaks is not None else {"allocated": device.peak_memory_bytes()}
    return {"peak_device_allocated_bytes": found.get("allocated"),
            "peak_device_reserved_bytes": found.get("reserved")}


def reported_device_memory(output: dict[str, Any]) -> dict[str, int | None]:
    """Peaks a backend measured where its work ran (e.g. in data-parallel ranks), if any.

    The worker's own device holds none of such a job's tensors: its peak would read ~0.
    """
    reported = output.get("device_memory")
    if not reported:
        return {}
    return {"peak_device_allocated_bytes": reported.get("allocated"),
            "peak_device_reserved_bytes": reported.get("reserved")}


def measure_case(spec: WorkloadSpec, module: Any, case: dict[str, ParamValue], variant: str,
                 device: Any, inputs: dict[str, Any], policy: TimingPolicy,
                 sync_style: str = "device", window: CaseWatch | None = None,
                 counted: JsonObject | None = None, clock: PhaseClock | None = None,
                 pass_limit_s: float = DEFAULT_PASS_LIMIT_S,
                 ) -> tuple[Measurement, dict[str, Any], Any]:
    """Time one case in the spec's timing style: the measurement, the output, and the step.

    The step is what the device-busy pass calls again; None where the backend times work in
    other processes ('measure'), which no in-process profiler can see. The window (GPU state,
    energy) spans the timed samples; in 'measure' style, the backend's whole call. COUNTED:
    the FLOP record the cell's first round made for this case (a later round), taken instead
    of counting again. PASS_LIMIT_S: the run's limit on the FLOP count and the memory pass.
    """
    if spec.run.timing == "measure":  # the backend runs the timing core itself (other processes)
        return measured_by_backend(spec, module, case, variant, device, inputs, policy, window)
    with phase(clock, SETUP_PHASE):
        task = module.make_task(case, variant, device, inputs)
    step, synchronize = timed_pair(task, device, sync_style)
    if spec.run.timing == "per_call" and blocks.supports_blocks(task):
        # A pass after the samples may run a part of it (blocks.CallStep).
        step = blocks.CallStep(task, step, step.keep if isinstance(step, OutputStep) else None)
    if window is not None:
        window.attach(step, synchronize)
    if spec.run.timing == "per_call":  # blocks of steps within each call where the task has them
        if spec.run.calls is None:
            raise ValueError(f"workload {spec.name}: timing 'per_call' needs `calls`")
        measurement = blocks.per_call_in_blocks(
            task, step, synchronize, spec.run.calls(case), blocks.boundary_wait(device, sync_style),
            spec.run.call_blocks(case) if spec.run.call_blocks else 1, window)
    else:
        measurement = autorange(step, synchronize, policy, window,
                                clock.now if clock is not None else None)
    synchronize()
    with phase(clock, OUTPUT_PHASE):
        output = task.output()
    per_call = measurement.median if measurement.samples else measurement.cold_seconds
    output.setdefault("extra", {}).update(
        counted_passes(spec, module, case, task, per_call, counted, clock, pass_limit_s))
    synchronize()
    return measurement, output, step


def measured_by_backend(spec: WorkloadSpec, module: Any, case: dict[str, ParamValue],
                        variant: str, device: Any, inputs: dict[str, Any],
                        policy: TimingPolicy, window: CaseWatch | None,
                        ) -> tuple[Measurement, dict[str, Any], None]:
    """A case in 'measure' style: the backend runs the timing core itself, in other processes
    (the window spans its whole call), and no step is left for a pass to call again."""
    if window is not None:
        window.begin()
    try:
        measurement, output = module.measure(case, variant, device, inputs, policy)
    finally:
        if window is not None:
            window.end(0)
    # No task here for a counter to trace, but a declared count costs nothing: kept, so
    # the call's own count is stored as for every other timing style (its rates read it).
    output.setdefault("extra", {}).update(declared_flops_record(spec, case))
    return measurement, output, None


def timed_pair(task: Any, device: Any, sync_style: str) -> tuple[Any, Any]:
    """(step, synchronize) for the timing core, in the framework's sync style.

    "device": a device-wide wait (torch.cuda.synchronize, TF sync_devices). "output": the
    framework has no such wait (JAX), so the step's returned output is kept and the device
    blocks on it (`device.block(output)`, e.g. jax.block_until_ready).
    """
    if sync_style != "output":
        return task.step, device.synchronize
    step = OutputStep(task)

    def synchronize() -> None:
        if step.last is not None:
            device.block(step.last)

    return step, synchronize


class OutputStep:
    """A sync='output' framework's step: keeps what its last call returned, for the wait.

    `keep` replaces it where a call stopped half-way (blocks.CallStep.part) returned nothing:
    the last whole call's output may be gone by then (Keras on JAX donates the weights' buffers
    to the next steps), so the state as of the stop is what the wait must block on.
    """

    def __init__(self, task: Any) -> None:
        self.task = task
        self.last: Any = None

    def __call__(self) -> None:
        self.last = self.task.step()

    def keep(self, output: Any) -> None:
        self.last = output


@dataclass
class TimedCase:
    """One timing of a case, checked: what run_case keeps of its best attempt."""

    measurement: Measurement
    output: dict[str, Any]
    step: Any
    check: Any
    memory: dict[str, int | None]
    watched: JsonObject  # energy and GPU-state extras (CaseWatch.finish_case)
    gpu_suspect: str
    inputs: dict[str, Any]

    @property
    def contention(self) -> str:
        """Why this timing had no machine to itself ('' when it had): cores or GPU state."""
        load = self.measurement.other_load
        reasons = [load.reason()] if load is not None and load.contended else []
        return "; ".join([*reasons, *([self.gpu_suspect] if self.gpu_suspect else [])])

    @property
    def other_cores(self) -> float | None:
        load = self.measurement.other_load
        return None if load is None else load.other_cores + load.steal_cores


def timed_seconds(measurement: Measurement) -> float:
    """Seconds spent inside the timed calls: the cold call and the warm samples."""
    if isinstance(measurement, blocks.BlockMeasurement) and measurement.call_seconds:
        return float(sum(measurement.call_seconds))
    warm = sum(measurement.samples) * measurement.calls_per_sample
    return float((measurement.cold_seconds or 0.0) + warm)


def time_case(context: CellContext, plan: CasePlan, last: bool = True) -> TimedCase:
    """Prepare, time and check one case once (run_case may call it again when contended).

    LAST: no attempt follows this one, so its energy is measured even where it was contended.
    """
    spec, cell, device, clock = context.spec, context.cell, context.device, context.clock
    _reset_peak_memory(device)
    if context.watch is not None:
        context.watch.start_case()
    with clock.timing("inputs"):
        inputs = spec.inputs(plan.case, cell.variant, context.settings)
    policy = (TimingPolicy.quick() if context.settings.quick else TimingPolicy()).share(
        cell.rounds).reusing(plan.reused, plan.level)
    started = time.perf_counter()
    passes_before = sum(clock.phases.get(name, 0.0) for name in BESIDE_WARMUP_PHASES)
    with clock.saying(TIMED_CALLS_SAID):  # said to the parent, not timed apart
        measurement, output, step = measure_case(spec, context.module, plan.case,
                                                 cell.variant, device, inputs, policy,
                                                 load_framework(cell.framework).sync,
                                                 context.watch, plan.counted, clock,
                                                 context.settings.pass_limit_s)
    timed = timed_seconds(measurement)
    clock.timed_s += timed
    passes = sum(clock.phases.get(name, 0.0) for name in BESIDE_WARMUP_PHASES) - passes_before
    clock.add("warm-up and calibration",
              max(0.0, time.perf_counter() - started - timed - passes))
    # A plausibility check (e.g. GB/s above what memory allows) needs the measured time.
    output.setdefault("seconds_per_call", measurement.median if measurement.samples
                      else measurement.cold_seconds)
    # Every attempt is checked before its energy pass: a later call must never reach the
    # output a check reads (an in-place buffer, a trained model).
    if spec.check is None:
        raise ValueError(f"workload {spec.name} has no `check`: no time is trusted without one")
    with clock.timing("check"):
        check = spec.check(plan.case, cell.variant, inputs, output)
    # Read before the busy pass, so the profiler's buffers never count as the case's memory.
    memory = device_memory_record(device)
    memory.update(reported_device_memory(output))
    watched, gpu_suspect = finish_watch(context, measurement, output, last)
    return TimedCase(measurement, output, step, check, memory, watched, gpu_suspect, inputs)


def finish_watch(context: CellContext, measurement: Measurement, output: dict[str, Any],
                 last: bool) -> tuple[JsonObject, str]:
    """The case's energy and GPU-state extras and its GPU-state suspect text (nothing without a
    watcher). Before the busy pass, so no profiler has run in this process when the energy
    pass times more calls (its own pace is in the record: window_s / calls)."""
    cell, watch = context.cell, context.watch
    with context.clock.timing("energy and GPU state"):
        if watch is None:
            return {}, ""
        load = measurement.other_load
        return watch.finish_case(
            output["seconds_per_call"], output.get("extra", {}).get("steps_per_call"),
            not last, load is not None and load.contended,
            no_energy_pass=(QUICK_ENERGY_REASON if context.settings.quick else
                            NO_ENERGY_REASON if not context.settings.energy else
                            LATER_ROUND_ENERGY_REASON if cell.round > 0 else ""))


@dataclass
class Attempts:
    """A case's timings: each attempt's record, the one kept (the first uncontended one, else
    the last: the only one whose energy was measured) and its number, and attempt 1's cold
    call (the only cold one: a retry's first call finds the compile caches, the graphs and the
    allocator already warm)."""

    records: list[Attempt]
    kept: TimedCase
    kept_number: int
    first_cold: float | None


def time_attempts(context: CellContext, plan: CasePlan) -> Attempts:
    """Time the case until an attempt is uncontended, at most the settings' attempts
    (once where an earlier case of this worker was contended throughout), pausing between."""
    clock = context.clock
    allowed = 1 if clock.busy else context.settings.attempts
    records: list[Attempt] = []
    kept: TimedCase | None = None
    kept_number = 0
    first_cold: float | None = None  # attempt 1's first call: the only cold one
    for number in range(1, allowed + 1):
        timed = time_case(context, plan, last=number == allowed)
        if number == 1:
            first_cold = timed.measurement.cold_seconds
        why = timed.contention
        samples = timed.measurement.samples
        records.append(Attempt(number, timed.measurement.median if samples else None,
                               len(samples), timed.other_cores, why))
        kept, kept_number = timed, number  # the first uncontended one, else the last
        if not why or timed_seconds(timed.measurement) > RETRY_MAX_TIMED_S:
            break
        if number < allowed:
            with clock.timing("pause before a retry"):
                time.sleep(QUICK_RETRY_PAUSE_S if context.settings.quick else RETRY_PAUSE_S)
    assert kept is not None
    return Attempts(records, kept, kept_number, first_cold)


def run_case(context: CellContext, plan: CasePlan) -> CaseResult:
    """Prepare, time (again while contended: time_attempts) and check one case, then its
    passes after the samples; every failure becomes a status in the record."""
    spec, cell, device, clock = context.spec, context.cell, context.device, context.clock
    host_peak_reset = reset_host_peak()  # this case's own host peak, for the memory fit
    try:
        found = time_attempts(context, plan)
        kept = found.kept
        with clock.timing(DEVICE_PROFILE_PHASE):
            device_profile = device_profile_pass(
                spec, device, cell.round, kept.step, kept.measurement.calls_per_sample,
                kept.output.get("seconds_per_call"))
        host_peak = case_host_peak(host_peak_reset)  # before the sensitivity's fp32 runs
        with clock.timing(sensitivity.PHASE):
            check = sensitivity.checked_with_sensitivity(
                spec, context.module, plan.case, cell.variant, cell.framework, device,
                kept.inputs, kept.output, kept.check)
        with clock.timing(FEATURES_PHASE):  # after the check: its calls reach no output
            features = features_pass(context.module, cell.framework, cell.variant, device,
                                     cell.round,
                                     kept.step, kept.inputs, kept.output.get("seconds_per_call"),
                                     context.settings.pass_limit_s)
    except VariantUnavailable as exc:
        return CaseResult(plan.case, Status.UNAVAILABLE, str(exc))
    except Exception as exc:  # a failed case is data; the next case still runs
        traceback.print_exc()
        return CaseResult(plan.case, Status.ERROR, failure_reason(exc))
    suspect = [text for text in (kept.measurement.suspect, kept.gpu_suspect) if text]
    suspect += attempt_suspects(found, context)
    return case_record(plan, found, check, "; ".join(suspect),
                       {**kept.output.get("extra", {}), **kept.watched, **host_peak,
                        **warmup_extra(kept.measurement), **features},
                       device_profile, context.cell.round)


def attempt_suspects(found: Attempts, context: CellContext) -> list[str]:
    """What the attempts add to the case's SUSPECT text. Marks the kept one where there were
    several, and the worker busy where every attempt was contended (the load is not a passing
    spike: its later cases are timed once)."""
    records, clock, cell = found.records, context.clock, context.cell
    if len(records) > 1:
        records[found.kept_number - 1] = replace(records[found.kept_number - 1], kept=True)
        if all(attempt.contended for attempt in records):
            clock.busy = True
            return [f"contended in all {len(records)} attempts"]
    elif records[0].contended and clock.busy:
        return ["not timed again: the cores stayed busy through every attempt of an earlier "
                "case of this cell" + (f" ({cell.busy})" if cell.busy else "")]
    return []


def case_record(plan: CasePlan, found: Attempts, check: Any, suspect: str, extra: JsonObject,
                device_profile: JsonObject, round_number: int) -> CaseResult:
    """The record of a case timed, checked and profiled in round ROUND_NUMBER's worker: its
    status from the check."""
    measurement, kept = found.kept.measurement, found.kept
    record = CaseResult(
        case=plan.case,
        rounds=[CaseRound(
            round=round_number,
            cold_seconds=found.first_cold,  # not the kept attempt's: its first call was warm
            samples=tuple(measurement.samples),
            calls_per_sample=measurement.calls_per_sample,
            other_load=(None if measurement.other_load is None else
                        {"other_cores": measurement.other_load.other_cores,
                         "steal_cores": measurement.other_load.steal_cores,
                         "seconds": measurement.other_load.seconds,
                         "interrupt_cores": measurement.other_load.interrupt_cores}),
            **blocks.record_fields(measurement),
            attempts=tuple(found.records) if len(found.records) > 1 else ())],
        timer_overhead_s=measurement.timer_overhead_s,
        check=check.as_dict(),
        suspect=suspect,
        predicted_call_s=measurement.predicted_call_s,
        extra=extra,
        peak_device_allocated_bytes=kept.memory["peak_device_allocated_bytes"],
        peak_device_reserved_bytes=kept.memory["peak_device_reserved_bytes"],
        device_profile=device_profile,
        calls_per_sample_reused=plan.reused,
    )
    if not check.passed:
        record.status, record.reason = Status.INVALID, f"check failed: {check.detail}"
    elif check.metric == NOT_COMPARED:  # timed and ok; the reason says why nothing was checked
        record.reason = check.detail
    return record


def warmup_extra(measurement: Measurement) -> JsonObject:
    """{"warmup": calls, seconds and why it stopped} for a case timed by autorange (its
    warm-up ends when its calls settle, or at the cap: harness.measure.timing.warm_up); else
    nothing (a case timed call by call has no warm-up)."""
    return {"warmup": measurement.warmup_record()} if measurement.warmup_stopped else {}


def case_host_peak(reset: bool) -> dict[str, int]:
    """{"peak_host_memory_bytes": the case's own host peak} where the mark was reset before
    the case, else nothing (a process-wide peak would be an earlier, larger case's)."""
    peak = host_peak_bytes() if reset else None
    return {} if peak is None else {"peak_host_memory_bytes": peak}
