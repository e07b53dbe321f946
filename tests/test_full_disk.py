"""Issue 65: a full disk (or a read-only folder) is one line and a folder `harness check`
passes. run.json and measurements.csv are saved together, all or none; a save that fails stops
the run with exit 3, the folder keeping the pair saved before (a --resume runs the rest); a
new run whose first save fails leaves no folder; `report --out` and `export --out` onto a full
disk are one line, exit 3; a --resume of a folder it cannot write is one line, exit 2."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from harness import api
from harness.audit import audit_run
from harness.data import store
from harness.run import resume
from harness.run.rounds import round_orders
from tests.cli_in_process import CliOutcome, run_cli_in_process

FULL = OSError(errno.ENOSPC, "No space left on device")
RUN = ("compare", "--workload", "fault", "--framework", "fake,fakegpu", "--device", "cpu",
       "--variant", "ok", "--quick", "--no-ceilings", "--no-report", "--rounds", "2")


def disk_full_at(monkeypatch: pytest.MonkeyPatch, csv_write: int) -> None:
    """measurements.csv's CSV_WRITE-th save (and every one after) finds the disk full."""
    written = store._temporary_copy
    count = 0

    def filling(path: Path, data: bytes) -> Path:
        nonlocal count
        if path.name == store.MEASUREMENTS_FILE:
            count += 1
            if count >= csv_write:
                raise FULL
        return written(path, data)

    monkeypatch.setattr(store, "_temporary_copy", filling)


def one_error_line(ran: CliOutcome, code: int) -> str:
    assert ran.returncode == code, ran.stdout + ran.stderr
    assert "Traceback" not in ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith("harness: error:")]
    assert len(errors) == 1, ran.stderr
    return errors[0]


def test_both_files_are_written_or_neither(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = tmp_path / "run.json", tmp_path / "measurements.csv"
    store.write_together([(first, b"old json"), (second, b"old csv")])
    disk_full_at(monkeypatch, 1)
    with pytest.raises(OSError, match="No space"):
        store.write_together([(first, b"new json"), (second, b"new csv")])
    assert (first.read_bytes(), second.read_bytes()) == (b"old json", b"old csv")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["measurements.csv", "run.json"]


def test_a_full_disk_mid_run_stops_it_in_one_line_and_leaves_a_consistent_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    disk_full_at(monkeypatch, 4)  # after the first round's first cell
    ran = run_cli_in_process(*RUN, "--out", str(tmp_path / "results"))
    line = one_error_line(ran, 3)
    [run_dir] = (tmp_path / "results").iterdir()
    assert "No space left on device" in line and f"--resume {run_dir}" in line
    audit = audit_run(run_dir, round_orders)
    assert not audit.mismatches, [item.line() for item in audit.mismatches]
    kept = store.load_run(run_dir)
    assert kept.finished is None and len(kept.cells) == 1  # the pair saved before the failure
    monkeypatch.undo()  # room made: the resume runs the rest
    resumed = store.load_run(api.resume_run(run_dir, progress=False).path)
    assert resumed.finished is not None and len(resumed.cells) == 2
    assert all(sorted({record.round for record in case.rounds}) == [0, 1]
               for cell in resumed.cells for case in cell.cases)


def test_a_run_whose_first_save_fails_leaves_no_folder(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    disk_full_at(monkeypatch, 1)
    ran = run_cli_in_process(*RUN, "--out", str(tmp_path / "results"))
    assert "folder was removed" in one_error_line(ran, 3)
    assert list((tmp_path / "results").iterdir()) == []


@pytest.fixture
def stored_run(tmp_path: Path) -> Path:
    run = api.plan("fault", frameworks="fake", devices="cpu", variants="ok", sizes=[1],
                   quick=True, out=tmp_path / "results")
    return api.execute(run, ceilings=False, progress=False).path


def test_report_and_export_onto_a_full_disk_are_one_line_exit_3(
        stored_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness import report

    def full(*args: object, **kwargs: object) -> list[Path]:
        raise FULL

    monkeypatch.setattr(report, "render_report", full)
    ran = run_cli_in_process("report", str(stored_run), "--out", str(tmp_path / "pictures"))
    assert "cannot write the report (No space left on device)" in one_error_line(ran, 3)
    monkeypatch.setattr(store, "_temporary_copy", full)
    for fmt in ("csv", "parquet"):
        out = tmp_path / f"rows.{fmt}"
        ran = run_cli_in_process("export", str(stored_run), "--format", fmt, "--out", str(out))
        assert "No space left on device" in one_error_line(ran, 3) and not out.exists()


def test_a_resume_of_a_folder_it_cannot_write_is_one_line_exit_2(
        stored_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def read_only(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(resume.tempfile, "mkstemp", read_only)
    ran = run_cli_in_process("compare", "--resume", str(stored_run), "--no-report")
    assert "cannot write this run folder (Read-only file system)" in one_error_line(ran, 2)
