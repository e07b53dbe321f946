"""The report's measured attribution: known device figures in, known parts and verdicts out."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from harness.analysis import casetable
from harness.report import render_report
from harness.report.load import load_runs
from harness.report.views.devicetime import attribution_table
from tests.synthetic_runs import cell_result, write_run

# Per call on the GPU: (wall, busy, copies, kernels); at n=128 the device works 40% of the time.
GPU_FIGURES = {64: (1.0e-3, 0.9e-3, 0.0, 4.0), 128: (2.0e-3, 0.8e-3, 0.2e-3, 10.0)}
CPU_WALL = {64: 1.5e-3, 128: 3.0e-3}


def gpu_result() -> dict:
    result = cell_result("torch", {n: [wall] * 5 for n, (wall, *_) in GPU_FIGURES.items()},
                         device="cuda:0")
    for case in result["cases"]:
        _, busy, copies, kernels = GPU_FIGURES[case["case"]["n"]]
        case["device_profile"] = {"calls": 8, "busy_seconds": busy, "copy_seconds": copies,
                                  "kernels_per_call": kernels, "launches_per_call": kernels,
                                  "span_seconds": None, "tool": "test"}
    return result


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    cpu = cell_result("torch", {n: [wall] * 5 for n, wall in CPU_WALL.items()})
    return write_run(tmp_path / "run", [cpu, gpu_result()])


def test_attribution_splits_gpu_cases_and_leaves_cpu_cases_whole(run_dir: Path) -> None:
    run_set = load_runs([run_dir])
    runs = casetable.assign_experiments(run_set.runs)
    prepared, _ = casetable.prepare(run_set.measurements, runs)
    table = attribution_table(casetable.case_stats(prepared), prepared, {})
    gpu = table[(table["device"] == "cuda:0") & (table["size_label"] == "128")].iloc[0]
    assert gpu["busy_share"] == pytest.approx(0.4)
    assert gpu["copies_s"] == pytest.approx(0.2e-3)
    assert gpu["compute_s"] == pytest.approx(0.6e-3)
    assert gpu["host_s"] == pytest.approx(1.2e-3)
    assert gpu["kernels_per_step"] == 10 and gpu["kind"] == "launch-bound"
    assert gpu["cold_extra_s"] == pytest.approx(18e-3)  # cold call is 10x a warm one
    fast = table[(table["device"] == "cuda:0") & (table["size_label"] == "64")].iloc[0]
    assert fast["kind"] == "device-bound"
    cpu = table[table["device"] == "cpu"].iloc[0]
    assert cpu["host_compute_s"] == pytest.approx(cpu["wall_step_s"])
    assert pd.isna(cpu.get("busy_step_s"))


def test_summary_says_what_is_measured_and_draws_both_figures(run_dir: Path,
                                                              tmp_path: Path) -> None:
    out = tmp_path / "report"
    written = render_report([run_dir], out)
    summary = (out / "summary.md").read_text()
    assert "## Where the time goes, measured (two clocks)" in summary
    assert "Derived: device compute = busy - copies" in summary
    assert "| torch cuda:0 fp32 | 128 | 2 ms | 800 us | 40% | 200 us | 600 us | 1.2 ms | 10 |" \
        in summary
    assert "launch-bound: busy 800 us of 2 ms wall (40%)" in summary
    assert "| torch cpu fp32 | 128 | 3 ms | - | - | - | compute (host) |" in summary
    assert "GPU 1.5x faster" in summary  # best GPU variant vs best CPU variant
    names = {path.name for path in written}
    assert {"matmul-device-time.png", "matmul-busy-sweep.png"} <= names
    assert all((out / name).stat().st_size > 0 for name in names)


def test_cpu_only_report_has_no_device_section(tmp_path: Path) -> None:
    cpu = cell_result("torch", {64: [1e-3] * 5})
    run = write_run(tmp_path / "run", [cpu])
    render_report([run], tmp_path / "report")
    assert "two clocks" not in (tmp_path / "report" / "summary.md").read_text()
