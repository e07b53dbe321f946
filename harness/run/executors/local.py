"""The default executor: every cell in its own worker process on this machine, one at a time.

Exactly `harness.run.runner.run_matrix`; this class only adds the progress states around it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.settings import Settings
from harness.data.results import CellResult
from harness.run.executors.base import CellState, OnResult, OnState, ignore_state
from harness.run.runner import RunOptions, run_matrix
from harness.spec import Cell


class LocalExecutor:
    """Runs the cells here, in order, one worker process each (harness compare's default)."""

    name = "local"
    runs_cells_here = True

    def run(self, cells: list[Cell], options: RunOptions, run_dir: Path, on_result: OnResult,
            on_state: OnState | None = None) -> bool:
        """run_matrix; cells are queued, then each runs as the one before it is done."""
        report_state = on_state or ignore_state
        for cell in cells:
            report_state(cell, CellState.QUEUED)
        if cells:
            report_state(cells[0], CellState.RUNNING)
        position = {cell.key: index for index, cell in enumerate(cells)}

        def finished(cell: Cell, result: CellResult) -> None:
            on_result(cell, result)
            report_state(cell, CellState.DONE)
            following = position.get(cell.key, len(cells)) + 1
            if following < len(cells):
                report_state(cells[following], CellState.RUNNING)

        return run_matrix(cells, options, finished)

    def describe(self, settings: Settings) -> dict[str, Any]:
        """Its name and how workers start, by the run's SETTINGS."""
        workers = ("forked from a warm process per framework that declares preload"
                   if settings.fork_workers else "a new interpreter each")
        return {"name": self.name, "workers": workers}
