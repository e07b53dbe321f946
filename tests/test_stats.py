"""Derived figures: throughput from work counts, and the faster-than-physics flag."""

from __future__ import annotations

from harness.analysis.casetable import CaseRow
from harness.analysis.stats import implausibility
from harness.data.ceilings import MEMORY, DeviceCeiling, Peaks
from tests.synthetic_runs import rated_row

CEILINGS = DeviceCeiling.from_json({
    "peak_gflops": 1000.0, "peak_gflops_by_precision": {"fp32": 1000.0, "bf16": 8000.0},
    "bandwidth_gbps": 100.0})


def summary(variant: str = "fp32", gflops: float | None = None,
            gbps: float | None = None) -> CaseRow:
    return rated_row(variant, "cuda:0", gflops, gbps)


def test_rates_within_the_ceilings_are_not_flagged() -> None:
    assert implausibility(summary(gflops=900.0, gbps=90.0), CEILINGS) == ""


def test_a_rate_above_peak_flops_is_flagged() -> None:
    assert "IMPLAUSIBLE" in implausibility(summary(gflops=1500.0), CEILINGS)


def test_each_precision_is_held_to_its_own_peak() -> None:
    assert implausibility(summary("bf16", gflops=5000.0), CEILINGS) == ""
    assert "IMPLAUSIBLE" in implausibility(summary("bf16", gflops=9000.0), CEILINGS)


def test_a_few_percent_past_a_copy_ceiling_is_not_physics_broken() -> None:
    assert implausibility(summary(gbps=105.0), CEILINGS) == ""


def test_a_folded_loop_above_memory_bandwidth_is_flagged() -> None:
    assert "GB/s" in implausibility(summary(gbps=2500.0), CEILINGS)


def test_no_ceilings_means_no_verdict() -> None:
    assert implausibility(summary(gbps=1e9), None) == ""
    assert implausibility(summary(gbps=1e9), DeviceCeiling("cuda:0", error="no GPU")) == ""


def test_ceilings_keep_the_best_figure_any_library_reached() -> None:
    from harness.measure.ceilings import LibraryProbe, _best_of

    best = _best_of([LibraryProbe(Peaks({"fp32": 144.0}, {MEMORY: 9.0}), {"fp32": 2048}),
                     LibraryProbe(Peaks({"fp32": 183.0}, {MEMORY: 8.0}), {"fp32": 4096})])
    assert best.peaks == Peaks({"fp32": 183.0}, {MEMORY: 9.0})
    assert best.reached_at_n == {"fp32": 4096}  # the size of the library that reached 183


def test_a_count_takes_its_noun_in_the_number_it_needs() -> None:
    """'1 cells' and '1 candidate fixes' were printed (a new user's trial)."""
    from harness.core.units import counted

    assert counted(1, "cell") == "1 cell" and counted(3, "cell") == "3 cells"
    assert counted(1, "candidate fix", "candidate fixes") == "1 candidate fix"
    assert counted(0, "candidate fix", "candidate fixes") == "0 candidate fixes"
