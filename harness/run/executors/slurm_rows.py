"""A cell's row from what its SLURM task left: the result file the task wrote, or, where that
says nothing complete, SLURM's word on how the task ended (state, reason, node, its log).

A task SLURM ended (failed, timed out, cancelled, preempted) becomes a status row with SLURM's
state and reason; one lost with its node (down, failed, not responding) is `interrupted`, so
`--resume` runs it again. Every such row keeps the cases its task saved.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace

from harness.data.results import CellResult
from harness.run.executors.slurm_state import TaskState
from harness.spec import Cell, Status

# A TIMEOUT this far under the task's limit was no time limit (a lost node reported so).
EARLY_TIMEOUT_MARGIN_S = 10.0
# submitit's own log lines ('submitit WARNING (date) - Bypassing signal SIGCONT') say nothing
# about the cell; they are never quoted as a task's reason.
SUBMITIT_LOG_LINE = re.compile(r"^submitit (DEBUG|INFO|WARNING|ERROR|CRITICAL)\b")

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


def as_cell_row(cell: Cell, written: CellResult | None, status: Status,
                reason: str) -> CellResult:
    """The row of a task that did not complete: `cell` with this status and reason, keeping
    the cases its task saved (`written`, if it wrote anything)."""
    if written is None:
        written = CellResult(cell, status, reason)
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


def with_slurm(result: CellResult, **seen: str | int | bool | None) -> CellResult:
    """The result with what SLURM said of its task added to its `slurm` record."""
    result.slurm = {**(result.slurm or {}), **seen}
    return result
