"""Cells as tasks of SLURM job arrays, submitted through submitit; results in the one run folder.

One task per (workload, variant, framework, device) cell, as AlgoPerf submits its cells with
`sbatch --array` and benchopt runs its configurations as submitit arrays. CPU cells ask for a
whole node (`--exclusive`) on the CPU partition, so nothing else shares its cores while it is
timed; GPU cells ask for one GPU (`--gres=gpu:1`) on the GPU partition. Each task runs what a
local cell runs: `harness.run.runner.run_worker`, i.e. the worker in its own process, on its node.

The task writes its result document to RUN_DIR/cells/ (a shared file system, as on every
cluster) with the node's host metadata and its SLURM job id; this process watches SLURM and
hands each result on as its task ends. A task SLURM ended (failed, timed out, cancelled,
preempted, node failure) becomes a status row with SLURM's state and reason. A stop signal
cancels the arrays (scancel) and marks the cells not yet finished `interrupted`.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.core import interrupt
from harness.core.units import device_kind
from harness.data.results import CellResult
from harness.run.executors import slurm_state
from harness.run.executors.base import CellState, OnResult, OnState, ignore_state
from harness.run.executors.slurm_state import TaskState
from harness.run.executors.task import run_task
from harness.run.resume import TASK_RESULTS_FOLDER as RESULTS_FOLDER  # RUN_DIR/cells/<id>.json
from harness.run.runner import RunOptions, empty_result
from harness.spec import BadInput, Cell, Status

SUBMITIT_FOLDER = "slurm"     # RUN_DIR/slurm/: submitit's scripts, pickles and task logs
TIME_LIMIT_MARGIN_MIN = 5     # start-up and import time on top of the cell's --timeout
STDERR_TAIL_CHARS = 1500

# SLURM's end states that are not COMPLETED, as the status their cell gets.
STATUS_OF_STATE = {
    "TIMEOUT": Status.TIMEOUT,
    "DEADLINE": Status.TIMEOUT,
    "CANCELLED": Status.INTERRUPTED,
    "PREEMPTED": Status.INTERRUPTED,
}
WORDS_OF_STATE = {
    "TIMEOUT": "reached its SLURM time limit",
    "DEADLINE": "passed its SLURM deadline",
    "CANCELLED": "cancelled in SLURM (scancel)",
    "PREEMPTED": "preempted by SLURM",
    "NODE_FAIL": "its node failed",
    "OUT_OF_MEMORY": "out of memory (SLURM's memory limit)",
    "BOOT_FAIL": "its node failed to boot",
    "FAILED": "the SLURM task failed",
}
# A task's own document with one of these statuses is a cell that ran to its end: handed on
# at once. Any other waits for SLURM's word on how the task ended.
COMPLETE_STATUSES = frozenset({Status.OK.value, Status.INVALID.value, Status.UNAVAILABLE.value})
# submitit's local executor reports processes, not SLURM states.
LOCAL_STATES = {"RUNNING": "RUNNING", "FINISHED": "COMPLETED", "INTERRUPTED": "CANCELLED",
                "QUEUED": "PENDING"}


def cell_id(cell: Cell) -> str:
    """'fp32-torch-cuda0': the cell's file name in RUN_DIR/cells (unique within a run)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "", f"{cell.variant}-{cell.framework}-{cell.device}")


def default_time_limit_min(timeout_s: float) -> int:
    """Minutes SLURM allows a task: the cell's own timeout plus a start-up margin."""
    return math.ceil(timeout_s / 60) + TIME_LIMIT_MARGIN_MIN


def parse_sbatch_settings(values: list[str] | None) -> dict[str, Any]:
    """`--sbatch account=lab --sbatch requeue` -> {'account': 'lab', 'requeue': True}."""
    settings: dict[str, Any] = {}
    for value in values or []:
        name, has_value, text = value.partition("=")
        name = name.strip().lstrip("-")
        if not name:
            raise BadInput(f"--sbatch {value!r}: expected KEY=VALUE or KEY (example: "
                           "account=mylab, constraint=a100, requeue)")
        settings[name] = text.strip() if has_value else True
    return settings


def read_result(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def ended_result(cell: Cell, state: TaskState, document: dict[str, Any] | None,
                 log_tail: str = "") -> dict[str, Any]:
    """The result of a task SLURM ended: the task's own document if it completed, else a status
    row with SLURM's state and reason that keeps whatever cases the task saved."""
    if state.state == "COMPLETED" and document is not None:
        return document
    status = STATUS_OF_STATE.get(state.state, Status.ERROR)
    words = WORDS_OF_STATE.get(state.state, "the SLURM task ended")
    if state.state == "COMPLETED":
        words = "the SLURM task completed without writing a result"
    reason = f"{words}: {state.describe()}"
    told = (document or {}).get("reason") or " | ".join(log_tail.splitlines()[-4:])
    if told:
        reason += f"; task said: {told}"
    result = dict(document) if document is not None else empty_result(
        cell, status, reason).to_dict()
    result.update(cell=cell.as_dict(), status=status.value, reason=reason, finished=time.time())
    return result


def interrupted_result(cell: Cell, document: dict[str, Any] | None,
                       reason: str) -> dict[str, Any]:
    """A cell a stop signal cut short: interrupted, keeping the cases its task saved."""
    result = dict(document) if document is not None else empty_result(
        cell, Status.INTERRUPTED, reason).to_dict()
    result.update(cell=cell.as_dict(), status=Status.INTERRUPTED.value, reason=reason,
                  finished=time.time())
    return result


@dataclass
class Task:
    """One submitted cell: its submitit job, where its result lands, what was last seen."""

    cell: Cell
    job: Any
    result_path: Path
    running: bool = False
    missing_since: float | None = None

    @property
    def job_id(self) -> str:
        return str(self.job.job_id)

    def log_tail(self) -> str:
        try:
            text = self.job.stderr() or ""
        except Exception:  # noqa: BLE001 - a missing log must not cost the row
            text = ""
        return text[-STDERR_TAIL_CHARS:]


@dataclass
class SlurmExecutor:
    """Submits cells as submitit job arrays; see the module docstring.

    partition_cpu / partition_gpu: where CPU and GPU cells go (None: the cluster's default).
    time_limit_min: SLURM's limit per task (None: the cell timeout plus a margin).
    sbatch: more sbatch settings for every task ({'account': 'lab', 'constraint': 'a100'}).
    cluster: 'slurm', or 'local' for submitit's local executor (no SLURM: tests, one box).
    poll_s: how often SLURM is asked; missing_grace_s: how long a result file may lag behind
    its task's end (shared file systems cache); cancel_grace_s: after a stop, how long tasks
    already finishing get to hand in their results.
    """

    partition_cpu: str | None = None
    partition_gpu: str | None = None
    time_limit_min: int | None = None
    sbatch: dict[str, Any] = field(default_factory=dict)
    exclusive_cpu: bool = True
    gpus_per_cell: int = 1
    cluster: str = "slurm"
    poll_s: float = 1.0
    missing_grace_s: float = 30.0
    cancel_grace_s: float = 15.0
    name = "slurm"
    runs_cells_here = False

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "cluster": self.cluster, "partition_cpu": self.partition_cpu,
                "partition_gpu": self.partition_gpu, "time_limit_min": self.time_limit_min,
                "sbatch": self.sbatch, "exclusive_cpu": self.exclusive_cpu,
                "gpus_per_cell": self.gpus_per_cell}

    def parameters(self, kind: str, options: RunOptions) -> dict[str, Any]:
        """submitit parameters for the array of one device kind ('cpu' or 'gpu')."""
        found: dict[str, Any] = {
            "timeout_min": self.time_limit_min or default_time_limit_min(options.timeout_s),
            "name": "harness",
            "slurm_additional_parameters": dict(self.sbatch),
        }
        partition = self.partition_gpu if kind == "gpu" else self.partition_cpu
        if partition:
            found["slurm_partition"] = partition
        if kind == "gpu":
            found["slurm_gres"] = f"gpu:{self.gpus_per_cell}"
        elif self.exclusive_cpu:
            found["slurm_exclusive"] = True
        return found

    def submit(self, cells: list[Cell], options: RunOptions,
               run_dir: Path) -> tuple[list[Task], list[dict[str, Any]]]:
        """One array per device kind (partition and resources differ): a Task per cell, and
        an error result per cell of an array that sbatch refused (no such partition, no GPUs
        there, an account it does not know...)."""
        import submitit

        results = run_dir / RESULTS_FOLDER
        results.mkdir(parents=True, exist_ok=True)
        tasks: list[Task] = []
        refused: list[dict[str, Any]] = []
        for kind in ("cpu", "gpu"):
            group = [cell for cell in cells if device_kind(cell.device) == kind]
            if not group:
                continue
            # A fresh executor per kind: submitit keeps parameters across updates, and a GPU
            # cell must not inherit the CPU cells' --exclusive.
            executor = submitit.AutoExecutor(folder=run_dir / SUBMITIT_FOLDER / "%j",
                                             cluster=self.cluster)
            executor.update_parameters(**self.parameters(kind, options))
            paths = [results / f"{cell_id(cell)}.json" for cell in group]
            for path in paths:  # a --resume: the cut-short run's file must not pass for news
                path.unlink(missing_ok=True)
            try:
                jobs = executor.map_array(run_task, [cell.as_dict() for cell in group],
                                          [str(path) for path in paths],
                                          [options] * len(group),
                                          [self.restored_environment()] * len(group))
            except Exception as exc:  # noqa: BLE001 - a refused submission is a status row
                said = " | ".join(str(exc).strip().splitlines()[-3:])
                refused.extend(empty_result(cell, Status.ERROR,
                                            f"sbatch refused the {kind} cells: {said}").to_dict()
                               for cell in group)
                continue
            tasks.extend(Task(cell, job, path) for cell, job, path in zip(group, jobs, paths))
        return tasks, refused

    def restored_environment(self) -> dict[str, str | None]:
        """What a task must set back first: submitit's local executor gives every task the
        same CUDA_VISIBLE_DEVICES; the tasks pin their GPUs out of what this process sees."""
        if self.cluster != "local":
            return {}
        return {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}

    def states(self, tasks: list[Task]) -> dict[str, TaskState] | None:
        """Task id -> state, from SLURM (or submitit's local processes); None: no answer now."""
        if self.cluster != "slurm":
            return {task.job_id: TaskState(LOCAL_STATES.get(str(task.job.state), "UNKNOWN"))
                    for task in tasks}
        try:
            return slurm_state.query(task.job_id for task in tasks)
        except slurm_state.SlurmUnreachable:
            return None

    def cancel(self, tasks: list[Task]) -> None:
        if self.cluster == "slurm":
            slurm_state.cancel(task.job_id for task in tasks)
            return
        for task in tasks:
            task.job.cancel(check=False)

    def run(self, cells: list[Cell], options: RunOptions, run_dir: Path, on_result: OnResult,
            on_state: OnState | None = None) -> bool:
        """Submit every cell, hand on each result as its task ends; False if stopped early."""
        report_state = on_state or ignore_state
        if not cells:
            return True
        tasks, refused = self.submit(cells, options, run_dir)
        for result in refused:
            cell = Cell(**result["cell"])
            on_result(cell, CellResult.from_dict(result))
            report_state(cell, CellState.DONE)
        for task in tasks:
            report_state(task.cell, CellState.QUEUED)
        pending = list(tasks)
        try:
            while pending and interrupt.requested() is None:
                pending = self._collect(pending, on_result, report_state)
                if pending:
                    time.sleep(self.poll_s)
        except KeyboardInterrupt:  # no handlers installed (a notebook): cancel, then re-raise
            self._stop(pending, on_result, report_state, "interrupted by KeyboardInterrupt",
                       wait=False)
            raise
        stop = interrupt.requested()
        if stop is None:
            return True
        self._stop(pending, on_result, report_state,
                   f"interrupted by {interrupt.describe(stop)}; SLURM task cancelled")
        return False

    def _collect(self, pending: list[Task], on_result: OnResult,
                 report_state: Callable[[Cell, CellState], None]) -> list[Task]:
        """Hand on the results of the tasks that ended; the ones still going are returned."""
        states = self.states(pending)
        still: list[Task] = []
        for task in pending:
            state = None if states is None else states.get(task.job_id)
            if state is not None and state.running and not task.running:
                task.running = True
                report_state(task.cell, CellState.RUNNING)
            result = self._ended(task, state, answered=states is not None)
            if result is None:
                still.append(task)
                continue
            result.setdefault("slurm", {})["job_id"] = task.job_id
            if state is not None and state.finished:  # a complete cell may beat its task's end
                result["slurm"]["state"] = state.state
            if state is not None and state.node:
                result["slurm"]["node"] = state.node
            on_result(task.cell, CellResult.from_dict(result))
            report_state(task.cell, CellState.DONE)
        return still

    def _ended(self, task: Task, state: TaskState | None,
               answered: bool = True) -> dict[str, Any] | None:
        """The task's result once SLURM says it ended (and its file is in), else None.
        answered: whether SLURM answered at all this time (if not, only a complete file counts).

        Why wait for SLURM when the file says error or timeout: a task SLURM cancels, times out
        or preempts still writes a file (its worker killed by SLURM's signal), and the row must
        say what SLURM did.
        """
        document = read_result(task.result_path)
        if document is not None and document.get("status") in COMPLETE_STATUSES:
            return document  # the cell ran to its end; how its task exits changes nothing
        if not answered:
            return None
        if state is None:  # forgotten by SLURM (or never seen): the file is all there is
            if document is not None:
                return document
            return self._after_grace(task, TaskState("UNKNOWN", "no longer known to SLURM"))
        if not state.finished:
            return None
        if state.state == "COMPLETED" and document is None:
            return self._after_grace(task, state)
        return ended_result(task.cell, state, document, task.log_tail())

    def _after_grace(self, task: Task, state: TaskState) -> dict[str, Any] | None:
        """None until the result file has had missing_grace_s to appear, then a status row."""
        now = time.monotonic()
        if task.missing_since is None:
            task.missing_since = now
        if now - task.missing_since < self.missing_grace_s:
            return None
        return ended_result(task.cell, state, read_result(task.result_path), task.log_tail())

    def _stop(self, pending: list[Task], on_result: OnResult,
              report_state: Callable[[Cell, CellState], None], reason: str,
              wait: bool = True) -> None:
        """scancel what is left; results already written are kept as they are, every other
        cell becomes `interrupted` (with the cases its task saved).

        Why look before cancelling: a task writes its file only once its cell is complete, so
        a file there now is a finished cell, even if scancel catches its task still exiting.
        """
        written = {task.job_id: read_result(task.result_path) for task in pending}
        self.cancel(pending)
        deadline = time.monotonic() + (self.cancel_grace_s if wait else 0.0)
        while wait and pending and time.monotonic() < deadline:
            states = self.states(pending) or {}
            if len(states) == len(pending) and all(state.finished for state in states.values()):
                break
            time.sleep(min(self.poll_s, 0.5))
        states = (self.states(pending) or {}) if wait else {}
        for task in pending:
            state = states.get(task.job_id)
            document = written[task.job_id] or read_result(task.result_path)
            if written[task.job_id] is not None or (
                    state is not None and state.state == "COMPLETED" and document is not None):
                result = document
            else:
                result = interrupted_result(task.cell, document, reason)
            result.setdefault("slurm", {})
            result["slurm"].update(job_id=task.job_id,
                                   state=state.state if state is not None else "CANCELLED")
            on_result(task.cell, CellResult.from_dict(result))
            report_state(task.cell, CellState.DONE)
