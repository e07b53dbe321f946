"""The timing core: sync before every clock read, cold call apart, calibration, spread."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from harness.data.results import sample_stats
from harness.measure import hostload, timing
from harness.measure.timing import TimingPolicy, autorange, per_call
from tests.fakes.backend.fault import VirtualClock

FAST = TimingPolicy(min_samples=5, min_time_s=0.02, max_time_s=1.0, warmup_s=0.01,
                    target_sample_s=0.002)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> VirtualClock:
    """The timing core's clock, moved only by what a test's calls say they take, and no host
    load read: a test with an upper bound on a measured time asserts the timing core's
    arithmetic, which a loaded machine's late wake-ups must not decide (issue 50)."""
    virtual = VirtualClock()
    monkeypatch.setattr(timing, "_clock", virtual.read)
    monkeypatch.setattr(hostload, "snapshot", lambda group=None: None)
    return virtual


def taking(clock: VirtualClock, seconds: Callable[[], float]) -> Callable[[], None]:
    """A step whose call takes seconds() on CLOCK."""
    return lambda: clock.advance(seconds())


class AsyncDevice:
    """Work queues on the device and runs while the host goes on; synchronize() waits for
    it, like cudaDeviceSynchronize. On a VirtualClock: a launch costs the host LAUNCH_S."""

    LAUNCH_S = 1e-6

    def __init__(self, clock: VirtualClock, work_s: float) -> None:
        self.clock, self.work_s, self.busy_until = clock, work_s, 0.0

    def step(self) -> None:
        self.busy_until = max(self.busy_until, self.clock.read()) + self.work_s
        self.clock.advance(self.LAUNCH_S)

    def synchronize(self) -> None:
        self.clock.advance(max(0.0, self.busy_until - self.clock.read()))


def test_asynchronous_work_is_inside_the_measured_time(clock: VirtualClock) -> None:
    device = AsyncDevice(clock, work_s=0.02)
    measurement = autorange(device.step, device.synchronize, FAST)
    assert measurement.median >= 0.02
    assert measurement.cold_seconds >= 0.02


def test_the_async_fake_would_fool_an_unsynchronised_timer(clock: VirtualClock) -> None:
    """Control: without synchronize the same step reads far too fast, so the test above can fail."""
    device = AsyncDevice(clock, work_s=0.02)
    measurement = autorange(device.step, lambda: None, FAST)
    assert measurement.median == pytest.approx(AsyncDevice.LAUNCH_S)


def test_every_clock_read_follows_a_synchronize(monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    real_clock = timing._clock

    def clock() -> float:
        events.append("clock")
        return real_clock()

    def step() -> None:
        events.append("step")
        time.sleep(0.0002)  # keeps calibration, and so the event list, small

    monkeypatch.setattr(timing, "_clock", clock)
    autorange(step, lambda: events.append("sync"), FAST)
    assert events.count("clock") > 10
    # Back-to-back clock reads are fine (the sample loop's elapsed-time check follows a
    # synchronised read); what must never happen is a step between a clock read and the last sync.
    last_non_clock = None
    for event in events:
        if event == "clock":
            assert last_non_clock == "sync"
        else:
            last_non_clock = event


def test_cold_first_call_is_reported_apart_from_warm_samples(clock: VirtualClock) -> None:
    calls = {"count": 0}

    def step() -> None:
        calls["count"] += 1
        clock.advance(0.15 if calls["count"] == 1 else 0.001)

    measurement = autorange(step, lambda: None, FAST)
    assert measurement.cold_seconds >= 0.15
    assert measurement.median < 0.01
    assert max(measurement.samples) < 0.15


def test_calibration_grows_calls_per_sample_past_the_timer_overhead() -> None:
    measurement = autorange(lambda: None, lambda: None, FAST)
    assert measurement.calls_per_sample > 1
    assert measurement.calls_per_sample * measurement.median >= 0.5 * FAST.target_sample_s or \
        measurement.calls_per_sample == 1_048_576


def test_sampling_reaches_the_minimum_count_and_time() -> None:
    policy = TimingPolicy(min_samples=9, min_time_s=0.05, max_time_s=5.0, warmup_s=0.0,
                          target_sample_s=0.001)
    started = time.perf_counter()
    measurement = autorange(lambda: time.sleep(0.002), lambda: None, policy)
    assert len(measurement.samples) >= 9
    assert time.perf_counter() - started >= 0.05


def test_budget_stops_sampling_of_slow_calls(clock: VirtualClock) -> None:
    policy = TimingPolicy(min_samples=50, min_time_s=10.0, max_time_s=0.2, warmup_s=0.0)
    measurement = autorange(taking(clock, lambda: 0.03), lambda: None, policy)
    assert 3 <= len(measurement.samples) < 50
    assert measurement.samples == pytest.approx([0.03] * len(measurement.samples))


def test_per_call_takes_first_call_as_cold(clock: VirtualClock) -> None:
    durations = iter([0.05, 0.01, 0.01, 0.01])
    measurement = per_call(taking(clock, lambda: next(durations)), lambda: None, 4)
    assert measurement.cold_seconds == pytest.approx(0.05)
    assert measurement.samples == pytest.approx([0.01] * 3)


def test_iqr_and_noise_flag() -> None:
    assert sample_stats([1.0, 2.0, 3.0, 4.0, 5.0]).iqr == pytest.approx(2.0)
    assert not sample_stats([1.0, 1.01, 1.02, 0.99, 1.0]).noisy
    assert sample_stats([1.0, 1.5, 0.6, 1.3, 0.8]).noisy


# --- the guard against measurement artefacts ----------------------------------------------------

def test_bimodal_split_finds_two_clusters_and_ignores_a_tail() -> None:
    alternating = [0.001, 0.008] * 20
    low, high, share = timing.bimodal_split(alternating)
    assert low == pytest.approx(0.001) and high == pytest.approx(0.008) and share == 0.5
    smooth = [0.001 * (1 + 0.02 * index) for index in range(40)]  # 1.0 .. 1.78 ms
    assert timing.bimodal_split(smooth) is None
    one_stall = [0.001] * 39 + [0.05]  # 2.5% of calls stalled: a tail, not a second mode
    assert timing.bimodal_split(one_stall) is None
    assert timing.bimodal_split([0.001, 0.008, 0.001]) is None  # too few to say


def test_alternating_calls_are_flagged_suspect(clock: VirtualClock) -> None:
    calls = {"count": 0}

    def step() -> None:
        calls["count"] += 1
        clock.advance(0.001 if calls["count"] % 2 else 0.020)

    policy = TimingPolicy(min_samples=5, min_time_s=0.05, max_time_s=1.0, warmup_s=0.1)
    measurement = autorange(step, lambda: None, policy)
    assert "bimodal single calls" in measurement.suspect


def test_steady_samples_near_calibration_are_not_suspect() -> None:
    """Synthetic, so the host's load cannot decide it: smooth samples, no drift, no load."""
    steady = [0.002 * (1 + 0.01 * index) for index in range(30)]
    measurement = timing.Measurement(cold_seconds=0.01, samples=steady[:10],
                                     predicted_call_s=0.002, single_calls=steady)
    assert timing.suspect_reason(measurement) == ""
    faster = timing.Measurement(cold_seconds=0.01, samples=[0.001] * 7, predicted_call_s=0.003)
    assert timing.suspect_reason(faster) == ""  # threads still waking during calibration


def test_drift_from_calibration_is_flagged() -> None:
    measurement = timing.Measurement(cold_seconds=0.01, samples=[0.008] * 7,
                                     predicted_call_s=0.001)
    assert "8x what calibration measured" in timing.suspect_reason(measurement)


def test_competing_processes_are_measured_and_flagged() -> None:
    """Busy processes outside our process group show up as other cores in use.

    Two spinners, so that together they hold more than a core even when this suite's second
    pytest process and its worker take the other two shares of a 2-core machine; and every
    figure of the record must agree with what /proc says the spinners themselves used.
    """
    import subprocess
    import sys

    from harness.measure import hostload

    if hostload.snapshot() is None:
        pytest.skip("no /proc here: contention is not measured on this OS")
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                 start_new_session=True) for _ in range(2)]
    try:
        time.sleep(0.3)  # let them start
        before = hostload.snapshot()
        time.sleep(1.0)
        after = hostload.snapshot()
        load = hostload.other_load(before, after)
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    assert load is not None and before is not None and after is not None
    # Process times are seconds (psutil), so CPU seconds over wall seconds are cores.
    spinners_cores = sum(after.processes[spinner.pid].own - before.processes[spinner.pid].own
                         for spinner in spinners) / load.seconds
    assert load.other_cores > 0.6
    assert load.other_cores >= spinners_cores - 0.02  # never fewer than the spinners used
    assert load.other_cores >= max(cores for _, cores in load.top_others)
    assert load.contended and "other processes used" in load.reason()
    assert any(f"({spinner.pid})" in load.reason() for spinner in spinners)


def test_a_bimodal_cell_is_flagged_through_the_worker(out_dir) -> None:
    """The fake backend's calls alternate 1 ms and 20 ms: the cell must say so, not hide it,
    and say nothing else (no contention: the suite's other pytest process is not its input)."""
    import json

    from typer.testing import CliRunner

    from harness.cli import app

    result = CliRunner().invoke(app, ["compare", "--workload", "fault", "--framework", "fake",
                                      "--variant", "bimodal", "--quick", "--no-report",
                                      "--no-ceilings", "--out", str(out_dir)])
    assert result.exit_code == 0, result.output
    document = json.loads(next(out_dir.glob("*/run.json")).read_text())
    cases = document["cells"][0]["cases"]
    # Size 2 alternates, timed on the fake backend's virtual clock with no host load read
    # (tests/fakes/backend/fault.py): the verdict is the calls', whatever else the cores ran.
    assert cases[1]["suspect"] == "bimodal single calls: 44% near 1 ms, 56% near 20 ms"
    assert "SUSPECT" in result.output


# The ceilings probe's stability and the CPU's physical bound: tests/test_bounds.py.
