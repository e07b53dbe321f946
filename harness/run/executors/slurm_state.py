"""What SLURM says about the tasks of a job array: state, reason, node and exit code.

Asked of `scontrol show job` first (it knows every job the controller still holds: pending,
running and, for MinJobAge seconds, finished) and of `sacct` for jobs the controller has
forgotten. Why not submitit's own job.state: it asks sacct only, and clusters without job
accounting (the one-node test cluster, small lab clusters) have no sacct.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass

QUERY_TIMEOUT_S = 30.0
# JobState values after which a task runs no more (slurm.schedmd.com/job_state_codes.html).
FINISHED_STATES = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY",
    "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT",
})
RUNNING_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "STAGE_OUT", "SIGNALING"})


@dataclass(frozen=True)
class TaskState:
    """One task as SLURM reports it; `state` is SLURM's JobState word (PENDING, RUNNING, ...)."""

    state: str
    reason: str = ""
    node: str = ""
    exit_code: str = ""

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    @property
    def running(self) -> bool:
        return self.state in RUNNING_STATES

    def describe(self) -> str:
        """'CANCELLED on node3 (exit code 0:15)': the words a status row carries."""
        parts = [f"SLURM state {self.state}"]
        if self.node:
            parts.append(f"on {self.node}")
        details = [f"reason {self.reason}"] if self.reason not in ("", "None") else []
        if self.exit_code and self.exit_code != "0:0":
            details.append(f"exit code {self.exit_code}")
        text = " ".join(parts)
        return f"{text} ({', '.join(details)})" if details else text


def task_ids(array_id: str, indices: str) -> list[str]:
    """'7', '0-2,5%4' -> ['7_0', '7_1', '7_2', '7_5']: the tasks a record stands for."""
    found = []
    for part in indices.split("%", 1)[0].strip("[]").split(","):
        if "-" in part:
            first, last = part.split("-", 1)
            found.extend(f"{array_id}_{index}" for index in range(int(first), int(last) + 1))
        elif part.strip().isdigit():
            found.append(f"{array_id}_{int(part)}")
    return found


def _fields(line: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S*)", line))


def parse_scontrol(text: str) -> dict[str, TaskState]:
    """`scontrol -o show job ID` (one job per line) -> task id ('123_4' or '123') -> state."""
    states = {}
    for line in text.splitlines():
        fields = _fields(line)
        if "JobId" not in fields:
            continue
        node = fields.get("NodeList", "")
        state = TaskState(fields.get("JobState", "UNKNOWN"), fields.get("Reason", ""),
                          "" if node == "(null)" else node, fields.get("ExitCode", ""))
        array_id, index = fields.get("ArrayJobId"), fields.get("ArrayTaskId")
        names = task_ids(array_id, index) if array_id and index else [fields["JobId"]]
        states.update({name: state for name in names})
    return states


def parse_sacct(text: str) -> dict[str, TaskState]:
    """`sacct -n -P -X -o JobID,State,NodeList,Reason,ExitCode` -> task id -> state."""
    states = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 5:
            continue
        job_id, state, node, reason, exit_code = parts[:5]
        # 'CANCELLED by 0' -> state CANCELLED, and who cancelled it goes into the reason.
        word, _, by = state.partition(" ")
        entry = TaskState(word, (reason + (f", {by}" if by else "")).strip(", "),
                          "" if node == "None assigned" else node, exit_code)
        array_id, _, index = job_id.partition("_")
        names = task_ids(array_id, index) if index else [job_id]
        states.update({name: entry for name in names})
    return states


class SlurmUnreachable(RuntimeError):
    """The controller did not answer (busy, restarting, network): no news, not an end."""


def _run(command: list[str]) -> tuple[int, str, str]:
    """(exit code, stdout, stderr); exit code -1 when the command could not run at all."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=QUERY_TIMEOUT_S,
                              env=dict(os.environ))
    except (OSError, subprocess.SubprocessError) as exc:
        return -1, "", str(exc)
    return done.returncode, done.stdout, done.stderr


def _scontrol(array: str) -> dict[str, TaskState]:
    """The array's tasks per scontrol; {} once the controller has forgotten the job."""
    code, out, err = _run(["scontrol", "-o", "show", "job", array])
    if code == 0:
        return parse_scontrol(out)
    if "invalid job id" in err.lower():
        return {}
    raise SlurmUnreachable(f"scontrol show job {array}: {err.strip() or f'exit code {code}'}")


def query(job_ids: Iterable[str]) -> dict[str, TaskState]:
    """The state of each task ('123_4') SLURM still knows; absent ones are simply missing.

    Raises SlurmUnreachable when scontrol could not ask the controller: a task missing then
    says nothing about whether it ended.
    """
    wanted = set(job_ids)
    arrays = sorted({job_id.split("_", 1)[0] for job_id in wanted})
    states: dict[str, TaskState] = {}
    for array in arrays:
        states.update(_scontrol(array))
    forgotten = sorted({job_id.split("_", 1)[0] for job_id in wanted - set(states)})
    if forgotten:
        code, accounted, _ = _run(["sacct", "-n", "-P", "-X", "-j", ",".join(forgotten), "-o",
                                   "JobID,State,NodeList,Reason,ExitCode"])
        for job_id, state in parse_sacct(accounted if code == 0 else "").items():
            states.setdefault(job_id, state)
    return {job_id: states[job_id] for job_id in wanted if job_id in states}


def cancel(job_ids: Iterable[str]) -> None:
    """scancel the arrays (and single jobs) these tasks belong to, in one call."""
    arrays = sorted({job_id.split("_", 1)[0] for job_id in job_ids})
    if arrays:
        _run(["scancel", *arrays])
