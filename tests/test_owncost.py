"""Issue 42: the harness's own cost. A warm-up that ends when the calls have settled, FLOPs
counted once per cell, idle power remembered per machine, energy from the timed windows."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path
from typing import Any

import pytest

from harness.data.results import CaseResult, CaseRound, CellResult
from harness.measure import casewatch, energy, energycounters, idlepower, timing
from harness.measure.timing import TimingPolicy
from harness.run import casepasses, caserun, rounds, worker
from harness.spec import CallPlan, Cell, Check, WorkloadSpec

# --- the warm-up ---------------------------------------------------------------------------


class FakeClock:
    """A clock that only the fake step moves: each call takes the next of `durations`."""

    def __init__(self, durations: list[float]) -> None:
        self.durations, self.now, self.calls = list(durations), 0.0, 0

    def step(self) -> None:
        self.now += self.durations[min(self.calls, len(self.durations) - 1)]
        self.calls += 1

    def read(self) -> float:
        return self.now


def _warm_up(monkeypatch: pytest.MonkeyPatch, durations: list[float],
             warmup_s: float = 1.0) -> tuple[list[float], str]:
    clock = FakeClock(durations)
    monkeypatch.setattr(timing, "_clock", clock.read)
    return timing.warm_up(clock.step, lambda: None, TimingPolicy(warmup_s=warmup_s))


def test_warm_up_stops_once_the_last_calls_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    # A slow first warm call, then calls within 1% of each other: settled after the window.
    durations = [0.004, 0.00201, 0.002, 0.00199, 0.002, 0.00201, 0.002]
    singles, stopped = _warm_up(monkeypatch, durations)
    assert stopped == timing.WARMUP_SETTLED
    assert len(singles) == 1 + timing.SETTLE_CALLS  # the slow call, then one full window
    assert sum(singles) < 0.1  # far below the 1 s cap


def test_a_later_round_back_at_its_first_rounds_level_is_warm_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A later round knows the level its cell's first round settled at: its calls back there
    are warm after MIN_WARMUP_CALLS of them, not after a window of SETTLE_CALLS more; a
    process that sits elsewhere warms up by its own calls, as the first round did."""
    durations = [0.004, 0.00201, 0.002, 0.00199, 0.002, 0.00201, 0.002]

    def warm_up(level: float | None) -> list[float]:
        clock = FakeClock(durations)
        monkeypatch.setattr(timing, "_clock", clock.read)
        singles, stopped = timing.warm_up(clock.step, lambda: None,
                                          TimingPolicy(warmup_s=1.0).reusing(None, level))
        assert stopped == timing.WARMUP_SETTLED
        return singles

    assert len(warm_up(0.002)) == 1 + timing.MIN_WARMUP_CALLS  # the slow call, then two
    assert len(warm_up(0.003)) == len(warm_up(None)) == 1 + timing.SETTLE_CALLS


def test_calls_still_getting_faster_warm_up_to_the_cap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # 2% faster every call: any 5 of them lie within 5% of their median, but they fall.
    durations = [0.01 * 0.98 ** index for index in range(200)]
    singles, stopped = _warm_up(monkeypatch, durations, warmup_s=0.2)
    assert stopped == timing.WARMUP_CAP
    assert sum(singles) >= 0.2


def test_calls_alternating_between_two_levels_settle_on_the_levels(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Never within 5% of their median, and the median flips between the levels: until issue
    48 such calls warmed up to the cap; two windows that show both levels, each level where it
    was, are warm."""
    durations = [0.002, 0.003] * 200
    singles, stopped = _warm_up(monkeypatch, durations, warmup_s=0.2)
    assert stopped == timing.WARMUP_SETTLED
    assert len(singles) == 2 * timing.SETTLE_CALLS  # two windows: the rule's fewest calls


def test_a_bimodal_gpu_step_settles_within_a_fifth_of_the_cap(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake GPU step that waits in about 1 call of 3 (1.0 ms or 2.6 ms, each +-2%, in a
    fixed random mix): settled on its two levels after at most four windows, a fifth of the
    0.25 s cap; the mix still marks the samples bimodal where it shows."""
    draw = random.Random(48)
    durations = [0.05] + [(0.0026 if draw.random() < 0.35 else 0.0010)
                          * draw.uniform(0.98, 1.02) for _ in range(400)]
    singles, stopped = _warm_up(monkeypatch, durations, warmup_s=0.25)
    assert stopped == timing.WARMUP_SETTLED
    assert len(singles) <= 1 + 4 * timing.SETTLE_CALLS and sum(singles) < 0.25 / 5 + 0.05
    assert timing.bimodal_split(durations[1:41]) is not None  # the samples would say so


def test_a_level_still_falling_between_two_levels_does_not_settle(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Two levels 1.5x apart, both 2% faster every call: each level moves ~10% per window.
    durations = [(0.002 if index % 2 else 0.003) * 0.98 ** index for index in range(200)]
    singles, stopped = _warm_up(monkeypatch, durations, warmup_s=0.08)
    assert len(singles) > 4 * timing.SETTLE_CALLS  # it ran on, window after window
    assert stopped == timing.WARMUP_CAP


# Scattered by up to +-20% around a level that no longer moves, after three slower calls: no
# 5 calls agree to 5%, but two windows' medians do (the LSTM's 6.5 ms calls on the 16-core
# host's CPU warmed up to the cap in every case of every round before).
SCATTER = [1.0, 0.85, 1.2, 0.9, 1.15, 0.8, 1.1, 0.95, 1.05, 1.18, 0.83]
SCATTERED = [0.02, 0.012, 0.009] + [0.0065 * SCATTER[index % len(SCATTER)]
                                    for index in range(400)]


def test_scattered_calls_at_a_steady_level_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    singles, stopped = _warm_up(monkeypatch, SCATTERED, warmup_s=0.25)
    assert stopped == timing.WARMUP_SETTLED
    assert 2 * timing.SETTLE_CALLS <= len(singles) <= 3 + 2 * timing.SETTLE_CALLS + 5
    assert sum(singles) < 0.15  # the cap was 0.25 s
    assert not timing.settled(singles, timing.SETTLE_CALLS, level=False)  # no window agrees


def test_scattered_calls_still_getting_faster_do_not_settle_on_the_level(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The same scatter on a level 3% lower every call: two windows' medians lie ~15% apart.
    durations = [0.0065 * 0.97 ** index * SCATTER[index % len(SCATTER)] for index in range(40)]
    singles, stopped = _warm_up(monkeypatch, durations, warmup_s=0.15)
    assert stopped == timing.WARMUP_CAP and len(singles) >= 2 * timing.SETTLE_CALLS
    # At the 11th call the two windows' medians meet by chance (0.2% apart); the trend over
    # them, ~3% of the level per call, is what keeps the warm-up going.
    first, second = statistics.median(singles[1:6]), statistics.median(singles[6:11])
    assert abs(second / first - 1) < timing.SETTLE_BAND
    slope = timing.trend(singles[1:11])
    assert slope < 0 and abs(slope) * timing.SETTLE_CALLS > timing.SETTLE_BAND * second


def test_a_call_longer_than_the_cap_is_the_whole_warm_up(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A slow step (the Jacobian's 5 s) pays one warm-up call per round, as before."""
    singles, stopped = _warm_up(monkeypatch, [0.5], warmup_s=0.25)
    assert len(singles) == 1 and stopped == timing.WARMUP_CAP


@pytest.mark.parametrize(("cold", "kept"), [(0.54, True), (0.6, False), (3.0, False)])
def test_a_slow_steady_steps_warm_up_call_is_its_first_sample(
        monkeypatch: pytest.MonkeyPatch, cold: float, kept: bool) -> None:
    """A step slower than the cap whose cold call took what a warm one does (seed 000's
    Jacobian: 19 s a call on the H100) keeps its one warm-up call as a sample; one whose cold
    call was longer (a compile) throws it away, as every warm-up call is."""
    clock = FakeClock([cold, 0.5])
    monkeypatch.setattr(timing, "_clock", clock.read)
    policy = TimingPolicy(min_samples=3, min_time_s=0.0, max_time_s=100.0, warmup_s=0.25)
    measurement = timing.autorange(clock.step, lambda: None, policy)
    assert measurement.cold_seconds == pytest.approx(cold)
    assert measurement.samples == pytest.approx([0.5] * 3)
    assert clock.calls == 1 + (3 if kept else 4)  # the cold call, then the calls timed
    assert measurement.warmup_record()["stopped"] == (timing.WARMUP_KEPT if kept
                                                      else timing.WARMUP_CAP)


def test_settling_needs_at_least_two_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    singles, stopped = _warm_up(monkeypatch, [0.01] * 100, warmup_s=0.25)
    assert stopped == timing.WARMUP_SETTLED
    assert timing.MIN_WARMUP_CALLS <= len(singles) < 25


def test_a_zero_window_is_the_fixed_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock([0.002])
    monkeypatch.setattr(timing, "_clock", clock.read)
    singles, stopped = timing.warm_up(clock.step, lambda: None,
                                      TimingPolicy(warmup_s=0.1, settle_calls=0))
    assert stopped == timing.WARMUP_CAP and len(singles) == 50


def test_autorange_records_how_its_warm_up_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock([0.001])
    monkeypatch.setattr(timing, "_clock", clock.read)
    measurement = timing.autorange(clock.step, lambda: None,
                                   TimingPolicy(min_samples=3, min_time_s=0.0))
    record = measurement.warmup_record()
    assert record == {"calls": timing.SETTLE_CALLS, "seconds": pytest.approx(0.005),
                      "stopped": timing.WARMUP_SETTLED}
    assert caserun.warmup_extra(measurement) == {"warmup": record}


# --- FLOPs counted once per cell -----------------------------------------------------------


class CountingModule:
    """An implementation whose FLOP counter says how often it ran."""

    __name__ = "counting"

    def __init__(self) -> None:
        self.counted = 0

    def make_task(self, case: dict, variant: str, device: Any, inputs: dict) -> Any:
        class Task:
            def step(self) -> None:
                pass

            def output(self) -> dict:
                return {"total": 1}

        return Task()

    def count_flops(self, task: Any) -> tuple[float, str, dict]:
        self.counted += 1
        return 123.0, "the fake counter", {"complete": False, "uncounted_ops": ["lstm"]}


class CpuDevice:
    def synchronize(self) -> None:
        pass


SPEC = WorkloadSpec(name="counted", kind="fault", summary="", sweep="size", params={},
                    variants=("ok",), counts_flops=True,
                    check=lambda *args: Check(True, "abs_error", 0, 0, ""))
FAST = TimingPolicy(min_samples=3, min_time_s=0.0, warmup_s=0.001, target_sample_s=1e-5)


def _flops_of(module: CountingModule, counted: dict | None) -> dict:
    _, output, _ = caserun.measure_case(SPEC, module, {"size": 1}, "ok", CpuDevice(), {}, FAST,
                                       counted=counted)
    return {key: value for key, value in output["extra"].items() if key.startswith("flops")}


def test_a_later_round_takes_the_first_rounds_flops_without_counting() -> None:
    module = CountingModule()
    first = _flops_of(module, None)
    assert module.counted == 1 and first["flops_counted_by"] == "the fake counter"
    result = CellResult(cell=Cell("counted", "ok", "fake", "cpu"),
                        cases=[CaseResult({"size": 1}, rounds=[CaseRound(0, 0.1, (1.0,))],
                                          extra=dict(first)),
                               CaseResult({"size": 2}, rounds=[CaseRound(0, 0.1, (1.0,))])])
    merger = rounds.RoundMerger.of(SPEC, [result.cell], 3)
    merger.add(result.cell, result)
    later = merger.calibrated(Cell("counted", "ok", "fake", "cpu", rounds=3, round=1))
    assert later.flops[1] is None  # nothing counted there: that round counts anew
    again = Cell(**json.loads(json.dumps(later.as_dict())))  # through the cell file
    assert again == later and hash(again) == hash(later)
    reused = _flops_of(module, worker.counted_flops(again, 0))
    assert module.counted == 1  # the counter did not run again
    assert reused["flops_per_call"] == 123.0
    assert reused["flops_coverage"] == first["flops_coverage"]
    assert reused["flops_counted_by"] == "the fake counter" + casepasses.FLOPS_REUSED
    assert worker.counted_flops(again, 1) is None


# --- idle power remembered per machine -----------------------------------------------------


class SteadyCounter:
    """An energy counter drawing WATTS on a clock that moves only when slept."""

    def __init__(self, name: str, watts: float, clock: list[float]) -> None:
        self.name, self.watts, self.clock = name, watts, clock
        self.reads = 0

    def read_joules(self) -> float:
        self.reads += 1
        return self.watts * self.clock[0]


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path


def _watch(monkeypatch: pytest.MonkeyPatch, watts: float,
           cache: Path | None = None) -> tuple[casewatch.CaseWatch, list[float]]:
    clock = [0.0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    monkeypatch.setattr(idlepower.time, "sleep", sleep)
    monkeypatch.setattr(idlepower.time, "perf_counter", lambda: clock[0])
    host = SteadyCounter("RAPL package-0", watts, clock)
    return casewatch.CaseWatch(None, "cpu cell", host, "", is_gpu=False, cache=cache), clock


def _measure_idle(monkeypatch: pytest.MonkeyPatch, watts: float, fingerprint: dict,
                  cache: Path) -> idlepower.IdlePower:
    watch, _ = _watch(monkeypatch, watts, cache)
    original = idlepower.measure_idle

    def measured(counters: dict, **kwargs: Any) -> dict:  # the defaults, on the fake clock
        return original(counters, sleep=idlepower.time.sleep, clock=idlepower.time.perf_counter)

    monkeypatch.setattr(idlepower, "measure_idle", measured)
    watch.measure_idle(fingerprint)
    return watch.idle["host"]


def test_idle_power_is_remembered_and_measured_again_on_a_new_fingerprint(
        cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    machine = casewatch.idle_fingerprint("cpu", "x86 CPU")
    first = _measure_idle(monkeypatch, 40.0, machine, cache_dir)
    assert first.watts == pytest.approx(40.0) and not first.remembered and first.settled
    second = _measure_idle(monkeypatch, 55.0, machine, cache_dir)  # the counter: now 55 W
    assert second.remembered and second.watts == pytest.approx(40.0)
    record = energy.window_record(_window(), None, second, "the timed samples")
    assert record.idle_remembered_from == idlepower.time.strftime(
        "%H:%M", idlepower.time.localtime(first.measured_at))
    changed = _measure_idle(monkeypatch, 55.0, {**machine, "cores": machine["cores"] + 1},
                            cache_dir)
    assert not changed.remembered and changed.watts == pytest.approx(55.0)
    measured = energy.window_record(_window(), None, changed, "the timed samples")
    assert measured.idle_remembered_from == "" and not measured.extra_fields


def test_idle_power_older_than_an_hour_is_measured_again(
        cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    machine = casewatch.idle_fingerprint("cpu", "x86 CPU")
    first = _measure_idle(monkeypatch, 40.0, machine, cache_dir)
    names = ["RAPL package-0"]
    assert idlepower.recall_idle(machine, names, cache_dir,
                                 now=first.measured_at + 60) is not None
    assert idlepower.recall_idle(machine, names, cache_dir,
                                 now=first.measured_at + idlepower.IDLE_REMEMBER_S + 1) is None
    assert idlepower.recall_idle(machine, ["another counter"], cache_dir,
                                 now=first.measured_at) is None


def _window() -> energycounters.EnergyWindow:
    clock = iter([0.0, 2.0])
    joules = iter([0.0, 100.0])

    class Counter:
        name = "RAPL package-0"

        def read_joules(self) -> float:
            return next(joules)

    window = energycounters.EnergyWindow(Counter(), clock=lambda: next(clock))
    window.begin()
    window.end(10)
    return window


# --- energy from the timed windows ---------------------------------------------------------


def test_a_timed_window_long_enough_gives_the_energy_without_a_pass() -> None:
    watch, clock = casewatch.CaseWatch(None, "", None, "", is_gpu=False), [0.0]
    counter = SteadyCounter("RAPL package-0", 30.0, clock)
    watch.host = counter
    steps: list[int] = []
    watch.start_case()
    watch.attach(lambda: steps.append(1), lambda: None)
    watch.windows = {"host": energycounters.EnergyWindow(counter, clock=lambda: clock[0])}
    watch.windows["host"].begin()
    clock[0] += energy.MIN_WINDOW_S * 1.2  # the timed samples lasted long enough
    watch.end(600)
    extras, _ = watch.finish_case(0.002, None)
    host = extras["energy"]["host"]
    assert host["status"] == "ok" and host["source"] == "the timed samples"
    assert host["calls"] == 600 and not steps  # no energy pass called the step again
    assert host["joules_per_call"] == pytest.approx(30.0 * energy.MIN_WINDOW_S * 1.2 / 600)


def test_a_pass_after_the_samples_is_left_out_where_it_would_take_too_long() -> None:
    """Seed 000's Jacobian: 2.5 s per call; its FLOP counter's traced call took 16.5 s and
    the memory pass 14 s on the 2-core VM, its GPU step 12 s: each pass is left out, saying
    why, where its estimate passes AFTER_PASS_LIMIT_S; a short call keeps every pass."""
    assert casepasses.pass_too_long(casepasses.FLOP_COUNT_PHASE, 0.44) == ""
    assert casepasses.pass_too_long(casepasses.MEMORY_PASS_PHASE, 0.44) == ""
    assert casepasses.pass_too_long("device profile", 0.75) == ""
    assert casepasses.pass_too_long(casepasses.FLOP_COUNT_PHASE, None) == ""
    why = casepasses.pass_too_long(casepasses.FLOP_COUNT_PHASE, 2.5)
    assert why.startswith("left out: a call takes 2.5 s") and "~18 s" in why
    assert casepasses.pass_too_long("device profile", 12.0, calls=1) != ""
    # Under advise's 2 s (Settings.pass_limit_s) the Jacobian's 0.8 s calls at batch 25 lose
    # their FLOP count and memory pass; the device profile keeps its 10 s.
    advise = {"pass_limit_s": 2.0}
    assert "over the 2 s" in casepasses.pass_too_long(casepasses.FLOP_COUNT_PHASE, 0.8, **advise)
    assert casepasses.pass_too_long(casepasses.MEMORY_PASS_PHASE, 0.8, **advise) != ""
    assert casepasses.pass_too_long("device profile", 0.8, **advise) == ""
    assert casepasses.pass_too_long(casepasses.FLOP_COUNT_PHASE, 0.002, **advise) == ""


class ProfiledGpu:
    """A GPU device whose profiler records the calls it was asked to profile."""

    is_gpu = True

    def __init__(self) -> None:
        self.profiled: list[int] = []

    def profile(self, step: object, calls: int) -> Any:
        self.profiled.append(calls)
        return type("Profile", (), {"as_dict": staticmethod(lambda: {"busy_share": 0.5})})()


def test_the_device_profile_runs_in_a_cells_first_round_and_only_where_it_is_short() -> None:
    """A later round says its first round has the profile; a 12 s GPU call is left out,
    saying why; a short call is profiled over one sample's calls, and an epoch-sized call
    keeps its profile whatever it takes (MNIST's busy figures are the point)."""
    timed: Any = type("Spec", (), {"run": CallPlan(timing="autorange")})()
    epochs: Any = type("Spec", (), {"run": CallPlan(timing="per_call")})()
    device, step = ProfiledGpu(), lambda: None
    later = casepasses.device_profile_pass(timed, device, 1, step, 4, 0.001)
    assert later == {"reason": casepasses.LATER_ROUND_REASON}
    slow = casepasses.device_profile_pass(timed, device, 0, step, 4, 12.0)
    assert slow["reason"].startswith("the device profile was left out: a call takes 12 s")
    assert casepasses.device_profile_pass(timed, device, 0, step, 4, 0.001) == \
        {"busy_share": 0.5}
    assert casepasses.device_profile_pass(epochs, device, 0, step, 4, 60.0) == \
        {"busy_share": 0.5}
    assert device.profiled == [4, 1]


def test_a_slow_call_gets_no_flop_count_or_memory_pass_and_says_why() -> None:
    class Counting:
        calls = 0

        @staticmethod
        def count_flops(task: object) -> tuple[float, str]:
            Counting.calls += 1
            return 1.0, "counted"

        @staticmethod
        def required_memory(task: object) -> dict[str, int]:
            Counting.calls += 1
            return {"required_device_bytes": 1}

    spec = type("Spec", (), {"flops": None, "flops_covers": ""})()
    slow = casepasses.pass_too_long(casepasses.FLOP_COUNT_PHASE, 3.0)
    record = casepasses.flops_record(spec, Counting, {}, None, slow)  # type: ignore[arg-type]
    assert record == {"flops_counted_by": f"unavailable: the FLOP count was {slow}"}
    memory = casepasses.required_memory_record(
        Counting, None, casepasses.pass_too_long(casepasses.MEMORY_PASS_PHASE, 3.0))
    assert memory["required_device_reason"].startswith("the memory pass was left out")
    assert Counting.calls == 0
    assert casepasses.flops_record(spec, Counting, {}, None)["flops_per_call"] == 1.0  # type: ignore[arg-type]


def test_a_workers_cases_share_one_read_only_read_of_the_shared_weights(tmp_path: Path) -> None:
    """Every case of an own-model worker starts from weights.npz: read once while the file is
    unchanged, and read-only, so no case can change the next one's start."""
    import numpy as np

    from harness.workloads.usermodel.spec import shared_weights

    path = tmp_path / "weights.npz"
    np.savez(path, w=np.ones(3, dtype=np.float32))
    first = shared_weights(path)
    assert shared_weights(path) is first
    with pytest.raises(ValueError, match="read-only"):
        first["w"][0] = 2.0
    np.savez(path, w=np.zeros(4, dtype=np.float32))  # another run's file: read again
    assert shared_weights(path)["w"].shape == (4,)
