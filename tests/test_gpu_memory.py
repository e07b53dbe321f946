"""Peak device memory on the GPU path, with a fake GPU whose peaks are known: the worker resets
and reads them per case, the store writes them, the report's memory table shows them."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis import casetable
from harness.data import store
from harness.data.results import CellResult
from harness.report import render_report
from harness.report.load import load_runs
from harness.report.views.memory import memory_table
from harness.run.runner import run_worker
from harness.spec import Cell
from tests.fakes.gpubackend import device as fake_gpu
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn
from tests.quick_options import quick_options
from tests.synthetic_runs import write_run


def fake_gpu_result(device: str) -> dict:
    cell = Cell("fault", "ok", "fakegpu", device, {"size": [1, 2], "pid_file": ""})
    result = run_worker(cell, quick_options(60)).to_dict()
    assert result["status"] == "ok", result["reason"]
    return result


@pytest.fixture(scope="module")
def gpu_result() -> dict:
    return fake_gpu_result("cuda:0")


def test_each_gpu_case_records_the_peaks_after_a_reset(gpu_result: dict) -> None:
    for case in gpu_result["cases"]:
        assert case["peak_device_allocated_bytes"] == fake_gpu.PEAK_ALLOCATED
        assert case["peak_device_reserved_bytes"] == fake_gpu.PEAK_RESERVED


def test_a_cpu_case_has_no_device_peak() -> None:
    result = fake_gpu_result("cpu")
    for case in result["cases"]:
        assert case["peak_device_allocated_bytes"] is None
        assert case["peak_device_reserved_bytes"] is None


def test_the_peaks_reach_the_store_and_the_report(gpu_result: dict, tmp_path: Path) -> None:
    host = {"machine_label": "gpubox (fake gpu)", "hostname": "gpubox", "cpu_model": "Synth",
            "cores": 2, "memory_bytes": 2**33, "python": "3.11", "gpus": ["fake gpu"],
            "os": "Linux"}
    run = write_run(tmp_path / "run", [gpu_result], host, params={"size": [1, 2]},
                    workload="fault", sweep="size", work=lambda case: {})
    rows = [row for row in store.measurement_rows("run", "gpubox", "size",
                                                   CellResult.from_dict(gpu_result), {})
            if row["phase"] == "warm"]
    assert rows and {row["peak_device_allocated_bytes"] for row in rows} == {
        fake_gpu.PEAK_ALLOCATED}
    run_set = load_runs([run])
    runs = casetable.assign_experiments(run_set.runs)
    prepared, _ = casetable.prepare(run_set.measurements, runs)
    [row] = memory_table(prepared).to_dict("records")
    assert (row["framework"], row["device"]) == ("fakegpu", "cuda:0")
    assert row["peak_device_allocated_bytes"] == fake_gpu.PEAK_ALLOCATED
    assert row["peak_device_reserved_bytes"] == fake_gpu.PEAK_RESERVED
    render_report([run], tmp_path / "out")
    summary = (tmp_path / "out" / "summary.md").read_text()
    memory_rows = [line for line in summary.split("## Peak memory")[1].splitlines()
                   if line.startswith("| fault |") and "fakegpu cuda:0" in line]
    assert len(memory_rows) == 1 and "| 96 MiB | 128 MiB |" in memory_rows[0], summary
