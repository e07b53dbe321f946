"""Cells as tasks of SLURM job arrays, submitted through submitit; results in the one run folder.

One task per (workload, variant, framework, device) cell, as AlgoPerf submits its cells with
`sbatch --array` and benchopt runs its configurations as submitit arrays. CPU cells ask for a
whole node (`--exclusive`) on the CPU partition, so nothing else shares its cores while it is
timed; GPU cells ask for one GPU (`--gres=gpu:1`) on the GPU partition. Each task runs what a
local cell runs: `harness.run.runner.run_worker`, i.e. the worker in its own process, on its node.

The task writes its result document to RUN_DIR/cells/ (a shared file system, as on every
cluster) with the node's host metadata and its SLURM job id; this process watches SLURM and
hands each result on as its task ends. A task SLURM ended (failed, timed out, cancelled,
preempted) becomes a status row with SLURM's state and reason; one lost with its node (down,
failed, not responding) is `interrupted`, so `--resume` runs it again. A task that cannot start
(a drained or down node, a hold: see slurm_state.CANNOT_START_REASONS) for longer than the
pending limit is cancelled and `interrupted` with SLURM's reason: nothing waits without end.
A stop signal cancels the arrays (scancel) and marks the cells not yet finished `interrupted`.
Each array's id is recorded in RUN_DIR/slurm/arrays.json, so a `--resume` can tell whether the
run's tasks are still queued.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict

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
ARRAYS_FILE = "arrays.json"   # RUN_DIR/slurm/arrays.json: the arrays submitted, by kind and cell
WATCH_LOG = "watch.log"       # RUN_DIR/slurm/watch.log: what this process saw SLURM do
PREFLIGHT_SETTLE_S = 5.0     # how long the pre-check waits for an unusable node to come back
NODE_CHECK_S = 5.0            # how often the nodes of running tasks are asked after
# A TIMEOUT this far under the task's limit was no time limit (a lost node reported so).
EARLY_TIMEOUT_MARGIN_S = 10.0
# submitit's own log lines ('submitit WARNING (date) - Bypassing signal SIGCONT') say nothing
# about the cell; they are never quoted as a task's reason.
SUBMITIT_LOG_LINE = re.compile(r"^submitit (DEBUG|INFO|WARNING|ERROR|CRITICAL)\b")
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
    """'fp32-torch-cuda0' ('fp32-torch-cuda0-round2' for a round of a run of several): the
    cell's file name in RUN_DIR/cells, unique within a run, so no round overwrites another."""
    return cell.key.slug + (f"-round{cell.round}" if cell.rounds > 1 else "")


def default_time_limit_min(timeout_s: float) -> int:
    """Minutes SLURM allows a task: the cell's own timeout plus a start-up margin."""
    return math.ceil(timeout_s / 60) + TIME_LIMIT_MARGIN_MIN


def default_pending_limit_s(time_limit_min: int) -> float:
    """How long a task may sit unable to start (drained/down node, hold): its time limit.

    Why the time limit: it is the wait the user already accepted for one cell, it grows with
    the cells' size, and a node down for that long (minutes to hours on a cluster) is not a
    reboot that will end within the run.
    """
    return time_limit_min * 60.0


# `--sbatch` settings: KEY=VALUE as its text, a bare KEY (a flag such as requeue) as True.
SbatchSettings = dict[str, str | bool]
# What SlurmExecutor.describe stores in run.json's "executor" (a --resume reads it back).
ExecutorDescription = dict[str, str | int | float | bool | SbatchSettings | None]


@dataclass(frozen=True)
class JobParameters:
    """What the tasks of one array ask SLURM for: as submitit's parameters, and as the sbatch
    options submitit writes for them (for `sbatch --test-only`)."""

    timeout_min: int
    name: str = "harness"
    partition: str | None = None
    gres: str | None = None  # 'gpu:1' for GPU cells
    exclusive: bool = False  # a whole node, for CPU cells
    additional: Mapping[str, str | bool] = field(default_factory=dict)

    def submitit_parameters(self) -> dict[str, int | str | bool | SbatchSettings]:
        """The keyword arguments of submitit's `update_parameters`."""
        found: dict[str, int | str | bool | SbatchSettings] = {
            "timeout_min": self.timeout_min, "name": self.name,
            "slurm_additional_parameters": dict(self.additional)}
        if self.partition:
            found["slurm_partition"] = self.partition
        if self.gres:
            found["slurm_gres"] = self.gres
        if self.exclusive:
            found["slurm_exclusive"] = True
        return found

    def sbatch_flags(self) -> list[str]:
        """The sbatch options submitit writes for these parameters."""
        flags = [f"--time={self.timeout_min}", f"--job-name={self.name}"]
        if self.partition:
            flags.append(f"--partition={self.partition}")
        if self.gres:
            flags.append(f"--gres={self.gres}")
        if self.exclusive:
            flags.append("--exclusive")
        for name, value in self.additional.items():
            option = name.replace("_", "-")
            flags.append(f"--{option}" if value is True else f"--{option}={value}")
        return flags


class ArrayRecord(TypedDict):
    """One submitted array, as RUN_DIR/slurm/arrays.json keeps it."""

    array: str  # SLURM's array id
    kind: str  # 'cpu' or 'gpu'
    submitted: float  # time.time()
    tasks: dict[str, str]  # task id ('123_0') -> cell id (its file name in RUN_DIR/cells)


def log_lines(text: str) -> list[str]:
    """A task log's lines without submitit's own (they never explain how a cell ended)."""
    return [line for line in text.splitlines()
            if line.strip() and not SUBMITIT_LOG_LINE.match(line.strip())]


def node_failure(state: TaskState, trouble: str) -> str:
    """Why a task that ended without a result was lost with its node; '' if it was not.

    trouble: what was seen of its node while it ran ('node vm stopped responding (...)').
    """
    if state.state in ("NODE_FAIL", "BOOT_FAIL"):
        node = state.node or "its node"
        return trouble or f"node {node} failed"
    if state.state not in ("TIMEOUT", "FAILED"):
        return ""
    if trouble:
        return trouble
    if (state.state == "TIMEOUT" and state.run_s is not None and state.limit_s and
            state.run_s < state.limit_s - EARLY_TIMEOUT_MARGIN_S):
        return (f"SLURM said TIMEOUT after {state.run_s:.0f} s of a {state.limit_s:.0f} s "
                f"limit: not its time limit; its node {state.node or '?'} most likely failed")
    return ""


def parse_sbatch_settings(values: list[str] | None) -> SbatchSettings:
    """`--sbatch account=lab --sbatch requeue` -> {'account': 'lab', 'requeue': True}."""
    settings: SbatchSettings = {}
    for value in values or []:
        name, has_value, text = value.partition("=")
        name = name.strip().lstrip("-")
        if not name:
            raise BadInput(f"--sbatch {value!r}: expected KEY=VALUE or KEY (example: "
                           "account=mylab, constraint=a100, requeue)")
        settings[name] = text.strip() if has_value else True
    return settings


def record_array(run_dir: Path, kind: str, tasks: list[Task]) -> None:
    """Add one submitted array to RUN_DIR/slurm/arrays.json (a --resume asks SLURM about it)."""
    path = run_dir / SUBMITIT_FOLDER / ARRAYS_FILE
    arrays = recorded_arrays(run_dir)
    arrays.append({"array": tasks[0].job_id.split("_", 1)[0], "kind": kind,
                   "submitted": time.time(),
                   "tasks": {task.job_id: cell_id(task.cell) for task in tasks}})
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(arrays, indent=1))
    os.replace(temporary, path)


def recorded_arrays(run_dir: Path) -> list[ArrayRecord]:
    """The arrays a run submitted, oldest first ([] before any or for a local run)."""
    try:
        found = json.loads((run_dir / SUBMITIT_FOLDER / ARRAYS_FILE).read_text())
    except (OSError, json.JSONDecodeError):
        return []
    return found if isinstance(found, list) else []


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
    slurm_state.cancel_tasks(live)
    deadline = time.monotonic() + wait_s
    while live_tasks(run_dir) and time.monotonic() < deadline:
        time.sleep(0.5)
    return sorted(live)


def usable_nodes(partition: str, settle_s: float = PREFLIGHT_SETTLE_S) -> list[
        tuple[str, str, bool]]:
    """[(node, state, whether it takes tasks)] of a partition ('' for the default one).

    Asked again for up to settle_s while none is usable and all merely do not respond: a node
    SLURM just returned to service shows 'idle*' for a second until its slurmd registers.
    """
    deadline = time.monotonic() + settle_s
    while True:
        try:
            nodes = slurm_state.partition_nodes()
        except slurm_state.SlurmUnreachable as exc:
            raise BadInput(f"--executor slurm: SLURM does not answer here ({exc})") from None
        listed = [(node, state + ("" if up else " (partition down)"),
                   up and slurm_state.sinfo_state_usable(state))
                  for node, state, up in nodes.get(partition, [])]
        returning = all(state.endswith("*") for _, state, _ in listed)
        if any(usable for _, _, usable in listed) or not returning or \
                time.monotonic() > deadline:
            return listed
        time.sleep(0.5)


def read_result(path: Path) -> CellResult | None:
    """The result a task wrote; None while there is none (or it cannot be read yet)."""
    try:
        return CellResult.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError, KeyError):  # not (yet) a cell result's document
        return None


def as_cell_row(cell: Cell, written: CellResult | None, status: Status,
                reason: str) -> CellResult:
    """The row of a task that did not complete: `cell` with this status and reason, keeping
    the cases its task saved (`written`, if it wrote anything)."""
    if written is None:
        written = empty_result(cell, status, reason)
    # The cell as this run planned it, not as the task's file spelled it (cell_extra: keys of
    # that spelling this harness does not know).
    return replace(written, cell=cell, cell_extra={}, status=status, reason=reason,
                   finished=time.time())


def ended_result(cell: Cell, state: TaskState, document: CellResult | None,
                 log_tail: str = "", node_trouble: str = "") -> CellResult:
    """The result of a task SLURM ended: the task's own document if it completed, else a status
    row with SLURM's state and reason that keeps whatever cases the task saved. A task lost
    with its node is `interrupted` (see node_failure), so --resume runs it again."""
    if state.state == "COMPLETED" and document is not None:
        return document
    status = STATUS_OF_STATE.get(state.state, Status.ERROR)
    words = WORDS_OF_STATE.get(state.state, "the SLURM task ended")
    if state.state == "COMPLETED":
        words = "the SLURM task completed without writing a result"
    lost = node_failure(state, node_trouble)
    if lost:
        status, words = Status.INTERRUPTED, f"lost with its node: {lost}"
    reason = f"{words}: {state.describe()}"
    told = (document.reason if document is not None else "") or " | ".join(
        log_lines(log_tail)[-4:])
    if told:
        reason += f"; task said: {told}"
    return as_cell_row(cell, document, status, reason)


def interrupted_result(cell: Cell, document: CellResult | None, reason: str) -> CellResult:
    """A cell a stop signal cut short: interrupted, keeping the cases its task saved."""
    return as_cell_row(cell, document, Status.INTERRUPTED, reason)


def with_slurm(result: CellResult, **seen: str | int | bool | None) -> CellResult:
    """The result with what SLURM said of its task added to its `slurm` record."""
    result.slurm = {**(result.slurm or {}), **seen}
    return result


@dataclass
class Task:
    """One submitted cell: its submitit job, where its result lands, what was last seen."""

    cell: Cell
    job: Any
    result_path: Path
    running: bool = False
    missing_since: float | None = None
    blocked_since: float | None = None   # pending with a cannot-start reason since (monotonic)
    reason: str = ""                     # the last pending reason seen
    restarts: int = 0                    # SLURM requeues seen
    node_trouble: str = ""               # what was seen of its node going down while it ran

    @property
    def job_id(self) -> str:
        return "" if self.job is None else str(self.job.job_id)

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
    pending_limit_s: how long a task may sit unable to start (drained or down node, hold...)
    before it is cancelled and `interrupted` (None: its time limit, default_pending_limit_s).
    Ordinary waits (Priority, Resources) have no bound: a busy cluster may queue for hours, and
    the progress line names the reason.
    poll_s: how often SLURM is asked; missing_grace_s: how long a result file may lag behind
    its task's end (shared file systems cache); cancel_grace_s: after a stop, how long tasks
    already finishing get to hand in their results.
    """

    partition_cpu: str | None = None
    partition_gpu: str | None = None
    time_limit_min: int | None = None
    sbatch: SbatchSettings = field(default_factory=dict)
    pending_limit_s: float | None = None
    exclusive_cpu: bool = True
    gpus_per_cell: int = 1
    cluster: str = "slurm"
    poll_s: float = 1.0
    missing_grace_s: float = 30.0
    cancel_grace_s: float = 15.0
    name = "slurm"
    runs_cells_here = False

    def describe(self) -> ExecutorDescription:
        return {"name": self.name, "cluster": self.cluster, "partition_cpu": self.partition_cpu,
                "partition_gpu": self.partition_gpu, "time_limit_min": self.time_limit_min,
                "sbatch": self.sbatch, "pending_limit_s": self.pending_limit_s,
                "exclusive_cpu": self.exclusive_cpu,
                "gpus_per_cell": self.gpus_per_cell}

    def parameters(self, kind: str, options: RunOptions) -> JobParameters:
        """What the array of one device kind ('cpu' or 'gpu') asks SLURM for."""
        gpu = kind == "gpu"
        return JobParameters(
            timeout_min=self.time_limit(options),
            partition=(self.partition_gpu if gpu else self.partition_cpu) or None,
            gres=f"gpu:{self.gpus_per_cell}" if gpu else None,
            exclusive=not gpu and self.exclusive_cpu,
            additional=dict(self.sbatch))

    def time_limit(self, options: RunOptions) -> int:
        return self.time_limit_min or default_time_limit_min(options.timeout_s)

    def pending_limit(self, options: RunOptions) -> float:
        if self.pending_limit_s is not None:
            return self.pending_limit_s
        return default_pending_limit_s(self.time_limit(options))

    def preflight(self, cells: list[Cell], options: RunOptions) -> None:
        """BadInput (one line) before any run folder is written when SLURM would never run
        these cells: no node of a partition can take a task (drained, down, not responding,
        partition down), or sbatch refuses the options (`sbatch --test-only`)."""
        if self.cluster != "slurm":
            return
        kinds = [kind for kind in ("cpu", "gpu")
                 if any(device_kind(cell.device) == kind for cell in cells)]
        for kind in kinds:
            partition = self.partition_gpu if kind == "gpu" else self.partition_cpu
            option = f"--partition-{kind} {partition!r}" if partition else \
                f"the default partition (for {kind} cells)"
            listed = usable_nodes(partition or "")
            if listed and not any(usable for _, _, usable in listed):
                seen = ", ".join(f"{node}: {state}" for node, state, _ in listed[:6])
                raise BadInput(f"{option}: no node can take a task now ({seen}); SLURM would "
                               "queue the cells without end")
            flags = self.parameters(kind, options).sbatch_flags()
            code, _, said = slurm_state._run(["sbatch", "--test-only", *flags, "--wrap", "true"])
            if code != 0:
                last = (said.strip().splitlines() or [f"exit code {code}"])[0]
                raise BadInput(f"sbatch refuses the {kind} cells' options "
                               f"({' '.join(flags)}): {last}")

    def submit(self, cells: list[Cell], options: RunOptions,
               run_dir: Path) -> tuple[list[Task], list[CellResult]]:
        """One array per device kind (partition and resources differ): a Task per cell, and
        an error result per cell of an array that sbatch refused (no such partition, no GPUs
        there, an account it does not know...)."""
        import submitit

        results = run_dir / RESULTS_FOLDER
        results.mkdir(parents=True, exist_ok=True)
        tasks: list[Task] = []
        refused: list[CellResult] = []
        for kind in ("cpu", "gpu"):
            group = [cell for cell in cells if device_kind(cell.device) == kind]
            if not group:
                continue
            # A fresh executor per kind: submitit keeps parameters across updates, and a GPU
            # cell must not inherit the CPU cells' --exclusive.
            executor = submitit.AutoExecutor(folder=run_dir / SUBMITIT_FOLDER / "%j",
                                             cluster=self.cluster)
            executor.update_parameters(**self.parameters(kind, options).submitit_parameters())
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
                for cell in group:
                    row = empty_result(cell, Status.ERROR,
                                       f"sbatch refused the {kind} cells: {said}")
                    # Never submitted: --resume counts the cell as not run.
                    refused.append(with_slurm(row, job_id=None, refused=True))
                self._log(run_dir, f"sbatch refused the {len(group)} {kind} cells: {said}")
                continue
            group_tasks = [Task(cell, job, path) for cell, job, path in zip(group, jobs, paths)]
            if self.cluster == "slurm":  # submitit's local jobs are no SLURM array to ask after
                record_array(run_dir, kind, group_tasks)
            self._log(run_dir, f"submitted {len(group)} {kind} cells as array "
                               f"{group_tasks[0].job_id.split('_')[0]}")
            tasks.extend(group_tasks)
        return tasks, refused

    def _log(self, run_dir: Path, line: str) -> None:
        """One line in RUN_DIR/slurm/watch.log: what SLURM did, for after the run."""
        path = run_dir / SUBMITIT_FOLDER / WATCH_LOG
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as stream:
                stream.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")
        except OSError:
            pass  # the log is a courtesy; the rows carry what matters

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
        self._run_dir, self._pending_limit = run_dir, self.pending_limit(options)
        self._nodes_checked = 0.0
        self._partition_blocked: dict[str, str] = {}
        tasks, refused = self.submit(cells, options, run_dir)
        for result in refused:
            on_result(result.cell, result)
            report_state(result.cell, CellState.DONE)
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
                 report_state: OnState) -> list[Task]:
        """Hand on the results of the tasks that ended; the ones still going are returned."""
        states = self.states(pending)
        self._watch_nodes(pending, states or {})
        still: list[Task] = []
        for task in pending:
            state = None if states is None else states.get(task.job_id)
            self._note(task, state, report_state)
            result = self._ended(task, state, answered=states is not None)
            if result is None:
                result = self._blocked_too_long(task, state)
            if result is None:
                still.append(task)
                continue
            seen: dict[str, str | int] = {"job_id": task.job_id}
            if state is not None and state.finished:  # a complete cell may beat its task's end
                seen["state"] = state.state
            if state is not None and state.node:
                seen["node"] = state.node
            if task.restarts:
                seen["restarts"] = task.restarts
            on_result(task.cell, with_slurm(result, **seen))
            report_state(task.cell, CellState.DONE)
        return still

    def _note(self, task: Task, state: TaskState | None, report_state: OnState) -> None:
        """Follow one task: running, requeued, or pending and why (progress line and log)."""
        if state is None:
            return
        if state.restarts > task.restarts:
            task.restarts = state.restarts
            self._log(self._run_dir, f"{task.job_id} ({task.cell.label}) requeued by SLURM "
                                     f"(restart {state.restarts})")
        if state.running and not task.running:
            task.running, task.blocked_since = True, None
            report_state(task.cell, CellState.RUNNING)
            self._log(self._run_dir, f"{task.job_id} ({task.cell.label}) running on "
                                     f"{state.node}")
        if not state.pending:
            return
        if task.running:  # requeued: waiting again
            task.running = False
        reason = slurm_state.readable_reason(state.reason)
        blocked = self._partition_blocked.get(self._partition_of(task), "")
        if blocked and not slurm_state.cannot_start(state.reason):
            # Only the first task in line gets the node's reason; the others say Priority or
            # Resources while no node could ever take them.
            reason = f"{reason}; {blocked}"
        if reason != task.reason:
            task.reason = reason
            self._log(self._run_dir, f"{task.job_id} ({task.cell.label}) pending: {reason}")
            report_state(task.cell, CellState.QUEUED, reason)
        if not (blocked or slurm_state.cannot_start(state.reason)):
            task.blocked_since = None
        elif task.blocked_since is None:
            task.blocked_since = time.monotonic()

    def _blocked_too_long(self, task: Task, state: TaskState | None) -> CellResult | None:
        """Cancel a task that could not start for longer than the pending limit: its cell is
        `interrupted` with SLURM's reason (so --resume runs it), and nothing waits forever."""
        if state is None or not state.pending or task.blocked_since is None:
            return None
        waited = time.monotonic() - task.blocked_since
        if waited < self._pending_limit:
            return None
        slurm_state.cancel_tasks([task.job_id])
        reason = (f"SLURM could not start the task for {waited:.0f} s (pending limit "
                  f"{self._pending_limit:g} s), cancelled: {task.reason}")
        self._log(self._run_dir, f"{task.job_id} ({task.cell.label}) {reason}")
        result = interrupted_result(task.cell, None, reason)
        result.slurm = {"state": "CANCELLED", "pending_reason": task.reason}
        return result

    def _watch_nodes(self, pending: list[Task], states: dict[str, TaskState]) -> None:
        """Every NODE_CHECK_S, ask after the nodes running tasks: one seen down or not
        responding marks its tasks, whose end is then called a node failure."""
        if self.cluster != "slurm" or time.monotonic() - self._nodes_checked < NODE_CHECK_S:
            return
        self._nodes_checked = time.monotonic()
        self._partition_blocked = self._blocked_partitions(pending, states)
        running = {task.job_id: states[task.job_id].node for task in pending
                   if task.job_id in states and states[task.job_id].running}
        nodes = slurm_state.node_states(running.values())
        for task in pending:
            node = nodes.get(running.get(task.job_id, ""))
            if node is not None and node.lost and not task.node_trouble:
                task.node_trouble = node.describe()
                self._log(self._run_dir, f"{task.job_id} ({task.cell.label}): "
                                         f"{task.node_trouble}")

    def _partition_of(self, task: Task) -> str:
        """The partition the task was sent to ('' for the cluster's default one)."""
        kind = device_kind(task.cell.device)
        return (self.partition_gpu if kind == "gpu" else self.partition_cpu) or ""

    def _blocked_partitions(self, pending: list[Task],
                            states: dict[str, TaskState]) -> dict[str, str]:
        """Partition -> why none of its nodes can take a task, for those pending tasks wait
        on (none when every such partition has a usable node, or sinfo does not answer)."""
        waiting = {self._partition_of(task) for task in pending
                   if task.job_id in states and states[task.job_id].pending}
        if not waiting:
            return {}
        try:
            nodes = slurm_state.partition_nodes()
        except slurm_state.SlurmUnreachable:
            return {}
        blocked = {}
        for partition in waiting:
            listed = nodes.get(partition, [])
            if listed and not any(up and slurm_state.sinfo_state_usable(state)
                                  for _, state, up in listed):
                seen = ", ".join(f"{node}: {state}" + ("" if up else " (partition down)")
                                 for node, state, up in listed[:6])
                blocked[partition] = (f"no node of partition {partition or '(default)'} can "
                                      f"take a task ({seen})")
        return blocked

    def _own(self, task: Task) -> CellResult | None:
        """The task's result file, if this very task wrote it: a file another task wrote (an
        older run's task still queued when this one was submitted) is not this cell's result."""
        document = read_result(task.result_path)
        written_by = ((document.slurm if document is not None else None) or {}).get("job_id")
        if document is not None and task.job_id and written_by not in (None, task.job_id):
            return None
        return document

    def _ended(self, task: Task, state: TaskState | None,
               answered: bool = True) -> CellResult | None:
        """The task's result once SLURM says it ended (and its file is in), else None.
        answered: whether SLURM answered at all this time (if not, only a complete file counts).

        Why wait for SLURM when the file says error or timeout: a task SLURM cancels, times out
        or preempts still writes a file (its worker killed by SLURM's signal), and the row must
        say what SLURM did.
        """
        document = self._own(task)
        if document is not None and document.status.value in COMPLETE_STATUSES:
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
        if state.state in ("TIMEOUT", "FAILED") and not task.node_trouble and state.node:
            lost = slurm_state.node_states([state.node]).get(state.node)
            if lost is not None and lost.lost:
                task.node_trouble = lost.describe()
        return ended_result(task.cell, state, document, task.log_tail(), task.node_trouble)

    def _after_grace(self, task: Task, state: TaskState) -> CellResult | None:
        """None until the result file has had missing_grace_s to appear, then a status row."""
        now = time.monotonic()
        if task.missing_since is None:
            task.missing_since = now
        if now - task.missing_since < self.missing_grace_s:
            return None
        return ended_result(task.cell, state, self._own(task), task.log_tail(),
                            task.node_trouble)

    def _stop(self, pending: list[Task], on_result: OnResult, report_state: OnState,
              reason: str,
              wait: bool = True) -> None:
        """scancel what is left; results already written are kept as they are, every other
        cell becomes `interrupted` (with the cases its task saved).

        Why look before cancelling: a task writes its file only once its cell is complete, so
        a file there now is a finished cell, even if scancel catches its task still exiting.
        """
        written = {task.job_id: self._own(task) for task in pending}
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
            document = written[task.job_id] or self._own(task)
            if document is not None and (written[task.job_id] is not None or (
                    state is not None and state.state == "COMPLETED")):
                result = document
            else:
                result = interrupted_result(task.cell, document, reason)
            on_result(task.cell, with_slurm(result, job_id=task.job_id, state=(
                state.state if state is not None else "CANCELLED")))
            report_state(task.cell, CellState.DONE)


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
        arrays = sorted({job_id.split("_", 1)[0] for job_id in live})
        listed = ", ".join(f"{job_id} {state.state}" for job_id, state in sorted(live.items()))
        raise BadInput(f"--resume: the run's SLURM array {', '.join(arrays)} still has tasks "
                       f"queued or running ({listed}); wait for them, or add --cancel-running "
                       "to scancel them")
