"""What a run says to the user besides its answer: the phase it is in while it runs, why a run
that measured nothing failed, and how to continue a stopped one."""

from __future__ import annotations

import signal
from pathlib import Path

from harness import api
from harness.commands.epilogue import interrupted_lines
from harness.data.results import CellResult, RunDocument
from harness.spec import Cell, Status


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
