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
# Pending reasons (squeue %r) of a task that cannot start until someone acts: a down, drained
# or not-responding node, a partition set down, a hold, an account or constraint SLURM will
# never grant. Priority, Resources, BeginTime, Dependency... are ordinary waits: not here.
CANNOT_START_REASONS = (
    "ReqNodeNotAvail", "NodeDown", "PartitionDown", "PartitionInactive", "JobHeldUser",
    "JobHeldAdmin", "BadConstraints", "InvalidAccount", "InvalidQOS",
    "DependencyNeverSatisfied", "Nodes required for job are DOWN, DRAINED",
)
# Node state flags (scontrol show node) under which a task running there is lost (a draining
# node still finishes its tasks).
LOST_NODE_FLAGS = frozenset({"DOWN", "FAIL", "NOT_RESPONDING"})


def cannot_start(reason: str) -> bool:
    """Whether a pending task's reason says it cannot start until someone acts."""
    words = reason.replace("_", " ")
    return any(known.replace("_", " ") in words for known in CANNOT_START_REASONS)


def readable_reason(reason: str) -> str:
    """scontrol -o writes a reason's spaces as underscores: 'Nodes required for job ...'."""
    return reason.replace("_", " ") if " " not in reason else reason


def clock_seconds(text: str) -> float | None:
    """SLURM's '[D-]HH:MM:SS' (RunTime, TimeLimit) in seconds; None for UNLIMITED and the like."""
    days, _, clock = text.rpartition("-")
    parts = clock.split(":")
    if not all(part.isdigit() for part in parts) or not 1 <= len(parts) <= 3:
        return None
    seconds = 0.0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return seconds + (int(days) * 86400 if days.isdigit() else 0)


@dataclass(frozen=True)
class TaskState:
    """One task as SLURM reports it; `state` is SLURM's JobState word (PENDING, RUNNING, ...)."""

    state: str
    reason: str = ""
    node: str = ""
    exit_code: str = ""
    restarts: int = 0                # times SLURM requeued the task (node failure, preemption)
    run_s: float | None = None       # RunTime, where scontrol says
    limit_s: float | None = None     # TimeLimit, where scontrol says

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"

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
        details = [f"reason {readable_reason(self.reason)}"] \
            if self.reason not in ("", "None") else []
        if self.exit_code and self.exit_code != "0:0":
            details.append(f"exit code {self.exit_code}")
        text = " ".join(parts)
        return f"{text} ({', '.join(details)})" if details else text


def task_ids(array_id: str, indices: str) -> list[str]:
    """'7', '0-2,5%4' -> ['7_0', '7_1', '7_2', '7_5']: the tasks a record stands for."""
    found: list[str] = []
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
        restarts = fields.get("Restarts", "0")
        state = TaskState(fields.get("JobState", "UNKNOWN"), fields.get("Reason", ""),
                          "" if node == "(null)" else node, fields.get("ExitCode", ""),
                          int(restarts) if restarts.isdigit() else 0,
                          clock_seconds(fields.get("RunTime", "")),
                          clock_seconds(fields.get("TimeLimit", "")))
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
        done = subprocess.run(command, check=False, capture_output=True, text=True,
                              timeout=QUERY_TIMEOUT_S, env=dict(os.environ))
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


def cancel_tasks(job_ids: Iterable[str]) -> None:
    """scancel these tasks ('123_4') only, not the rest of their arrays."""
    wanted = sorted(set(job_ids))
    if wanted:
        _run(["scancel", *wanted])


@dataclass(frozen=True)
class NodeState:
    """One node as `scontrol show node` reports it: its state flags and the admin's reason."""

    name: str
    flags: frozenset[str]
    reason: str = ""

    @property
    def lost(self) -> bool:
        """Whether a task running there is lost (down, failed, not responding)."""
        return bool(self.flags & LOST_NODE_FLAGS)

    def describe(self) -> str:
        """'vm stopped responding (DOWN+NOT_RESPONDING, reason: test)'."""
        flags = "+".join(sorted(self.flags))
        what = "stopped responding" if "NOT_RESPONDING" in self.flags else "is down" \
            if "DOWN" in self.flags else f"is {flags}"
        return f"node {self.name} {what} ({flags}" + (
            f", reason: {self.reason})" if self.reason else ")")


def parse_nodes(text: str) -> dict[str, NodeState]:
    """`scontrol -o show node` -> name -> NodeState. The reason may hold spaces: it runs to the
    '[user@time]' stamp scontrol appends."""
    nodes = {}
    for line in text.splitlines():
        fields = _fields(line)
        if "NodeName" not in fields:
            continue
        reason = re.search(r"\bReason=(.*?)(?: \[[^\]]*\]|$)", line)
        flags = frozenset(fields.get("State", "UNKNOWN").upper().replace("*", "+NOT_RESPONDING")
                          .split("+")) - {""}
        nodes[fields["NodeName"]] = NodeState(fields["NodeName"], flags,
                                              reason.group(1).strip() if reason else "")
    return nodes


def node_states(names: Iterable[str]) -> dict[str, NodeState]:
    """The state of these nodes; {} when scontrol does not answer (no news)."""
    wanted = sorted({name for name in names if name})
    if not wanted:
        return {}
    code, out, _ = _run(["scontrol", "-o", "show", "node", ",".join(wanted)])
    return parse_nodes(out) if code == 0 else {}


def sinfo_state_usable(state: str) -> bool:
    """Whether an sinfo node state (%T: 'idle', 'mixed', 'drained', 'down*', ...) takes tasks.

    A trailing '*' is a node that does not respond; '~' (powered off, cloud) and '#' (powering
    up) still take tasks, as SLURM boots them for the job.
    """
    if state.endswith("*"):
        return False
    word = state.rstrip("~#!%$@^-").lower()
    return not any(bad in word for bad in ("drain", "down", "fail", "maint", "inval",
                                           "unknown", "future", "reboot", "unk"))


def partition_nodes() -> dict[str, list[tuple[str, str, bool]]]:
    """Partition -> [(node, sinfo state, partition up)]; the default partition also as ''.

    Raises SlurmUnreachable when sinfo does not answer.
    """
    code, out, err = _run(["sinfo", "-h", "-N", "-o", "%P|%N|%T|%a"])
    if code != 0:
        raise SlurmUnreachable(f"sinfo: {err.strip() or f'exit code {code}'}")
    found: dict[str, list[tuple[str, str, bool]]] = {}
    for line in out.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 4:
            continue
        partition, node, state, available = parts
        entry = (node, state, available.lower() == "up")
        found.setdefault(partition.rstrip("*"), []).append(entry)
        if partition.endswith("*"):
            found.setdefault("", []).append(entry)
    return found
