"""CPU time that processes outside this process group used while a case was timed.

Why: a CPU timing is only as good as the cores it had. With the framework's thread pool as wide
as the machine, one busy process elsewhere (an orphaned worker, a compile job) makes every
parallel region wait for a descheduled thread, and a 30 us call reads milliseconds. So the
harness measures the competition (all cores' busy time minus this process group's, plus
hypervisor steal, read through psutil) instead of assuming an idle machine. Only on Linux:
elsewhere psutil has no reaped children's time nor steal, and this reports nothing.

The group's own time includes the children its members already waited for (psutil's
children_user + children_system: cutime + cstime in /proc/PID/stat): a compiler subprocess that
starts and exits between two snapshots is in neither snapshot's process list, but its CPU time
lands in its parent's cutime when it is reaped, so it stays the worker's own rather than
"other processes" (issue 24: jax cells flagged for their own short-lived children). Interrupt
time (irq + softirq) is kept apart: on an otherwise idle machine it is mostly the kernel
serving our own device, not competition.

Two readings of "other processes", both lower bounds of the truth, and the larger is reported:
the machine's busy time minus the group's, which sees strangers that came and went inside the
window, and the sum of the strangers seen at both ends (or born inside the window), which stays
right when the group reaps a child of another session. Such a child (a worker started with its
own session, as pytest-xdist's sibling worker or a second harness does) carries its whole
lifetime into its reaper's cutime at once: with two test processes on 2 cores that made the
group's delta swallow a busy spinner (0.49 "other" cores while the spinner itself read 0.98).
The reaped child's time from before the window is taken back out of the group's delta.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from harness.core.units import digits

# Other processes using more than this many cores on average make a cell's timing suspect:
# half a core is more than background daemons use and less than any real competing job.
CONTENDED_CORES = 0.5
# Processes named in a contended window's reason: the largest users, at least this much.
TOP_OTHERS, TOP_OTHER_MIN_CORES = 3, 0.05
KTHREADD = 2  # Linux's kernel-thread parent: its children are kernel threads


@dataclass(frozen=True)
class ProcessTimes:
    """One process's CPU seconds: its own (all threads) and its reaped children's."""

    name: str
    group: int
    own: float  # user + system
    children: float  # children_user + children_system: descendants it waited for
    parent: int = 0  # ppid: whose children's time its time lands in when it is reaped

    @property
    def total(self) -> float:
        return self.own + self.children


@dataclass(frozen=True)
class LoadSnapshot:
    wall_s: float
    busy_s: float  # every core's non-idle time (interrupts excluded), this group included
    steal_s: float  # time the hypervisor gave our vCPUs to someone else
    group_s: float  # this process group's CPU time, reaped children included
    interrupt_s: float = 0.0  # irq + softirq time on every core
    processes: dict[int, ProcessTimes] = field(default_factory=dict)  # by pid, others included
    group: int | None = None  # the process group counted as ours

    @classmethod
    def of(cls, wall_s: float, cpu: Any, processes: dict[int, ProcessTimes],
           group: int) -> LoadSnapshot:
        """CPU (psutil.cpu_times() on Linux) and PROCESSES as a snapshot: the group's time is
        its members' own and reaped children's."""
        group_s = sum(times.total for times in processes.values() if times.group == group)
        return cls(wall_s, cpu.user + cpu.nice + cpu.system, cpu.steal, group_s,
                   cpu.irq + cpu.softirq, processes, group)


@dataclass(frozen=True)
class OtherLoad:
    """Average cores used by other processes (and stolen by the hypervisor) over a window."""

    other_cores: float
    steal_cores: float
    seconds: float
    interrupt_cores: float = 0.0
    top_others: tuple[tuple[str, float], ...] = ()  # ("name (pid)", cores), largest first

    @property
    def contended(self) -> bool:
        return self.other_cores + self.steal_cores > CONTENDED_CORES

    def reason(self) -> str:
        cores = os.cpu_count() or 0
        top = ", ".join(f"{name} {used:.1f}" for name, used in self.top_others)
        return (f"other processes used {self.other_cores:.1f} of {cores} cores"
                + (f" ({top})" if top else "")
                + (f" and the hypervisor stole {self.steal_cores:.1f}" if self.steal_cores >= 0.05
                   else "") + f" during the {digits(self.seconds, 2)} s this case was timed")


def _processes() -> dict[int, ProcessTimes]:
    """Every process's times by pid (those that exit while we look are skipped)."""
    import psutil  # lazily, as in snapshot()

    found = {}
    for process in psutil.process_iter(["name", "ppid", "cpu_times"]):
        info, times = process.info, process.info["cpu_times"]
        try:
            group = os.getpgid(process.pid)  # psutil has no process group
        except OSError:
            continue  # it exited while we looked
        if times is not None:  # None: psutil was denied access
            found[process.pid] = ProcessTimes(
                info["name"] or "?", group, times.user + times.system,
                times.children_user + times.children_system, info["ppid"] or 0)
    return found


def snapshot(group: int | None = None) -> LoadSnapshot | None:
    """The counters now, or None off Linux (see the module's docstring)."""
    # Lazily: the CLI imports this module on its start-up path, and only workers and probes
    # take snapshots.
    import psutil

    if not psutil.LINUX:
        return None
    group = os.getpgrp() if group is None else group
    return LoadSnapshot.of(time.perf_counter(), psutil.cpu_times(), _processes(), group)


def _stranger_cores(start: LoadSnapshot, end: LoadSnapshot, group: int | None,
                    seconds: float) -> dict[str, float]:
    """Cores each process outside the group used over the window, by its own time.

    Seen at both ends: the difference; born inside the window: all of its time. Reaped
    children's time is left out, since it may have been spent before the window.
    """
    used = {}
    for pid, after in end.processes.items():
        if after.group == group or KTHREADD in (pid, after.parent):
            continue  # ours, or a kernel thread (its time may be interrupt work, kept apart)
        before = start.processes.get(pid)
        spent = after.own - before.own if before is not None else after.own
        used[f"{after.name} ({pid})"] = max(0.0, spent) / seconds
    return used


def _carried_into_group(start: LoadSnapshot, end: LoadSnapshot, group: int | None) -> float:
    """Seconds that strangers reaped by the group inside the window had spent before it.

    A process of another session whose parent is in the group, alive at the start and gone at
    the end, was (most likely) reaped by that parent: its whole lifetime joined the group's
    children's time, though the part before the window was never the group's work in it.
    """
    carried = 0.0
    for pid, before in start.processes.items():
        parent = start.processes.get(before.parent)
        if (pid not in end.processes and before.group != group
                and parent is not None and parent.group == group):
            carried += before.total
    return carried


def _top_others(strangers: dict[str, float]) -> tuple[tuple[str, float], ...]:
    """The largest other users over the window (at least TOP_OTHER_MIN_CORES each)."""
    used = [(name, cores) for name, cores in strangers.items() if cores >= TOP_OTHER_MIN_CORES]
    return tuple(sorted(used, key=lambda item: -item[1])[:TOP_OTHERS])


def other_load(start: LoadSnapshot | None, end: LoadSnapshot | None) -> OtherLoad | None:
    """What ran beside us between two snapshots; None when either is missing."""
    if start is None or end is None or end.wall_s <= start.wall_s:
        return None
    seconds = end.wall_s - start.wall_s
    group_delta = (end.group_s - start.group_s) - _carried_into_group(start, end, end.group)
    busy_minus_group = ((end.busy_s - start.busy_s) - group_delta) / seconds
    strangers = _stranger_cores(start, end, end.group, seconds)
    return OtherLoad(other_cores=max(0.0, busy_minus_group, sum(strangers.values())),
                     steal_cores=max(0.0, (end.steal_s - start.steal_s) / seconds),
                     seconds=seconds,
                     interrupt_cores=max(0.0, (end.interrupt_s - start.interrupt_s) / seconds),
                     top_others=_top_others(strangers))
