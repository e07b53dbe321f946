"""Parquet beside the CSV, typed; `harness export` merges runs into parquet, csv or json."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.data import store
from harness.data.export import typed_frame
from tests.synthetic_runs import cell_result, write_run


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    first = write_run(tmp_path / "run-a", [cell_result("torch", {64: [1.0, 1.1, 1.2]})])
    second = write_run(tmp_path / "run-b", [cell_result("numpy", {64: [2.0, 2.1], 128: [3.0]})],
                       params={"n": [64, 128], "dtype": "float32", "extra_knob": 3})
    return first, second


def test_typed_frame_gives_known_columns_fixed_types_and_infers_the_rest() -> None:
    rows = [{"seconds": "0.5", "sample": "1", "check_passed": "True", "size": "64",
             "param_shape": "28x28", "reason": ""},
            {"seconds": "", "sample": "", "check_passed": "", "size": "128",
             "param_shape": "", "reason": "boom"}]
    frame = typed_frame(rows, ["seconds", "sample", "check_passed", "size", "param_shape",
                               "reason", "peak_device_reserved_bytes"])
    assert frame["seconds"].dtype == "float64" and pd.isna(frame["seconds"][1])
    assert str(frame["sample"].dtype) == "Int64" and frame["sample"][0] == 1
    assert str(frame["check_passed"].dtype) == "boolean" and bool(frame["check_passed"][0])
    assert list(frame["size"]) == [64, 128]
    assert list(frame["param_shape"]) == ["28x28", ""]
    assert list(frame["reason"]) == ["", "boom"]
    # Empty everywhere (a CPU run's device memory) still gets its numeric type.
    assert str(frame["peak_device_reserved_bytes"].dtype) == "Int64"


def test_every_run_folder_holds_parquet_with_the_csv_rows_and_columns(tmp_path: Path) -> None:
    run_dir, _ = two_runs(tmp_path)
    csv = pd.read_csv(run_dir / store.MEASUREMENTS_FILE)
    parquet = pd.read_parquet(run_dir / store.PARQUET_FILE)
    assert list(parquet.columns) == list(csv.columns)
    assert len(parquet) == len(csv) == 4  # cold + 3 warm
    assert parquet["seconds"].tolist() == pytest.approx(csv["seconds"].tolist())
    assert parquet["peak_host_memory_bytes"].tolist() == [200 * 2**20] * 4
    assert not list(tmp_path.glob("**/*.tmp"))  # written atomically: no leftovers


def test_export_parquet_merges_runs_with_the_union_of_columns(tmp_path: Path) -> None:
    first, second = two_runs(tmp_path)
    target = tmp_path / "merged.parquet"
    result = invoke("export", str(first), str(second), "--format", "parquet", "--out",
                    str(target))
    assert result.exit_code == 0, result.output
    merged = pd.read_parquet(target)
    assert len(merged) == 4 + 3 + 2
    assert set(merged["run_id"]) == {"run-a", "run-b"}
    assert set(merged["framework"]) == {"torch", "numpy"}
    assert merged.loc[merged["framework"] == "numpy", "size"].max() == 128
    assert merged["seconds"].dtype == "float64"


def test_export_csv_and_json_go_to_stdout(tmp_path: Path) -> None:
    first, second = two_runs(tmp_path)
    as_csv = invoke("export", str(first), str(second), "--format", "csv")
    assert as_csv.exit_code == 0, as_csv.output
    frame = pd.read_csv(io.StringIO(as_csv.stdout))
    assert len(frame) == 9 and "peak_host_memory_bytes" in frame.columns
    as_json = invoke("export", str(first), "--format", "json")
    records = json.loads(as_json.stdout)
    assert len(records) == 4 and records[0]["framework"] == "torch"
    assert records[0]["peak_device_allocated_bytes"] is None  # null, not NaN


@pytest.mark.parametrize("args, message", [
    (["--format", "xlsx"], "--format 'xlsx'"),
    (["--format", "parquet"], "needs --out"),
    (["--format", "csv", "--out", "/nonexistent-folder/x.csv"], "does not exist"),
])
def test_bad_export_requests_are_one_line_exit_2(tmp_path: Path, args: list[str],
                                                 message: str) -> None:
    first, _ = two_runs(tmp_path)
    result = invoke("export", str(first), *args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output


def test_export_of_a_folder_that_is_no_run_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = invoke("export", str(tmp_path / "empty"))
    assert result.exit_code == 2 and "not a harness run folder" in result.output
