"""Timed blocks of steps inside one call (harness.measure.blocks), on fake tasks and a fake clock.

The clock is replaced by a counter the fake device advances, so every expected sample is exact
and nothing here depends on how busy the machine is.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.backend import StepMarks
from harness.data import store
from harness.data.results import CellResult
from harness.measure import blocks, timing


class FakeClock:
    """Seconds that pass only when the fake device finishes work."""

    def __init__(self) -> None:
        self.now = 0.0
        self.reads: list[tuple[float, int]] = []  # (time, work still pending at the read)
        self.pending: list[float] = []

    def read(self) -> float:
        self.reads.append((self.now, len(self.pending)))
        return self.now

    def launch(self, seconds: float) -> None:
        """Asynchronous work: time passes only when someone waits for it."""
        self.pending.append(seconds)

    def synchronize(self) -> None:
        self.now += sum(self.pending)
        self.pending.clear()


class EpochTask:
    """An epoch of `steps` steps; step i costs step_costs[i] seconds of device time."""

    def __init__(self, clock: FakeClock, step_costs: list[float], stride: int = 1,
                 report_steps: bool = True) -> None:
        self.clock, self.step_costs, self.stride = clock, step_costs, stride
        self.steps_per_call = len(step_costs)
        if report_steps:
            self.step_marks = StepMarks()
        self.outputs_asked = 0

    def current_output(self) -> str:
        self.outputs_asked += 1
        return "state"

    def step(self) -> None:
        for index, cost in enumerate(self.step_costs):
            if index % self.stride == 0 and hasattr(self, "step_marks"):
                self.step_marks.before_step(index, self.current_output)
            self.clock.launch(cost)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(timing, "_clock", fake.read)
    monkeypatch.setattr(blocks.hostload, "snapshot", lambda: None)
    monkeypatch.setattr(blocks.hostload, "other_load", lambda before, after: None)
    monkeypatch.setattr(timing.hostload, "snapshot", lambda: None)
    monkeypatch.setattr(timing.hostload, "other_load", lambda before, after: None)
    return fake


def device_wait(clock: FakeClock) -> blocks.BoundaryWait:
    return lambda current_output: clock.synchronize()


def test_block_starts_are_even_and_never_more_blocks_than_steps() -> None:
    assert blocks.block_starts(64, 16) == list(range(4, 64, 4))
    assert blocks.block_starts(10, 4) == [2, 5, 8]  # 2, 3, 3, 2 steps
    assert blocks.block_starts(3, 16) == [1, 2]
    assert blocks.block_starts(1, 16) == []


def test_blocks_become_warm_samples_scaled_to_a_whole_call(clock: FakeClock) -> None:
    # 8 steps of 1 s each, except a slow first step (tracing) in every epoch's first block.
    task = EpochTask(clock, [5.0] + [1.0] * 7)
    measurement = blocks.per_call_in_blocks(task, task.step, clock.synchronize, 2,
                                            device_wait(clock), blocks_per_call=4)
    assert measurement.call_seconds == [12.0, 12.0] and measurement.cold_seconds == 12.0
    # Epoch 1: its first block (5 + 1 s) is cold; 3 blocks of 2 s, scaled by 8 / 2 steps.
    # Epoch 2: all 4 blocks, its first again 6 s (the slow step is in every epoch here).
    assert measurement.samples == [8.0, 8.0, 8.0, 24.0, 8.0, 8.0, 8.0]
    assert measurement.sample_steps == [2] * 7
    assert measurement.calls_per_sample == 1
    # A sync before every clock read: nothing was pending when the clock was read.
    assert clock.reads and all(pending == 0 for _, pending in clock.reads)
    assert isinstance(task.step_marks, StepMarks) and not isinstance(task.step_marks,
                                                                      blocks.BlockClock)


def test_one_epoch_gives_warm_samples(clock: FakeClock) -> None:
    task = EpochTask(clock, [1.0] * 64)
    measurement = blocks.per_call_in_blocks(task, task.step, clock.synchronize, 1,
                                            device_wait(clock), blocks_per_call=16)
    assert len(measurement.samples) == 15 and set(measurement.samples) == {64.0}


def test_strided_steps_put_the_boundary_at_the_next_reported_step(clock: FakeClock) -> None:
    """Keras with steps_per_execution reports every Nth step only."""
    task = EpochTask(clock, [1.0] * 8, stride=4)
    measurement = blocks.per_call_in_blocks(task, task.step, clock.synchronize, 2,
                                            device_wait(clock), blocks_per_call=8)
    assert measurement.sample_steps == [4, 4, 4]  # epoch 1's second block, both of epoch 2
    assert measurement.samples == [8.0, 8.0, 8.0]


def test_a_task_without_step_marks_gets_one_sample_per_call(clock: FakeClock) -> None:
    task = EpochTask(clock, [1.0] * 8, report_steps=False)
    measurement = blocks.per_call_in_blocks(task, task.step, clock.synchronize, 3,
                                            device_wait(clock))
    assert not isinstance(measurement, blocks.BlockMeasurement)
    assert measurement.samples == [8.0, 8.0] and blocks.record_fields(measurement) == {}


def test_one_block_per_call_is_the_per_call_timing(clock: FakeClock) -> None:
    task = EpochTask(clock, [1.0] * 8)
    measurement = blocks.per_call_in_blocks(task, task.step, clock.synchronize, 3,
                                            device_wait(clock), blocks_per_call=1)
    assert measurement.samples == [8.0, 8.0] and task.outputs_asked == 0


class OutputDevice:
    def __init__(self) -> None:
        self.blocked_on: list[Any] = []

    def block(self, output: Any) -> None:
        self.blocked_on.append(output)

    def synchronize(self) -> None:
        raise AssertionError("a sync='output' framework has no device-wide wait")


def test_output_style_waits_on_the_task_output_at_boundaries_only(clock: FakeClock) -> None:
    device = OutputDevice()
    task = EpochTask(clock, [1.0] * 8)
    wait = blocks.boundary_wait(device, "output")
    blocks.per_call_in_blocks(task, task.step, clock.synchronize, 1, wait, blocks_per_call=4)
    assert device.blocked_on == ["state"] * 3 and task.outputs_asked == 3
    with pytest.raises(RuntimeError, match="output to wait on"):
        wait(None)


def test_block_case_rows_keep_the_whole_epochs() -> None:
    result = {"cell": {"workload": "mnist-wide", "variant": "as-written", "framework": "torch",
                       "device": "cpu", "params": {}},
              "status": "ok", "reason": "",
              "cases": [{"case": {"batch_size": 32}, "status": "ok", "reason": "",
                         "rounds": [{"cold_seconds": 12.0, "samples": [8.0, 9.0],
                                     "call_seconds": [12.0, 8.5], "sample_steps": [2, 2]}]}]}
    rows = store.measurement_rows("run", "host", "batch_size", CellResult.from_dict(result), {})
    phases = [(row["phase"], row["sample"], row["seconds"]) for row in rows]
    assert phases == [("cold", 0, 12.0), ("warm", 1, 8.0), ("warm", 2, 9.0),
                      ("epoch", 1, 12.0), ("epoch", 2, 8.5)]
    assert [row.get("block_steps") for row in rows] == [None, 2, 2, None, None]


# --- a part of a call for the device-busy pass ------------------------------------------------

class StepCountingProfiler:
    """A GPU device whose profile reads the fake clock's device work of the calls it runs:
    1 kernel per step, each step's cost as busy time."""

    is_gpu = True

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock

    def profile(self, step: Any, calls: int) -> Any:
        from harness.measure.devicetime import DeviceProfile

        for _ in range(calls):
            step()
        work = list(self.clock.pending)
        self.clock.synchronize()
        return DeviceProfile(calls=calls, busy_seconds=sum(work) / calls, copy_seconds=0.0,
                             kernels_per_call=len(work) / calls, copies_per_call=0.0,
                             launches_per_call=len(work) / calls, span_seconds=sum(work) / calls,
                             tool="fake")


def test_a_long_calls_profile_runs_its_first_steps_and_scales_them_to_the_call(
        clock: FakeClock) -> None:
    from harness.run.casepasses import device_profile_record

    task = EpochTask(clock, [0.01] * 1000)  # a 10 s call of 1,000 steps of 10 ms
    own_marks = task.step_marks
    call = blocks.CallStep(task, task.step)
    steps = call.part_steps(10.0)
    assert steps == round(blocks.PART_TARGET_S / 0.01)  # ~0.5 s of the call
    record = device_profile_record(StepCountingProfiler(clock), call, 1, 10.0)
    assert task.step_marks is own_marks  # the task's marks are back for the next call
    assert record["profiled_share"] == pytest.approx(steps / 1000)
    assert record["kernels_per_call"] == pytest.approx(1000)  # 50 steps' kernels, scaled
    assert record["busy_seconds"] == pytest.approx(10.0)
    assert record["span_seconds"] == pytest.approx(10.0)
    # A short call, and a task that does not report its steps, are profiled whole.
    assert call.part_steps(0.4) == 1000 and call.part_steps(None) == 1000
    whole = device_profile_record(StepCountingProfiler(clock), call, 1, 0.4)
    assert whole["profiled_share"] == 1.0 and whole["kernels_per_call"] == 1000
    # A call of few, slow steps still profiles PART_MIN_STEPS of them.
    slow = blocks.CallStep(EpochTask(clock, [1.0] * 200), task.step)
    assert slow.part_steps(200.0) == blocks.PART_MIN_STEPS


class RecordingWindow:
    """A TimedWindow that notes when it began (the fake clock then) and the calls it ended on."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock, self.began_at, self.calls = clock, None, None
        self.pending_at_begin: int | None = None

    def begin(self) -> None:
        self.began_at, self.pending_at_begin = self.clock.now, len(self.clock.pending)

    def end(self, calls: float) -> None:
        self.calls = calls


def test_with_the_cold_call_alone_the_window_spans_its_warm_blocks(clock: FakeClock) -> None:
    """A round's share of an epoch is one call, the cold one: the window (energy, GPU state)
    spans its warm blocks, counted as their share of a call, so no energy pass has to run
    more of the step afterwards; the samples are the same blocks."""
    task = EpochTask(clock, [5.0] + [1.0] * 7)
    window = RecordingWindow(clock)
    measurement = blocks.per_call_in_blocks(task, task.step, clock.synchronize, 1,
                                            device_wait(clock), blocks_per_call=4, window=window)
    assert window.began_at == 6.0 and window.pending_at_begin == 0  # after the cold block
    assert window.calls == 6 / 8  # the warm blocks' steps, as a share of the call
    assert measurement.samples == [8.0, 8.0, 8.0]


def test_a_cold_call_without_a_boundary_leaves_an_empty_window(clock: FakeClock) -> None:
    task = EpochTask(clock, [1.0] * 8, stride=100)  # reports its first step only
    window = RecordingWindow(clock)
    blocks.per_call_in_blocks(task, task.step, clock.synchronize, 1, device_wait(clock),
                              blocks_per_call=4, window=window)
    assert window.began_at == 8.0 and window.calls == 0
