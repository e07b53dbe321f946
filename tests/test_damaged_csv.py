"""A damaged measurements.csv is named, never read silently: report, diff and export check it
against run.json's samples (harness.data.csvmatch) and refuse it in one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness import api
from harness.cli import app
from harness.data import store
from tests.synthetic_runs import cell_result, write_run


def _run(folder: Path) -> Path:
    return write_run(folder, [cell_result("torch", {64: [1.0, 1.1, 1.2], 128: [2.0, 2.1]}),
                              cell_result("numpy", {64: [3.0, 3.1]})])


def garbage_line(csv_path: Path) -> None:
    lines = csv_path.read_text().splitlines(keepends=True)
    csv_path.write_text("".join([*lines[:3], "garbage here\n", *lines[3:]]))


def cut_in_half(csv_path: Path) -> None:
    text = csv_path.read_text()
    csv_path.write_text(text[:len(text) // 2])


def lose_last_rows(csv_path: Path) -> None:
    """Whole lines lost (a cut at a line's end): every line parses, rows are missing."""
    lines = csv_path.read_text().splitlines(keepends=True)
    csv_path.write_text("".join(lines[:-2]))


@pytest.mark.parametrize("damage", [garbage_line, cut_in_half, lose_last_rows])
@pytest.mark.parametrize("command", ["report", "diff", "export"])
def test_a_damaged_csv_is_one_line_exit_2(tmp_path: Path, damage, command: str) -> None:
    run_dir, healthy = _run(tmp_path / "damaged"), _run(tmp_path / "healthy")
    damage(run_dir / store.MEASUREMENTS_FILE)
    args = {"report": ["report", str(run_dir), "--out", str(tmp_path / "report")],
            "diff": ["diff", str(healthy), str(run_dir)],
            "export": ["export", str(run_dir), "--format", "csv"]}[command]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert "measurements.csv" in lines[0] and "harness check" in lines[0], lines[0]
    assert "Traceback" not in result.output


def test_what_is_wrong_is_named(tmp_path: Path) -> None:
    run_dir = _run(tmp_path / "run")
    garbage_line(run_dir / store.MEASUREMENTS_FILE)
    with pytest.raises(store.StoreError, match=r"line 4 has 1 fields, the header \d+"):
        api.load(run_dir)
    run_dir = _run(tmp_path / "short")
    lose_last_rows(run_dir / store.MEASUREMENTS_FILE)
    with pytest.raises(store.StoreError, match=r"numpy cpu fp32 64: 0 warm rows, run.json "
                                               r"holds 2\); see harness check "):
        api.load(run_dir)


def test_a_healthy_run_still_loads_and_reports(tmp_path: Path) -> None:
    run_dir = _run(tmp_path / "run")
    assert len(api.load(run_dir)) == (1 + 3) + (1 + 2) + (1 + 2)  # a cold row, the warm ones
    for args in (["export", str(run_dir), "--format", "csv"],
                 ["diff", str(run_dir), str(run_dir)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
