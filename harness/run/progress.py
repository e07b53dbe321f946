"""What a run shows while it runs, on stderr: the progress bar, the cells' states, the ETA.

Progress goes to stderr (`console`), never into the returned data or stdout's tables.

The ETA is the mean time of the cells already done times the cells left. Why not rich's
TimeRemainingColumn: it estimates speed from the last 30 s only, and a cell usually takes
longer than that, so it would show no estimate for most of a run.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from harness.data.results import CellResult
from harness.run.executors import CellState, Executor, StateTally
from harness.run.executors.base import OnResult
from harness.run.runner import RunOptions
from harness.spec import Cell

console = Console(stderr=True)


def eta_seconds(elapsed: float | None, completed: float, total: float | None) -> float | None:
    """Seconds left, or None until the first cell has finished."""
    if not elapsed or completed <= 0 or total is None:
        return None
    return elapsed / completed * max(total - completed, 0.0)


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA -:--"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"ETA {hours}:{minutes:02d}:{secs:02d}" if hours else f"ETA {minutes}:{secs:02d}"


class CellEtaColumn(ProgressColumn):
    """Shows the estimated time left, from the cells already done."""

    def render(self, task: Task) -> Text:
        return Text(format_eta(eta_seconds(task.elapsed, task.completed, task.total)),
                    style="progress.remaining")


def run_with_progress(executor: Executor, cells: list[Cell], options: RunOptions,
                      run_dir: Path, add: OnResult) -> bool:
    """The executor's run of `cells` under a progress bar: the last result, the count done,
    the cells per state (queued, running, done: harness.run.executors.StateTally), the time
    and the ETA. Each result is handed to `add` first. The bar is gone when the run ends.

    Without a terminal (output piped to a file, CI) there is no bar: rich's transient bar left
    one empty line behind per call there, and advise calls it once per worker."""
    tally = StateTally()
    if not console.is_terminal:
        return executor.run(cells, options, run_dir, add, tally.update)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/"
                  "{task.total}"), TextColumn("{task.fields[states]}"), TimeElapsedColumn(),
                  CellEtaColumn(), console=console, transient=True) as bar:
        task = bar.add_task("cells", total=len(cells), states="")

        def on_result(cell: Cell, result: CellResult) -> None:
            add(cell, result)
            bar.update(task, advance=1, description=f"{cell.label}: {result.status.value}")

        def on_state(cell: Cell, state: CellState, reason: str = "") -> None:
            tally.update(cell, state, reason)
            bar.update(task, states=tally.text())

        return executor.run(cells, options, run_dir, on_result, on_state)
