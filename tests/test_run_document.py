"""Typed run documents: every key survives a round trip, older layouts upgrade, docs/ re-renders."""

from __future__ import annotations

import copy
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from harness.data import fields, store
from harness.data.ceilings import Ceilings
from harness.data.results import SCHEMA_VERSION, CaseResult, CellResult, RunDocument
from harness.data.upgrade import (
    DEFAULT_HINTS,
    NO_DEVICE_PROFILE,
    UpgradeError,
    as_run_document,
    upgrade,
    upgrade_1_to_2,
)
from harness.spec import Status

DOCS = Path(__file__).resolve().parents[1] / "docs"
TARBALLS = [DOCS / "example" / "cpu-runs.tar.gz", DOCS / "example" / "h100-runs.tar.gz"]

# A timed case exactly as the worker writes it today (12 keys, its one round's record 5) plus
# one from a newer plugin.
WORKER_CASE: dict[str, Any] = {
    "case": {"batch_size": 32, "epochs": 1, "train_samples": 4000},
    "status": "ok", "reason": "",
    "rounds": [{"round": 0, "cold_seconds": 1.19, "samples": [1.01, 0.96, 0.93],
                "calls_per_sample": 1,
                "other_load": {"other_cores": 0.0, "steal_cores": 0.005, "seconds": 4.1}}],
    "timer_overhead_s": 0.0,
    "check": {"passed": True, "metric": "test_accuracy", "value": 0.946, "bound": 0.5},
    "suspect": "", "predicted_call_s": None,
    "extra": {"accuracy": 0.946, "steps_per_call": 938, "data_source": "embedded",
              "samples_distinct": 4000, "energy_joules": 12.5},
    "peak_device_allocated_bytes": 2**20, "peak_device_reserved_bytes": 2**21,
    "device_profile": {"calls": 1, "busy_seconds": 0.5, "copy_seconds": 0.01,
                       "kernels_per_call": 12.0, "launches_per_call": 14.0,
                       "span_seconds": 0.6, "tool": "torch.profiler"},
    "gpu_clock_mhz": 1980,  # a key no version of this harness knows
}
WORKER_CELL: dict[str, Any] = {
    "cell": {"workload": "mnist-small", "variant": "as-written", "framework": "torch",
             "device": "cuda:0", "params": {"batch_size": [32]}, "quick": True,
             "rank": 0},  # unknown key inside the cell
    "status": "ok", "reason": "", "framework_version": "2.13.0", "device_name": "H200",
    "threads": {"intra_op": 16, "inter_op": 16}, "started": 1.0, "finished": 2.0,
    "cases": [WORKER_CASE, {"case": {"batch_size": 64, "epochs": 1, "train_samples": 4000},
                            "status": "error", "reason": "out of memory"}],
    "peak_host_memory_bytes": 7 * 2**20, "device_init_seconds": 0.3,
    "peak_host_memory_source": "wait4 (measured by the runner)",
    "peak_host_memory_bytes_worker": 6 * 2**20, "power_limit_w": 700,
}
CURRENT_RUN: dict[str, Any] = {
    "schema_version": SCHEMA_VERSION, "run_id": "r1", "command": ["harness", "compare"],
    "started": 1.0, "finished": 3.0, "workload": "mnist-small", "sweep": "batch_size",
    "params": {"batch_size": [32, 64]}, "quick": True, "timeout_s": 900.0,
    "hints": {"bandwidth_ceiling": "bandwidth_gbps"},
    "frameworks": {"torch": {"color": "#0173B2", "label": "PyTorch"}},
    "host": {"machine_label": "box (H200)", "hostname": "box"},
    "ceilings": {"cuda:0": {"device": "cuda:0", "gflops_by_precision": {"fp32": 1e5}}},
    "interrupted": True, "interrupted_by": "SIGINT",
    "cells": [WORKER_CELL], "cluster": {"nodes": 1},  # unknown top-level key
    "rounds": 1, "seed": None,
}


def docs_run_dirs(tmp_path: Path) -> list[Path]:
    """Every run folder under docs/: both example tarballs, extracted (and any run.json left)."""
    for tarball in TARBALLS:
        with tarfile.open(tarball) as archive:
            # The "data" filter where this Python has it (3.10.12+, 3.11.4+): our own tarballs.
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            archive.extractall(tmp_path / tarball.name.split(".")[0], **safe)
    found = [*DOCS.glob("**/run.json"), *tmp_path.glob("**/run.json")]
    return sorted(path.parent for path in found)


def assert_contains(stored: Any, written: Any, where: str = "") -> None:
    """Every key of STORED is in WRITTEN with the same value (lists of objects item by item)."""
    if isinstance(stored, dict):
        assert isinstance(written, dict), where
        for key, value in stored.items():
            assert key in written, f"{where}/{key} lost"
            assert_contains(value, written[key], f"{where}/{key}")
    elif isinstance(stored, list) and stored and isinstance(stored[0], dict):
        assert len(stored) == len(written), where
        for index, (item, copy_) in enumerate(zip(stored, written)):
            assert_contains(item, copy_, f"{where}[{index}]")
    else:
        assert stored == written, f"{where}: {stored!r} != {written!r}"


# --- round trips ------------------------------------------------------------------------------

def test_a_worker_case_round_trips_key_for_key() -> None:
    case = CaseResult.from_dict(WORKER_CASE)
    assert case.to_dict() == WORKER_CASE
    assert case.extra_fields == {"gpu_clock_mhz": 1980}
    assert case.peak_device_bytes == 2**21 and case.stats.median == pytest.approx(0.96)


def test_a_failed_case_keeps_its_three_keys() -> None:
    stored = {"case": {"n": 64}, "status": "error", "reason": "boom"}
    case = CaseResult.from_dict(stored)
    assert not case.measured and case.status is Status.ERROR
    assert case.to_dict() == stored


def test_a_cell_round_trips_with_unknown_keys_inside_and_out() -> None:
    cell = CellResult.from_dict(WORKER_CELL)
    assert cell.framework == "torch" and cell.cell.params == {"batch_size": [32]}
    # `quick` too: a cell no longer has it (it is the run's setting), an old run's is kept.
    assert cell.cell_extra == {"quick": True, "rank": 0}
    assert cell.extra_fields == {"power_limit_w": 700}
    assert cell.to_dict() == WORKER_CELL
    assert CellResult.from_dict(cell.to_dict()) == cell


def test_a_current_run_document_round_trips_key_for_key() -> None:
    document = RunDocument.from_dict(CURRENT_RUN)
    assert document.machine == "box (H200)" and document.framework_color("torch") == "#0173B2"
    assert document.to_dict() == CURRENT_RUN


def test_write_run_then_load_run_gives_the_same_document(tmp_path: Path) -> None:
    document = RunDocument.from_dict(CURRENT_RUN)
    store.write_run(tmp_path, document)
    store.write_measurements(tmp_path, [])
    assert json.loads((tmp_path / store.RUN_FILE).read_text()) == CURRENT_RUN
    assert store.load_run(tmp_path) == document


def test_every_docs_run_folder_round_trips(docs_collections: dict[str, list[Path]]) -> None:
    run_dirs = [run_dir for members in docs_collections.values() for run_dir in members]
    assert len(run_dirs) >= 19  # 13 H100 and 6 CPU runs in the two tarballs
    for run_dir in run_dirs:
        stored = store.read_run(run_dir)
        document = store.load_run(run_dir)
        # The ceilings record reads every stored form and writes one (older names folded).
        assert document.ceilings == Ceilings.from_json(stored.pop("ceilings", None))
        written = document.to_dict()
        written.pop("ceilings")
        assert_contains(stored, written, str(run_dir))
        assert RunDocument.from_dict(document.to_dict()) == document


# --- upgrades ---------------------------------------------------------------------------------

def old_layout_run() -> dict[str, Any]:
    """run.json as version 1 wrote it before hints, styles and the device-busy pass."""
    timed = {"case": {"n": 64}, "status": "ok", "reason": "", "cold_seconds": 0.5,
             "samples": [0.1, 0.2], "calls_per_sample": 4, "timer_overhead_s": 0.0,
             "check": {"passed": True, "metric": "rel_error", "value": 1e-7},
             "extra": {}, "peak_device_memory_bytes": 4096}
    failed = {"case": {"n": 128}, "status": "error", "reason": "boom"}
    cell = {"cell": {"workload": "matmul", "variant": "fp32", "framework": "torch",
                     "device": "cuda:0", "params": {"n": [64, 128]}, "quick": True},
            "status": "error", "reason": "boom", "framework_version": "2.4",
            "device_name": "H100", "threads": None, "started": 1.0, "finished": 2.0,
            "cases": [timed, failed], "peak_host_memory_bytes": 2**20}
    return {"schema_version": 1, "run_id": "old", "command": ["harness"], "started": 1.0,
            "finished": 2.0, "workload": "matmul", "sweep": "n", "params": {"n": [64, 128]},
            "quick": True, "timeout_s": 900.0, "host": {"hostname": "h100-box"},
            "cells": [cell], "interrupted": False}


def test_upgrade_1_to_2_fills_hints_and_styles_and_renames_the_memory_peak() -> None:
    old = old_layout_run()
    new = upgrade_1_to_2(copy.deepcopy(old))
    assert new["schema_version"] == 2
    assert new["hints"]["bandwidth_ceiling"] and new["hints"] != {}  # from the matmul spec
    assert set(new["frameworks"]) == {"torch"} and new["frameworks"]["torch"]["color"]
    timed, failed = new["cells"][0]["cases"]
    assert "peak_device_memory_bytes" not in timed
    assert timed["peak_device_allocated_bytes"] == 4096
    assert timed["device_profile"] == {"reason": NO_DEVICE_PROFILE}
    assert failed == old["cells"][0]["cases"][1]  # an untimed case gains nothing


def test_upgrade_keeps_what_the_old_run_stored() -> None:
    old = old_layout_run()
    old["hints"] = {"bandwidth_ceiling": "copy_gbps"}
    old["frameworks"] = {"torch": {"color": "#123456", "label": "mine"}}
    case = old["cells"][0]["cases"][0]
    case["peak_device_allocated_bytes"] = 8192  # both names: the newer one wins
    case["device_profile"] = {"reason": "profiler missing"}
    new = upgrade(old)
    assert new["hints"] == {"bandwidth_ceiling": "copy_gbps"}
    assert new["frameworks"] == {"torch": {"color": "#123456", "label": "mine"}}
    assert new["cells"][0]["cases"][0]["peak_device_allocated_bytes"] == 8192
    assert new["cells"][0]["cases"][0]["device_profile"] == {"reason": "profiler missing"}
    assert old["schema_version"] == 1  # the caller's copy is not touched


def test_an_unknown_workload_gets_the_default_hints_and_a_palette_colour() -> None:
    old = old_layout_run()
    old["workload"] = "retired-workload"
    old["cells"][0]["cell"]["framework"] = "retired-framework"
    new = upgrade(old)
    assert new["hints"] == DEFAULT_HINTS
    assert new["frameworks"] == {"retired-framework": {"color": "",
                                                       "label": "retired-framework"}}


def test_the_upgraded_document_loads_typed_and_writes_the_current_layout(tmp_path: Path) -> None:
    (tmp_path / store.RUN_FILE).write_text(json.dumps(old_layout_run()))
    store.write_measurements(tmp_path, [])
    document = store.load_run(tmp_path)
    assert document.machine == "h100-box" and document.machine_label == ""
    assert document.cells[0].cases[0].peak_device_allocated_bytes == 4096
    written = document.to_dict()
    assert written["schema_version"] == SCHEMA_VERSION
    assert upgrade(written) == written  # the current layout needs no step


@pytest.mark.parametrize("version", [SCHEMA_VERSION + 1, "2", 0, True])
def test_versions_this_harness_cannot_read_are_refused(version: Any) -> None:
    with pytest.raises(UpgradeError):
        upgrade({"schema_version": version})


def test_a_hand_built_dict_is_read_as_the_untyped_layout() -> None:
    document = as_run_document({"workload": "matmul", "cells": [
        {"cell": {"framework": "numpy"}, "cases": [{"case": {"n": 1}, "status": "ok",
                                                    "cold_seconds": 1.0,
                                                    "peak_device_memory_bytes": 5}]}]})
    assert document.cells[0].cases[0].peak_device_allocated_bytes == 5
    assert "numpy" in document.frameworks and document.hints


# --- declared per-case fields -----------------------------------------------------------------

def test_declared_fields_drive_the_csv_columns_and_types() -> None:
    from harness.data import columns

    for item in fields.csv_fields():
        assert item.name in columns.BASE_COLUMNS
        typed = {float: columns.FLOAT_COLUMNS, int: columns.INTEGER_COLUMNS,
                 str: columns.TEXT_COLUMNS, bool: columns.BOOL_COLUMNS}[item.kind]
        assert item.name in typed
    assert not {item.name for item in fields.FIELDS if not item.csv} & set(columns.BASE_COLUMNS)


def test_declared_fields_reach_csv_rows_report_extras_and_cli() -> None:
    from harness.core.registry import load_workload
    from harness.report.load import extra_rows
    from tests.synthetic_runs import cli_rows_of

    cell = CellResult.from_dict(WORKER_CELL)
    rows = store.measurement_rows("r1", "box", "batch_size", cell, {})
    warm = [row for row in rows if row["phase"] == "warm"]
    assert {row["accuracy"] for row in warm} == {0.946}
    assert {row["device_seconds"] for row in warm} == {0.5}
    assert {row["peak_host_memory_bytes"] for row in rows} == {7 * 2**20}
    failed = [row for row in rows if row["status"] == "error"]
    assert failed and failed[0]["accuracy"] == "" and failed[0]["device_reason"] == ""
    document = RunDocument.from_dict(CURRENT_RUN)
    extras = extra_rows(document, "box")
    assert extras[0]["accuracy"] == 0.946 and extras[0]["data_source"] == "embedded"
    assert extras[0]["peak_device_memory_bytes"] == 2**20
    assert extras[0]["threads"] == str({"intra_op": 16, "inter_op": 16})
    summaries = cli_rows_of(load_workload("mnist-small"), cell)
    assert summaries[0].extras["accuracy"] == 0.946
    assert summaries[1].extras["accuracy"] is None


def test_the_cli_table_shows_a_declared_column_only_where_a_row_has_a_value() -> None:
    from rich.console import Console

    from harness.commands.tables import results_table
    from harness.core.registry import load_workload
    from tests.synthetic_runs import cli_rows_of

    spec = load_workload("mnist-small")
    with_accuracy = cli_rows_of(spec, CellResult.from_dict(WORKER_CELL))
    headers = [column.header for column in results_table(spec, with_accuracy).columns]
    assert "accuracy" in headers
    console = Console(width=250, record=True)
    console.print(results_table(spec, with_accuracy))
    assert "0.946" in console.export_text()
    without = [summary for summary in with_accuracy if summary.extras["accuracy"] is None]
    assert "accuracy" not in [column.header for column in results_table(spec, without).columns]


# --- the run folders under docs/ ---------------------------------------------------------------

COLLECTIONS = ["cpu-runs/cpu2core", "h100-runs/h100"]


@pytest.fixture(scope="module")
def docs_collections(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """The run folders under docs/ by the folder that holds them, as the docs drew them."""
    root = tmp_path_factory.mktemp("docs-runs")
    found: dict[str, list[Path]] = {}
    for run_dir in docs_run_dirs(root):
        base = DOCS if run_dir.is_relative_to(DOCS) else root
        found.setdefault(run_dir.parent.relative_to(base).as_posix(), []).append(run_dir)
    return found


def test_the_docs_collections_are_all_named(docs_collections: dict[str, list[Path]]) -> None:
    assert sorted(docs_collections) == sorted(COLLECTIONS)


@pytest.mark.slow  # draws every figure of every run: about half a minute per collection
@pytest.mark.parametrize("collection", COLLECTIONS)
def test_every_docs_run_folder_re_renders(collection: str, tmp_path: Path,
                                          docs_collections: dict[str, list[Path]]) -> None:
    """Each collection of runs under docs/ loads through the data model and renders a report."""
    from harness.report import render_report
    from harness.report.load import load_runs

    members = docs_collections[collection]
    run_set = load_runs(members)
    assert [document.run_id for document in run_set.documents] == [d.name for d in members]
    assert all(document.hints for document in run_set.documents)  # upgraded where older
    written = render_report(members, tmp_path)
    assert any(path.suffix == ".png" for path in written)
    assert (tmp_path / "summary.md").read_text().strip()
