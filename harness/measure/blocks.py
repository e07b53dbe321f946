"""Timed blocks of steps inside a long call: many warm samples from one or two epochs.

Why: a per_call workload (MNIST: one call = one training epoch) gives one sample per call, so
a run of 3 epochs has 2 warm samples per cell, too few to say whether a gap between two
frameworks beats the noise. An epoch is many identical optimizer steps, so the clock is also
read between blocks of them. The harness still owns the clock: a task only says "step i of
this call starts now" (harness.backend.StepMarks.before_step) and, where its framework waits
on an output rather than on the device (JAX), how to get the output to wait on. Every clock
read here is preceded by a synchronise, as in harness.measure.timing.

A block's seconds are scaled to a whole call (seconds x steps per call / steps in the block),
so a block sample keeps the unit of the call samples it replaces: seconds per epoch. The first
block of the first call is the cold part (tracing, compilation, allocator growth) and is not a
sample; the whole calls (epochs) are kept too, the first one as the cold call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.backend import StepMarks
from harness.measure import hostload, timing
from harness.measure.timing import Measurement, TimedWindow, per_call, suspect_reason

# Blocks per call unless the workload says otherwise: one epoch then gives BLOCKS_PER_CALL - 1
# warm samples (the first block is cold), enough for quartiles that mean something; fewer when
# a call has fewer steps than this.
BLOCKS_PER_CALL = 16

# How a block boundary waits for the work dispatched so far: given the task's zero-argument
# "current output" function (or None), synchronise the device or block on that output.
BoundaryWait = Callable[[Callable[[], Any] | None], None]


@dataclass
class BlockMeasurement(Measurement):
    """A per_call measurement whose warm samples are blocks of steps, scaled to a call."""

    call_seconds: list[float] = field(default_factory=list)  # every whole call, the cold first
    sample_steps: list[int] = field(default_factory=list)  # steps in each warm sample's block
    steps_per_call: int = 0


def block_starts(steps_per_call: int, blocks: int = BLOCKS_PER_CALL) -> list[int]:
    """The step indices at which a new block starts (0 excluded): blocks as even as steps allow."""
    count = max(1, min(blocks, steps_per_call))
    return sorted({round(index * steps_per_call / count) for index in range(1, count)} - {0})


def boundary_wait(device: Any, sync_style: str) -> BoundaryWait:
    """The wait before a block's clock read, in the framework's sync style.

    "device": a device-wide wait. "output": the framework has none (JAX), so the task's current
    output (its training state) is blocked on; a task that offers none cannot be cut in blocks.
    """
    if sync_style != "output":
        return lambda current_output: device.synchronize()

    def wait_for_output(current_output: Callable[[], Any] | None) -> None:
        if current_output is None:
            raise RuntimeError("block boundary without an output to wait on: a task of a "
                               "sync='output' framework must pass current_output")
        device.block(current_output())

    return wait_for_output


class BlockClock(StepMarks):
    """Reads the clock, after a wait, where a new block of steps starts inside one call."""

    def __init__(self, steps_per_call: int, wait: BoundaryWait,
                 blocks: int = BLOCKS_PER_CALL) -> None:
        self.steps_per_call = steps_per_call
        self.starts = block_starts(steps_per_call, blocks)
        self.wait = wait
        self.marks: list[tuple[int, float]] = []  # (first step of the block, clock at its start)
        self.next_start = 0  # index into self.starts of the next boundary
        # Called once at the next call's first boundary, after its wait and before its clock
        # read (so what it costs is the cold block's): the window's begin where the only
        # call is the cold one (_timed_blocks).
        self.at_first_boundary: Callable[[], None] | None = None

    def start_call(self) -> None:
        """The caller has synchronised: this clock read starts the call and its first block."""
        self.next_start = 0
        self.marks = [(0, timing._clock())]

    def before_step(self, index: int, current_output: Callable[[], Any] | None = None) -> None:
        """Called by the task before step `index`; a clock read only at a block boundary.

        Steps may be reported in strides (Keras' steps_per_execution reports every 32nd), so a
        boundary is taken at the first reported index at or past it.
        """
        if self.next_start >= len(self.starts) or index < self.starts[self.next_start]:
            return
        self.wait(current_output)
        if self.at_first_boundary is not None and len(self.marks) == 1:
            begin, self.at_first_boundary = self.at_first_boundary, None
            begin()
        self.marks.append((index, timing._clock()))
        while self.next_start < len(self.starts) and self.starts[self.next_start] <= index:
            self.next_start += 1

    def end_call(self) -> list[tuple[int, float]]:
        """The caller has synchronised: (steps, seconds) of every block of the call just run."""
        ends = [*self.marks[1:], (self.steps_per_call, timing._clock())]
        return [(end_step - start_step, end_time - start_time)
                for (start_step, start_time), (end_step, end_time) in zip(self.marks, ends)
                if end_step > start_step]


def supports_blocks(task: Any) -> bool:
    """Whether the task reports its steps (step_marks) and knows how many a call has."""
    return isinstance(getattr(task, "step_marks", None), StepMarks) and \
        int(getattr(task, "steps_per_call", 0) or 0) > 1


def per_call_in_blocks(task: Any, step: Callable[[], object], synchronize: Callable[[], None],
                       count: int, wait: BoundaryWait,
                       blocks_per_call: int = BLOCKS_PER_CALL,
                       window: TimedWindow | None = None) -> Measurement:
    """Time `count` calls (epochs) of `task`, sampling `blocks_per_call` blocks within each.

    With one block per call, or a task that does not report its steps, this is
    harness.measure.timing.per_call: one sample per call after the cold one. The clock is taken
    off the task afterwards, so a later call (the device-busy pass) runs without block waits.
    The window (GPU state, energy), as in per_call, spans the whole warm calls: energy is
    counted per call, and a block is no call. Where the only call is the cold one (a round's
    share of an epoch), it spans that call's warm blocks, counted as their share of a call:
    the same steps the samples are, so no energy pass has to run more of them afterwards.
    """
    if blocks_per_call <= 1 or not supports_blocks(task):
        return per_call(step, synchronize, count, window)
    clock = BlockClock(int(task.steps_per_call), wait, blocks_per_call)
    own_marks = task.step_marks
    task.step_marks = clock
    try:
        measurement = _timed_blocks(step, synchronize, count, clock, window)
    finally:
        task.step_marks = own_marks
    return measurement


def _timed_blocks(step: Callable[[], object], synchronize: Callable[[], None], count: int,
                  clock: BlockClock, window: TimedWindow | None = None) -> BlockMeasurement:
    load_before = hostload.snapshot()
    call_seconds: list[float] = []
    samples: list[float] = []
    sample_steps: list[int] = []
    if window is not None and count < 2:
        clock.at_first_boundary = window.begin  # no warm call: the cold call's warm blocks
    for call in range(count):
        synchronize()
        if call == 1 and window is not None:
            window.begin()
        clock.start_call()
        step()
        synchronize()
        blocks = clock.end_call()
        call_seconds.append(sum(seconds for _, seconds in blocks))
        for steps, seconds in blocks[1:] if call == 0 else blocks:
            samples.append(seconds * clock.steps_per_call / steps)
            sample_steps.append(steps)
    if window is not None:
        if clock.at_first_boundary is not None:  # no boundary came: an empty window, which
            clock.at_first_boundary = None       # says so (as in per_call)
            window.begin()
        window.end(count - 1 if count >= 2 else sum(sample_steps) / clock.steps_per_call)
    measurement = BlockMeasurement(cold_seconds=call_seconds[0], samples=samples,
                                   call_seconds=call_seconds, sample_steps=sample_steps,
                                   steps_per_call=clock.steps_per_call)
    measurement.other_load = hostload.other_load(load_before, hostload.snapshot())
    measurement.suspect = suspect_reason(measurement)
    return measurement


def record_fields(measurement: Measurement) -> dict[str, Any]:
    """What a block measurement adds to the worker's case record ({} for any other)."""
    if not isinstance(measurement, BlockMeasurement):
        return {}
    return {"call_seconds": tuple(measurement.call_seconds),
            "sample_steps": tuple(measurement.sample_steps)}


# --- a part of a call, for the passes after the samples ---------------------------------------

# The device-busy pass of a long call profiles its first steps, about this much of the call:
# on the H200 two whole 1/3-epoch calls of keras-torch MNIST (one under the profiler) took
# 14.3 s of a 55 s cell, for per-call figures that scale with the steps profiled.
PART_TARGET_S = 0.5
# ...and never fewer steps than this, so one slow first step is a small share of the part.
PART_MIN_STEPS = 50


class EnoughSteps(Exception):
    """Raised at the first step past a part of a call: the task stops its call there."""


class StopAfter(StepMarks):
    """Step marks that end the call at step `steps` (before that step runs)."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.output: Any = None  # the task's output as of the stop, where it offers one

    def before_step(self, index: int, current_output: Callable[[], Any] | None = None) -> None:
        if index >= self.steps:
            # A call stopped here returns no output, and a sync='output' framework's wait
            # needs one that still exists: the state as of this step.
            self.output = current_output() if current_output is not None else None
            raise EnoughSteps(index)


@dataclass
class CallStep:
    """One whole call of a task that reports its steps, which can also run a part of itself.

    Why: a pass after the samples (the device profile) needs per-call figures, and a call of
    a long epoch share costs seconds; its first STEPS steps, scaled by the share they are,
    cost a fraction. The part runs after the check, so a call left half-way reaches no output.
    """

    task: Any
    step: Callable[[], object]
    # Where the framework waits on an output (caserun.OutputStep.keep): told the state a part
    # stopped at, since the stopped call returns none. None: a device-wide wait.
    keep_output: Callable[[Any], None] | None = None

    def __call__(self) -> object:
        return self.step()

    @property
    def steps_per_call(self) -> int:
        return int(self.task.steps_per_call)

    def part_steps(self, seconds_per_call: float | None) -> int:
        """The steps of the part: about PART_TARGET_S of the call, at least PART_MIN_STEPS,
        at most the whole call."""
        if not seconds_per_call or seconds_per_call <= PART_TARGET_S:
            return self.steps_per_call
        per_step = seconds_per_call / self.steps_per_call
        return min(self.steps_per_call, max(PART_MIN_STEPS, round(PART_TARGET_S / per_step)))

    def part(self, steps: int) -> Callable[[], None]:
        """A callable that runs the first STEPS steps of one call, then stops the call."""
        def first_steps() -> None:
            own_marks = self.task.step_marks
            stop = StopAfter(steps)
            self.task.step_marks = stop
            try:
                self.step()
            except EnoughSteps:
                if self.keep_output is not None and stop.output is not None:
                    self.keep_output(stop.output)
            finally:
                self.task.step_marks = own_marks
        return first_steps
