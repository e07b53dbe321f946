"""`--resume RUN_DIR`: which cells of a stored run still need to run, and what is kept.

A cell has a result when run.json holds one whose status is not `interrupted` and that is not
a refused submission (no SLURM job id: the cell never ran); a result file that a SLURM task
left in RUN_DIR/cells after the submitting process died counts too (its task finished; nothing
finished is lost). Everything else of the stored plan runs again. A run whose SLURM tasks are
still queued or running is not resumed (their results would land under the new tasks).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from harness.data.results import CellResult, RunDocument
from harness.data.store import read_cell_result
from harness.spec import BadInput, Cell, Status

TASK_RESULTS_FOLDER = "cells"  # where SLURM tasks write (harness.run.executors.slurm)


def planned_cells(document: RunDocument) -> list[Cell]:
    """The cells the run was planned with (stored in run.json since --resume exists)."""
    if not document.planned_cells:
        raise BadInput(f"run {document.run_id!r} stores no planned cells (written before "
                       "--resume existed); start a new run instead")
    return [Cell.from_dict(fields) for fields in document.planned_cells]


def _task_results(run_dir: Path) -> list[CellResult]:
    paths = sorted((run_dir / TASK_RESULTS_FOLDER).glob("*.json"))
    return [result for path in paths if (result := read_cell_result(path)) is not None]


def never_ran(result: CellResult) -> bool:
    """A row for a cell that did not run: interrupted, or its submission refused (no job)."""
    refused = bool((result.slurm or {}).get("refused")) and not (result.slurm or {}).get("job_id")
    return result.status == Status.INTERRUPTED or refused


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


def cells_to_run(planned: list[Cell], kept: list[CellResult]) -> list[Cell]:
    """The planned cells without a kept result, in the planned order."""
    done = {result.cell.key for result in kept}
    return [cell for cell in planned if cell.key not in done]


def remaining(document: RunDocument, run_dir: Path) -> tuple[list[CellResult], list[Cell]]:
    """(the results kept, the planned cells without one): read before anything is changed, so
    the executor can check those cells (SLURM's preflight) while the folder is as it was."""
    kept = kept_results(document, run_dir)
    return kept, cells_to_run(planned_cells(document), kept)


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
