"""Where a case's energy figure comes from (issue 42, item 2): the timed samples' own window
where it is long enough for the counter, a separate pass of more calls only where it is not,
and the record and the report's energy line say which.

Fakes only (this VM has no powercap and no GPU): a board counter that integrates a constant
power over the real clock, and a RAPL powercap folder written here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from harness.analysis.casetable import CaseRow
from harness.data.records import CaseEnergy, EnergyRecord
from harness.measure import edgepass, energy, energycounters
from harness.measure.casewatch import QUICK_REASON, CaseWatch
from harness.measure.timing import TimingPolicy, autorange
from harness.report.views.energy import case_line, source_phrase

WATTS = 250.0


@dataclass
class BoardCounter:
    """A GPU board drawing WATTS: its counter advances with the clock, as NVML's does."""

    name: str = "fake board counter"
    watts: float = WATTS

    def read_joules(self) -> float:
        return self.watts * time.perf_counter()


class CountedStep:
    """A step that takes SECONDS and counts its calls, so a test sees every extra call."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.calls = seconds, 0

    def __call__(self) -> None:
        self.calls += 1
        time.sleep(self.seconds)


def gpu_watch() -> CaseWatch:
    watch = CaseWatch(None, "", None, "no powercap here", is_gpu=True)
    watch.device_counter = BoardCounter()  # type: ignore[assignment]  # an EnergyCounter
    return watch


def timed(watch: CaseWatch, step: CountedStep, seconds: float) -> float:
    """Time STEP for about SECONDS with the watch's window around the samples; the median."""
    watch.start_case()
    watch.attach(step, lambda: None)
    policy = TimingPolicy(min_samples=3, min_time_s=seconds, warmup_s=0.0)
    return autorange(step, lambda: None, policy, watch).median


def line(record: dict[str, Any]) -> str:
    """The report's energy line of a GPU case with this record."""
    step = record["window_s"] / record["calls"] / record["steps_per_call"]
    row = CaseRow.of({"workload": "matmul", "framework": "torch", "device": "cuda:0",
                      "variant": "fp32", "size_label": "64", "status": "ok", "valid": True,
                      "median_s": step, "samples": 3})
    return case_line(replace(row, energy=CaseEnergy(device=EnergyRecord.from_dict(record))))


def test_timed_samples_long_enough_give_the_figure_without_another_call() -> None:
    watch, step = gpu_watch(), CountedStep(0.002)
    median = timed(watch, step, energy.MIN_WINDOW_S * 1.1)
    calls_timed = step.calls
    device = watch.finish_case(median, 1)[0]["energy"]["device"]
    assert step.calls == calls_timed  # no separate pass
    assert device["status"] == "ok" and device["source"] == "the timed samples"
    assert device["window_s"] >= energy.MIN_WINDOW_S
    assert device["watts_mean"] == pytest.approx(WATTS, rel=0.05)  # real clocks: a stall moves it
    assert "s in all; from the timed samples;" in line(device)


def test_timed_samples_too_short_for_the_counter_get_a_separate_pass() -> None:
    watch, step = gpu_watch(), CountedStep(0.01)
    median = timed(watch, step, 0.05)
    calls_timed = step.calls
    device = watch.finish_case(median, 2)[0]["energy"]["device"]
    assert step.calls > calls_timed  # the pass made more calls, after the timing
    assert device["status"] == "ok" and device["source"].startswith("an energy pass")
    assert device["calls"] == step.calls - calls_timed  # the pass's calls, not the samples'
    # between two counter updates, not for EXTEND_TO_S (harness.measure.edgepass)
    assert device["window_s"] < edgepass.EXTEND_TO_S
    assert device["edge_span_s"] >= edgepass.EDGE_MIN_SPAN_S
    assert device["watts_mean"] == pytest.approx(WATTS, rel=0.05)
    text = line(device)
    assert "s in all; separate pass (between two counter updates" in text
    assert "; the timed samples lasted" in text
    assert "from the timed samples" not in text


def test_too_short_where_no_pass_is_spent_is_not_measured_and_makes_no_call() -> None:
    watch, step = gpu_watch(), CountedStep(0.01)
    median = timed(watch, step, 0.05)
    calls_timed = step.calls
    device = watch.finish_case(median, 1, no_energy_pass=QUICK_REASON)[0]["energy"]["device"]
    assert step.calls == calls_timed
    assert device == {"status": "not measured", "reason": QUICK_REASON}


def test_host_rapl_and_gpu_board_read_over_the_same_timed_samples(tmp_path: Path) -> None:
    """Both counters of a GPU case come from the one window around its samples."""
    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text("0\n")
    (zone / "max_energy_range_uj").write_text(f"{10**12}\n")
    rapl = energycounters.open_rapl(tmp_path)
    assert isinstance(rapl, energycounters.RaplEnergy), rapl
    watch = CaseWatch(None, "", rapl, "", is_gpu=True)
    watch.device_counter = BoardCounter()  # type: ignore[assignment]  # an EnergyCounter
    step = CountedStep(0.002)
    watch.start_case()
    watch.attach(step, lambda: None)
    watch.begin()
    while time.perf_counter() - watch.windows["device"].start_s < energy.MIN_WINDOW_S * 1.05:
        step()
    (zone / "energy_uj").write_text("30000000\n")  # the packages drew 30 J meanwhile
    watch.end(step.calls)
    calls_timed = step.calls
    records = watch.finish_case(0.002, 1)[0]["energy"]
    assert step.calls == calls_timed
    assert {records[name]["source"] for name in ("device", "host")} == {"the timed samples"}
    assert records["host"]["joules_total"] == pytest.approx(30.0)
    assert records["host"]["calls"] == records["device"]["calls"] == calls_timed


@pytest.mark.parametrize("source, phrase", [
    ("the timed samples", "from the timed samples"),
    ("an energy pass after the check (the timed samples lasted 0.3 s, too short for the "
     "counter)", "separate pass (the timed samples lasted 0.3 s, too short for the counter)"),
    (None, "source not recorded"),
])
def test_the_energy_line_names_its_source(source: str | None, phrase: str) -> None:
    assert source_phrase(source) == phrase
