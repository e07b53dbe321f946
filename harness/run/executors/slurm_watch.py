"""Watching a run's submitted SLURM tasks until each has handed in its cell's row.

The watch asks SLURM after the tasks every poll, follows each (running, requeued, pending and
why), and hands each cell's row on as its task ends (slurm_rows says what row). A task that
cannot start (a drained or down node, a hold: see slurm_state.CANNOT_START_REASONS) for longer
than the pending limit is cancelled and `interrupted` with SLURM's reason: nothing waits
without end. A stop signal cancels the tasks and marks the cells not yet finished `interrupted`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.core import interrupt
from harness.core.units import device_kind
from harness.data.results import CellResult
from harness.data.store import read_cell_result
from harness.run.executors import slurm_rows, slurm_state
from harness.run.executors.base import CellState, OnResult, OnState
from harness.run.executors.slurm_records import log_line
from harness.run.executors.slurm_state import TaskState
from harness.spec import Cell, Status


class WatchSettings(Protocol):
    """What a watch reads of its executor (slurm.SlurmExecutor): named here so that this
    module, which slurm.py imports, imports nothing back."""

    cluster: str
    poll_s: float
    missing_grace_s: float
    cancel_grace_s: float

    def partition(self, kind: str) -> str | None: ...

NODE_CHECK_S = 5.0            # how often the nodes of running tasks are asked after
STDERR_TAIL_CHARS = 1500
# submitit's local executor reports processes, not SLURM states.
LOCAL_STATES = {"RUNNING": "RUNNING", "FINISHED": "COMPLETED", "INTERRUPTED": "CANCELLED",
                "QUEUED": "PENDING"}


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

    @property
    def label(self) -> str:
        """'123_4 (fp32 torch cpu)': the task as watch.log names it."""
        return f"{self.job_id} ({self.cell.label})"

    def log_tail(self) -> str:
        try:
            text = self.job.stderr() or ""
        except Exception:  # noqa: BLE001 - a missing log must not cost the row
            text = ""
        return text[-STDERR_TAIL_CHARS:]

    def own(self) -> CellResult | None:
        """The task's result file if this very task wrote it; None while there is none (or it
        cannot be read yet), and for a file another task wrote (an older run's task still
        queued when this one was submitted): that is not this cell's result."""
        document = read_cell_result(self.result_path)
        written_by = (document.slurm or {}).get("job_id") if document is not None else None
        return None if self.job_id and written_by not in (None, self.job_id) else document


@dataclass
class Watch:
    """One run's watch over its tasks; the executor's settings (cluster, poll and grace times,
    partitions) are read from `executor`."""

    executor: WatchSettings
    run_dir: Path
    pending_limit_s: float
    on_result: OnResult
    report_state: OnState
    nodes_checked: float = 0.0  # when the nodes of running tasks were last asked after
    partition_blocked: dict[str, str] = field(default_factory=dict)  # see _blocked_partitions

    def follow(self, tasks: list[Task]) -> bool:
        """Hand on each task's row as it ends; False if a stop signal cut the watch short."""
        pending = list(tasks)
        try:
            while pending and interrupt.requested() is None:
                pending = self.collect(pending)
                if pending:
                    time.sleep(self.executor.poll_s)
        except KeyboardInterrupt:  # no handlers installed (a notebook): cancel, then re-raise
            self.stop(pending, "interrupted by KeyboardInterrupt", wait=False)
            raise
        stop = interrupt.requested()
        if stop is None:
            return True
        self.stop(pending, f"interrupted by {interrupt.describe(stop)}; SLURM task cancelled")
        return False

    def states(self, tasks: list[Task]) -> dict[str, TaskState] | None:
        """Task id -> state, from SLURM (or submitit's local processes); None: no answer now."""
        if self.executor.cluster != "slurm":
            return {task.job_id: TaskState(LOCAL_STATES.get(str(task.job.state), "UNKNOWN"))
                    for task in tasks}
        try:
            return slurm_state.query(task.job_id for task in tasks)
        except slurm_state.SlurmUnreachable:
            return None

    def cancel(self, tasks: list[Task]) -> None:
        if self.executor.cluster == "slurm":
            slurm_state.cancel(task.job_id for task in tasks)
            return
        for task in tasks:
            task.job.cancel(check=False)

    def hand_on(self, cell: Cell, result: CellResult) -> None:
        """A cell's row to the caller: the cell is done."""
        self.on_result(cell, result)
        self.report_state(cell, CellState.DONE)

    def collect(self, pending: list[Task]) -> list[Task]:
        """Hand on the results of the tasks that ended; the ones still going are returned."""
        states = self.states(pending)
        self._watch_nodes(pending, states or {})
        still: list[Task] = []
        for task in pending:
            state = None if states is None else states.get(task.job_id)
            self._note(task, state)
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
            self.hand_on(task.cell, slurm_rows.with_slurm(result, **seen))
        return still

    def _note(self, task: Task, state: TaskState | None) -> None:
        """Follow one task: running, requeued, or pending and why (progress line and log)."""
        if state is None:
            return
        if state.restarts > task.restarts:
            task.restarts = state.restarts
            log_line(self.run_dir, f"{task.label} requeued by SLURM (restart {state.restarts})")
        if state.running and not task.running:
            task.running, task.blocked_since = True, None
            self.report_state(task.cell, CellState.RUNNING)
            log_line(self.run_dir, f"{task.label} running on {state.node}")
        if not state.pending:
            return
        task.running = False  # requeued: waiting again
        reason = slurm_state.readable_reason(state.reason)
        blocked = self.partition_blocked.get(self._partition_of(task), "")
        if blocked and not slurm_state.cannot_start(state.reason):
            # Only the first task in line gets the node's reason; the others say Priority or
            # Resources while no node could ever take them.
            reason = f"{reason}; {blocked}"
        if reason != task.reason:
            task.reason = reason
            log_line(self.run_dir, f"{task.label} pending: {reason}")
            self.report_state(task.cell, CellState.QUEUED, reason)
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
        if waited < self.pending_limit_s:
            return None
        slurm_state.cancel([task.job_id], whole_arrays=False)
        reason = (f"SLURM could not start the task for {waited:.0f} s (pending limit "
                  f"{self.pending_limit_s:g} s), cancelled: {task.reason}")
        log_line(self.run_dir, f"{task.label} {reason}")
        result = slurm_rows.as_cell_row(task.cell, None, Status.INTERRUPTED, reason)
        result.slurm = {"state": "CANCELLED", "pending_reason": task.reason}
        return result

    def _watch_nodes(self, pending: list[Task], states: dict[str, TaskState]) -> None:
        """Every NODE_CHECK_S, ask after the nodes running tasks: one seen down or not
        responding marks its tasks, whose end is then called a node failure. Also note which
        partitions pending tasks wait on with no node that can take a task (none when sinfo
        does not answer): their reason says so."""
        if self.executor.cluster != "slurm" or \
                time.monotonic() - self.nodes_checked < NODE_CHECK_S:
            return
        self.nodes_checked = time.monotonic()
        self.partition_blocked = slurm_state.blocked_partitions(
            self._partition_of(task) for task in pending
            if task.job_id in states and states[task.job_id].pending)
        running = {task.job_id: states[task.job_id].node for task in pending
                   if task.job_id in states and states[task.job_id].running}
        nodes = slurm_state.node_states(running.values())
        for task in pending:
            node = nodes.get(running.get(task.job_id, ""))
            if node is not None and node.lost and not task.node_trouble:
                task.node_trouble = node.describe()
                log_line(self.run_dir, f"{task.label}: {task.node_trouble}")

    def _partition_of(self, task: Task) -> str:
        """The partition the task was sent to ('' for the cluster's default one)."""
        return self.executor.partition(device_kind(task.cell.device)) or ""

    def _ended(self, task: Task, state: TaskState | None,
               answered: bool = True) -> CellResult | None:
        """The task's result once SLURM says it ended (and its file is in), else None.
        answered: whether SLURM answered at all this time (if not, only a complete file counts).

        Why wait for SLURM when the file says error or timeout: a task SLURM cancels, times out
        or preempts still writes a file (its worker killed by SLURM's signal), and the row must
        say what SLURM did.
        """
        document = task.own()
        if document is not None and document.status.value in slurm_rows.COMPLETE_STATUSES:
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
        return slurm_rows.ended_result(task.cell, state, document, task.log_tail(),
                                       task.node_trouble)

    def _after_grace(self, task: Task, state: TaskState) -> CellResult | None:
        """None until the result file has had missing_grace_s to appear, then a status row."""
        now = time.monotonic()
        if task.missing_since is None:
            task.missing_since = now
        if now - task.missing_since < self.executor.missing_grace_s:
            return None
        return slurm_rows.ended_result(task.cell, state, task.own(), task.log_tail(),
                                       task.node_trouble)

    def stop(self, pending: list[Task], reason: str, wait: bool = True) -> None:
        """scancel what is left; results already written are kept as they are, every other
        cell becomes `interrupted` (with the cases its task saved).

        Why look before cancelling: a task writes its file only once its cell is complete, so
        a file there now is a finished cell, even if scancel catches its task still exiting.
        """
        written = {task.job_id: task.own() for task in pending}
        self.cancel(pending)
        deadline = time.monotonic() + (self.executor.cancel_grace_s if wait else 0.0)
        while wait and pending and time.monotonic() < deadline:
            states = self.states(pending) or {}
            if len(states) == len(pending) and all(state.finished for state in states.values()):
                break
            time.sleep(min(self.executor.poll_s, 0.5))
        states = (self.states(pending) or {}) if wait else {}
        for task in pending:
            state = states.get(task.job_id)
            document = written[task.job_id] or task.own()
            if document is not None and (written[task.job_id] is not None or (
                    state is not None and state.state == "COMPLETED")):
                result = document
            else:
                result = slurm_rows.as_cell_row(task.cell, document, Status.INTERRUPTED,
                                                 reason)
            self.hand_on(task.cell, slurm_rows.with_slurm(result, job_id=task.job_id, state=(
                state.state if state is not None else "CANCELLED")))
