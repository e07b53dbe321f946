"""What a run shows while it runs, on stderr: the progress bar, the cells' states, the ETA.

Progress goes to stderr (`console`), never into the returned data or stdout's tables.

The ETA is the mean time of the cells already done times the cells left. Why not rich's
TimeRemainingColumn: it estimates speed from the last 30 s only, and a cell usually takes
longer than that, so it would show no estimate for most of a run.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
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

from harness.core.units import counted
from harness.data.results import CellResult
from harness.run.executors import CellState, Executor, StateTally
from harness.run.executors.base import OnResult
from harness.run.phases import PhaseBoard, PhaseProgress
from harness.run.runner import RunOptions
from harness.spec import Cell, CellKey

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
    """Shows the estimated time left: from the cells already done, or before the first is done
    from the estimates of the cells left (an earlier round's workers), where there are any."""

    def __init__(self, left_estimate: Callable[[], float | None] = lambda: None) -> None:
        super().__init__()
        self.left_estimate = left_estimate

    def render(self, task: Task) -> Text:
        seconds = eta_seconds(task.elapsed, task.completed, task.total)
        return Text(format_eta(seconds if seconds is not None else self.left_estimate()),
                    style="progress.remaining")


def cell_estimates(recorded: list[CellResult]) -> dict[CellKey, float]:
    """Seconds a cell's next worker should take: the mean of its workers so far (an earlier
    round's, whose calibration the next one reuses); cells without one are left out."""
    estimates = {}
    for result in recorded:
        records = result.cost.per_worker if result.cost else []
        walls = [float(wall) for record in records
                 if isinstance(wall := record.get("wall_s"), (int, float))]
        if walls:
            estimates[result.cell.key] = sum(walls) / len(walls)
    return estimates


class CellPhases:
    """Tells the board which cell runs ('cell 3 of 8: ...', with its estimate) as the executor
    reports states; several at once (SLURM) are said as the tally of states."""

    def __init__(self, board: PhaseBoard | None, cells: list[Cell], tally: StateTally,
                 estimates: dict[CellKey, float]) -> None:
        self.board, self.tally, self.estimates = board, tally, estimates
        self.position = {cell.key: index for index, cell in enumerate(cells)}
        self.total = len(cells)
        self.done: set[CellKey] = set()

    def update(self, cell: Cell, state: CellState, reason: str = "") -> None:
        self.tally.update(cell, state, reason)
        if state == CellState.DONE:
            self.done.add(cell.key)
        if self.board is None:
            return
        running = sum(1 for known in self.tally.states.values() if known == CellState.RUNNING)
        if state == CellState.RUNNING and running == 1:
            index = self.position.get(cell.key, 0) + 1
            self.board.enter(f"cell {index} of {self.total}: {cell.framework} {cell.device} "
                             f"{cell.variant}", self.estimates.get(cell.key))
        elif running != 1:
            self.board.enter(f"cells: {self.tally.text()}")

    def left_s(self) -> float | None:
        """The estimates of the cells not done, summed; None unless every one has one."""
        left = [key for key in self.position if key not in self.done]
        if not left or any(key not in self.estimates for key in left):
            return None
        return sum(self.estimates[key] for key in left)


def run_with_progress(executor: Executor, cells: list[Cell], options: RunOptions,
                      run_dir: Path, add: OnResult,
                      estimates: dict[CellKey, float] | None = None) -> bool:
    """The executor's run of `cells` under a progress bar: the phase now (the cell i of n, what
    its worker does, how long so far: harness.run.phases), the count done, the cells per state
    (queued, running, done: harness.run.executors.StateTally), the time and the ETA. Each
    result is handed to `add` first. The bar is gone when the run ends. ESTIMATES: seconds per
    cell where known (cell_estimates), for the phase's words and the ETA before a cell ends.

    Without a terminal (output piped to a file, CI) there is no bar: rich's transient bar left
    one empty line behind per call there, and advise calls it once per worker; the run's plain
    reporter (harness.run.phases.PlainReporter) says the board's phase instead."""
    tally = StateTally()
    board = options.board
    phases = CellPhases(board, cells, tally, estimates or {})
    with board.phase(counted(len(cells), "cell")) if board is not None else nullcontext():
        if not console.is_terminal:
            return executor.run(cells, options, run_dir, add, phases.update)
        return _run_under_bar(executor, cells, options, run_dir, add, phases)


def _run_under_bar(executor: Executor, cells: list[Cell], options: RunOptions, run_dir: Path,
                   add: OnResult, phases: CellPhases) -> bool:
    """run_with_progress in a terminal: the bar, under a line saying the board's phase where
    there is one (else beside the last result's cell and status)."""
    columns = (BarColumn(), TextColumn("{task.completed}/{task.total}"),
               TextColumn("{task.fields[states]}"), TimeElapsedColumn(),
               CellEtaColumn(phases.left_s))
    bar = Progress(TextColumn("{task.description}"), *columns, console=console,
                   transient=True) if phases.board is None \
        else PhaseProgress(phases.board, *columns, console=console, transient=True)
    with bar:
        task = bar.add_task("cells", total=len(cells), states="")

        def on_result(cell: Cell, result: CellResult) -> None:
            add(cell, result)
            bar.update(task, advance=1, description=f"{cell.label}: {result.status.value}")

        def on_state(cell: Cell, state: CellState, reason: str = "") -> None:
            phases.update(cell, state, reason)
            bar.update(task, states=phases.tally.text())

        return executor.run(cells, options, run_dir, on_result, on_state)
