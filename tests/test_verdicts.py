"""The functions that decide numbers and verdicts, on hand-computed inputs: sample statistics,
the CLI's case summary, the U test and diff verdicts, environment mismatches, device-time
attribution and diagnosis, plausibility. Written against what mutation testing
(benchmarks/mutation.sh) showed the other tests let through: boundaries, defaults, messages."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness.analysis import crossover as xo
from harness.analysis import diff, plausibility
from harness.analysis.casetable import CaseRow
from harness.analysis.stats import check_text, implausibility, work_of
from harness.core.registry import load_workload
from harness.data.casekey import CaseKey
from harness.data.ceilings import HOST_LINK, MEMORY, Ceilings, DeviceCeiling, Peaks
from harness.data.results import RunDocument, sample_stats
from harness.measure.devicetime import attribute, diagnose
from harness.report import tables as t
from harness.report.views import fastest as fx
from harness.report.views import ratios as rx
from tests.synthetic_runs import (
    CPU_MACHINE,
    GPU_MACHINE,
    HOST,
    SIZES,
    cell_result,
    cli_rows_of,
    cpu_machine_results,
    cpu_seconds,
    gpu_machine_results,
    gpu_seconds,
    make_case,
    make_result,
    rated_row,
    stats_of,
    typed_result,
    write_fixture_run,
    write_run,
)

MATMUL = load_workload("matmul")
ELEMENTWISE = load_workload("elementwise")

# --- sample_stats ------------------------------------------------------------------------------


def test_sample_stats_on_known_samples() -> None:
    stats = sample_stats([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (stats.count, stats.median, stats.q1, stats.q3, stats.minimum) == (5, 3.0, 2.0, 4.0,
                                                                               1.0)
    assert stats.iqr == 2.0 and stats.noise == pytest.approx(2 / 3) and stats.noisy
    two = sample_stats([1.0, 2.0])  # 'inclusive' quartiles still give numbers for two samples
    assert (two.median, two.q1, two.q3) == (1.5, 1.25, 1.75)
    one = sample_stats([7.0])
    assert (one.count, one.median, one.q1, one.q3, one.minimum, one.iqr) == (1, 7.0, 7.0, 7.0,
                                                                             7.0, 0.0)
    assert not one.noisy
    nan = float("nan")
    assert sample_stats([nan, 2.0, nan, 4.0]).count == 2
    empty = sample_stats([nan])
    assert (empty.count, empty.median, empty.iqr, empty.noise, empty.noisy) == (
        0, None, None, None, False)


def test_the_noise_threshold_is_ten_percent_exclusive() -> None:
    # median 2.5, IQR 0.25: exactly 10%, not noisy; a little above: noisy.
    exactly = sample_stats([2.25, 2.375, 2.5, 2.625, 2.75])
    assert exactly.noise == 0.1 and not exactly.noisy
    assert sample_stats([2.25, 2.37, 2.5, 2.63, 2.75]).noisy
    assert sample_stats([0.0, 0.0, 0.0]).noise is None  # median 0: no fraction


# --- the CLI's per-case summary ----------------------------------------------------------------

def matmul_row(warm: list[float], **case_fields: object) -> CaseRow:
    document = cell_result("torch", {512: warm})
    document["cases"][0].update(case_fields)
    document["peak_host_memory_bytes"] = 3 * 2**20
    [row] = cli_rows_of(MATMUL, typed_result(document))
    return row


def test_the_cli_row_derives_rates_from_the_median() -> None:
    summary = matmul_row([2e-3, 1e-3, 3e-3], peak_device_allocated_bytes=5,
                         peak_device_reserved_bytes=9, suspect="drift")
    assert (summary.variant, summary.framework, summary.device, summary.size) == (
        "fp32", "torch", "cpu", 512)
    assert (summary.status, summary.reason) == ("ok", "")
    assert summary.call_median_s == 2e-3 and summary.samples == 3
    assert summary.call_iqr_s == pytest.approx(1e-3) and summary.noisy
    assert summary.cold_call_s == pytest.approx(2e-2)
    assert summary.gflops == pytest.approx(2 * 512**3 / 2e-3 / 1e9)
    assert summary.gbps is None  # matmul counts no bytes
    assert check_text(summary.check) == "pass rel_error=1e-07"
    assert summary.suspect == "drift"
    assert summary.peak_host_bytes == 3 * 2**20
    assert summary.peak_device_bytes == 9  # reserved before allocated
    assert matmul_row([1e-3], peak_device_allocated_bytes=5).peak_device_bytes == 5


def test_the_cli_row_without_samples_has_no_rate() -> None:
    summary = matmul_row([1.0], samples=[])  # a case with its cold call only
    assert math.isnan(summary.call_median_s) and summary.gflops is None
    assert summary.samples == 0


def test_the_cli_row_gives_both_rates_where_both_are_counted() -> None:
    case_params = {"elements": 2**20, "iterations": 4, "trailing_shape": [1]}
    document = {"cell": {"workload": "elementwise", "variant": "eager", "framework": "torch",
                         "device": "cpu", "params": {}}, "status": "ok", "reason": "",
                "cases": [{"case": case_params, "status": "ok", "reason": "",
                           "samples": [1e-3], "cold_seconds": 2e-3,
                           "check": {"passed": False, "metric": "abs_error", "value": 0.123}}]}
    [summary] = cli_rows_of(ELEMENTWISE, typed_result(document))
    work = work_of(ELEMENTWISE, case_params)
    assert summary.gflops == pytest.approx(work["flops"] / 1e-3 / 1e9)
    assert summary.gbps == pytest.approx(work["bytes"] / 1e-3 / 1e9)
    assert check_text(summary.check) == "FAIL abs_error=0.12"
    assert work_of(MATMUL, {"n": 4}) == {"flops": 128.0}


def test_a_cell_that_stopped_short_gets_a_status_row() -> None:
    document = cell_result("torch", {64: [1e-3, 1e-3]})
    document.update(status="timeout", reason="killed after 900 s")
    summaries = cli_rows_of(MATMUL, typed_result(document))
    assert len(summaries) == 2
    assert summaries[0].status == "ok" and summaries[0].size == 64
    last = summaries[1]
    assert (last.status, last.reason, last.size, last.samples) == (
        "timeout", "killed after 900 s", None, 0)
    assert math.isnan(last.call_median_s)
    assert len(cli_rows_of(MATMUL, typed_result(cell_result("torch", {64: [1e-3]})))) == 1


def test_implausibility_reads_the_cases_own_device() -> None:
    summary = rated_row("fp32", "cpu", 500.0)
    ceilings = {"peak_gflops_by_precision": {"fp32": 100.0},
                "physical": {"gflops_by_precision": {"fp32": 400.0}}}
    assert implausibility(summary, DeviceCeiling.from_json(ceilings)).startswith(
        "IMPLAUSIBLE: 500 GFLOP/s > physical bound 400")
    assert "probe was low" in implausibility(summary, DeviceCeiling.from_json({
        **ceilings, "physical": {"gflops_by_precision": {"fp32": 600.0}}}))


# --- the U test and the diff verdicts ----------------------------------------------------------

def test_u_test_needs_both_samples_and_treats_one_value_each() -> None:
    with pytest.raises(ValueError, match="both samples need at least one value"):
        diff.mann_whitney_u([], [1.0])
    with pytest.raises(ValueError):
        diff.mann_whitney_u([1.0], [])
    # One value each: U = 0, variance 1*1/12*3 = 0.25, z = (0.5 - 0.5) / 0.5 = 0, p = 1.
    assert diff.mann_whitney_u([1.0], [2.0]) == (0.0, 1.0)


def test_u_test_tie_correction_on_a_hand_computed_case() -> None:
    # [1, 2, 2] vs [2, 3, 3]: ranks 1, 3, 3 | 3, 5.5, 5.5; U1 = 7 - 6 = 1;
    # ties (3 and 2): (24 + 6) / (6 * 5) = 1.0; variance = 9/12 * (7 - 1) = 4.5;
    # z = (|1 - 4.5| - 0.5) / sqrt(4.5) = 1.41421; p = erfc(z / sqrt 2) = 0.157299.
    u_stat, p_value = diff.mann_whitney_u([1.0, 2.0, 2.0], [2.0, 3.0, 3.0])
    assert u_stat == 1.0
    assert p_value == pytest.approx(math.erfc(3 / math.sqrt(4.5) / math.sqrt(2)), rel=1e-12)
    # Far apart samples: p well below 1 and never above it.
    assert diff.mann_whitney_u([1.0] * 2, [5.0] * 2)[1] == pytest.approx(
        math.erfc((2 - 0.5) / math.sqrt(4 / 12 * (5 - 1.0)) / math.sqrt(2)))


def test_u_test_p_is_capped_at_one() -> None:
    # [2] vs [1, 3]: U = 1 = its mean; the continuity correction clamps z to 0, p = 1.
    assert diff.mann_whitney_u([2.0], [1.0, 3.0]) == (1.0, 1.0)
    assert diff.mann_whitney_u([1.0, 3.0], [2.0, 4.0])[1] == pytest.approx(
        math.erfc(0.5 / math.sqrt(4 / 12 * 5) / math.sqrt(2)))


def test_verdict_boundaries() -> None:
    assert diff.verdict_for(50.0, diff.ALPHA, 5.0) == "same"  # p must be below alpha
    assert diff.verdict_for(50.0, diff.ALPHA * 0.99, 5.0) == "slower"
    assert diff.verdict_for(5.0, 0.001, 5.0) == "same"  # exactly the threshold: same
    assert diff.verdict_for(-5.0, 0.001, 5.0) == "same"
    assert diff.verdict_for(5.01, 0.001, 5.0) == "slower"
    assert diff.verdict_for(-5.01, 0.001, 5.0) == "faster"


def cases(statuses: dict[CaseKey, str],
          samples: dict[CaseKey, list[float]]) -> diff.RunCases:
    return diff.RunCases("run", {}, statuses, samples)


# diff matches cases on any machine: its keys have no machine.
KEY = CaseKey("matmul", "", "fp32", "torch", "cpu", "64")


def test_compare_case_with_known_samples() -> None:
    a = cases({KEY: "ok"}, {KEY: [1.0, 1.01, 0.99, 1.0, 1.02]})
    b = cases({KEY: "ok"}, {KEY: [2.0, 2.02, 1.98, 2.0, 2.04]})
    result = diff.compare_case(KEY, a, b, 5.0, 10.0)
    assert (result.workload, result.variant, result.framework, result.device, result.size) == (
        "matmul", "fp32", "torch", "cpu", "64")
    assert (result.samples_a, result.samples_b) == (5, 5)
    assert (result.median_a_s, result.median_b_s) == (1.0, 2.0)
    assert result.ratio == 2.0 and result.change_pct == pytest.approx(100.0)
    assert result.p_value == pytest.approx(diff.mann_whitney_u(a.samples[KEY], b.samples[KEY])[1])
    assert result.verdict == "slower" and result.regression
    assert not diff.compare_case(KEY, a, b, 5.0, None).regression  # no limit, no regression
    assert not diff.compare_case(KEY, a, b, 5.0, 100.0).regression  # 100% is not above 100%
    assert diff.compare_case(KEY, b, a, 5.0, 10.0).verdict == "faster"


def test_compare_case_needs_five_samples_each() -> None:
    four = cases({KEY: "ok"}, {KEY: [1.0, 1.0, 1.0, 1.0]})
    five = cases({KEY: "ok"}, {KEY: [2.0] * 5})
    result = diff.compare_case(KEY, four, five, 5.0, 10.0)
    assert result.verdict == "not judged" and result.p_value is None and not result.regression
    assert result.ratio == 2.0  # the ratio is still shown
    assert diff.compare_case(KEY, five, four, 5.0, 10.0).verdict == "not judged"


def test_compare_case_on_failed_cases() -> None:
    ok = cases({KEY: "ok"}, {KEY: [1.0] * 5})
    for status in ("error", "invalid", "timeout"):
        failed = cases({KEY: status}, {})
        newly = diff.compare_case(KEY, ok, failed, 5.0, 10.0)
        assert newly.verdict == f"{status} in B" and newly.regression
        assert newly.median_b_s is None and newly.samples_b == 0 and newly.ratio is None
        assert not diff.compare_case(KEY, ok, failed, 5.0, None).regression
        fixed = diff.compare_case(KEY, failed, ok, 5.0, 10.0)
        assert fixed.verdict == f"fixed in B (was {status})" and not fixed.regression
    unavailable = cases({KEY: "unavailable"}, {})
    assert not diff.compare_case(KEY, ok, unavailable, 5.0, 10.0).regression
    both = diff.compare_case(KEY, cases({KEY: "error"}, {}), cases({KEY: "error"}, {}), 5, None)
    assert both.verdict == "error in both"
    assert diff.compare_case(KEY, cases({KEY: "error"}, {}), cases({KEY: "timeout"}, {}), 5,
                             None).verdict == "error -> timeout"


def test_worst_status_of_a_case_ignores_blanks() -> None:
    assert diff._worst(pd.Series(["ok", "", "invalid", "ok"])) == "invalid"
    assert diff._worst(pd.Series(["", ""])) == ""


def test_diff_runs_lists_cases_on_one_side_only_and_serialises(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", [cell_result("torch", {64: [1.0] * 5, 128: [2.0] * 5})])
    run_b = write_run(tmp_path / "b", [cell_result("torch", {64: [1.0] * 5, 256: [3.0] * 5})])
    result = diff.diff_runs(run_a, run_b, threshold_pct=7.0, fail_on_regression_pct=12.0)
    assert (result.run_a, result.run_b) == (str(run_a), str(run_b))
    assert [case.size for case in result.cases] == ["64"]
    assert result.cases[0].verdict == "same" and result.cases[0].p_value == 1.0
    key = {"workload": "matmul", "variant": "fp32", "framework": "torch", "device": "cpu"}
    assert result.only_in_a == [{**key, "size": "128", "status": "ok"}]
    assert result.only_in_b == [{**key, "size": "256", "status": "ok"}]
    document = result.as_dict()
    assert document["method"] == diff.METHOD and document["alpha"] == diff.ALPHA
    assert (document["run_a"], document["run_b"]) == (str(run_a), str(run_b))
    assert document["threshold_pct"] == 7.0 and document["fail_on_regression_pct"] == 12.0
    assert document["environment_mismatches"] == [{"what": "param n", "a": "64, 128",
                                                  "b": "64, 256"}] or \
        document["environment_mismatches"] == []
    assert document["cases"][0]["size"] == "64" and document["cases"][0]["verdict"] == "same"
    assert document["only_in_a"] == result.only_in_a and document["only_in_b"] == \
        result.only_in_b
    assert document["regressions"] == []
    assert set(document) == {"method", "alpha", "run_a", "run_b", "threshold_pct",
                             "fail_on_regression_pct", "environment_mismatches", "cases",
                             "only_in_a", "only_in_b", "regressions", "strict", "suspect"}


def test_regressions_are_listed_in_the_document(tmp_path: Path) -> None:
    run_a = write_run(tmp_path / "a", [cell_result("torch", {64: [1.0, 1.01, 0.99, 1.0, 1.02]})])
    run_b = write_run(tmp_path / "b", [cell_result("torch", {64: [2.0, 2.02, 1.98, 2.0, 2.04]})])
    document = diff.diff_runs(run_a, run_b, fail_on_regression_pct=10.0).as_dict()
    assert [case["size"] for case in document["regressions"]] == ["64"]
    assert document["regressions"][0]["regression"] is True


# --- environment mismatches ------------------------------------------------------------------

def as_run(document: dict) -> RunDocument:
    """A stored run document as harness.data.results reads it."""
    return RunDocument.from_dict({"run_id": "r", "workload": "matmul", "sweep": "n",
                                  "params": {}, "cells": [], **document})


def run_document(**changes: object) -> dict:
    document = {"workload": "mnist-small", "sweep": "batch_size", "quick": True,
                "params": {"batch_size": [32], "epochs": 2, "data": "/home/a/mnist.npz"},
                "host": dict(HOST),
                "cells": [{"cell": {"framework": "torch", "device": "cpu"},
                           "framework_version": "2.13.0", "device_name": "Test CPU 9000"}]}
    document.update(changes)
    return document


def test_identical_environments_have_no_mismatch() -> None:
    assert diff.environment_mismatches(as_run(run_document()), as_run(run_document())) == []


def test_each_recorded_difference_is_named_with_both_values() -> None:
    other_host = {**HOST, "cpu_model": "Other CPU", "cores": 8, "gpus": ["H100", "H100"],
                  "python": "3.12.1"}
    b = run_document(
        workload="mnist-wide", quick=False, host=other_host,
        params={"batch_size": [64], "epochs": 3, "data": "/elsewhere/mnist.npz", "seed": 1},
        cells=[{"cell": {"framework": "torch", "device": "cpu"},
                "framework_version": "2.14.0", "device_name": "Other CPU"},
               {"cell": {"framework": "jax", "device": "cpu"}, "framework_version": "0.5"}])
    found = {item["what"]: (item["a"], item["b"])
             for item in diff.environment_mismatches(as_run(run_document()), as_run(b))}
    assert found == {
        "workload": ("mnist-small", "mnist-wide"),
        "param epochs": ("2", "3"),  # the swept batch size and the data folder do not count
        "param seed": ("-", "1"),
        "quick": ("True", "False"),
        "host CPU": ("Test CPU 9000", "Other CPU"),
        "usable cores": ("2", "8"),
        "GPUs": ("none", "H100, H100"),
        "Python": ("3.11.7", "3.12.1"),
        "torch version": ("2.13.0", "2.14.0"),
        "torch cpu device name": ("Test CPU 9000", "Other CPU"),
    }


def test_a_different_data_file_name_is_a_mismatch() -> None:
    b = run_document(params={"batch_size": [32], "epochs": 2, "data": "/home/a/fashion.npz"})
    assert diff.environment_mismatches(as_run(run_document()), as_run(b)) == [
        {"what": "param data", "a": "mnist.npz", "b": "fashion.npz"}]


def test_cell_facts_keep_the_first_value_per_framework() -> None:
    document = {"cells": [
        {"cell": {"framework": "torch", "device": "cpu"}, "framework_version": "2.13",
         "device_name": "cpu A"},
        {"cell": {"framework": "torch", "device": "cpu"}, "framework_version": "9.9",
         "device_name": "cpu B"},
        {"cell": {"framework": "numpy", "device": "cpu"}, "framework_version": "",
         "device_name": ""}]}
    assert diff._cell_facts(as_run(document)) == {"torch version": "2.13",
                                          "torch cpu device name": "cpu A"}
    assert diff._cell_facts(as_run({})) == {}


def test_text_of_recorded_values() -> None:
    assert diff._text([]) == "none" and diff._text(("a", 1)) == "a, 1"
    assert diff._text(None) == "-" and diff._text("") == "-" and diff._text(0) == "0"
    assert diff._text(False) == "False"


def test_comparable_params_drop_the_sweep_and_keep_data_by_name() -> None:
    document = {"sweep": "n", "params": {"n": [1, 2], "dtype": "float32", "data": "/x/y.npz"}}
    assert diff._comparable_params(as_run(document)) == {"dtype": "float32", "data": "y.npz"}
    assert diff._comparable_params(as_run({"params": {"data": 3}})) == {"data": 3}
    assert diff._comparable_params(as_run({})) == {}
    assert document["params"]["n"] == [1, 2]  # the document itself is left alone


# --- device-time attribution and diagnosis ------------------------------------------------------

def test_attribution_caps_copies_and_busy() -> None:
    capped = attribute(wall_s=1e-3, busy_s=0.5e-3, copies_s=0.8e-3)
    assert capped.copies_s == 0.5e-3 and capped.compute_s == 0.0
    assert capped.host_s == pytest.approx(0.5e-3) and capped.cold_extra_s is None
    assert attribute(1e-3, 0.5e-3, 0.0, cold_s=0.5e-3).cold_extra_s == 0.0  # never negative
    zero_wall = attribute(0.0, 2e-3, 1e-3)
    assert zero_wall.busy_s == 2e-3 and zero_wall.host_s == 0.0
    assert math.isnan(zero_wall.busy_share)
    assert capped.parts() == {"copies": 0.5e-3, "compute": 0.0, "host": capped.host_s}


def test_diagnosis_thresholds() -> None:
    # Busy share exactly 60% is not launch-bound; just under is.
    assert diagnose(attribute(1e-3, 0.6e-3, 0.0)).kind == "device-bound"
    assert diagnose(attribute(1e-3, 0.59e-3, 0.0)).kind == "launch-bound"
    # Copies exactly half of busy: transfer-bound; just under: not.
    assert diagnose(attribute(1e-3, 1e-3, 0.5e-3)).kind == "transfer-bound"
    assert diagnose(attribute(1e-3, 1e-3, 0.49e-3)).kind == "device-bound"
    # Half the FLOP ceiling while busy: compute-bound; just under: device-bound.
    assert diagnose(attribute(1e-3, 1e-3, 0.0), flops=50e9, peak_gflops=100_000).kind == \
        "compute-bound"
    assert diagnose(attribute(1e-3, 1e-3, 0.0), flops=49e9, peak_gflops=100_000).kind == \
        "device-bound"
    assert diagnose(attribute(1e-3, 1e-3, 0.0), nbytes=1.5e9, bandwidth_gbps=3000).kind == \
        "memory-bound"
    assert diagnose(attribute(1e-3, 1e-3, 0.0), nbytes=1.4e9, bandwidth_gbps=3000).kind == \
        "device-bound"


def test_diagnosis_texts_carry_the_figures() -> None:
    launch = diagnose(attribute(2e-3, 0.5e-3, 0.0))
    assert launch.text == ("launch-bound: busy 500 us of 2 ms wall (25%); the host's launch, "
                           "dispatch and Python take 1.5 ms per call")
    transfer = diagnose(attribute(1e-3, 1e-3, 0.75e-3), kernels_per_call=3)
    assert transfer.text == ("transfer-bound: copies 750 us of 1 ms busy (75%); busy 1 ms of "
                             "1 ms wall (100%), 3 kernels per call")
    compute = diagnose(attribute(1e-3, 1e-3, 0.0), flops=80e9, peak_gflops=100_000)
    assert compute.text == ("compute-bound near the ceiling: 80,000 GFLOP/s while busy = 80% of "
                            "the measured 100,000; busy 1 ms of 1 ms wall (100%)")
    memory = diagnose(attribute(1e-3, 1e-3, 0.0), nbytes=2.4e9, bandwidth_gbps=3000)
    assert memory.text == ("memory-bound near bandwidth: 2,400 GB/s while busy = 80% of the "
                           "measured 3,000; busy 1 ms of 1 ms wall (100%)")
    both = diagnose(attribute(1e-3, 1e-3, 0.0), flops=10e9, nbytes=3e8, peak_gflops=100_000,
                    bandwidth_gbps=3000)
    assert both.text == ("device-bound below its ceilings (10% of peak FLOP/s, 10% of peak "
                         "bandwidth): busy 1 ms of 1 ms wall (100%)")
    bare = diagnose(attribute(1e-3, 0.9e-3, 0.0))
    assert bare.text == ("device-bound below its ceilings (no ceiling to compare with): "
                         "busy 900 us of 1 ms wall (90%)")
    slow = diagnose(attribute(1e-3, 1e-3, 0.0), flops=5e7, peak_gflops=99)
    assert "50 GFLOP/s while busy = 51% of the measured 99;" in slow.text


def test_no_busy_time_means_no_rate() -> None:
    idle = diagnose(attribute(1e-3, 0.0, 0.0), flops=1e9, peak_gflops=10)
    assert idle.kind == "launch-bound"


# --- plausibility ---------------------------------------------------------------------------

def test_precision_of_a_variant() -> None:
    assert plausibility.precision_of("fp32") == "fp32"
    assert plausibility.precision_of("matmul-TF32") == "tf32"
    assert plausibility.precision_of("bf16-autocast") == "bf16"
    assert plausibility.precision_of("mixed", {"mixed": "fp16"}) == "fp16"
    assert plausibility.precision_of("bf16", {"other": "fp16"}) == "bf16"


def entry_of(stored: dict[str, Any], device: str) -> DeviceCeiling | None:
    """plausibility.device_entry of ceilings as run.json stores them."""
    return plausibility.device_entry(Ceilings.from_json(stored), device)


def test_device_entry_falls_back_from_index_to_kind() -> None:
    ceilings = {"cuda": {"bandwidth_gbps": 1.0}, "cpu": {"bandwidth_gbps": 2.0}}
    assert entry_of(ceilings, "cuda:1") == DeviceCeiling("cuda", Peaks(gbps={MEMORY: 1.0}))
    assert entry_of({"gpu": {"x": 1}}, "cuda:0") == DeviceCeiling("gpu", extra_fields={"x": 1})
    assert entry_of({"cuda:0": {"error": "no"}, "cuda": {"y": 2}}, "cuda:0") == \
        DeviceCeiling("cuda", extra_fields={"y": 2})
    assert entry_of({"cuda:0": "broken"}, "cuda:0") is None
    assert plausibility.device_entry(None, "cpu") is None and entry_of({}, "cpu") is None


def test_flop_and_bandwidth_limits() -> None:
    """Every stored form (the oldest peak_gflops and peak_gflops_<precision> too) gives the
    same limits; a value that is no positive number is no probe."""
    def flop_limits(stored: dict[str, Any], precision: str) -> tuple[float | None, ...]:
        return plausibility.flop_limits(DeviceCeiling.from_json(stored), precision)

    def bandwidth_limits(stored: dict[str, Any], link: str) -> tuple[float | None, ...]:
        return plausibility.bandwidth_limits(DeviceCeiling.from_json(stored), link)

    entry = {"peak_gflops_by_precision": {"fp32": 100.0, "bf16": 0},
             "peak_gflops_fp16": 400.0, "peak_gflops": 90.0, "bandwidth_gbps": 10.0,
             "physical": {"gflops_by_precision": {"fp32": 300.0}, "bandwidth_gbps": 20.0}}
    assert flop_limits(entry, "fp32") == (100.0, 300.0)
    assert flop_limits(entry, "fp16") == (400.0, pytest.approx(440.0))
    assert flop_limits(entry, "bf16") == (None, None)  # 0 is no probe
    assert flop_limits({"peak_gflops": 90.0}, "fp32") == (90.0, pytest.approx(99.0))
    assert flop_limits({"peak_gflops": 90.0}, "tf32") == (None, None)
    assert bandwidth_limits(entry, MEMORY) == (10.0, 20.0)
    assert bandwidth_limits({"bandwidth_gbps": 10}, MEMORY) == (10.0, pytest.approx(11.0))
    assert bandwidth_limits(entry, HOST_LINK) == (None, None)
    assert bandwidth_limits({"bandwidth_gbps": "fast"}, MEMORY) == (None, None)
    assert plausibility.flop_limits(None, "fp32") == (None, None)


def test_judge_boundaries_and_texts() -> None:
    assert plausibility.judge(5.0, "GB/s", None, None).kind == "unknown"
    assert plausibility.judge(110.0, "GB/s", 100.0, 200.0).kind == "ok"  # exactly probe x 1.1
    assert plausibility.judge(110.1, "GB/s", 100.0, 200.0).kind == "probe-low"
    assert plausibility.judge(200.0, "GB/s", 100.0, 200.0).kind == "probe-low"  # at the bound
    assert plausibility.judge(200.1, "GB/s", 100.0, 200.0).kind == "implausible"
    assert plausibility.judge(300.0, "GB/s", None, 200.0).kind == "implausible"
    assert plausibility.judge(300.0, "GB/s", 100.0, None).kind == "probe-low"
    verdict = plausibility.judge(250.0, "GFLOP/s", 100.0, 125.0)
    assert verdict.implausible and verdict.text() == (
        "IMPLAUSIBLE: 250 GFLOP/s > physical bound 125 (measured probe 100)")
    low = plausibility.judge(120.0, "GFLOP/s", 100.0, 125.0)
    assert not low.implausible and low.text() == (
        "above the probe (100 GFLOP/s): the probe was low, this result is the ceiling")
    assert plausibility.judge(1.0, "GB/s", 100.0, 200.0).text() == ""


def test_judge_case_judges_every_rate_it_has() -> None:
    ceilings = Ceilings.from_json({"cuda:0": {
        "peak_gflops_by_precision": {"fp32": 100.0, "bf16": 400.0}, "bandwidth_gbps": 10.0,
        "h2d_pinned_gbps": 5.0}})
    both = plausibility.judge_case(90.0, 9.0, "fp32", "cuda:0", ceilings)
    assert [(v.metric, v.kind) for v in both] == [("GFLOP/s", "ok"), ("GB/s", "ok")]
    bf16 = plausibility.judge_case(300.0, None, "bf16", "cuda:0", ceilings)
    assert [(v.metric, v.probe, v.kind) for v in bf16] == [("GFLOP/s", 400.0, "ok")]
    declared = plausibility.judge_case(300.0, None, "fast", "cuda:0", ceilings,
                                       precisions={"fast": "bf16"})
    assert declared[0].probe == 400.0
    pinned = plausibility.judge_case(None, 7.0, "fp32", "cuda:0", ceilings, HOST_LINK)
    assert [(v.probe, v.kind) for v in pinned] == [(5.0, "implausible")]
    assert plausibility.judge_case(float("nan"), float("nan"), "fp32", "cuda:0", ceilings) == []
    assert plausibility.judge_case(None, None, "fp32", "cuda:0", ceilings) == []
    assert plausibility.judge_case(90.0, None, "fp32", "cpu", ceilings)[0].kind == "unknown"


# --- the verdict tables (harness.report.tables), without drawing a report -----------------------

def gpu_fixture(tmp_path: Path) -> pd.DataFrame:
    run = write_fixture_run(tmp_path / "gpu", GPU_MACHINE, gpu_machine_results())
    return stats_of(run)[0]


def test_gap_significance_needs_three_samples_each() -> None:
    def case(samples: int, q1: float, q3: float) -> pd.Series:
        return pd.Series({"samples": samples, "q1_s": q1, "q3_s": q3, "median_s": (q1 + q3) / 2})

    def judged(first: pd.Series, second: pd.Series) -> dict[str, bool]:
        found = t.gap_significance(first, second)
        return {"judged": found["judged"], "significant": found["significant"]}
    assert judged(case(3, 1.0, 1.1), case(3, 2.0, 2.1)) == {"judged": True, "significant": True}
    assert judged(case(3, 1.0, 2.0), case(3, 1.5, 2.1)) == {"judged": True, "significant": False}
    assert judged(case(2, 1.0, 1.1), case(9, 2.0, 2.1)) == {"judged": False,
                                                            "significant": False}
    assert judged(case(9, 1.0, 1.1), case(2, 2.0, 2.1)) == {"judged": False,
                                                            "significant": False}


def test_find_crossover_counts_and_orders_the_sizes() -> None:
    curves = pd.DataFrame({"size": [1024, 64, 256, 512, 128],
                           "cpu_s": [9.0, 1.0, 9.0, 9.0, 2.0],
                           "gpu_s": [5.0, 5.0, 5.0, float("nan"), 5.0]})
    verdict = xo.find_crossover(curves)
    assert (verdict.kind, verdict.size, verdict.sizes_compared) == ("crossover", 256, 4)
    always = xo.find_crossover(pd.DataFrame({"size": [8, 4], "cpu_s": [9.0, 9.0],
                                            "gpu_s": [1.0, 1.0]}))
    assert (always.kind, always.size, always.sizes_compared) == ("gpu-always", 4, 2)
    never = xo.find_crossover(pd.DataFrame({"size": [4], "cpu_s": [1.0], "gpu_s": [1.0]}))
    assert (never.kind, never.size, never.sizes_compared) == ("cpu-always", None, 1)  # a tie
    mixed = xo.find_crossover(pd.DataFrame({"size": [4, 8], "cpu_s": [9.0, 1.0],
                                           "gpu_s": [1.0, 9.0]}))
    assert (mixed.kind, mixed.size, mixed.sizes_compared) == ("mixed", None, 2)
    assert xo.find_crossover(pd.DataFrame({"size": [4], "cpu_s": [1.0],
                                          "gpu_s": [float("nan")]})).sizes_compared == 0


def test_crossover_texts() -> None:
    assert xo.Crossover("gpu-always", 4, 1).text("n") == "GPU faster at the one size measured"
    assert xo.Crossover("cpu-always", None, 1).text("n") == "CPU faster at the one size measured"
    assert xo.Crossover("gpu-always", 4, 2).text("n") == "GPU faster at every n measured"
    assert xo.Crossover("cpu-always", None, 3).text("batch_size") == (
        "no crossover in range: CPU faster at every batch_size measured")
    assert xo.Crossover("crossover", 4096, 3).text("n") == "GPU faster from n=4096 up"
    assert xo.Crossover("crossover", 256, 1).text("n") == "GPU faster from n=256 up"
    assert xo.Crossover("mixed", None, 1).text("n") == (
        "no crossover in range: GPU leads only at some sizes, not the largest")
    assert xo.Crossover("no-overlap").text("n") == "no sizes measured on both CPU and GPU"


def test_crossovers_pair_the_best_cells_and_each_framework(tmp_path: Path) -> None:
    verdicts = xo.crossovers(gpu_fixture(tmp_path)).set_index("framework")
    assert list(verdicts.index) == ["best", "torch", "tensorflow"]
    best = verdicts.loc["best"]
    assert (best["experiment"], best["machine"], best["variant"], best["sweep"]) == (
        "matmul", GPU_MACHINE, "fp32", "n")
    assert (best["kind"], best["size"], best["sizes_compared"]) == ("crossover", 256, 4)
    assert best["has_cpu"] and best["has_gpu"] and not best["cpu_is_other_variant"]
    assert best["largest_size"] == 4096
    assert best["speedup_at_largest"] == pytest.approx(cpu_seconds(4096) / gpu_seconds(4096))
    assert best["excluded"] == ["tensorflow cuda:0 invalid at 4096: check failed: relative "
                                "error 5e-01"]
    assert best["verdict"].text("n") == "GPU faster from n=256 up"
    tensorflow = verdicts.loc["tensorflow"]
    assert (tensorflow["kind"], tensorflow["size"], tensorflow["sizes_compared"]) == (
        "crossover", 256, 3)  # its 4096 case is invalid: not compared
    assert tensorflow["largest_size"] == 1024
    assert tensorflow["speedup_at_largest"] == pytest.approx(
        cpu_seconds(1024) / (1.5 * gpu_seconds(1024)))
    assert verdicts.loc["torch", "excluded"] == []


def test_a_machine_without_gpu_cells_has_no_overlap(tmp_path: Path) -> None:
    run = write_fixture_run(tmp_path / "cpu", CPU_MACHINE, cpu_machine_results())
    [best] = xo.crossovers(stats_of(run)[0]).to_dict("records")
    assert best["kind"] == "no-overlap" and best["has_cpu"] and not best["has_gpu"]
    assert best["largest_size"] is None and best["speedup_at_largest"] is None


def test_fastest_by_size_names_the_winner_runner_up_and_gap(tmp_path: Path) -> None:
    fastest = fx.fastest_by_size(gpu_fixture(tmp_path))
    assert list(fastest["size_label"]) == ["64", "256", "1024", "4096"]
    row = fastest.set_index("size_label").loc["4096"]
    assert (row["experiment"], row["machine"], row["variant"]) == ("matmul", GPU_MACHINE, "fp32")
    assert row["best"] == "torch cuda:0" and row["size_value"] == 4096
    assert row["best_median_s"] == pytest.approx(gpu_seconds(4096))
    assert row["best_iqr_s"] == pytest.approx(0.02 * gpu_seconds(4096))
    assert row["cells"] == 3 and row["runner_up"].endswith(" cpu")
    assert row["runner_up_median_s"] == pytest.approx(cpu_seconds(4096))
    assert row["ratio"] == pytest.approx(cpu_seconds(4096) / gpu_seconds(4096))
    assert row["judged"] and row["significant"] and row["device_verdict"]
    assert row["excluded"] == ["tensorflow cuda:0 invalid at 4096: check failed: relative "
                               "error 5e-01"]
    assert row["suspect"] == []
    small = fastest.set_index("size_label").loc["64"]
    assert small["cells"] == 4 and small["best"].endswith(" cpu") and small["excluded"] == []


def one_size_stats(tmp_path: Path, results: list) -> pd.DataFrame:
    run = write_fixture_run(tmp_path / "one", GPU_MACHINE, results, params={"n": [64]})
    return stats_of(run)[0]


def test_a_lone_valid_cell_is_shown_only_beside_a_failure(tmp_path: Path) -> None:
    alone = [make_result("matmul", "torch", "cpu", [make_case({"n": 64}, 1e-3)])]
    assert fx.fastest_by_size(one_size_stats(tmp_path / "a", alone)).empty
    failed_gpu = [*alone, make_result("matmul", "torch", "cuda:0", [make_case(
        {"n": 64}, 1e-4, status="invalid", reason="check failed", passed=False)])]
    [row] = fx.fastest_by_size(one_size_stats(tmp_path / "b", failed_gpu)).to_dict("records")
    assert row["best"] == "torch cpu" and row["cells"] == 1 and row["runner_up"] == ""
    assert math.isnan(row["ratio"]) and math.isnan(row["runner_up_median_s"])
    assert not row["judged"] and not row["significant"]
    assert not row["device_verdict"]  # the GPU did not run this race
    assert row["excluded"] == ["torch cuda:0 invalid at 64: check failed"]


def test_a_suspect_cell_is_listed_with_its_reason(tmp_path: Path) -> None:
    results = [make_result("matmul", "torch", "cpu", [make_case({"n": 64}, 1e-3,
                                                               suspect="drift")]),
               make_result("matmul", "numpy", "cpu", [make_case({"n": 64}, 2e-3)])]
    [row] = fx.fastest_by_size(one_size_stats(tmp_path, results)).to_dict("records")
    assert row["suspect"] == ["torch cpu: drift"] and row["ratio"] == pytest.approx(2.0)


def gpu_curve(medians: dict[int, float], flops: dict[int, float] | None = None,
              nbytes: dict[int, float] | None = None) -> pd.DataFrame:
    sizes = list(medians)
    return pd.DataFrame({"size_value": sizes, "median_s": [medians[n] for n in sizes],
                         "flops": [(flops or {}).get(n, float("nan")) for n in sizes],
                         "bytes": [(nbytes or {}).get(n, float("nan")) for n in sizes]})


def test_flat_run_thresholds() -> None:
    flat = xo._flat_run(gpu_curve({1: 1.0, 2: 1.5, 8: 1.99}, flops={1: 1.0, 2: 2.0, 8: 8.0}))
    assert flat == {"from_size": 1, "to_size": 8, "level_s": 1.5, "work_growth": 8.0,
                    "time_growth": 1.99}
    assert xo._flat_run(gpu_curve({1: 1.0, 8: 2.0}, flops={1: 1.0, 8: 8.0})) is None
    assert xo._flat_run(gpu_curve({1: 1.0, 8: 1.0}, flops={1: 1.0, 8: 7.9})) is None
    assert xo._flat_run(gpu_curve({1: 1.0})) is None
    # Work from bytes where no FLOPs are counted, else from the size itself.
    assert xo._flat_run(gpu_curve({1: 1.0, 2: 1.0}, nbytes={1: 1.0, 2: 10.0}))["work_growth"] \
        == 10.0
    assert xo._flat_run(gpu_curve({1: 1.0, 2: 1.0}, flops={1: 0.0, 2: 0.0},
                                 nbytes={1: 1.0, 2: 10.0}))["work_growth"] == 10.0
    assert xo._flat_run(gpu_curve({1: 1.0, 16: 1.0}))["work_growth"] == 16.0
    assert xo._flat_run(gpu_curve({1: 1.0, 16: 1.0}, flops={1: 0.0, 16: 0.0},
                                 nbytes={1: 0.0, 16: 0.0}))["work_growth"] == 16.0


def test_flat_time_is_looked_for_where_the_cpu_wins_only(tmp_path: Path) -> None:
    sizes = [16, 32, 64, 128, 1024]
    def run_with(gpu: Any, name: str) -> pd.DataFrame:
        results = [make_result("matmul", "torch", "cpu", [make_case({"n": n}, cpu_seconds(n))
                                                          for n in sizes]),
                   make_result("matmul", "torch", "cuda:0", [make_case({"n": n}, gpu(n))
                                                             for n in sizes])]
        return stats_of(write_fixture_run(tmp_path / name, GPU_MACHINE, results,
                                          params={"n": sizes}))[0]
    stats = run_with(gpu_seconds, "crossover")
    [row] = xo.flat_time_below_crossover(stats, xo.crossovers(stats)).to_dict("records")
    assert (row["experiment"], row["machine"], row["variant"], row["framework"],
            row["sweep"]) == ("matmul", GPU_MACHINE, "fp32", "torch", "n")
    assert (row["from_size"], row["to_size"]) == (16, 64)  # below the crossover at 128 only
    assert row["work_growth"] == pytest.approx(64.0)
    # A GPU that loses everywhere on a flat floor: its whole curve is the explanation.
    always_slower = run_with(lambda n: 0.5, "cpu-always")
    [row] = xo.flat_time_below_crossover(always_slower,
                                        xo.crossovers(always_slower)).to_dict("records")
    assert (row["from_size"], row["to_size"], row["level_s"]) == (16, 1024, 0.5)
    # A GPU faster everywhere needs no explanation, flat or not.
    always_faster = run_with(lambda n: 1e-9, "gpu-always")
    assert xo.flat_time_below_crossover(always_faster, xo.crossovers(always_faster)).empty


def test_ratio_table_speedups_and_framework_pairs(tmp_path: Path) -> None:
    ratios = rx.ratio_table(gpu_fixture(tmp_path))
    assert list(ratios.columns) == ["experiment", "machine", "kind", "label", "size_label",
                                    "size_value", "ratio"]
    speedups = ratios[ratios["kind"] == "gpu_speedup"].set_index(["label", "size_label"])
    assert speedups.loc[("torch fp32", "4096"), "ratio"] == pytest.approx(
        cpu_seconds(4096) / gpu_seconds(4096))
    assert speedups.loc[("torch fp32", "4096"), "size_value"] == 4096
    assert speedups.loc[("tensorflow fp32", "64"), "ratio"] == pytest.approx(
        cpu_seconds(64) / (1.5 * gpu_seconds(64)))
    assert ("tensorflow fp32", "4096") not in speedups.index  # invalid there
    assert len(speedups) == 4 + 3
    pairs = ratios[ratios["kind"] == "framework_ratio"].set_index(["label", "size_label"])
    assert pairs.loc[("torch / tensorflow: cuda:0 fp32", "256"), "ratio"] == pytest.approx(
        1 / 1.5)
    assert pairs.loc[("torch / tensorflow: cpu fp32", "256"), "ratio"] == pytest.approx(1.0)
    assert set(ratios["experiment"]) == {"matmul"} and set(ratios["machine"]) == {GPU_MACHINE}


def test_gpu_only_variants_and_other_devices_are_labelled(tmp_path: Path) -> None:
    results = [make_result("matmul", "torch", "cpu", [make_case({"n": 64}, 4e-3)]),
               make_result("matmul", "torch", "cuda:0", [make_case({"n": 64}, 1e-3)],
                           variant="tf32"),
               make_result("matmul", "torch", "cuda:1", [make_case({"n": 64}, 2e-3)])]
    ratios = rx.ratio_table(one_size_stats(tmp_path, results))
    speedups = dict(zip(ratios.loc[ratios["kind"] == "gpu_speedup", "label"],
                        ratios.loc[ratios["kind"] == "gpu_speedup", "ratio"]))
    assert speedups == {"torch tf32 (vs cpu fp32)": pytest.approx(4.0),
                        "torch fp32 cuda:1": pytest.approx(2.0)}


def test_peak_fractions_judge_each_rate_and_raise_a_low_probe(tmp_path: Path) -> None:
    results = [make_result("matmul", "torch", "cpu", [make_case({"n": n}, cpu_seconds(n))
                                                      for n in SIZES])]
    stats = stats_of(write_fixture_run(tmp_path / "cpu", CPU_MACHINE, results))[0]
    rates = {n: 2.0 * n**3 / cpu_seconds(n) / 1e9 for n in SIZES}
    ceilings = {CPU_MACHINE: Ceilings.from_json({"cpu": {
        "peak_gflops_by_precision": {"fp32": 60.0},
        "physical": {"gflops_by_precision": {"fp32": 99.0}}}})}
    frame = t.peak_fractions(stats, ceilings).set_index("size_label")
    assert list(frame.columns) == [c for c in t.PEAK_COLUMNS if c != "size_label"]
    assert frame.loc["4096", "kind"] == "implausible"  # ~100 GFLOP/s > the 99 bound
    assert frame.loc["64", "kind"] == "probe-low" and frame.loc["4096", "metric"] == "GFLOP/s"
    assert frame.loc["64", "probe"] == 60.0 and frame.loc["64", "bound"] == 99.0
    best_plausible = max(rate for rate in rates.values() if rate <= 99.0)
    assert frame.loc["64", "peak"] == pytest.approx(best_plausible)
    assert frame.loc["64", "fraction"] == pytest.approx(rates[64] / best_plausible)
    assert frame.loc["4096", "rate"] == pytest.approx(rates[4096])
    assert frame.loc["4096", "sweep"] == "n"
    # With a high probe, the probe is the peak.
    high = {CPU_MACHINE: Ceilings.from_json({"cpu": {
        "peak_gflops_by_precision": {"fp32": 200.0}}})}
    frame = t.peak_fractions(stats, high).set_index("size_label")
    assert set(frame["kind"]) == {"ok"} and set(frame["peak"]) == {200.0}
    assert frame.loc["1024", "fraction"] == pytest.approx(rates[1024] / 200.0)
    # No ceilings for this machine: nothing to judge, an empty frame with the columns.
    empty = t.peak_fractions(stats, {"elsewhere": high[CPU_MACHINE]})
    assert empty.empty and list(empty.columns) == t.PEAK_COLUMNS


def test_ceiling_lookups_per_device_and_precision() -> None:
    ceilings = Ceilings.from_json({"cuda:0": {
        "peak_gflops_by_precision": {"fp32": 50.0, "bf16": 800.0}, "h2d_pinned_gbps": 25.0}})
    assert t.flop_ceiling(ceilings, "cuda:0", "bf16-autocast") == 800.0
    assert t.flop_ceiling(ceilings, "cuda:0", "fp32") == 50.0
    assert t.flop_ceiling(ceilings, "cuda:0", "fp16") is None
    assert t.flop_ceiling(ceilings, "cpu", "fp32") is None
    assert t.ceiling_for(ceilings, "cuda:0", HOST_LINK) == 25.0
    assert t.ceiling_for(ceilings, "cuda:0", MEMORY) is None


def test_load_cases_keeps_file_order_and_skips_cell_level_rows(tmp_path: Path) -> None:
    failed = cell_result("numpy", {64: [1.0]}, status="error")
    failed["cases"] = []  # a cell that died before its first case: one cell-level row
    run = write_run(tmp_path / "run", [cell_result("torch", {128: [2.0] * 3, 64: [1.0] * 3}),
                                       failed])
    loaded = diff.load_cases(run)
    assert loaded.name == str(run)
    keys = list(loaded.statuses)
    assert keys == [CaseKey("matmul", "", "fp32", "torch", "cpu", "128"),
                    CaseKey("matmul", "", "fp32", "torch", "cpu", "64")]
    assert loaded.samples[keys[0]] == [2.0] * 3 and loaded.statuses[keys[1]] == "ok"


def test_diff_runs_default_threshold_is_five_percent(tmp_path: Path) -> None:
    a = [1.0, 1.001, 0.999, 1.0005, 0.9995, 1.0, 1.0002, 0.9998]
    run_a = write_run(tmp_path / "a", [cell_result("torch", {64: a})])
    run_b = write_run(tmp_path / "b", [cell_result("torch", {64: [1.055 * x for x in a]})])
    assert diff.diff_runs(run_a, run_b).cases[0].verdict == "slower"  # 5.5% > 5%
    assert diff.diff_runs(run_a, run_b, threshold_pct=6.0).cases[0].verdict == "same"
    assert diff.diff_runs(run_a, run_b).fail_on_regression_pct is None


def test_fastest_keeps_variants_in_run_order_past_a_lone_cell(tmp_path: Path) -> None:
    results = [make_result("matmul", "torch", "cpu", [make_case({"n": 64}, 1e-3)],
                           variant="fp32"),  # alone in its race: no row
               make_result("matmul", "torch", "cpu", [make_case({"n": 64}, 1e-3)],
                           variant="bf16"),
               make_result("matmul", "numpy", "cpu", [make_case({"n": 64}, 3e-3)],
                           variant="bf16"),
               make_result("matmul", "torch", "cpu", [make_case({"n": 64}, 2e-3)],
                           variant="as-written"),
               make_result("matmul", "numpy", "cpu", [make_case({"n": 64}, 1e-3)],
                           variant="as-written")]
    fastest = fx.fastest_by_size(one_size_stats(tmp_path, results))
    assert list(fastest["variant"]) == ["bf16", "as-written"]  # run order, not alphabetical
    assert list(fastest["best"]) == ["torch cpu", "numpy cpu"]


def test_peak_fractions_judge_byte_rates_against_bandwidth(tmp_path: Path) -> None:
    results = [make_result("matmul", "torch", "cpu", [make_case({"n": 64}, 0.1)])]
    run = write_fixture_run(tmp_path / "bytes", CPU_MACHINE, results, params={"n": [64]},
                            work=lambda case: {"bytes": 2e9})
    stats = stats_of(run)[0]
    memory = {CPU_MACHINE: Ceilings({"cpu": DeviceCeiling("cpu", Peaks(gbps={MEMORY: 40.0}))})}
    [row] = t.peak_fractions(stats, memory).to_dict("records")
    assert (row["metric"], row["rate"], row["probe"], row["kind"]) == ("GB/s", 20.0, 40.0, "ok")
    assert row["fraction"] == pytest.approx(0.5)
    link = {CPU_MACHINE: Ceilings({"cpu": DeviceCeiling("cpu", Peaks(gbps={HOST_LINK: 10.0}))})}
    pinned = t.peak_fractions(stats, link, bandwidth_key=HOST_LINK)
    assert list(pinned["kind"]) == ["implausible"]  # 20 GB/s over a 10 GB/s copy, +10% margin
