"""`python -m harness.run.worker CELL.json RESULT.json SETTINGS`: run ONE cell, write ONE JSON
document.

The only process that imports a framework. The result goes to a file, never stdout, so
framework logging cannot corrupt it; it is rewritten (atomically) after every case, so a
timeout or crash at the largest size keeps the smaller sizes already measured. SETTINGS is
the run's harness.core.settings.Settings as JSON (the runner passes them; the worker never
reads a HARNESS_* variable): they are installed for the whole process before anything else.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backend import DeviceUnavailable, ProfileUnavailable, VariantUnavailable
from harness.core import settings as run_settings
from harness.core.registry import (
    backend_module,
    framework_installed,
    implementation_module,
    load_framework,
    load_workload,
)
from harness.core.units import format_seconds
from harness.data.results import Attempt, CaseResult, CellResult, HarnessCost
from harness.data.secondopinion import RECORD_KEY as SECOND_OPINION
from harness.data.serial import JsonObject
from harness.data.store import write_json_atomic
from harness.measure import blocks
from harness.measure.casewatch import LATER_ROUND_REASON as LATER_ROUND_ENERGY_REASON
from harness.measure.casewatch import QUICK_REASON as QUICK_ENERGY_REASON
from harness.measure.casewatch import CaseWatch, idle_fingerprint
from harness.measure.memory import host_peak_bytes, reset_host_peak
from harness.measure.timing import Measurement, TimingPolicy, autorange
from harness.run import sensitivity
from harness.run.failures import failure_reason
from harness.spec import Cell, ParamValue, Status, WorkloadSpec

# Why a run's cases carry no energy figure when its command asked for none (harness advise).
NO_ENERGY_REASON = ("not asked for: harness advise times the fixes only (no idle power, no "
                    "energy pass)")


def peak_host_memory_bytes() -> int | None:
    """Peak resident set size of this worker (Linux reports kilobytes)."""
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return int(peak) * (1 if sys.platform == "darwin" else 1024)
    except (ImportError, OSError):
        return None


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


# A check's metric when the result could not be compared (e.g. random numbers drawn in a user
# model's forward pass): the case stays ok, its reason says why, the report warns.
NOT_COMPARED = "not_compared"
CPU_PROFILE_REASON = "cpu cell: no device clock; its whole time is host compute"


def profile_calls(spec: WorkloadSpec, calls_per_sample: int) -> int:
    """Calls in the device-busy pass: one epoch-sized call, else one timed sample's worth.

    A sample's worth was calibrated to last a few milliseconds, long enough for the profiler's
    start-up to be a small part and short enough that its event buffer stays small.
    """
    return 1 if spec.timing == "per_call" else max(1, calls_per_sample)


# A cell's later rounds skip what its first round measured once for all of them.
LATER_ROUND_REASON = "measured in the cell's first round only"


def device_profile_record(device: Any, step: Any, calls: int,
                          seconds_per_call: float | None = None) -> JsonObject:
    """The device-busy pass: figures per call, or {'reason': why there are none}.

    Runs after the timed samples and the check, so the profiler's own cost never reaches a
    wall-clock sample and an extra call (one more epoch) never reaches a checked output. A
    failure here costs the second clock only, never the case. A long call of a task that
    reports its steps (blocks.CallStep) is profiled over its first steps, scaled to the call.
    """
    if not getattr(device, "is_gpu", False):
        return {"reason": CPU_PROFILE_REASON}
    if step is None:
        return {"reason": "timed in other processes; no in-process device profile"}
    profile = getattr(device, "profile", None)
    if profile is None:
        return {"reason": f"{type(device).__name__} has no device profiler"}
    try:
        if isinstance(step, blocks.CallStep):
            steps = step.part_steps(seconds_per_call)
            if steps < step.steps_per_call:
                return profile(step.part(steps), 1).scaled_from(
                    steps / step.steps_per_call).as_dict()
        return profile(step, calls).as_dict()
    except ProfileUnavailable as exc:
        return {"reason": str(exc)}
    except Exception as exc:  # noqa: BLE001 - the wall-clock result is already safe
        traceback.print_exc()
        return {"reason": f"profiling failed: {failure_reason(exc)}"}


class CellRun:
    """Accumulates the result document of one cell and saves it after every change."""

    def __init__(self, cell: Cell, result_path: Path) -> None:
        self.result_path = result_path
        self.result = CellResult(cell=cell, started=time.time())
        self.clock = PhaseClock()
        self.clock.busy = bool(cell.busy)  # an earlier round found the load lasting

    def finish(self, status: Status | None = None, reason: str = "") -> None:
        if status is None:
            status, reason = self.result.finished_status(), self.result.first_case_reason()
        self.result.status, self.result.reason = status, reason
        self.result.finished = time.time()
        self.result.peak_host_memory_bytes = peak_host_memory_bytes()
        started = self.result.started or self.result.finished
        self.result.cost = HarnessCost(self.result.finished - started, self.clock.timed_s, 1,
                                       dict(self.clock.phases))
        self.save()

    def save(self) -> None:
        write_json_atomic(self.result_path, self.result.to_dict())


def measure_case(spec: WorkloadSpec, module: Any, case: dict[str, ParamValue], variant: str,
                 device: Any, inputs: dict[str, Any], policy: TimingPolicy,
                 sync_style: str = "device", window: CaseWatch | None = None,
                 counted: JsonObject | None = None, clock: PhaseClock | None = None,
                 ) -> tuple[Measurement, dict[str, Any], Any]:
    """Time one case in the spec's timing style: the measurement, the output, and the step.

    The step is what the device-busy pass calls again; None where the backend times work in
    other processes ('measure'), which no in-process profiler can see. The window (GPU state,
    energy) spans the timed samples; in 'measure' style, the backend's whole call. COUNTED:
    the FLOP record the cell's first round made for this case (a later round), taken instead
    of counting again.
    """
    if spec.timing == "measure":  # the backend runs the timing core itself (other processes)
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
    task = module.make_task(case, variant, device, inputs)
    step, synchronize = timed_pair(task, device, sync_style)
    if spec.timing == "per_call" and blocks.supports_blocks(task):
        step = blocks.CallStep(task, step)  # a pass after the samples may run a part of it
    if window is not None:
        window.attach(step, synchronize)
    if spec.timing == "per_call":  # blocks of steps within each call where the task has them
        if spec.calls is None:
            raise ValueError(f"workload {spec.name}: timing 'per_call' needs `calls`")
        measurement = blocks.per_call_in_blocks(
            task, step, synchronize, spec.calls(case), blocks.boundary_wait(device, sync_style),
            spec.call_blocks(case) if spec.call_blocks else 1, window)
    else:
        measurement = autorange(step, synchronize, policy, window)
    synchronize()
    output = task.output()
    per_call = measurement.median if measurement.samples else measurement.cold_seconds
    # A declared count costs nothing: only a counter's (an extra traced call) is reused.
    with phase(clock, FLOP_COUNT_PHASE):
        output.setdefault("extra", {}).update(
            reused_flops(counted) if counted and spec.flops is None else
            flops_record(spec, module, case, task,
                         pass_too_long(FLOP_COUNT_PHASE, per_call)))
    if counted is None:  # a later round's record is dropped when the rounds merge: no pass
        with phase(clock, MEMORY_PASS_PHASE):
            output["extra"].update(required_memory_record(
                module, task, pass_too_long(MEMORY_PASS_PHASE, per_call)))
    synchronize()
    return measurement, output, step


# The passes after the timed samples that each cost a call or more (a counter's traced call,
# the memory pass's watched call), named apart from warm-up in the cost line: for a step of
# seconds (seed 000's Jacobian) each is a large part of the worker.
FLOP_COUNT_PHASE = "FLOP count"
MEMORY_PASS_PHASE = "memory pass"
AFTER_SAMPLE_PHASES = (FLOP_COUNT_PHASE, MEMORY_PASS_PHASE)


# A pass after the samples is left out where it would take longer than this, by the case's
# median call and the pass's cost in calls: it describes the case, it is not the measurement,
# and a user waiting on a step of seconds should not wait minutes more for it. The costs in
# calls were measured on seed 000's Jacobian (2.5 s per call on the 2-core VM): the FLOP
# counter's traced call 6.6x a call, the memory pass's watched call 5.6x (both dispatch every
# op through Python); the device profile runs two calls, one under the profiler.
AFTER_PASS_LIMIT_S = 10.0
PASS_COST_CALLS = {FLOP_COUNT_PHASE: 7.0, MEMORY_PASS_PHASE: 6.0, "device profile": 3.0}


def pass_too_long(name: str, seconds_per_call: float | None, calls: int = 1) -> str:
    """Why the pass NAME is left out for a case whose call takes SECONDS_PER_CALL ('' where it
    runs): its estimate over its limit (the device profile: AFTER_PASS_LIMIT_S; the FLOP count
    and memory pass: the run's pass_limit_s, 2 s under advise)."""
    if not seconds_per_call:
        return ""
    limit = AFTER_PASS_LIMIT_S if name not in (FLOP_COUNT_PHASE, MEMORY_PASS_PHASE) \
        else run_settings.active().pass_limit_s
    estimate = seconds_per_call * calls * PASS_COST_CALLS[name]
    if estimate <= limit:
        return ""
    return (f"left out: a call takes {format_seconds(seconds_per_call)} and the {name} pass "
            f"about {PASS_COST_CALLS[name] * calls:g} of them (~{estimate:.0f} s, over the "
            f"{limit:g} s a pass after the samples may take)")


def phase(clock: PhaseClock | None, name: str) -> contextlib.AbstractContextManager[None]:
    """CLOCK's timing of NAME, or nothing where no clock is kept."""
    return clock.timing(name) if clock is not None else contextlib.nullcontext()


def required_memory_record(module: Any, task: Any, too_long: str = "") -> JsonObject:
    """What the step must hold in memory where the implementation measures it (its
    required_memory(task): weights, gradients, optimizer state, saved activations, the largest
    transient, in one more eager call; the memory fit's GPU prediction), else {}. After the
    timed samples, the output and the FLOP count, so its call reaches none of them; a failure
    costs the figure, not the case."""
    measure = getattr(module, "required_memory", None)
    if measure is None:
        return {}
    if too_long:  # TOO_LONG: why the pass would cost too much (pass_too_long)
        return {"required_device_reason": f"the memory pass was {too_long}"}
    try:
        return dict(measure(task))
    except Exception as exc:  # noqa: BLE001 - the timed result is already safe
        traceback.print_exc()
        return {"required_device_reason": f"the memory pass failed: {failure_reason(exc)}"}


# Appended to a reused FLOP record's flops_counted_by: who counted them, and where.
FLOPS_REUSED = "; counted in the cell's first round, reused"


def reused_flops(counted: JsonObject) -> JsonObject:
    """The first round's FLOP record, saying that it was counted there (its count and its
    coverage as they were: a call's FLOPs are fixed by its case)."""
    record = dict(counted)
    how = str(record.get("flops_counted_by", ""))
    record["flops_counted_by"] = how if how.endswith(FLOPS_REUSED) else how + FLOPS_REUSED
    return record


def declared_flops_record(spec: WorkloadSpec, case: dict[str, ParamValue]) -> JsonObject:
    """The workload's exact count of one call where it declares one (matmul: 2n^3), else {}."""
    declared = spec.flops(case) if spec.flops is not None else None
    if declared is None:
        return {}
    return {"flops_per_call": float(declared),
            "flops_counted_by": f"declared by the workload ({spec.flops_covers})"}


def flops_record(spec: WorkloadSpec, module: Any, case: dict[str, ParamValue],
                 task: Any, too_long: str = "") -> JsonObject:
    """FLOPs of one call: the workload's exact count where it declares one (matmul: 2n^3),
    else the framework's own counter (the implementation's count_flops(task), which may make
    one more call) with its coverage record where it gives one (flops_coverage: the ops it had
    no formula for) and its second opinion where it has one (flops_second_opinion: an
    independent count of the same call, part by part: harness.data.secondopinion), else the
    reason there is none. After the timed samples and the output, so neither a counter's cost
    nor its extra call reaches them."""
    declared = declared_flops_record(spec, case)
    if declared:
        return declared
    counter = getattr(module, "count_flops", None)
    if counter is None:
        return {"flops_counted_by": f"unavailable: {module.__name__} has no FLOP counter"}
    if too_long:  # TOO_LONG: why the counter's pass would cost too much (pass_too_long)
        return {"flops_counted_by": f"unavailable: the FLOP count was {too_long}"}
    try:
        # (count, how), (count, how, coverage) or (count, how, coverage, second opinion):
        # coverage is the counter's record of what it missed ({"complete", "uncounted_ops",
        # "uncounted_param_share"}), or None; the second opinion a secondopinion record, or None.
        count, how, *rest = counter(task)
    except Exception as exc:  # noqa: BLE001 - a counter failing costs the count, not the case
        traceback.print_exc()
        return {"flops_counted_by": f"unavailable: the counter failed: {failure_reason(exc)}"}
    if count is None:
        return {"flops_counted_by": f"unavailable: {how}"}
    record: JsonObject = {"flops_per_call": float(count), "flops_counted_by": how}
    if rest and rest[0] is not None:
        record["flops_coverage"] = rest[0]
    if len(rest) > 1 and rest[1] is not None:
        record[SECOND_OPINION] = rest[1]
    return record


def timed_pair(task: Any, device: Any, sync_style: str) -> tuple[Any, Any]:
    """(step, synchronize) for the timing core, in the framework's sync style.

    "device": a device-wide wait (torch.cuda.synchronize, TF sync_devices). "output": the
    framework has no such wait (JAX), so the step's returned output is kept and the device
    blocks on it (`device.block(output)`, e.g. jax.block_until_ready).
    """
    if sync_style != "output":
        return task.step, device.synchronize
    last_output: list[Any] = [None]

    def step() -> None:
        last_output[0] = task.step()

    def synchronize() -> None:
        if last_output[0] is not None:
            device.block(last_output[0])

    return step, synchronize


# A case timed while other processes used the cores, or while the GPU throttled, is timed
# again after a pause, at most this many times in all; it stays SUSPECT only when every
# attempt was contended (the record keeps each attempt and why).
# The settings' attempts change it (HARNESS_ATTEMPTS: the test suite, contended by design).
MAX_ATTEMPTS = run_settings.DEFAULT_ATTEMPTS
RETRY_PAUSE_S = 1.0
QUICK_RETRY_PAUSE_S = 0.25
# A case whose timed calls took longer than this (MNIST epochs) is not timed again: a retry
# would repeat minutes of training. Its contention is recorded and it stays SUSPECT.
RETRY_MAX_TIMED_S = 20.0


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


class PhaseClock:
    """Wall time of the harness's own phases in a worker, by name (HarnessCost.phases)."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.timed_s = 0.0
        # A case of this worker was contended in every attempt: the load is not a passing
        # spike, so later cases are timed once (their contention is still recorded).
        self.busy = False

    def add(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds

    @contextlib.contextmanager
    def timing(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)


def time_case(spec: WorkloadSpec, module: Any, case: dict[str, ParamValue], cell: Cell,
              device: Any, watch: CaseWatch | None, clock: PhaseClock, last: bool = True,
              reused: int | None = None, counted: JsonObject | None = None) -> TimedCase:
    """Prepare, time and check one case once (run_case may call it again when contended).

    REUSED: the calls per sample the cell's first round found, where calibration starts.
    COUNTED: the FLOP record the cell's first round made for this case (None: count).
    """
    _reset_peak_memory(device)
    if watch is not None:
        watch.start_case()
    with clock.timing("inputs"):
        inputs = spec.make_inputs(case, cell.variant) if spec.make_inputs else {}
    policy = (TimingPolicy.quick() if cell.quick else TimingPolicy()).share(
        cell.rounds).reusing(reused)
    started = time.perf_counter()
    passes_before = sum(clock.phases.get(name, 0.0) for name in AFTER_SAMPLE_PHASES)
    measurement, output, step = measure_case(spec, module, case, cell.variant, device,
                                             inputs, policy,
                                             load_framework(cell.framework).sync, watch,
                                             counted, clock)
    timed = timed_seconds(measurement)
    clock.timed_s += timed
    passes = sum(clock.phases.get(name, 0.0) for name in AFTER_SAMPLE_PHASES) - passes_before
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
        check = spec.check(case, cell.variant, inputs, output)
    # Read before the busy pass, so the profiler's buffers never count as the case's memory.
    memory = device_memory_record(device)
    memory.update(reported_device_memory(output))
    # Before the busy pass, so no profiler has run in this process when the energy pass
    # times more calls (its own pace is in the record: window_s / calls).
    with clock.timing("energy and GPU state"):
        load = measurement.other_load
        watched, gpu_suspect = watch.finish_case(
            output["seconds_per_call"], output.get("extra", {}).get("steps_per_call"),
            not last, load is not None and load.contended,
            no_energy_pass=(QUICK_ENERGY_REASON if cell.quick else
                            NO_ENERGY_REASON if not run_settings.active().energy else
                            LATER_ROUND_ENERGY_REASON if cell.round > 0 else ""),
        ) if watch is not None else ({}, "")
    return TimedCase(measurement, output, step, check, memory, watched, gpu_suspect, inputs)


def run_case(
    spec: WorkloadSpec, module: Any, case: dict[str, ParamValue], cell: Cell, device: Any,
    watch: CaseWatch | None = None, clock: PhaseClock | None = None,
    reused: int | None = None, max_attempts: int = MAX_ATTEMPTS,
    counted: JsonObject | None = None,
) -> CaseResult:
    """Prepare, time and check one case; every failure becomes a status in the record.

    A contended timing (other processes on the cores, a throttling GPU) is timed again after
    a pause, up to MAX_ATTEMPTS in all (the settings' attempts; why a knob: the test suite runs
    two pytest processes on 2 cores, so every case there is contended by design and retrying
    it would only triple the suite's worker time); the first uncontended attempt is kept,
    else the last (the only one whose energy was measured), and the case is SUSPECT only then.
    The case's cold call is the first attempt's first call whichever attempt is kept: a
    retry's first call finds the compile caches, the graphs and the allocator already warm.
    """
    clock = clock or PhaseClock()
    attempts: list[Attempt] = []
    kept: TimedCase | None = None
    kept_number = 0
    first_cold: float | None = None  # attempt 1's first call: the only cold one
    host_peak_reset = reset_host_peak()  # this case's own host peak, for the memory fit
    try:
        allowed = 1 if clock.busy else max_attempts
        for number in range(1, allowed + 1):
            timed = time_case(spec, module, case, cell, device, watch, clock,
                              last=number == allowed, reused=reused, counted=counted)
            if number == 1:
                first_cold = timed.measurement.cold_seconds
            why = timed.contention
            samples = timed.measurement.samples
            attempts.append(Attempt(number, timed.measurement.median if samples else None,
                                    len(samples), timed.other_cores, why, round=cell.round))
            kept, kept_number = timed, number  # the first uncontended one, else the last
            if not why or timed_seconds(timed.measurement) > RETRY_MAX_TIMED_S:
                break
            if number < allowed:
                with clock.timing("pause before a retry"):
                    time.sleep(QUICK_RETRY_PAUSE_S if cell.quick else RETRY_PAUSE_S)
        assert kept is not None
        with clock.timing("device profile"):
            # Once per cell, in its first round: the profile describes the code, not the
            # minute, and a second clock per round would cost a profiled pass per worker.
            calls = profile_calls(spec, kept.measurement.calls_per_sample)
            # (an epoch-sized call keeps its profile: MNIST's busy figures are the point)
            too_long = pass_too_long("device profile", kept.output.get("seconds_per_call"),
                                     calls) \
                if getattr(device, "is_gpu", False) and spec.timing != "per_call" else ""
            device_profile: JsonObject = (
                {"reason": LATER_ROUND_REASON} if cell.round > 0
                else {"reason": f"the device profile was {too_long}"} if too_long
                else device_profile_record(device, kept.step, calls,
                                           kept.output.get("seconds_per_call")))
        host_peak = case_host_peak(host_peak_reset)  # before the sensitivity's fp32 runs
        with clock.timing(sensitivity.PHASE):
            check = sensitivity.checked_with_sensitivity(
                spec, module, case, cell.variant, cell.framework, device, kept.inputs,
                kept.output, kept.check)
    except VariantUnavailable as exc:
        return CaseResult(case, Status.UNAVAILABLE, str(exc))
    except Exception as exc:  # a failed case is data; the next case still runs
        traceback.print_exc()
        return CaseResult(case, Status.ERROR, failure_reason(exc))
    measurement = kept.measurement
    suspect = [text for text in (measurement.suspect, kept.gpu_suspect) if text]
    if len(attempts) > 1:
        attempts[kept_number - 1].kept = True
        if all(attempt.contended for attempt in attempts):
            suspect.append(f"contended in all {len(attempts)} attempts")
            clock.busy = True
    elif attempts[0].contended and clock.busy:
        suspect.append("not timed again: the cores stayed busy through every attempt of an "
                       "earlier case of this cell" + (f" ({cell.busy})" if cell.busy else ""))
    record = CaseResult(
        case=case,
        cold_seconds=first_cold,  # not the kept attempt's: its first call was not cold
        samples=measurement.samples,
        calls_per_sample=measurement.calls_per_sample,
        timer_overhead_s=measurement.timer_overhead_s,
        check=check.as_dict(),
        suspect="; ".join(suspect),
        predicted_call_s=measurement.predicted_call_s,
        other_load=(None if measurement.other_load is None else
                    {"other_cores": measurement.other_load.other_cores,
                     "steal_cores": measurement.other_load.steal_cores,
                     "seconds": measurement.other_load.seconds,
                     "interrupt_cores": measurement.other_load.interrupt_cores}),
        extra={**kept.output.get("extra", {}), **kept.watched,
               **host_peak, **warmup_extra(measurement)},
        peak_device_allocated_bytes=kept.memory["peak_device_allocated_bytes"],
        peak_device_reserved_bytes=kept.memory["peak_device_reserved_bytes"],
        device_profile=device_profile,
        **blocks.record_fields(measurement),
        attempts=attempts if len(attempts) > 1 else [],
        calls_per_sample_reused=reused,
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


def reused_calibration(spec: WorkloadSpec, cell: Cell, position: int) -> int | None:
    """The calls per sample the cell's first round found for its case at POSITION, if this
    worker is a later round given one; None where the case is timed call by call (an epoch
    has nothing to calibrate)."""
    if spec.timing == "per_call" or position >= len(cell.calibration):
        return None
    return cell.calibration[position]


def counted_flops(cell: Cell, position: int) -> JsonObject | None:
    """The FLOP record the cell's first round made for its case at POSITION, if this worker
    is a later round given one; None: count (harness.run.rounds first_round_flops)."""
    if position >= len(cell.flops) or cell.flops[position] is None:
        return None
    return dict(cell.flops[position] or {})


def run_cell(cell: Cell, result_path: Path,
             settings: run_settings.Settings | None = None) -> None:
    """Run CELL's cases under SETTINGS (None: the process's active ones), saving after each."""
    chosen = settings or run_settings.active()
    run = CellRun(cell, result_path)
    run.save()
    clock = run.clock
    spec = load_workload(cell.workload)
    installed, reason = framework_installed(cell.framework)
    if not installed:
        return run.finish(Status.UNAVAILABLE, reason)
    with clock.timing("framework import"):
        device_module = backend_module(cell.framework, "device")
        run.result.framework_version = device_module.version()
        run.result.threads = device_module.threads()
    try:
        with clock.timing("device open"):
            device = device_module.open_device(cell.device)
    except DeviceUnavailable as exc:
        return run.finish(Status.UNAVAILABLE, str(exc))
    run.result.device_name = device.description
    # Context creation happens when the device opens, before any case's cold call.
    run.result.device_init_seconds = getattr(device, "init_seconds", None)
    if cell.device == "cpu" and cell.variant in spec.device_only_variants:
        return run.finish(Status.UNAVAILABLE, f"variant {cell.variant} needs a GPU device")
    module = implementation_module(spec, cell.framework)
    with clock.timing("idle power"):
        watch = CaseWatch.open(device)  # NVML and RAPL, each or the reason it is unavailable
        # Idle power settles for seconds: measured once per cell (its first round), or read
        # back where this machine measured it within the hour (energy.IDLE_REMEMBER_S); not
        # for --quick, whose energy figures then have no share above idle.
        if not cell.quick and cell.round == 0 and chosen.energy:
            watch.measure_idle(idle_fingerprint(cell.device, str(device.description)))
    for position, case in enumerate(spec.cases_for(cell.params, cell.variant)):
        run.result.cases.append(run_case(spec, module, case, cell, device, watch, clock,
                                         reused_calibration(spec, cell, position),
                                         chosen.attempts, counted_flops(cell, position)))
        run.save()
    run.finish()


def main(argv: list[str]) -> int:
    """CELL.json RESULT.json [SETTINGS]: without SETTINGS (JSON), the defaults, not the
    environment's HARNESS_* variables."""
    cell_path, result_path = Path(argv[0]), Path(argv[1])
    settings = run_settings.Settings.from_json(argv[2]) if len(argv) > 2 \
        else run_settings.Settings()
    # Installed first: the registry's plugins, the MNIST loader and the NVML and RAPL
    # openers under CaseWatch read the active settings, and no argument reaches them.
    run_settings.install(settings)
    cell_fields = json.loads(cell_path.read_text())
    cell = Cell(**cell_fields)
    print(f"worker {cell.label} on {platform.node()}", file=sys.stderr)
    try:
        run_cell(cell, result_path, settings)
    except Exception as exc:  # anything outside a case (a broken import, say) is the cell's error
        traceback.print_exc()
        partial = CellRun(cell, result_path)
        if result_path.exists():
            partial.result = CellResult.from_dict(json.loads(result_path.read_text()))
        partial.finish(Status.ERROR, failure_reason(exc))
    return 0


def exit_now(code: int) -> None:
    """Leave without the interpreter's teardown: the result file is written (atomically) and
    the streams are flushed. Why: a framework's teardown (TensorFlow's: ~1.4 s on 2 cores) is
    wall time of every worker, and with rounds of every round, that measures nothing."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main(sys.argv[1:]))
