"""GPU state and energy per case (issue 24), with a fake NVML and a fake RAPL sysfs folder."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.core.settings import Settings
from harness.data.records import GpuProcesses, GpuReadings
from harness.measure import edgepass, energy, energycounters, gpustate, idlepower
from harness.measure.casewatch import CaseWatch
from harness.measure.timing import TimingPolicy, autorange
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn

FAKE = "tests.fakes.nvml"
WATTS = 250.0


@pytest.fixture
def fake_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(gpustate.NVML_MODULE_ENV, FAKE)
    for name in ("FAKE_NVML_THROTTLE", "FAKE_NVML_PIDS", "FAKE_NVML_FAIL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FAKE_NVML_WATTS", str(WATTS))
    monkeypatch.setenv(energycounters.POWERCAP_ENV, "/nonexistent-powercap")


@dataclass
class FakeGpuDevice:
    name: str = "cuda:0"
    is_gpu: bool = True

    def synchronize(self) -> None:
        pass


def watch_of(device: object) -> CaseWatch:
    """The worker's watcher of DEVICE, under the settings this test's environment names (the
    fake NVML module, the powercap folder)."""
    return CaseWatch.open(device, Settings.from_environment())


def opened(fake_nvml: None) -> gpustate.NvmlGpu:
    gpu = gpustate.open_gpu("cuda:0", FAKE, visible="")
    assert not isinstance(gpu, str), gpu
    return gpu


# --- NVML: found, missing, failing ------------------------------------------------------------

def test_missing_or_failing_nvml_is_unavailable_with_the_reason(
        fake_nvml: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "not installed" in gpustate.open_gpu("cuda:0", module_name="no_such_nvml_module")
    monkeypatch.setenv("FAKE_NVML_FAIL", "1")
    reason = gpustate.open_gpu("cuda:0", FAKE, visible="")
    assert isinstance(reason, str) and "NVML failed to start" in reason
    watch = watch_of(FakeGpuDevice())
    watch.start_case()
    extras, suspect = watch.finish_case(0.01, 1)
    assert extras["gpu_state"] == {"status": "unavailable", "reason": reason}
    assert extras["energy"]["device"]["status"] == "unavailable"
    assert suspect == ""


@pytest.mark.parametrize("visible, index, expected", [
    ("", 1, ("index", 1)), ("2,3", 1, ("index", 3)), ("GPU-a,GPU-b", 0, ("uuid", "GPU-a"))])
def test_cuda_index_maps_through_cuda_visible_devices(visible: str, index: int,
                                                      expected: tuple) -> None:
    assert gpustate.nvml_target(index, visible) == expected


def test_unmappable_cuda_visible_devices_says_why() -> None:
    with pytest.raises(ValueError, match="MIG"):
        gpustate.nvml_target(0, "MIG-1234")
    assert "no handle" in gpustate.open_gpu("cuda:0", module_name=FAKE, visible="5")


def test_readings_and_throttle_names(fake_nvml: None) -> None:
    gpu = opened(fake_nvml)
    assert gpu.readings() == GpuReadings(sm_clock_mhz=1980, memory_clock_mhz=3201,
                                         temperature_c=41, power_w=WATTS, power_limit_w=700)
    assert gpustate.throttle_names(0x4 | 0x1) == ["gpu_idle", "sw_power_cap"]


# --- suspicion: throttled or shared while timed -----------------------------------------------

def watched_case(gpu: gpustate.NvmlGpu) -> dict:
    watch = gpustate.GpuStateWatch(gpu, poll_s=0.01)
    watch.before_case()
    watch.begin()
    watch.end(1)
    return watch.after_case().to_dict()


@pytest.mark.parametrize("mask, flagged", [(0x0, False), (0x1, False), (0x2, False),
                                           (0x4, True), (0x20, True), (0x40, True),
                                           (0x80, True), (0x8, True)])
def test_only_slowing_throttles_make_a_case_suspect(fake_nvml: None, mask: int, flagged: bool,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NVML_THROTTLE", hex(mask))
    record = watched_case(opened(fake_nvml))
    assert record["status"] == "ok" and record["before"]["sm_clock_mhz"] == 1980
    assert record["while_timed"]["polls"] >= 2  # one at begin, one at end
    assert bool(record["suspect"]) == flagged
    if flagged:
        assert "GPU throttled" in record["suspect"]


def test_another_process_on_the_device_is_flagged_ours_are_not(
        fake_nvml: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # A child in its own session (as torchrun starts ranks) is still in our process tree.
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        monkeypatch.setenv("FAKE_NVML_PIDS", str(child.pid))
        ours = watched_case(opened(fake_nvml))
        monkeypatch.setenv("FAKE_NVML_PIDS", f"{child.pid},1")  # pid 1: init, not ours
        shared = watched_case(opened(fake_nvml))
    finally:
        child.kill()
        child.wait()
    assert ours["processes"]["ours"] == sorted([os.getpid(), child.pid])
    assert ours["processes"]["others"] == [] and ours["suspect"] == ""
    assert shared["processes"]["others"] == [1]
    assert "GPU shared" in shared["suspect"] and "pid 1" in shared["suspect"]


def test_pids_from_another_namespace_flag_only_more_than_our_group() -> None:
    few = GpuProcesses(readable=True, ours=[], others=[], unseen=[7001], our_group_size=1)
    many = GpuProcesses(readable=True, ours=[], others=[], unseen=[7001, 7002, 7003],
                        our_group_size=1)
    assert gpustate.suspect_text(None, few) == ""
    assert "another pid namespace" in gpustate.suspect_text(None, many)


# --- energy: NVML counter windows -------------------------------------------------------------

def test_energy_from_the_timed_samples_when_the_window_is_long_enough(fake_nvml: None) -> None:
    watch = watch_of(FakeGpuDevice())
    watch.idle = {"device": idlepower.IdlePower("fake board", 100.0, 1.5)}
    watch.start_case()
    policy = TimingPolicy(min_samples=3, min_time_s=1.1, warmup_s=0.01)
    step = lambda: __import__("time").sleep(0.002)  # noqa: E731
    watch.attach(step, lambda: None)
    measurement = autorange(step, lambda: None, policy, watch)
    extras, suspect = watch.finish_case(measurement.median, 4)
    device = extras["energy"]["device"]
    assert device["status"] == "ok" and device["source"] == "the timed samples"
    assert device["calls"] == len(measurement.samples) * measurement.calls_per_sample
    assert device["watts_mean"] == pytest.approx(WATTS, rel=0.05)  # real clocks: a stall moves it
    assert device["joules_per_step"] == pytest.approx(device["joules_per_call"] / 4)
    # 250 W total, 100 W of it idle: the work added 150 W over the window.
    assert device["joules_per_call_above_idle"] == pytest.approx(
        device["joules_per_call"] * 150 / 250, rel=0.01)
    assert device["reported"] == energy.REPORTED
    assert extras["energy"]["host"]["status"] == "unavailable"
    assert extras["gpu_state"]["status"] == "ok" and suspect == ""


def test_a_short_window_is_extended_by_an_energy_pass(fake_nvml: None) -> None:
    watch = watch_of(FakeGpuDevice())
    watch.start_case()
    calls = []

    def step() -> None:
        calls.append(1)
        __import__("time").sleep(0.3)

    watch.attach(step, lambda: None)
    watch.begin()
    watch.end(5)  # a 5-call window of microseconds: far too short
    # The median says 0.5 s per call, the calls take 0.3 s: 4 calls would last 1.2 s, so the
    # pass sizes a second chunk from the rate it saw (3 calls) and reaches EXTEND_TO_S.
    extras, _ = watch.finish_case(0.5, 1)
    device = extras["energy"]["device"]
    assert len(calls) == 7 and device["status"] == "ok" and device["calls"] == 7
    assert device["source"].startswith("an energy pass")
    assert device["window_s"] >= edgepass.EXTEND_TO_S
    assert device["watts_mean"] == pytest.approx(WATTS, rel=0.05)


def test_a_short_window_without_a_step_is_not_measured(fake_nvml: None) -> None:
    watch = watch_of(FakeGpuDevice())
    watch.start_case()
    watch.begin()
    watch.end(3)
    device = watch.finish_case(0.001, 1)[0]["energy"]["device"]
    assert device["status"] == "not measured" and "window too short" in device["reason"]
    untimed = watch_of(FakeGpuDevice())
    untimed.start_case()
    device = untimed.finish_case(0.001, 1)[0]["energy"]["device"]
    assert device["status"] == "not measured"


def test_idle_power_is_the_counter_over_a_quiet_window(fake_nvml: None) -> None:
    counter = energycounters.NvmlEnergy(opened(fake_nvml))
    idle = idlepower.measure_idle({"device": counter}, seconds=0.5)["device"]
    assert idle.watts == pytest.approx(WATTS, rel=0.05)
    assert idle.settled is True and idle.windows == 2


class Cooling:
    """A counter whose power falls 150 -> 131 -> 123 -> 122 W over four 1 s windows."""

    name = "cooling board"

    def __init__(self) -> None:
        self.now, self.joules, self.watts = 0.0, 0.0, iter([150.0, 131.0, 123.0, 122.0, 122.0])

    def read_joules(self) -> float:
        return self.joules

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.joules += next(self.watts) * seconds


def test_idle_power_waits_for_a_board_that_is_still_cooling_down() -> None:
    board = Cooling()
    idle = idlepower.measure_idle({"device": board}, seconds=1.0, sleep=board.sleep,
                               clock=lambda: board.now)["device"]
    # 131 -> 123 differs by 6%, 123 -> 122 by 0.8%: settled on the fourth window.
    assert idle.watts == pytest.approx(122.0) and idle.settled and idle.windows == 4
    board = Cooling()
    capped = idlepower.measure_idle({"device": board}, seconds=1.0, sleep=board.sleep,
                                 clock=lambda: board.now, max_windows=2)["device"]
    assert capped.watts == pytest.approx(131.0) and capped.settled is False


# --- energy: RAPL through a fake powercap folder ----------------------------------------------

def make_zone(root: Path, zone: str, name: str, energy_uj: int, max_uj: int = 1000_000) -> Path:
    folder = root / zone
    folder.mkdir(parents=True)
    (folder / "name").write_text(name + "\n")
    (folder / "energy_uj").write_text(f"{energy_uj}\n")
    (folder / "max_energy_range_uj").write_text(f"{max_uj}\n")
    return folder


def test_rapl_sums_packages_and_unwraps(tmp_path: Path) -> None:
    package0 = make_zone(tmp_path, "intel-rapl:0", "package-0", 900_000)
    package1 = make_zone(tmp_path, "intel-rapl:1", "package-1", 10)
    make_zone(tmp_path, "intel-rapl:0:0", "core", 5)  # inside package-0: not added again
    make_zone(tmp_path, "intel-rapl:2", "psys", 5)  # the platform: would count packages twice
    rapl = energycounters.open_rapl(tmp_path)
    assert isinstance(rapl, energycounters.RaplEnergy), rapl
    assert rapl.name == "RAPL package-0 + package-1"
    start = rapl.read_joules()
    (package0 / "energy_uj").write_text("200000\n")  # wrapped: 100,000 to the top + 200,000
    (package1 / "energy_uj").write_text("500010\n")  # 500,000 more
    assert rapl.read_joules() - start == pytest.approx(0.3 + 0.5)


def test_rapl_wraparound_exactly(tmp_path: Path) -> None:
    zone = make_zone(tmp_path, "intel-rapl:0", "package-0", 990_000, max_uj=1000_000)
    rapl = energycounters.open_rapl(tmp_path)
    start = rapl.read_joules()
    (zone / "energy_uj").write_text("5000\n")  # 10,000 to the wrap, then 5,000
    assert rapl.read_joules() - start == pytest.approx(0.015)
    (zone / "energy_uj").write_text("25000\n")
    assert rapl.read_joules() - start == pytest.approx(0.035)


def test_rapl_missing_or_unreadable_is_unavailable_with_the_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert "no " in energycounters.open_rapl(tmp_path / "absent")
    assert "no RAPL package domain" in energycounters.open_rapl(tmp_path)
    make_zone(tmp_path, "intel-rapl:0", "package-0", 1)
    real_read = Path.read_text

    def root_only(path: Path, *args, **kwargs) -> str:
        if path.name == "energy_uj":
            raise PermissionError(13, "Permission denied")
        return real_read(path, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", root_only)
    reason = energycounters.open_rapl(tmp_path)
    assert isinstance(reason, str) and "not readable" in reason


def test_a_cpu_cell_reports_rapl_energy_per_step(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    zone = make_zone(tmp_path, "intel-rapl:0", "package-0", 0, max_uj=10**12)
    monkeypatch.setenv(energycounters.POWERCAP_ENV, str(tmp_path))
    ticks = iter([0.0, 2.0])  # the window's clock: exactly 2 s
    watch = watch_of(FakeGpuDevice(name="cpu", is_gpu=False))
    watch.start_case()
    watch.windows = {"host": energycounters.EnergyWindow(watch.host, clock=lambda: next(ticks))}
    watch.windows["host"].begin()
    (zone / "energy_uj").write_text(str(60_000_000))  # 60 J over the window
    watch.windows["host"].end(10)
    extras, suspect = watch.finish_case(0.2, 3)
    host = extras["energy"]["host"]
    assert host["status"] == "ok" and host["counter"] == "RAPL package-0"
    assert host["joules_per_call"] == pytest.approx(6.0)
    assert host["joules_per_step"] == pytest.approx(2.0)
    assert host["watts_mean"] == pytest.approx(30.0)
    assert "gpu_state" not in extras and "device" not in extras["energy"] and suspect == ""


# --- through a real worker and the CLI: the fake GPU backend with the fake NVML ----------------

def test_a_throttled_gpu_case_is_suspect_in_run_json_and_the_cli_table(
        fake_nvml: None, monkeypatch: pytest.MonkeyPatch, out_dir: Path) -> None:
    import json

    from typer.testing import CliRunner

    from harness.cli import app

    monkeypatch.setenv("FAKE_NVML_THROTTLE", "0x4")  # software power cap
    monkeypatch.setenv("HARNESS_ATTEMPTS", "3")  # the default, not the suite's one attempt
    monkeypatch.setenv("COLUMNS", "400")  # the table's reason column unfolded
    # Not --quick: a quick run makes no energy pass and measures no idle power.
    result = CliRunner().invoke(app, ["compare", "--workload", "fault", "--framework", "fakegpu",
                                      "--device", "cuda:0", "--variant", "ok", "--rounds", "1",
                                      "--no-report", "--no-ceilings", "--out", str(out_dir)])
    assert result.exit_code == 0, result.output
    document = json.loads(next(out_dir.glob("*/run.json")).read_text())
    case = document["cells"][0]["cases"][0]
    assert case["status"] == "ok"
    state = case["extra"]["gpu_state"]
    assert state["status"] == "ok" and state["nvml_name"] == "Fake H200"
    assert state["while_timed"]["throttle_reasons"]["sw_power_cap"] >= 2
    assert "GPU throttled (power cap" in case["suspect"]
    device_energy = case["extra"]["energy"]["device"]
    assert device_energy["status"] == "ok", device_energy
    assert device_energy["idle_watts"] == pytest.approx(WATTS, rel=0.05)
    # Throttled in every attempt: timed DEFAULT_ATTEMPTS times, each attempt and why in the record.
    assert len(case["rounds"][0]["attempts"]) == 3 and all("GPU throttled" in attempt["contended"]
                                              for attempt in case["rounds"][0]["attempts"])
    assert "contended in all 3 attempts" in case["suspect"]
    assert "SUSPECT" in result.output and "GPU throttled" in result.output
    from harness.report import render_report

    written = render_report([next(out_dir.glob("*/run.json")).parent], out_dir / "report")
    summary = next(path for path in written if path.name == "summary.md").read_text()
    assert "## Energy per step" in summary and "NVML total energy counter" in summary
    assert "## GPU state per case" in summary and "SUSPECT: GPU throttled" in summary


def test_energy_and_gpu_state_are_columns_of_the_csv_and_parquet(
        fake_nvml: None, out_dir: Path) -> None:
    """A GPU case has its energy per call, power, idle power, SM clock and throttle reasons in
    the tidy tables; a CPU case has the same columns empty, and the reason beside them."""
    import pandas as pd
    from typer.testing import CliRunner

    from harness.cli import app

    # Not --quick: a quick run measures no idle power, and the above-idle figures need it.
    result = CliRunner().invoke(app, ["compare", "--workload", "fault", "--framework", "fakegpu",
                                      "--device", "cuda:0,cpu", "--variant", "ok", "--rounds",
                                      "1", "--no-report", "--no-ceilings", "--out", str(out_dir)])
    assert result.exit_code == 0, result.output
    run_dir = next(out_dir.glob("*/run.json")).parent
    columns = ["energy_j_per_call", "energy_j_per_call_above_idle", "power_w_mean",
               "idle_power_w", "sm_clock_mhz_min", "sm_clock_mhz_max"]
    for frame in (pd.read_csv(run_dir / "measurements.csv", keep_default_na=False, dtype=str),
                  pd.read_parquet(run_dir / "measurements.parquet")):
        warm = frame[frame["phase"] == "warm"]
        gpu, cpu = warm[warm["device"] == "cuda:0"], warm[warm["device"] == "cpu"]
        assert not gpu.empty and not cpu.empty
        for column in columns:
            assert pd.to_numeric(gpu[column]).notna().all(), column
            assert (pd.to_numeric(cpu[column].replace("", None)).isna()).all(), column
        assert pd.to_numeric(gpu["power_w_mean"]).iloc[0] == pytest.approx(WATTS, rel=0.05)
        assert (gpu["energy_reason"] == "").all() and (gpu["gpu_state_reason"] == "").all()
        assert (gpu["throttle_reasons"] != "").all()
        assert cpu["energy_reason"].str.startswith("unavailable: no /nonexistent-powercap").all()
        assert (cpu["gpu_state_reason"] == "cpu cell: no GPU to watch").all()
    typed = pd.read_parquet(run_dir / "measurements.parquet")
    assert typed["energy_j_per_call"].dtype == "float64"
    assert str(typed["sm_clock_mhz_min"].dtype) == "Int64"


def test_the_window_spans_the_warm_calls_only() -> None:
    """per_call: begin() after the cold call, end(calls) after the last; autorange: the samples."""
    from harness.measure.timing import per_call

    events: list[str] = []

    class Recorder:
        def begin(self) -> None:
            events.append("begin")

        def end(self, calls: int) -> None:
            events.append(f"end {calls}")

    per_call(lambda: events.append("call"), lambda: None, 3, Recorder())
    assert events == ["call", "begin", "call", "call", "end 2"]
    events.clear()
    policy = TimingPolicy(min_samples=3, min_time_s=0.0, warmup_s=0.0, target_sample_s=0.0)
    measurement = autorange(lambda: events.append("call"), lambda: None, policy, Recorder())
    timed = len(measurement.samples) * measurement.calls_per_sample
    assert events[-1] == f"end {timed}"
    assert events[-timed - 2] == "begin" and events[-timed - 1:-1] == ["call"] * timed


def test_an_empty_process_list_says_sharing_cannot_be_seen(
        fake_nvml: None, monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = opened(fake_nvml)
    monkeypatch.setattr(gpu, "compute_pids", lambda: [])
    record = watched_case(gpu)
    assert "sharing cannot be seen" in record["processes"]["note"]
    assert record["suspect"] == ""
