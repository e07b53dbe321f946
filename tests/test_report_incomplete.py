"""Reports on runs that stopped early say so: a killed run (no end time), an interrupted one."""

from __future__ import annotations

from pathlib import Path

from harness.report import render_report
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn
from tests.synthetic_runs import (
    CPU_MACHINE,
    SIZES,
    cpu_seconds,
    make_case,
    make_result,
    write_fixture_run,
)
from tests.test_report import private_matplotlib  # noqa: F401 - autouse: matplotlib cache in tmp


def cpu_cell(framework: str, status: str = "ok", reason: str = "") -> dict:
    cases = [make_case({"n": n}, cpu_seconds(n)) for n in SIZES]
    return make_result("matmul", framework, "cpu", cases, status=status, reason=reason)


def summary_of(run_dirs: list[Path], out: Path) -> str:
    render_report(run_dirs, out)
    return (out / "summary.md").read_text()


def test_run_without_end_time_is_reported_incomplete(tmp_path: Path) -> None:
    run = write_fixture_run(tmp_path / "killed", CPU_MACHINE, [cpu_cell("torch")],
                            extra_doc={"finished": None})
    summary = summary_of([run], tmp_path / "out")
    runs_part, _, experiment_part = summary.partition("## matmul")
    assert "run `killed` did not finish (no end time): its cells may be incomplete" in runs_part
    assert ("- incomplete on laptop (cpu only): run `killed` did not finish (no end time)"
            in experiment_part)
    assert "cells saved: torch cpu fp32" in experiment_part
    assert "None: every cell ran" not in experiment_part


def test_interrupted_run_names_its_signal(tmp_path: Path) -> None:
    results = [cpu_cell("torch"),
               cpu_cell("numpy", status="interrupted", reason="interrupted by SIGTERM")]
    run = write_fixture_run(tmp_path / "stopped", CPU_MACHINE, results,
                            extra_doc={"interrupted": True, "interrupted_by": "SIGTERM"})
    summary = summary_of([run], tmp_path / "out")
    assert "run `stopped` was interrupted by SIGTERM" in summary
    assert "- interrupted on laptop (cpu only): run `stopped` was interrupted by SIGTERM" in summary
    assert "cells saved: torch cpu fp32, numpy cpu fp32" in summary
    assert "did not finish" not in summary


def test_finished_run_merged_with_a_killed_one_is_not_flagged(tmp_path: Path) -> None:
    """Only the killed run is named, though pandas reads the merged end times as floats."""
    done = write_fixture_run(tmp_path / "done", CPU_MACHINE, [cpu_cell("torch")])
    killed = write_fixture_run(tmp_path / "killed", CPU_MACHINE, [cpu_cell("numpy")],
                               extra_doc={"finished": None})
    summary = summary_of([done, killed], tmp_path / "out")
    assert "run `killed` did not finish" in summary
    assert "run `done`" not in summary
