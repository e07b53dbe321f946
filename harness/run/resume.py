"""`--resume RUN_DIR`: which cells, rounds and cases of a stored run still need to run, and
what is kept.

A cell has a result when run.json holds one that is not a refused submission (no SLURM job id:
the cell never ran) and that is not `interrupted` before any case finished; a result file that
a SLURM task left in RUN_DIR/cells after the submitting process died counts too (its task
finished; nothing finished is lost). A kept result of a run in rounds may hold fewer rounds
than the run states (a stop, a SIGKILL of the main process): its missing rounds run, each
under its own round index, and of a round whose worker was stopped only the cases it had not
finished (the worker writes its result after every case). Everything else of the stored plan
runs again. A run whose SLURM tasks are still queued or running is not resumed (their results
would land under the new tasks).
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.core.units import counted
from harness.data.results import CellResult, RunDocument
from harness.data.store import read_cell_result
from harness.spec import BadInput, Cell, CellKey, Status, WorkloadSpec, worst_status

TASK_RESULTS_FOLDER = "cells"  # where SLURM tasks write (harness.run.executors.slurm)


def check_resumable(run_dir: Path) -> None:
    """BadInput (exit 2, nothing run) for a run folder this process cannot write (a read-only
    mount): a resume saves every result into it. Tried, not asked (os.access says yes to root
    on a read-only mount)."""
    try:
        handle, probe = tempfile.mkstemp(dir=run_dir, prefix=".harness-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise BadInput(f"--resume {run_dir}: cannot write this run folder "
                       f"({exc.strerror or exc}); a resume saves its results into it") from None


def planned_cells(document: RunDocument) -> list[Cell]:
    """The cells the run was planned with (stored in run.json since --resume exists)."""
    if not document.planned_cells:
        raise BadInput(f"run {document.run_id!r} stores no planned cells (written before "
                       "--resume existed); start a new run instead")
    return [Cell.from_dict(fields) for fields in document.planned_cells]


def _task_results(run_dir: Path) -> list[CellResult]:
    paths = sorted((run_dir / TASK_RESULTS_FOLDER).glob("*.json"))
    return [result for path in paths if (result := read_cell_result(path)) is not None]


def kept_results(document: RunDocument, run_dir: Path) -> list[CellResult]:
    """The finished results of a stored run: run.json's, then task files it never recorded
    (or recorded as interrupted while the very task that wrote the file went on to finish)."""
    kept = [result for result in document.cells if not never_ran(result)]
    done = {result.cell.key for result in kept}
    recorded_jobs = {result.cell.key: (result.slurm or {}).get("job_id")
                     for result in document.cells}
    for result in _task_results(run_dir):
        key = result.cell.key
        if key in done or never_ran(result):
            continue
        written_by = (result.slurm or {}).get("job_id")
        # A file for a cell run.json holds a row of is this cell's only if the same task wrote it.
        if key in recorded_jobs and written_by != recorded_jobs[key]:
            continue
        kept.append(result)
        done.add(key)
    return kept


def never_ran(result: CellResult) -> bool:
    """A row for a cell that did not run: interrupted before a case finished, or its
    submission refused (no job)."""
    refused = bool((result.slurm or {}).get("refused")) and not (result.slurm or {}).get("job_id")
    return (result.status == Status.INTERRUPTED and not any(case.measured
                                                            for case in result.cases)) \
        or refused


def cells_to_run(planned: list[Cell], kept: list[CellResult]) -> list[Cell]:
    """The planned cells without a kept result, in the planned order."""
    done = {result.cell.key for result in kept}
    return [cell for cell in planned if cell.key not in done]


# Of a kept cell with rounds left: round index -> the case positions to run in it (() all).
RoundsLeft = dict[int, tuple[int, ...]]


@dataclass
class Remaining:
    """What a resume keeps and what it runs."""

    kept: list[CellResult]  # recorded again: whole results, and the rounds so far of the rest
    cells: list[Cell]  # the planned cells with work left, in the planned order
    rounds_left: dict[CellKey, RoundsLeft]  # of the kept cells with work left

    @property
    def partial(self) -> dict[CellKey, CellResult]:
        """The kept results of the cells with rounds left: the rounds they hold so far."""
        return {result.cell.key: result for result in self.kept
                if result.cell.key in self.rounds_left}

    @property
    def whole(self) -> int:
        """How many cells are kept with nothing left to run."""
        return len(self.kept) - len(self.rounds_left)


def remaining(document: RunDocument, run_dir: Path,
              case_count: Callable[[Cell], int]) -> Remaining:
    """What is kept and what runs: read before anything is changed, so the executor can check
    the cells (SLURM's preflight) while the folder is as it was. CASE_COUNT: how many cases a
    planned cell's worker runs (the workload's cases of its parameters)."""
    kept = kept_results(document, run_dir)
    left: dict[CellKey, RoundsLeft] = {}
    for result in kept:
        todo = rounds_left(result, max(1, document.rounds), case_count(result.cell))
        if todo:
            left[result.cell.key] = todo
    kept = [resumable(result) for result in kept]
    whole = [result for result in kept if result.cell.key not in left]
    return Remaining(kept, cells_to_run(planned_cells(document), whole), left)


def rounds_left(result: CellResult, rounds: int, case_count: int) -> RoundsLeft:
    """The rounds of ROUNDS a kept result still lacks, each with the case positions to run.

    A round whose worker ended (run.json's rounds_ended; for a result stored without them, read
    from its records) is not run again, whatever its cases did; nor is any round of a cell
    that timed out (a later round would wait the whole --timeout again). Of a round whose
    worker was stopped, the cases it finished are kept and only the others run."""
    if result.status == Status.TIMEOUT:
        return {}
    held = [{record.round for record in case.rounds} for case in result.cases]
    held += [set() for _ in range(case_count - len(held))]
    ended = set(result.rounds_ended) or ended_by_records(result, held, rounds)
    left: RoundsLeft = {}
    for index in range(rounds):
        missing = tuple(position for position in range(case_count)
                        if index not in held[position])
        if index not in ended and missing:
            left[index] = () if len(missing) == case_count else missing
    return left


def ended_by_records(result: CellResult, held: list[set[int]], rounds: int) -> set[int]:
    """The rounds whose worker ended, for a result stored without rounds_ended (one round, or a
    run from before they were kept): the rounds every case that measured holds; every round
    where none measured. None of a result a stop cut short: its records tell what it holds."""
    if result.status == Status.INTERRUPTED:
        return set()
    measured = [rounds_held for rounds_held in held if rounds_held]
    if not measured:
        return set(range(rounds))
    return set.intersection(*measured)


def resumable(result: CellResult) -> CellResult:
    """A kept result as the resumed rounds merge into it: no longer `interrupted` (its cases'
    worst status, and their reason, instead), since what the stop cut short runs now."""
    if result.status != Status.INTERRUPTED:
        return result
    status = worst_status([case.status for case in result.cases])
    reason = next((case.reason for case in result.cases
                   if case.status == status and case.reason), "")
    return replace(result, status=status, reason=reason)


def reopen(document: RunDocument, cells: list[Cell], executor: dict[str, Any],
           command: list[str]) -> None:
    """Ready a stored run's document to go on with CELLS.

    The document's cells are emptied (the caller records the kept ones again, which rewrites
    measurements.csv from them), its end and interruption marks cleared, the resume noted.
    """
    document.cells, document.finished, document.interrupted = [], None, False
    document.interrupted_by = ""
    document.resumed.append(
        {"started": time.time(), "command": command, "cells": len(cells), "executor": executor})


def case_count(spec: WorkloadSpec, cell: Cell) -> int:
    """How many cases CELL's worker runs: the workload's cases of its parameters."""
    return len(spec.cases_for(dict(cell.params), cell.variant))


def resume_line(left: Remaining) -> str:
    """What a resume keeps and runs, for its first line."""
    partly = len(left.rounds_left)
    rounds = sum(len(todo) for todo in left.rounds_left.values())
    return (f"{left.whole} cells kept, {len(left.cells) - partly} to run"
            + (f", {partly} with rounds to finish ({counted(rounds, 'worker round')}; their "
               "finished rounds kept)" if partly else ""))
