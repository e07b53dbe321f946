"""Run folders: unique, atomic, tidy, versioned; foreign or newer folders are refused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest

from harness.data import store
from harness.data.results import SCHEMA_VERSION, CellResult, RunDocument
from harness.data.store import StoreError


def _result(status: str = "ok") -> dict:
    return {
        "cell": {"workload": "matmul", "variant": "fp32", "framework": "torch", "device": "cpu",
                 "params": {"n": [64, 128]}},
        "status": status, "reason": "", "framework_version": "2.13.0", "device_name": "cpu x",
        "cases": [
            {"case": {"n": 64}, "status": "ok", "reason": "",
             "rounds": [{"cold_seconds": 0.5, "samples": [0.1, 0.2, 0.3],
                         "calls_per_sample": 4}],
             "check": {"passed": True, "metric": "rel_error", "value": 1e-7, "bound": 1e-5}},
            {"case": {"n": 128}, "status": "error", "reason": "out of memory: boom"},
        ],
    }


def test_new_run_dirs_are_unique_and_sortable(tmp_path: Path) -> None:
    first = store.new_run_dir(tmp_path, "matmul")
    second = store.new_run_dir(tmp_path, "matmul")
    assert first != second and first.is_dir() and second.is_dir()
    assert first.name[:15] <= second.name[:15]


def test_a_run_folder_name_needs_no_quoting(tmp_path: Path) -> None:
    """A model file's spaces and brackets do not reach the folder name (issue 65)."""
    folder = store.new_run_dir(tmp_path, "model-my model (v2)'s")
    assert folder.parent == tmp_path
    assert re.fullmatch(r"\d{8}-\d{6}-model-my_model_v2_s-[0-9a-f]{6}", folder.name), folder.name


def test_atomic_write_leaves_old_file_when_serialisation_fails(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    store.write_json_atomic(target, {"a": 1})

    class Unwritable:
        def __str__(self) -> str:
            raise RuntimeError("cannot serialise")

    with pytest.raises(RuntimeError):
        store.write_json_atomic(target, {"a": Unwritable()})
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]  # no temp file left behind


def test_rows_are_tidy_one_per_sample_and_round_trip(tmp_path: Path) -> None:
    rows = store.measurement_rows("run1", "host (cpu only)", "n",
                                  CellResult.from_dict(_result("error")), {0: {"flops": 2 * 64**3}})
    store.write_measurements(tmp_path, rows)
    frame = pd.read_csv(tmp_path / store.MEASUREMENTS_FILE)
    assert set(store.BASE_COLUMNS) <= set(frame.columns)
    ok = frame[frame["size"] == 64]
    assert list(ok["phase"]) == ["cold", "warm", "warm", "warm"]
    assert list(ok["seconds"]) == [0.5, 0.1, 0.2, 0.3]
    assert ok["flops"].iloc[0] == 2 * 64**3
    failed = frame[frame["size"] == 128]
    assert list(failed["status"]) == ["error"] and failed["seconds"].isna().all()
    assert "out of memory" in failed["reason"].iloc[0]


def test_a_cell_stopped_early_gets_its_own_status_row() -> None:
    result = _result("timeout")
    result["reason"] = "no result within --timeout"
    rows = store.measurement_rows("run1", "m", "n", CellResult.from_dict(result), {})
    assert rows[-1]["status"] == "timeout" and rows[-1]["phase"] == "none"


def _valid_run(tmp_path: Path) -> Path:
    run_dir = store.new_run_dir(tmp_path, "matmul")
    store.write_run(run_dir, RunDocument(run_id=run_dir.name))
    store.write_measurements(run_dir, [])
    return run_dir


def test_read_run_accepts_a_harness_folder(tmp_path: Path) -> None:
    run_dir = _valid_run(tmp_path)
    assert store.read_run(run_dir)["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "run.json").unlink(), "no run.json"),
    (lambda d: (d / "run.json").write_text('{"schema_ver'), "corrupt"),
    (lambda d: (d / "run.json").write_text('{"hello": 1}'), "no schema_version"),
    (lambda d: (d / "run.json").write_text('{"schema_version": 99}'), "newer"),
    (lambda d: (d / "measurements.csv").unlink(), "measurements.csv"),
])
@pytest.mark.planted  # damages its run on purpose
def test_read_run_refuses_damaged_or_foreign_folders(tmp_path: Path, damage, message: str) -> None:
    run_dir = _valid_run(tmp_path)
    damage(run_dir)
    with pytest.raises(StoreError, match=message):
        store.read_run(run_dir)
