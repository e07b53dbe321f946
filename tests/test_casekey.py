"""A case's identity is one frozen CaseKey, whichever record it is read from, and the run's end
reads the run in memory: its measurements typed from its rows as from its CSV, its predictions
those the report phrases, and neither harness.api nor harness/run/ imports the report."""

from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis import casetable
from harness.analysis.costmodel import size_of
from harness.analysis.crossover import run_predictions
from harness.data import store
from harness.data.casekey import CASE_COLUMNS, CELL_COLUMNS, CaseKey
from harness.data.measurements import measurements_of_rows, read_measurements
from harness.report import folder_predictions as report_predictions
from harness.report.load import load_runs
from harness.spec import Status
from tests.synthetic_runs import (
    GPU_MACHINE,
    gpu_machine_results,
    make_case,
    make_result,
    matmul_work,
    write_fixture_run,
)

HARNESS = Path(__file__).resolve().parents[1] / "harness"


@dataclasses.dataclass(frozen=True)
class WrittenRun:
    """A run folder and the rows its measurements.csv was written from (a recorder's)."""

    path: Path
    rows: list[store.MeasurementRow]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> WrittenRun:
    results = gpu_machine_results()
    path = write_fixture_run(tmp_path_factory.mktemp("casekey") / "run", GPU_MACHINE, results)
    rows = [row for result in store.load_run(path).cells for row in store.measurement_rows(
        path.name, GPU_MACHINE, "n", result,
        {index: matmul_work(case.case) for index, case in enumerate(result.cases)})]
    return WrittenRun(path, rows)


@pytest.fixture(scope="module")
def gpu_run(written: WrittenRun) -> Path:
    return written.path


def test_a_case_has_one_key_from_its_result_its_csv_rows_and_its_table_row(
        gpu_run: Path) -> None:
    document = store.load_run(gpu_run)
    from_results = [CaseKey.in_run(document, cell, case)
                    for cell in document.cells for case in cell.cases]
    assert len(set(from_results)) == len(from_results) == 16  # every case its own key
    # A cell's key is what its cases' keys share: their key without the size.
    assert {CaseKey.of_cell(cell, document.machine) for cell in document.cells if cell.cases} == {
        key.without("size_label") for key in from_results}
    csv_rows = read_measurements(gpu_run)
    from_csv = {CaseKey.from_row(row)
                for row in csv_rows[csv_rows["size_label"] != ""].to_dict("records")}
    run_set = load_runs([gpu_run])
    prepared, _ = casetable.prepare(run_set.measurements,
                                    casetable.assign_experiments(run_set.runs))
    stats = casetable.case_stats(prepared)
    from_table = [CaseKey.from_row(row) for row in stats.to_dict("records")]
    # Equal keys hash equal: a dict keyed by one constructor's keys finds the others'.
    by_key = {key: "found" for key in from_results}
    assert all(by_key[key] == "found" for key in [*from_csv, *from_table])
    assert set(from_table) == from_csv == set(from_results)
    torch_gpu = CaseKey("matmul", GPU_MACHINE, "fp32", "torch", "cuda:0", "256")
    assert torch_gpu in by_key and hash(torch_gpu) == hash(dataclasses.replace(torch_gpu))


def test_the_case_table_rows_typed_are_keyed_by_their_case(gpu_run: Path) -> None:
    document = store.load_run(gpu_run)
    run_set = load_runs([gpu_run])
    prepared, _ = casetable.prepare(run_set.measurements,
                                    casetable.assign_experiments(run_set.runs))
    rows = casetable.case_rows(casetable.case_stats(prepared))
    for cell in document.cells:
        for case in cell.cases:
            row = rows[CaseKey.in_run(document, cell, case)]
            assert row.status == case.status.value and row.samples == len(case.samples)
            if case.samples and case.status.value == "ok":
                assert row.valid and row.median_s == case.stats.median
                assert row.noise.median == row.median_s and row.noise.samples == row.samples
                assert size_of(row) == case.case["n"]
    invalid = rows[CaseKey("matmul", GPU_MACHINE, "fp32", "tensorflow", "cuda:0", "4096")]
    assert invalid.status == "invalid" and not invalid.valid and invalid.reason
    assert invalid.flops == 2 * 4096**3  # synthetic_runs.matmul_work's count
    never_timed = casetable.CaseRow.of({"variant": "fp32", "status": "error", "flops": 0})
    assert math.isnan(never_timed.median_s) and never_timed.flops is None  # 0: not counted
    with pytest.raises(ValueError):
        size_of(never_timed)  # no size: no point of a sweep


def test_the_rows_advise_reads_are_the_case_tables_with_what_its_csv_cannot_carry(
        gpu_run: Path) -> None:
    document = store.load_run(gpu_run)
    run_set = load_runs([gpu_run])
    prepared, _ = casetable.prepare(run_set.measurements,
                                    casetable.assign_experiments(run_set.runs))
    table = casetable.case_rows(casetable.case_stats(prepared))
    stopped = dataclasses.replace(document.cells[0], cases=[], status=Status.TIMEOUT,
                                  reason="stopped by the budget")
    document.cells.append(stopped)
    rows = casetable.run_rows(document)
    # In the run's order: each case, and a cell without cases (unavailable here) as one row.
    assert [row.key for row in rows] == [
        key for cell in document.cells for key in [CaseKey.in_run(document, cell, case)
                                                   for case in cell.cases]
        or [CaseKey.of_cell(cell, document.machine)]]
    by_key = {row.key: row for row in rows}
    timed = 0
    for cell, case in [(owner, case) for owner in document.cells for case in owner.cases]:
        key = CaseKey.in_run(document, cell, case)
        row, same = by_key[key], table[key]
        assert (row.status, row.samples, row.noisy) == (same.status, same.samples, same.noisy)
        assert (row.size, row.check, row.profile) == (case.case["n"], case.check,
                                                      case.device_profile)
        if row.samples:  # the table's figures, to the bit (NaN compares unequal)
            timed += 1
            assert (row.median_s, row.q1_s, row.q3_s, row.call_median_s) == (
                same.median_s, same.q1_s, same.q3_s, same.call_median_s)
            assert row.medians_by_round == same.medians_by_round
            assert row.cold_call_s == case.cold_seconds and row.timed
    assert timed >= 10
    # A cell stopped before its first case: one row, with no size and no samples.
    last = rows[-1]
    assert last.key == CaseKey.of_cell(stopped, document.machine) and last.size is None
    assert (last.status, last.cell_status, last.reason) == ("timeout", "timeout",
                                                             "stopped by the budget")
    assert last.samples == 0 and not last.timed


def test_a_key_is_frozen_and_blanks_what_it_matches_across() -> None:
    key = CaseKey.from_row({"workload": "matmul", "machine": "box", "variant": "fp32",
                            "framework": "torch", "device": "cpu", "size": 512.0})
    assert key == CaseKey("matmul", "box", "fp32", "torch", "cpu", "512")  # 512.0 read as 512
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.size_label = "1024"  # type: ignore[misc]
    assert key.without("machine") == CaseKey("matmul", "", "fp32", "torch", "cpu", "512")
    assert key.without("machine") != key and key.without("size_label").size_label == ""
    # A report's row names the experiment, which wins over the workload it belongs to.
    assert CaseKey.from_row({"experiment": "matmul (dtype=bf16)", "workload": "matmul",
                             "size_label": ""}).experiment == "matmul (dtype=bf16)"
    assert CASE_COLUMNS == (*CELL_COLUMNS, "size_label") == tuple(
        field.name for field in dataclasses.fields(CaseKey))


def test_a_runs_rows_in_memory_type_as_its_csv_reads(written: WrittenRun) -> None:
    pd.testing.assert_frame_equal(measurements_of_rows(written.rows),
                                  read_measurements(written.path))


def test_predictions_from_the_run_in_memory_are_those_the_report_phrases(
        written: WrittenRun) -> None:
    document = store.load_run(written.path)
    found = run_predictions(document, measurements_of_rows(written.rows), document.run_id)
    assert found and found == report_predictions(written.path)
    assert {record["framework"] for record in found} == {"torch", "tensorflow"}


def test_a_run_with_one_size_predicts_nothing(tmp_path: Path) -> None:
    run = write_fixture_run(tmp_path / "one", GPU_MACHINE, [
        make_result("matmul", "torch", device, [make_case({"n": 64}, 1e-3)])
        for device in ("cpu", "cuda:0")])
    document = store.load_run(run)
    assert run_predictions(document, read_measurements(run), document.run_id) == []


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at its top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_api_and_the_runner_import_nothing_from_the_report() -> None:
    files = [HARNESS / "api.py", *sorted((HARNESS / "run").rglob("*.py"))]
    assert len(files) > 10
    offenders = {str(path.relative_to(HARNESS)): sorted(
        name for name in imported_modules(path)
        if name == "harness.report" or name.startswith("harness.report."))
        for path in files}
    assert {path: names for path, names in offenders.items() if names} == {}


def test_the_import_rule_sees_an_import_inside_a_function(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("def later():\n    from harness.report import draw_report\n")
    assert "harness.report.draw_report" in imported_modules(planted)
    planted.write_text("from harness import report\n")
    assert "harness.report" in imported_modules(planted)
