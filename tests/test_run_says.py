"""What a run says to the user besides its answer: the phase it is in while it runs, why a run
that measured nothing failed, and how to continue a stopped one."""

from __future__ import annotations

import signal
from pathlib import Path

from harness import api
from harness.commands.epilogue import interrupted_lines
from harness.data.results import CellResult, RunDocument
from harness.spec import Cell, Status
from tests.cli_in_process import run_cli_in_process


def stopped_run(path: Path, statuses: list[Status], planned: int) -> api.RunResult:
    cells = [CellResult(Cell("matmul", "fp32", "torch", f"cpu{index}"), status)
             for index, status in enumerate(statuses)]
    document = RunDocument(planned_cells=[{} for _ in range(planned)], cells=cells)
    return api.RunResult(path, cells, document, signal.SIGTERM)


def test_a_stopped_run_names_the_resume_command_that_runs_the_rest() -> None:
    result = stopped_run(Path("results/my run"), [Status.OK, Status.INTERRUPTED], 3)
    assert interrupted_lines(result) == [
        "interrupted by SIGTERM: 1 of 3 cells finished and saved; to run the rest:",
        "  harness compare --resume 'results/my run'"]
    assert interrupted_lines(stopped_run(Path("r"), [], 2)) == [
        "interrupted by SIGTERM before any cell ran; nothing to keep: run the same command "
        "again"]
    assert interrupted_lines(api.RunResult(Path("r"), [], RunDocument())) == []


def test_a_run_that_measured_nothing_exits_4_with_one_line_saying_why(out_dir: Path) -> None:
    """--device cuda where no GPU is seen exited 0 with "no valid measurement" in its verdict;
    the fake framework has no GPU on any machine."""
    ran = run_cli_in_process("compare", "--workload", "fault", "--framework", "fake",
                             "--device", "cuda:0", "--variant", "ok", "--quick",
                             "--no-ceilings", "--no-report", "--out", str(out_dir))
    assert ran.returncode == api.EXIT_NO_MEASUREMENT == 4, ran.stdout + ran.stderr
    said = [line for line in ran.stderr.splitlines() if "no valid measurement" in line]
    assert said == ["harness: no valid measurement: fake cuda:0: the fake framework has no "
                    "cuda:0"], ran.stderr
    both = run_cli_in_process("compare", "--workload", "fault", "--framework", "fake",
                              "--device", "cpu,cuda:0", "--variant", "ok", "--quick",
                              "--no-ceilings", "--no-report", "--out", str(out_dir))
    assert both.returncode == 0 and "no valid measurement" not in both.stderr, both.stderr


def test_the_line_says_how_every_cell_ended_and_fits_100_columns() -> None:
    cells = [CellResult(Cell("matmul", "fp32", framework, "cuda:0"), Status.UNAVAILABLE,
                        "sees no CUDA device " * 8) for framework in ("numpy", "torch")]
    cells.append(CellResult(Cell("matmul", "fp32", "jax", "cuda:0"), Status.ERROR, "crashed"))
    result = api.RunResult(Path("r"), cells, RunDocument(cells=cells))
    line = api.no_measurement_line(result)
    assert line.startswith("harness: no valid measurement in 3 cells (2 unavailable, 1 error); "
                           "first: numpy cuda:0: sees no") and len(line) <= 100
    assert line.endswith(" ...")
    assert result.exit_code == api.EXIT_FAILED_CELL  # a failed cell's 1 says more than 4
