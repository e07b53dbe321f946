"""The edge-aligned energy pass (issue 42): the power between two observed updates of a counter
that advances in steps, over their time apart, is right from a 0.4 s span where two arbitrary
reads of the same counter are off by up to one step over the window.

Fakes only (no GPU here): a counter that steps every 100 ms as NVML's did on an H100, read
against a fake clock that only the calls advance, so the figures do not depend on this
machine's load; the poller thread is real (its stop and join are what is tested).
"""

from __future__ import annotations

import math
import sys
import threading
from dataclasses import dataclass

import pytest

from harness.backend import StepMarks
from harness.measure import blocks, counteredges, edgepass, energy, energycounters
from harness.measure.casewatch import CaseWatch, pass_source

WATTS, PERIOD_S = 300.0, 0.1


@dataclass
class SteppedCounter:
    """A board drawing WATTS whose counter moves only every PERIOD_S (first update at PHASE)."""

    clock: FakeClock
    phase_s: float = 0.037
    watts: float = WATTS
    moves: bool = True
    reads: int = 0
    name: str = "fake stepped counter"

    def value_at(self, seconds: float) -> float:
        if not self.moves:
            return 1000.0
        updates = math.floor((seconds - self.phase_s) / PERIOD_S) + 1
        return 1000.0 + self.watts * PERIOD_S * max(updates, 0)

    def read_joules(self) -> float:
        self.reads += 1
        return self.value_at(self.clock())


@dataclass
class FakeClock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class PacedStep:
    """A call that takes TICK_S on the fake clock and returns once the poller has read the
    counter again (so every tick is seen, however loaded this machine is)."""

    clock: FakeClock
    counter: SteppedCounter
    tick_s: float = 0.005
    calls: int = 0

    def __call__(self) -> None:
        self.calls += 1
        self.clock.now += self.tick_s
        seen = self.counter.reads
        for _ in range(2000):  # a poller that stopped reading must not hang the test
            if self.counter.reads > seen:
                return
            threading.Event().wait(0.0005)


def poll_log(counter: SteppedCounter, opened_s: float, closed_s: float,
             poll_s: float = 0.003, read_s: float = 0.001) -> list[counteredges.Reading]:
    """The reads a poller every POLL_S (each read lasting READ_S) logs from opened_s - 0.05 to
    closed_s + 0.05, on the counter's own time line."""
    log, started = [], opened_s - 0.05
    while started < closed_s + 0.05:
        value = counter.value_at(started + read_s / 2)
        log.append(counteredges.Reading(started, started + read_s, value))
        started += poll_s
    return log


def two_reads_watts(counter: SteppedCounter, opened_s: float, closed_s: float) -> float:
    return (counter.value_at(closed_s) - counter.value_at(opened_s)) / (closed_s - opened_s)


@pytest.mark.parametrize("phase_s", [0.0005, 0.02, 0.05, 0.0995])
def test_a_short_span_between_updates_gives_the_power_within_its_resolution(
        phase_s: float) -> None:
    counter = SteppedCounter(FakeClock(), phase_s=phase_s)
    opened, closed = 0.0, 0.7  # up to a period, a settling update, 4 periods, slack
    for settle in (0, 1):
        edges = counteredges.find_edges(poll_log(counter, opened, closed))
        span = counteredges.edge_span(edges, opened, closed, settle)
        assert span is not None and span.first.at_s > opened + settle * PERIOD_S
    edges = counteredges.find_edges(poll_log(counter, opened, closed))
    span = counteredges.edge_span(edges, opened, closed)
    assert span is not None and span.updates >= edgepass.EDGE_MIN_UPDATES
    assert span.seconds >= edgepass.EDGE_MIN_SPAN_S
    assert span.resolution_s <= 0.005  # two 1 ms reads 3 ms apart
    assert abs(span.watts - WATTS) <= WATTS * span.error_bound * (1 + 1e-9)
    assert span.error_bound <= span.resolution_s / span.seconds * (1 + 1e-9)
    assert span.period_s == pytest.approx(PERIOD_S, abs=span.resolution_s)


def test_two_arbitrary_reads_of_the_same_counter_over_0_4_s_are_off_by_up_to_a_step() -> None:
    """Today's reads, for contrast: one 100 ms step more or less over 0.4 s is 25%."""
    counter = SteppedCounter(FakeClock(), phase_s=0.0)
    errors = [two_reads_watts(counter, start, start + seconds) / WATTS - 1
              for start, seconds in ((0.001, 0.39), (0.095, 0.41))]
    assert min(errors) < -0.2 and max(errors) > 0.2
    for start, seconds in ((0.001, 0.39), (0.095, 0.41)):
        log = poll_log(counter, start, start + seconds)
        edges = counteredges.find_edges(log)
        span = counteredges.edge_span(edges, start, start + seconds, settle=0)
        assert span is not None and abs(span.watts / WATTS - 1) < 0.02


def test_an_update_seen_late_is_not_a_span_end() -> None:
    """A poller held up 60 ms (a call that kept the GIL) brackets that update loosely: the span
    starts at the next sharp one instead, and the figure keeps its resolution."""
    counter = SteppedCounter(FakeClock(), phase_s=0.05)
    log = [reading for reading in poll_log(counter, 0.0, 0.6)  # the updates at 0.05 and 0.55
           if not (0.02 < reading.started_s < 0.08 or 0.52 < reading.started_s < 0.58)]
    edges = counteredges.find_edges(log)
    assert max(edge.resolution_s for edge in edges) > counteredges.EDGE_SHARP_S
    span = counteredges.edge_span(edges, 0.0, 0.6, settle=0)
    assert span is not None and span.resolution_s <= counteredges.EDGE_SHARP_S
    assert span.first.at_s > 0.1 and span.last.at_s < 0.5
    assert abs(span.watts / WATTS - 1) < 0.02


def test_the_span_rule_wants_four_periods_and_the_minimum_span() -> None:
    counter = SteppedCounter(FakeClock(), phase_s=0.0)
    edges = counteredges.find_edges(poll_log(counter, 0.0, 1.0))
    period = counteredges.update_period(edges)
    assert period == pytest.approx(PERIOD_S, abs=0.004)
    short = counteredges.edge_span(edges, 0.0, 0.45, settle=0)  # updates at 0.1 to 0.4
    assert short is not None and short.updates == 3
    assert not edgepass.span_is_enough(short, period, edgepass.EDGE_MIN_SPAN_S)
    long = counteredges.edge_span(edges, 0.0, 0.55, settle=0)
    assert long is not None and long.updates == 4
    assert edgepass.span_is_enough(long, period, edgepass.EDGE_MIN_SPAN_S)
    assert not edgepass.span_is_enough(long, period, 1.0)  # four calls of 0.25 s: a 1 s span
    assert not edgepass.span_is_enough(long, 0.2, edgepass.EDGE_MIN_SPAN_S)  # a slower counter


def poll_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "energy-edge-poll"]


def test_the_pass_stops_once_the_span_is_long_enough_and_leaves_no_thread() -> None:
    clock = FakeClock()
    counter = SteppedCounter(clock)
    step = PacedStep(clock, counter)
    threads_before, switch_interval = threading.active_count(), sys.getswitchinterval()
    found = edgepass.edge_energy_pass({"device": counter}, step, lambda: None,
                                    seconds_per_call=step.tick_s, clock=clock)
    assert not poll_threads() and threading.active_count() == threads_before
    assert sys.getswitchinterval() == switch_interval  # put back as it was
    span = found.spans["device"]
    assert span is not None
    periods = found.periods["device"]
    assert periods is not None and periods == pytest.approx(PERIOD_S, abs=span.resolution_s)
    assert edgepass.span_is_enough(span, periods, edgepass.EDGE_MIN_SPAN_S)
    assert found.calls == step.calls
    assert found.seconds == pytest.approx(step.calls * step.tick_s)
    assert found.seconds < edgepass.EXTEND_TO_S / 2  # a third of today's pass, or less
    record = energy.edge_record(counter, found, "device", 2.0, None,
                                pass_source(span, 0.17)).to_dict()
    assert abs(record["watts_mean"] - WATTS) <= WATTS * span.resolution_s / span.seconds
    # What `harness check` recomputes: joules per call = W x window / calls.
    assert record["window_s"] == found.seconds and record["calls"] == found.calls
    assert record["joules_per_call"] == pytest.approx(
        record["watts_mean"] * record["window_s"] / record["calls"])
    assert record["joules_per_step"] == pytest.approx(record["joules_per_call"] / 2)
    assert record["edge_span_s"] == span.seconds and record["edge_updates"] == span.updates
    assert record["edge_resolution_s"] == span.resolution_s
    assert record["edge_error_bound"] == span.error_bound
    assert record["counter_period_s"] == periods
    assert record["source"].startswith("an energy pass after the check (between two counter "
                                       "updates")


def test_a_call_of_many_steps_needs_four_steps_of_span_not_four_calls() -> None:
    assert edgepass.min_span_s(0.6) == pytest.approx(4 * 0.6)
    assert edgepass.min_span_s(0.6, steps_per_call=625) == edgepass.EDGE_MIN_SPAN_S
    assert edgepass.min_span_s(0.6, steps_per_call=2) == pytest.approx(4 * 0.6)  # too few
    assert edgepass.min_span_s(1.0, steps_per_call=4) == pytest.approx(1.0)
    clock = FakeClock()
    counter = SteppedCounter(clock)
    step = PacedStep(clock, counter)  # 5 ms a step, 100 steps a call: a 0.5 s call
    calls = []

    def whole_call() -> None:
        calls.append(1)
        for _ in range(100):
            step()
    found = edgepass.edge_energy_pass({"device": counter}, whole_call, lambda: None,
                                      seconds_per_call=0.5, clock=clock, steps_per_call=100)
    span = found.spans["device"]
    assert span is not None and span.seconds >= edgepass.EDGE_MIN_SPAN_S - span.resolution_s
    assert 1 <= found.calls == len(calls) < edgepass.EDGE_MIN_CALLS  # 4 calls would be 2 s
    assert found.seconds == pytest.approx(0.5 * found.calls)


def test_a_counter_that_never_moves_falls_back_to_the_two_reads_of_today() -> None:
    clock = FakeClock()
    counter = SteppedCounter(clock, moves=False)
    step = PacedStep(clock, counter, tick_s=0.0625)  # exact in binary: 32 calls make 2 s
    syncs: list[float] = []
    found = edgepass.edge_energy_pass({"device": counter}, step, lambda: syncs.append(clock()),
                                    seconds_per_call=step.tick_s, clock=clock)
    assert not poll_threads()
    assert found.spans["device"] is None
    assert found.calls == round(edgepass.EXTEND_TO_S / step.tick_s)  # ran today's full pass
    # One sync before the calls, one after each chunk (9 calls, 0.55 s at the timed rate, three
    # times; then the 5 calls left to 2 s): none between the calls of a chunk.
    assert [round(at - syncs[0], 4) for at in syncs] == [0.0, 0.5625, 1.125, 1.6875, 2.0]
    record = energy.edge_record(counter, found, "device", 1.0, None,
                                pass_source(None, 0.17)).to_dict()
    assert record["status"] == "ok" and record["window_s"] >= edgepass.EXTEND_TO_S
    assert record["joules_total"] == 0.0 and "edge_span_s" not in record
    assert "no two counter updates seen" in record["source"]


def test_a_counter_that_gives_no_reading_is_not_measured() -> None:
    @dataclass
    class Silent:
        name: str = "silent counter"

        def read_joules(self) -> float | None:
            return None

    clock = FakeClock()

    def step() -> None:
        clock.now += 0.1

    found = edgepass.edge_energy_pass({"device": Silent()}, step, lambda: None,
                                    seconds_per_call=0.1, clock=clock)
    assert found.spans["device"] is None and not poll_threads()
    record = energy.edge_record(Silent(), found, "device", 1.0, None, "an energy pass")
    assert record.status == "not measured" and "gave no reading" in record.reason


def test_a_call_that_fails_still_stops_and_joins_the_poller() -> None:
    clock = FakeClock()
    counter = SteppedCounter(clock)

    def failing() -> None:
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError):
        edgepass.edge_energy_pass({"device": counter}, failing, lambda: None,
                                seconds_per_call=0.01, clock=clock)
    assert not poll_threads()


def test_a_case_watch_pass_records_the_edges_and_leaves_no_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    counter = SteppedCounter(clock)
    step = PacedStep(clock, counter)
    watch = CaseWatch(None, "", None, "no powercap here", is_gpu=True)
    watch.device_counter = counter  # type: ignore[assignment]  # an EnergyCounter
    watch.start_case()
    watch.attach(step, lambda: None)
    watch.windows = {"device": energycounters.EnergyWindow(counter, clock=clock)}
    watch.windows["device"].begin()
    clock.now += 0.17  # the timed samples: 0.17 s, too short for the counter
    watch.windows["device"].end(30)
    real_pass = edgepass.edge_energy_pass

    def on_fake_clock(*args: object, **kwargs: object) -> edgepass.EdgePass:
        return real_pass(*args, clock=clock, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(edgepass, "edge_energy_pass", on_fake_clock)
    device = watch.finish_case(step.tick_s, 1)[0]["energy"]["device"]
    assert not poll_threads()
    assert device["status"] == "ok" and device["calls"] == step.calls
    assert device["window_s"] < edgepass.EXTEND_TO_S
    assert abs(device["watts_mean"] - WATTS) <= WATTS * device["edge_resolution_s"] \
        / device["edge_span_s"]
    assert "(between two counter updates" in device["source"]
    assert "the timed samples lasted 0.17 s" in device["source"]


def test_a_long_calls_energy_pass_runs_its_first_steps_and_counts_them_as_that_share(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    counter = SteppedCounter(clock)
    paced = PacedStep(clock, counter)  # 5 ms a step

    class LongCall:  # a task whose call is 400 steps: 2 s, an epoch share
        steps_per_call = 400
        step_marks = StepMarks()

        def step(self) -> None:
            for index in range(self.steps_per_call):
                self.step_marks.before_step(index)
                paced()
    task = LongCall()
    call = blocks.CallStep(task, task.step)
    watch = CaseWatch(None, "", None, "no powercap here", is_gpu=True)
    watch.device_counter = counter  # type: ignore[assignment]  # an EnergyCounter
    watch.start_case()
    watch.attach(call, lambda: None)
    watch.windows = {"device": energycounters.EnergyWindow(counter, clock=clock)}
    watch.windows["device"].begin()
    clock.now += 0.01  # the timed samples: blocks of steps, far too short for the counter
    watch.windows["device"].end(1)
    real_pass = edgepass.edge_energy_pass

    def on_fake_clock(*args: object, **kwargs: object) -> edgepass.EdgePass:
        return real_pass(*args, clock=clock, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(edgepass, "edge_energy_pass", on_fake_clock)
    device = watch.finish_case(2.0, 400)[0]["energy"]["device"]
    share = 100 / 400  # PART_TARGET_S of a 2 s call: 100 steps
    assert device["status"] == "ok" and 0 < device["calls"] < 1
    assert device["calls"] == pytest.approx(paced.calls / 400)  # parts run, as whole calls
    assert device["window_s"] < 2.0  # less than one whole call
    per_call = WATTS * 2.0  # the board's power over a whole call's 2 s
    assert device["joules_per_call"] == pytest.approx(per_call, rel=0.05)
    assert device["joules_per_step"] == pytest.approx(per_call / 400, rel=0.05)
    assert f"the first {share:.0%} of a call's steps" in device["source"]
    assert task.step_marks.__class__ is StepMarks  # the call's own marks put back

