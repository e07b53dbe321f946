"""The executor seam: hand an executor cells, get each cell's typed result back as it finishes.

An executor decides where and how cells run (one process after another here, tasks of a SLURM
job array elsewhere); what a cell runs is always the same worker. Results come back through
`on_result` one by one, so the caller saves after every cell and a stop loses nothing finished;
`on_state` reports each cell's progress: queued, then running, then done.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from harness.core.settings import Settings
from harness.data.results import CellResult
from harness.run.runner import RunOptions
from harness.spec import Cell


class CellState(str, Enum):
    """Where a cell stands in an executor: waiting for a slot, running, or finished."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"

    def __str__(self) -> str:
        return self.value


OnResult = Callable[[Cell, CellResult], None]


class OnState(Protocol):
    """Told each change of a cell's state; reason: why a queued cell waits (SLURM's words)."""

    def __call__(self, cell: Cell, state: CellState, reason: str = "") -> None: ...


class Executor(Protocol):
    """Runs cells somewhere and reports each result; False when a stop signal ended it early."""

    name: str
    # Whether the machine that plans the run is the one the cells run on: only then do the
    # ceilings measured before the cells describe the cells' machine.
    runs_cells_here: bool

    def run(self, cells: list[Cell], options: RunOptions, run_dir: Path, on_result: OnResult,
            on_state: OnState | None = None) -> bool: ...

    def describe(self, settings: Settings) -> dict[str, Any]:
        """The executor's settings, stored in run.json (the run's SETTINGS: how workers
        start)."""
        ...


def ignore_state(cell: Cell, state: CellState, reason: str = "") -> None:
    """The on_state of a caller that does not show progress."""


class StateTally:
    """Counts of cells per state, for a progress line such as '3 queued, 1 running, 2 done';
    queued cells' reasons follow their count ('2 queued (2 ReqNodeNotAvail)')."""

    def __init__(self) -> None:
        self.states: dict[tuple[Any, ...], CellState] = {}
        self.reasons: dict[tuple[Any, ...], str] = {}

    def update(self, cell: Cell, state: CellState, reason: str = "") -> None:
        key = (cell.variant, cell.framework, cell.device)
        self.states[key] = state
        self.reasons[key] = reason if state == CellState.QUEUED else ""

    def text(self) -> str:
        counts = Counter(self.states.values())
        why = Counter(reason[:60] for key, reason in self.reasons.items()
                      if reason and self.states[key] == CellState.QUEUED)
        parts = []
        for state in CellState:
            part = f"{counts[state]} {state}"
            if state == CellState.QUEUED and why:
                part += " (" + "; ".join(f"{count} {reason}" for reason, count in why.items()) \
                    + ")"
            parts.append(part)
        return ", ".join(parts)
