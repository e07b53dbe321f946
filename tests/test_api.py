"""The Python API: harness.compare through real workers, harness.load, and bad input refused
before anything is written; the ceilings probe only where a rate can be judged against it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import harness
from harness import api
from harness.data import store
from harness.data.ceilings import Ceilings, DeviceCeiling, Peaks
from harness.run import session
from harness.run.runceilings import has_rates
from harness.spec import BadInput, Status


def no_probe(*args: Any, **options: Any) -> Ceilings:
    raise AssertionError("the ceilings were probed for a workload with no rate to judge")


def test_compare_runs_every_cell_in_a_worker_and_returns_its_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "measure_ceilings", no_probe)
    out = tmp_path / "results"
    result = harness.compare("fault", frameworks="fake", devices=["cpu"], variants=["ok"],
                             sizes=[1, 2], quick=True, out=out, report=False, progress=False)
    assert result.path.parent == out and (result.path / "run.json").is_file()
    assert result.exit_code == 0 and result.stopped_by is None
    [cell] = result.cells
    assert (cell.framework, cell.device, cell.variant, cell.status) == (
        "fake", "cpu", "ok", Status.OK)
    assert [case.case["size"] for case in cell.cases] == [1, 2]
    assert all(case.samples and case.check["passed"] for case in cell.cases)
    frame = result.frame
    assert set(frame["size_label"]) == {"1", "2"} and set(frame["status"]) == {"ok"}
    assert (frame["phase"] == "warm").sum() == sum(len(case.samples) for case in cell.cases)
    document = store.read_run(result.path)
    assert not document.get("ceilings")  # nothing to judge: no probe, no figures
    assert document["finished"] is not None and not document["interrupted"]


def test_a_failed_cell_sets_the_exit_code(tmp_path: Path) -> None:
    result = harness.compare("fault", frameworks="fake", devices="cpu", variants="ok,error",
                             quick=True, out=tmp_path, ceilings=False, report=False,
                             progress=False)
    statuses = {cell.variant: cell.status for cell in result.cells}
    assert statuses == {"ok": Status.OK, "error": Status.ERROR}
    assert result.exit_code == api.EXIT_FAILED_CELL


def test_ceilings_are_measured_when_the_workload_counts_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[tuple[list[str], int | None]] = []
    figures = Ceilings({"cpu": DeviceCeiling("cpu", Peaks({"fp32": 50.0}))})

    def fake_measure(devices: list[str], largest_n: int | None,
                     quick: bool = False, **options: Any) -> Ceilings:
        measured.append((devices, largest_n))
        return figures

    monkeypatch.setattr(session, "measure_ceilings", fake_measure)
    result = harness.compare("fault-rated", frameworks="fake", devices="cpu", variants="ok",
                             quick=True, out=tmp_path, report=False, progress=False)
    assert measured == [(["cpu"], round((1e3 * 2 / 2) ** (1 / 3)))]
    assert Ceilings.from_json(store.read_run(result.path)["ceilings"]) == figures


def test_which_workloads_have_a_rate_to_judge() -> None:
    from harness.core.registry import load_workload

    assert has_rates(load_workload("matmul")) and has_rates(load_workload("elementwise"))
    assert not has_rates(load_workload("fault"))


def test_load_reads_one_or_several_run_folders(tmp_path: Path) -> None:
    from tests.synthetic_runs import cell_result, write_run

    first = write_run(tmp_path / "a", [cell_result("torch", {64: [1.0, 1.1, 1.2]})])
    second = write_run(tmp_path / "b", [cell_result("numpy", {64: [2.0, 2.2]})])
    one = harness.load(first)
    assert isinstance(one, pd.DataFrame) and len(one) == 4  # cold + 3 warm
    assert sorted(one.loc[one["phase"] == "warm", "seconds"]) == pytest.approx([1.0, 1.1, 1.2])
    both = harness.load([str(first), second])
    assert len(both) == 4 + 3 and set(both["run_id"]) == {"a", "b"}
    assert harness.load([]).empty
    (tmp_path / "empty").mkdir()
    with pytest.raises(store.StoreError):
        harness.load(tmp_path / "empty")


@pytest.mark.parametrize("workload, options, message", [
    ("no-such-workload", {}, "unknown workload"),
    ("fault", {"frameworks": "no-such-framework"}, "no-such-framework"),
    ("fault", {"devices": "tpu"}, "unknown device"),
    ("fault", {"variants": "no-such-variant"}, "unknown variant"),
    ("fault", {"sizes": [0]}, "sizes must be >= 1"),
    ("fault", {"sizes": []}, "sizes must be >= 1"),
    ("fault", {"timeout_s": 0}, "must be > 0"),
    ("fault", {"data": "/nonexistent"}, "--data applies to the MNIST workloads"),
])
def test_bad_input_raises_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workload: str,
        options: dict[str, Any], message: str) -> None:
    monkeypatch.setattr(session, "measure_ceilings", no_probe)
    out = tmp_path / "results"
    out.mkdir()
    with pytest.raises(BadInput, match=message):
        harness.compare(workload, out=out / "runs", quick=True, report=False, progress=False,
                        **options)
    assert list(out.iterdir()) == []


def test_an_out_folder_that_cannot_be_written_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(BadInput, match="not a folder"):
        harness.compare("fault", frameworks="fake", out=blocker / "runs", report=False,
                        progress=False)
    assert blocker.read_text() == "not a folder" and list(tmp_path.iterdir()) == [blocker]
