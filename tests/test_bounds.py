"""The limits IMPLAUSIBLE is judged against, on known inputs: the CPU's physical bound from a
/proc/cpuinfo, `with_bounds` from given probe and cache figures, the per-machine cache that keeps
the best probe, and the probe's retry while other processes compete."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.analysis.plausibility import judge_case
from harness.data.ceilings import (
    HOST_LINK,
    MEMORY,
    Bound,
    Ceilings,
    DeviceCeiling,
    Peaks,
    RememberedProbe,
)
from harness.measure import ceilings, envinfo
from harness.measure.hostload import OtherLoad
from harness.measure.timing import Measurement


def cpuinfo(tmp_path: Path, flags: str | None, mhz: list[float]) -> Path:
    """A /proc/cpuinfo with one block per clock in `mhz`, each with these flags."""
    blocks = []
    for index, clock in enumerate(mhz or [None]):
        lines = [f"processor\t: {index}", "model name\t: Test CPU 9000"]
        if clock is not None:
            lines.append(f"cpu MHz\t\t: {clock:.3f}")
        if flags is not None:
            lines.append(f"flags\t\t: fpu vme {flags} pni")
        blocks.append("\n".join(lines))
    path = tmp_path / "cpuinfo"
    path.write_text("\n\n".join(blocks) + "\n")
    return path


@pytest.fixture
def four_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envinfo, "usable_cores", lambda: 4)


# --- envinfo.cpu_theoretical_gflops -------------------------------------------------------------

@pytest.mark.usefixtures("four_cores")
@pytest.mark.parametrize("flags, per_cycle, isa", [
    ("sse sse2 avx avx2 fma avx512f avx512dq", 64, "avx512f"),
    ("sse sse2 avx avx2 fma", 32, "avx2"),
    ("sse sse2 avx", 16, "avx"),
    ("sse sse2", 8, "sse2"),
    ("sse", 2, "scalar"),
])
def test_the_widest_simd_the_flags_name_sets_flops_per_cycle(
        tmp_path: Path, flags: str, per_cycle: int, isa: str) -> None:
    bound = envinfo.cpu_theoretical_gflops(cpuinfo(tmp_path, flags, [2100.0, 2100.0]))
    assert bound is not None
    # A reported 2.1 GHz is below the assumed 4 GHz all-core clock: the bound uses 4 GHz.
    assert bound.gflops == pytest.approx(4 * per_cycle * 4.0)
    assert bound.how.startswith(f"4 cores x {per_cycle} fp32 FLOP/cycle ({isa}) x 4 GHz")


@pytest.mark.usefixtures("four_cores")
def test_a_clock_above_the_assumed_maximum_raises_the_bound(tmp_path: Path) -> None:
    bound = envinfo.cpu_theoretical_gflops(cpuinfo(tmp_path, "avx2", [3000.0, 5200.0, 800.0]))
    assert bound is not None
    assert bound.gflops == pytest.approx(4 * 32 * 5.2)  # the fastest core's clock
    assert "x 5.2 GHz" in bound.how


@pytest.mark.usefixtures("four_cores")
def test_no_flags_and_no_clock_still_give_a_scalar_bound(tmp_path: Path) -> None:
    bound = envinfo.cpu_theoretical_gflops(cpuinfo(tmp_path, None, []))
    assert bound is not None and bound.gflops == pytest.approx(4 * 2 * 4.0)


def test_the_bound_scales_with_the_usable_cores(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    info = cpuinfo(tmp_path, "avx2", [2000.0])
    monkeypatch.setattr(envinfo, "usable_cores", lambda: 1)
    one = envinfo.cpu_theoretical_gflops(info)
    monkeypatch.setattr(envinfo, "usable_cores", lambda: 16)
    sixteen = envinfo.cpu_theoretical_gflops(info)
    assert one and sixteen and sixteen.gflops == pytest.approx(16 * one.gflops)


def test_no_cpuinfo_means_no_bound(tmp_path: Path) -> None:
    assert envinfo.cpu_theoretical_gflops(tmp_path / "absent") is None


# --- ceilings.with_bounds -----------------------------------------------------------------------

def theoretical(gflops: float) -> Any:
    return lambda: envinfo.TheoreticalPeak(gflops, "8 cores x 32 fp32 FLOP/cycle (avx2) x 4 GHz")


def cpu_figures(cached_fp32: float | None = None) -> DeviceCeiling:
    cached = RememberedProbe("cpu", {}, 0.0, Peaks({"fp32": cached_fp32}, {MEMORY: 12.0})) \
        if cached_fp32 is not None else None
    return DeviceCeiling("cpu", Peaks({"fp32": 100.0, "bf16": 40.0}, {MEMORY: 10.0}),
                         probe_sizes=(2048,), cached=cached)


def test_the_cpu_fp32_bound_is_the_theoretical_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envinfo, "cpu_theoretical_gflops", theoretical(1024.0))
    bounded = ceilings.with_bounds(cpu_figures())
    physical = bounded.physical
    assert physical is not None
    assert physical.gflops["fp32"] == pytest.approx(1024.0)
    assert physical.how["fp32"].startswith("8 cores x 32")
    # Precisions without a theoretical figure, and bandwidth, get the probe with a margin.
    assert physical.gflops["bf16"] == pytest.approx(40.0 * 1.25)
    assert physical.how["bf16"] == "best probe x 1.25"
    assert physical.gbps[MEMORY] == pytest.approx(10.0 * 1.10)
    assert physical.how[MEMORY] == "best probe x 1.1"
    assert HOST_LINK not in physical.gbps
    # The figures themselves pass through untouched.
    assert bounded.probe == cpu_figures().probe and bounded.probe_sizes == (2048,)


def test_a_probe_above_the_theoretical_figure_raises_the_bound(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong clock must not turn the machine's own best into an impossibility."""
    monkeypatch.setattr(envinfo, "cpu_theoretical_gflops", theoretical(80.0))
    assert ceilings.with_bounds(cpu_figures()).physical == Bound(
        {"fp32": 100.0, "bf16": 50.0}, {MEMORY: pytest.approx(11.0)},
        {"fp32": "8 cores x 32 fp32 FLOP/cycle (avx2) x 4 GHz", "bf16": "best probe x 1.25",
         MEMORY: "best probe x 1.1"})
    bounded = ceilings.with_bounds(cpu_figures(cached_fp32=150.0)).physical
    assert bounded is not None and bounded.gflops["fp32"] == pytest.approx(150.0)


def test_bounds_use_the_best_of_probe_and_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envinfo, "cpu_theoretical_gflops", lambda: None)
    physical = ceilings.with_bounds(cpu_figures(cached_fp32=300.0)).physical
    assert physical is not None
    assert physical.gflops["fp32"] == pytest.approx(300.0 * 1.25)
    assert physical.how["fp32"] == "best probe x 1.25"
    assert physical.gbps[MEMORY] == pytest.approx(12.0 * 1.10)  # the cache's 12 > 10
    assert physical.gflops["bf16"] == pytest.approx(40.0 * 1.25)


def test_a_gpu_is_never_held_to_the_cpu_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envinfo, "cpu_theoretical_gflops", theoretical(1e9))
    figures = DeviceCeiling("cuda:0", Peaks({"fp32": 50_000.0},
                                            {MEMORY: 3000.0, HOST_LINK: 50.0}))
    physical = ceilings.with_bounds(figures).physical
    assert physical is not None
    assert physical.gflops["fp32"] == pytest.approx(62_500.0)
    assert physical.gbps[MEMORY] == pytest.approx(3300.0)
    assert physical.gbps[HOST_LINK] == pytest.approx(55.0)
    assert physical.how[HOST_LINK] == "best probe x 1.1"


def test_a_failed_probe_gets_no_bounds() -> None:
    failed = DeviceCeiling("cuda:0", error="no installed framework can open this device")
    assert ceilings.with_bounds(failed) == failed


# --- the cache: one low probe cannot lower the bar ----------------------------------------------

def gpu_probe(fp32: float) -> DeviceCeiling:
    return DeviceCeiling("cuda:0", Peaks({"fp32": fp32}, {MEMORY: 3000.0}),
                         description="Synthetic GPU", measured_with=("torch",),
                         probe_sizes=(4096,))


def cached_fp32(figures: DeviceCeiling) -> float:
    assert figures.cached is not None
    return figures.cached.figures.gflops["fp32"]


def test_a_low_probe_after_a_good_one_keeps_the_good_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What 'two probes agree' was for: a probe that reads 885 one hour and 1,760 the next
    must not make an honest 1,500 GFLOP/s result IMPLAUSIBLE in the lower hour."""
    monkeypatch.setenv(ceilings.CACHE_ENV, str(tmp_path / "cache"))
    first = ceilings.with_bounds(ceilings.remember(gpu_probe(1760.0)))
    assert first.cached is None  # nothing seen before on this machine
    second = ceilings.with_bounds(ceilings.remember(gpu_probe(885.0)))
    assert cached_fp32(second) == 1760.0
    assert second.physical and second.physical.gflops["fp32"] == pytest.approx(1760.0 * 1.25)
    [verdict] = judge_case(1500.0, None, "fp32", "cuda:0", Ceilings({"cuda:0": second}))
    assert verdict.kind == "probe-low" and not verdict.implausible
    # The cache still holds the best, and a better probe raises it.
    assert cached_fp32(ceilings.remember(gpu_probe(2000.0))) == 1760.0
    assert cached_fp32(ceilings.remember(gpu_probe(900.0))) == 2000.0


def test_without_the_cache_the_low_probe_would_flag_the_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Control for the test above: the same low probe alone does call 1,500 impossible."""
    monkeypatch.setenv(ceilings.CACHE_ENV, str(tmp_path / "empty-cache"))
    alone = ceilings.with_bounds(ceilings.remember(gpu_probe(885.0)))
    [verdict] = judge_case(1500.0, None, "fp32", "cuda:0", Ceilings({"cuda:0": alone}))
    assert verdict.implausible


def test_a_failed_probe_is_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ceilings.CACHE_ENV, str(tmp_path / "cache"))
    failed = DeviceCeiling("cuda:0", error="boom")
    assert ceilings.remember(failed) == failed
    assert not ceilings.cache_path().exists()


# --- the probe retries while other processes compete ---------------------------------------------

def scripted_autorange(monkeypatch: pytest.MonkeyPatch,
                       runs: list[tuple[list[float], float]]) -> list[int]:
    """ceilings.autorange returning these (samples, other processes' cores) in turn."""
    calls: list[int] = []

    def autorange(step: Any, synchronize: Any, policy: Any) -> Measurement:
        samples, other_cores = runs[len(calls)]
        calls.append(1)
        return Measurement(cold_seconds=1.0, samples=samples,
                           other_load=OtherLoad(other_cores, 0.0, 1.0))
    monkeypatch.setattr(ceilings, "autorange", autorange)
    monkeypatch.setattr(ceilings, "PROBE_CONTENTION", [])
    return calls


def test_a_contended_probe_is_repeated_and_the_fastest_kept(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = scripted_autorange(monkeypatch, [([4.0, 3.0], 1.5), ([2.0, 2.5], 1.0), ([2.2], 0.0)])
    assert ceilings.best_seconds(lambda: None, lambda: None) == 2.0
    assert len(calls) == 3  # stopped at the first probe nobody competed with
    assert ceilings.PROBE_CONTENTION == [1.5, 1.0]


def test_an_idle_machine_is_probed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = scripted_autorange(monkeypatch, [([3.0, 2.5], 0.1)])
    assert ceilings.best_seconds(lambda: None, lambda: None) == 2.5
    assert len(calls) == 1 and ceilings.PROBE_CONTENTION == []


def test_retries_are_bounded_on_a_machine_that_stays_busy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    busy = [([float(5 - index)], 2.0) for index in range(10)]
    calls = scripted_autorange(monkeypatch, busy)
    assert ceilings.best_seconds(lambda: None, lambda: None) == 5 - ceilings.CONTENDED_RETRIES
    assert len(calls) == 1 + ceilings.CONTENDED_RETRIES


# --- this machine: the bound is above what its probe reaches -------------------------------------

@pytest.mark.slow
def test_the_cpu_physical_bound_is_above_what_the_probe_reaches() -> None:
    """The bound IMPLAUSIBLE is judged against must sit above this CPU's own best matmul (load
    from other processes only lowers the probe, so this cannot fail by chance)."""
    from harness.backends.numpy.ceilings import _rate
    from harness.backends.numpy.device import open_device

    bound = envinfo.cpu_theoretical_gflops()
    if bound is None:
        pytest.skip("no /proc/cpuinfo here")
    assert "cores x" in bound.how
    probe_gflops = _rate(open_device("cpu"), 512)
    assert 0 < probe_gflops <= bound.gflops, (probe_gflops, bound)


def test_best_of_keeps_each_figure_from_the_library_that_reached_it() -> None:
    best = ceilings._best_of([
        ceilings.LibraryProbe(Peaks({"fp32": 0.5}, {MEMORY: 0.25}), {"fp32": 64}),
        ceilings.LibraryProbe(Peaks({"fp32": 0.25, "bf16": 0.75}, {MEMORY: 0.125}),
                              {"fp32": 128, "bf16": 128}),
    ])
    assert best == ceilings.LibraryProbe(Peaks({"fp32": 0.5, "bf16": 0.75}, {MEMORY: 0.25}),
                                         {"fp32": 64, "bf16": 128})
    assert ceilings._best_of([]) == ceilings.LibraryProbe(Peaks())
