"""What a SLURM run keeps of its tasks in RUN_DIR/slurm/, and the check a --resume makes with it.

arrays.json lists each array submitted (its id, device kind, and which task runs which cell),
so a `--resume` can ask SLURM whether the run's tasks are still queued; watch.log is what this
process saw SLURM do, for after the run.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TypedDict

from harness.data.store import write_json_atomic
from harness.run.executors import slurm_state
from harness.run.executors.slurm_state import TaskState
from harness.spec import BadInput

SUBMITIT_FOLDER = "slurm"     # RUN_DIR/slurm/: submitit's scripts, pickles and task logs
ARRAYS_FILE = "arrays.json"   # RUN_DIR/slurm/arrays.json: the arrays submitted, by kind and cell
WATCH_LOG = "watch.log"       # RUN_DIR/slurm/watch.log: what this process saw SLURM do


class ArrayRecord(TypedDict):
    """One submitted array, as RUN_DIR/slurm/arrays.json keeps it."""

    array: str  # SLURM's array id
    kind: str  # 'cpu' or 'gpu'
    submitted: float  # time.time()
    tasks: dict[str, str]  # task id ('123_0') -> cell id (its file name in RUN_DIR/cells)


def record_array(run_dir: Path, kind: str, cells_of_tasks: Mapping[str, str]) -> None:
    """Add one submitted array (task id -> cell id) to RUN_DIR/slurm/arrays.json."""
    record: ArrayRecord = {"array": slurm_state.array_of(next(iter(cells_of_tasks))),
                           "kind": kind, "submitted": time.time(), "tasks": dict(cells_of_tasks)}
    write_json_atomic(run_dir / SUBMITIT_FOLDER / ARRAYS_FILE, [*recorded_arrays(run_dir), record])


def recorded_arrays(run_dir: Path) -> list[ArrayRecord]:
    """The arrays a run submitted, oldest first ([] before any or for a local run)."""
    try:
        found = json.loads((run_dir / SUBMITIT_FOLDER / ARRAYS_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return []
    return found if isinstance(found, list) else []


def log_line(run_dir: Path, line: str) -> None:
    """One line in RUN_DIR/slurm/watch.log: what SLURM did, for after the run."""
    path = run_dir / SUBMITIT_FOLDER / WATCH_LOG
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as stream:
            stream.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")
    except OSError:
        pass  # the log is a courtesy; the rows carry what matters


def live_tasks(run_dir: Path) -> dict[str, TaskState]:
    """The run's tasks SLURM still holds pending or running: task id -> state.

    Raises slurm_state.SlurmUnreachable when SLURM does not answer.
    """
    wanted = [job_id for array in recorded_arrays(run_dir) for job_id in array.get("tasks", {})]
    if not wanted:
        return {}
    return {job_id: state for job_id, state in slurm_state.query(wanted).items()
            if not state.finished}


def cancel_live_tasks(run_dir: Path, wait_s: float = 30.0) -> list[str]:
    """scancel the run's tasks still queued or running and wait (up to wait_s) for them to end;
    the ids cancelled."""
    live = live_tasks(run_dir)
    slurm_state.cancel(live, whole_arrays=False)
    deadline = time.monotonic() + wait_s
    while live_tasks(run_dir) and time.monotonic() < deadline:
        time.sleep(0.5)
    return sorted(live)


def check_no_live_tasks(run_dir: Path, cancel: bool = False) -> None:
    """BadInput (one line) while the run's SLURM tasks are still queued or running; cancel:
    scancel them first (waiting for them to end) instead."""
    if not recorded_arrays(run_dir):
        return
    try:
        if cancel:
            cancel_live_tasks(run_dir)
        live = live_tasks(run_dir)
    except slurm_state.SlurmUnreachable as exc:
        raise BadInput(f"--resume: cannot ask SLURM whether the run's tasks are still queued "
                       f"({exc})") from None
    if live:
        arrays = sorted({slurm_state.array_of(job_id) for job_id in live})
        listed = ", ".join(f"{job_id} {state.state}" for job_id, state in sorted(live.items()))
        raise BadInput(f"--resume: the run's SLURM array {', '.join(arrays)} still has tasks "
                       f"queued or running ({listed}); wait for them, or add --cancel-running "
                       "to scancel them")
