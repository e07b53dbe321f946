"""The passes after a case's timed samples: its FLOP count, its memory pass, its device profile.

Each describes the case; none is its measurement. They run after the timed samples and the
output (the device profile after the check as well), so that no extra call, traced call or
profiler reaches a timed sample or a checked output, and a failure in one costs its figure,
never the case. Each is left out where the case's median call says it would take too long
(pass_too_long).
"""

from __future__ import annotations

import traceback
from typing import Any

from harness.backend import FEATURES_PART_STEPS, ProfileUnavailable
from harness.core.settings import Settings
from harness.core.units import format_seconds
from harness.data.noprofile import (
    NO_TENSORFLOW_PROFILE,
    TENSORFLOW_FRAMEWORKS,
    NoProfileFeatures,
)
from harness.data.secondopinion import RECORD_KEY as SECOND_OPINION
from harness.data.serial import JsonObject
from harness.measure import blocks
from harness.measure.casewatch import LATER_ROUND_REASON
from harness.run.failures import failure_reason
from harness.run.phaseclock import PhaseClock, phase
from harness.spec import ParamValue, WorkloadSpec

CPU_PROFILE_REASON = "cpu cell: no device clock; its whole time is host compute"


def profile_calls(spec: WorkloadSpec, calls_per_sample: int) -> int:
    """Calls in the device-busy pass: one epoch-sized call, else one timed sample's worth.

    A sample's worth was calibrated to last a few milliseconds, long enough for the profiler's
    start-up to be a small part and short enough that its event buffer stays small.
    """
    return 1 if spec.run.timing == "per_call" else max(1, calls_per_sample)


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


# The passes after the timed samples that each cost a call or more (a counter's traced call,
# the memory pass's watched call), named apart from warm-up in the cost line: for a step of
# seconds (seed 000's Jacobian) each is a large part of the worker.
FLOP_COUNT_PHASE = "FLOP count"
MEMORY_PASS_PHASE = "memory pass"
AFTER_SAMPLE_PHASES = (FLOP_COUNT_PHASE, MEMORY_PASS_PHASE)
# A per-call task's making (the model, its optimizer: on Keras/JAX each new variable's
# initializer is a program of its own) and the output its check reads (an MNIST test accuracy
# is an evaluation, compiled once per process): named apart from warm-up, which then holds only
# what the timing itself spent, so a slow worker says which of them to cut.
SETUP_PHASE = "step setup"
OUTPUT_PHASE = "output for the check"
BESIDE_WARMUP_PHASES = (*AFTER_SAMPLE_PHASES, SETUP_PHASE, OUTPUT_PHASE)
DEVICE_PROFILE_PHASE = "device profile"
# The features of the step for a GPU prediction (issue 51): a torch CPU cell's own-cost phase.
FEATURES_PHASE = "features"

# A pass after the samples is left out where it would take longer than this, by the case's
# median call and the pass's cost in calls: it describes the case, it is not the measurement,
# and a user waiting on a step of seconds should not wait minutes more for it. The costs in
# calls were measured on seed 000's Jacobian (2.5 s per call on the 2-core VM): the FLOP
# counter's traced call 6.6x a call, the memory pass's watched call 5.6x (both dispatch every
# op through Python); the device profile runs two calls, one under the profiler.
AFTER_PASS_LIMIT_S = 10.0
# The FLOP count's and the memory pass's limit where no run's settings say (Settings.pass_limit_s).
DEFAULT_PASS_LIMIT_S = Settings.pass_limit_s
# The features pass records one call under a dispatch mode that times every op (the FLOP
# counter's cost) after one plain warm-up call: 8 calls (an MNIST epoch: a few steps of it).
PASS_COST_CALLS = {FLOP_COUNT_PHASE: 7.0, MEMORY_PASS_PHASE: 6.0, DEVICE_PROFILE_PHASE: 3.0,
                   FEATURES_PHASE: 8.0}
LIMITED_BY_SETTINGS = (FLOP_COUNT_PHASE, MEMORY_PASS_PHASE, FEATURES_PHASE)


def pass_too_long(name: str, seconds_per_call: float | None, calls: int = 1,
                  pass_limit_s: float = DEFAULT_PASS_LIMIT_S) -> str:
    """Why the pass NAME is left out for a case whose call takes SECONDS_PER_CALL ('' where it
    runs): its estimate over its limit (the device profile: AFTER_PASS_LIMIT_S; the FLOP count
    and memory pass: PASS_LIMIT_S, the run's settings' pass_limit_s, 2 s under advise)."""
    if not seconds_per_call:
        return ""
    limit = AFTER_PASS_LIMIT_S if name not in LIMITED_BY_SETTINGS else pass_limit_s
    estimate = seconds_per_call * calls * PASS_COST_CALLS[name]
    if estimate <= limit:
        return ""
    return (f"left out: a call takes {format_seconds(seconds_per_call)} and the {name} pass "
            f"about {PASS_COST_CALLS[name] * calls:g} of them (~{estimate:.0f} s, over the "
            f"{limit:g} s a pass after the samples may take)")


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


def counted_passes(spec: WorkloadSpec, module: Any, case: dict[str, ParamValue], task: Any,
                   seconds_per_call: float | None, counted: JsonObject | None,
                   clock: PhaseClock | None,
                   pass_limit_s: float = DEFAULT_PASS_LIMIT_S) -> JsonObject:
    """The case's extra fields from its FLOP count and its memory pass, each timed as its
    phase. COUNTED: the FLOP record the cell's first round made for this case (a later round),
    taken instead of counting again; a declared count costs nothing, so only a counter's (an
    extra traced call) is reused. A later round runs no memory pass: its record is dropped
    when the rounds merge."""
    found: JsonObject = {}
    with phase(clock, FLOP_COUNT_PHASE):
        found.update(
            reused_flops(counted) if counted and spec.flops is None else
            flops_record(spec, module, case, task,
                         pass_too_long(FLOP_COUNT_PHASE, seconds_per_call,
                                       pass_limit_s=pass_limit_s)))
    if counted is None:
        with phase(clock, MEMORY_PASS_PHASE):
            found.update(required_memory_record(
                module, task, pass_too_long(MEMORY_PASS_PHASE, seconds_per_call,
                                            pass_limit_s=pass_limit_s)))
    return found


def device_profile_pass(spec: WorkloadSpec, device: Any, cell_round: int, step: Any,
                        calls_per_sample: int, seconds_per_call: float | None) -> JsonObject:
    """The case's device profile (device_profile_record), or why there is none: once per
    cell, in its first round (the profile describes the code, not the minute, and a second
    clock per round would cost a profiled pass per worker), and not where it would take too
    long (an epoch-sized call keeps its profile: MNIST's busy figures are the point)."""
    if cell_round > 0:
        return {"reason": LATER_ROUND_REASON}
    calls = profile_calls(spec, calls_per_sample)
    too_long = pass_too_long(DEVICE_PROFILE_PHASE, seconds_per_call, calls) \
        if getattr(device, "is_gpu", False) and spec.run.timing != "per_call" else ""
    if too_long:
        return {"reason": f"the device profile was {too_long}"}
    return device_profile_record(device, step, calls, seconds_per_call)


FEATURES_REASON = "step_features_reason"
FEATURES_KEY, FEATURES_PART_KEY = "step_features", "step_features_steps"


def recorded_call_seconds(step: Any, seconds_per_call: float | None) -> float | None:
    """Seconds of the call the features pass records: an epoch-sized call's few steps, else
    one call."""
    if isinstance(step, blocks.CallStep) and seconds_per_call:
        return seconds_per_call * min(FEATURES_PART_STEPS, step.steps_per_call) / \
            step.steps_per_call
    return seconds_per_call


def features_pass(module: Any, framework: str, variant: str, device: Any, cell_round: int,
                  step: Any, inputs: Any, seconds_per_call: float | None,
                  pass_limit_s: float = DEFAULT_PASS_LIMIT_S) -> JsonObject:
    """The step's device-independent features for a GPU prediction (issue 51), as extra
    fields, or {step_features_reason: why there are none}: the implementation's
    step_features(step, variant, inputs, seconds_per_call) where it has one (torch's: an
    own-model file's step, MNIST's). A CPU cell's first round only (the features describe the
    code, not the minute); after the check and the device profile, so no recorded call
    reaches a timed sample or a checked output; within the run's pass limit, by the recorded
    call's estimate; a failure costs the features, not the case."""
    if getattr(device, "is_gpu", False) or cell_round > 0:
        # A GPU cell's step is measured, not predicted; a later round's record would be
        # dropped (the merged case keeps the first round's extra).
        return {}
    record = getattr(module, "step_features", None)
    if record is None:
        return {FEATURES_REASON: "the features pass records training steps of the MNIST "
                                 "workloads and of own-model torch files, not this "
                                 f"workload's {framework} step"}
    if framework in TENSORFLOW_FRAMEWORKS:  # nothing to record: no profile could price it
        return {FEATURES_KEY: NoProfileFeatures(framework, NO_TENSORFLOW_PROFILE).record(),
                FEATURES_PART_KEY: 1}
    if step is None:
        return {FEATURES_REASON: "timed in other processes; no in-process step to record"}
    too_long = pass_too_long(FEATURES_PHASE, recorded_call_seconds(step, seconds_per_call),
                             pass_limit_s=pass_limit_s)
    if too_long:
        return {FEATURES_REASON: f"the features pass was {too_long}"}
    try:
        return dict(record(step, variant, inputs, seconds_per_call))
    except Exception as exc:  # noqa: BLE001 - the timed result is already safe
        traceback.print_exc()
        return {FEATURES_REASON: f"the features pass failed: {failure_reason(exc)}"}
