"""CPU time that processes outside this process group used while a case was timed.

Why: a CPU timing is only as good as the cores it had. With the framework's thread pool as wide
as the machine, one busy process elsewhere (an orphaned worker, a compile job) makes every
parallel region wait for a descheduled thread, and a 30 us call reads milliseconds. So the
harness measures the competition (Linux /proc: all cores' busy time minus this process group's,
plus hypervisor steal) instead of assuming an idle machine. Elsewhere it reports nothing.

The group's own time includes the children its members already waited for (cutime + cstime
in /proc/PID/stat): a compiler subprocess that starts and exits between two snapshots is in
neither snapshot's process list, but its CPU time lands in its parent's cutime when it is
reaped, so it stays the worker's own rather than "other processes" (issue 24: jax cells
flagged for their own short-lived children). Interrupt time (irq + softirq) is kept apart:
on an otherwise idle machine it is mostly the kernel serving our own device, not competition.

Two readings of "other processes", both lower bounds of the truth, and the larger is reported:
the machine's busy time minus the group's, which sees strangers that came and went inside the
window, and the sum of the strangers seen at both ends (or born inside the window), which stays
right when the group reaps a child of another session. Such a child (a worker started with its
own session, as pytest-xdist's sibling worker or a second harness does) carries its whole
lifetime into its reaper's cutime at once: with two test processes on 2 cores that made the
group's delta swallow a busy spinner (0.49 "other" cores while the spinner itself read 0.98).
The reaped child's ticks from before the window are taken back out of the group's delta.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

PROC = Path("/proc")
# Other processes using more than this many cores on average make a cell's timing suspect:
# half a core is more than background daemons use and less than any real competing job.
CONTENDED_CORES = 0.5
# Processes named in a contended window's reason: the largest users, at least this much.
TOP_OTHERS, TOP_OTHER_MIN_CORES = 3, 0.05
KTHREADD = 2  # Linux's kernel-thread parent: its children are kernel threads


@dataclass(frozen=True)
class ProcessTicks:
    """One process's CPU ticks: its own (all threads) and its reaped children's."""

    name: str
    group: int
    own: int  # utime + stime
    children: int  # cutime + cstime: descendants it waited for
    parent: int = 0  # ppid: whose cutime its ticks land in when it is reaped

    @property
    def total(self) -> int:
        return self.own + self.children


@dataclass(frozen=True)
class LoadSnapshot:
    wall_s: float
    busy_ticks: int  # every core's non-idle time (interrupts excluded), this group included
    steal_ticks: int  # time the hypervisor gave our vCPUs to someone else
    group_ticks: int  # this process group's CPU time, reaped children included
    interrupt_ticks: int = 0  # irq + softirq time on every core
    processes: dict[int, ProcessTicks] = field(default_factory=dict)  # by pid, others included
    group: int | None = None  # the process group counted as ours


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
                   else "") + f" during the {self.seconds:.2g} s this case was timed")


def _cpu_line(proc: Path = PROC) -> tuple[int, int, int] | None:
    """(busy ticks without interrupts, steal ticks, irq + softirq ticks) of all cores."""
    try:
        fields = (proc / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    values = [int(value) for value in fields[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = values[:7]
    steal = values[7] if len(values) > 7 else 0
    return user + nice + system, steal, irq + softirq


def _process_ticks(proc: Path = PROC) -> dict[int, ProcessTicks]:
    """Every process's ticks by pid (those that exit while we look are skipped)."""
    found = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # it exited while we looked
        name = text[text.find("(") + 1:text.rfind(")")]
        fields = text[text.rfind(")") + 2:].split()  # the name may hold spaces
        try:
            found[int(entry.name)] = ProcessTicks(
                name=name, group=int(fields[2]), own=int(fields[11]) + int(fields[12]),
                children=int(fields[13]) + int(fields[14]), parent=int(fields[1]))
        except (IndexError, ValueError):
            continue
    return found


def _group_ticks(processes: dict[int, ProcessTicks], group: int) -> int:
    """The group's members' time plus the time of every child they reaped."""
    return sum(ticks.total for ticks in processes.values() if ticks.group == group)


def snapshot(proc: Path = PROC, group: int | None = None) -> LoadSnapshot | None:
    """The counters now, or None where /proc is not there."""
    line = _cpu_line(proc)
    if line is None:
        return None
    busy, steal, interrupts = line
    processes = _process_ticks(proc)
    group = os.getpgrp() if group is None else group
    return LoadSnapshot(time.perf_counter(), busy, steal, _group_ticks(processes, group),
                        interrupts, processes, group)


def _stranger_cores(start: LoadSnapshot, end: LoadSnapshot, group: int | None,
                    ticks_per_s: float, seconds: float) -> dict[str, float]:
    """Cores each process outside the group used over the window, by its own time.

    Seen at both ends: the difference; born inside the window: all of its time. Reaped
    children's time (cutime) is left out, since it may have been spent before the window.
    """
    used = {}
    for pid, after in end.processes.items():
        if after.group == group or KTHREADD in (pid, after.parent):
            continue  # ours, or a kernel thread (its time may be interrupt work, kept apart)
        before = start.processes.get(pid)
        ticks = after.own - before.own if before is not None else after.own
        used[f"{after.name} ({pid})"] = max(0, ticks) / ticks_per_s / seconds
    return used


def _carried_into_group(start: LoadSnapshot, end: LoadSnapshot, group: int | None) -> int:
    """Ticks that strangers reaped by the group inside the window had spent before it.

    A process of another session whose parent is in the group, alive at the start and gone at
    the end, was (most likely) reaped by that parent: its whole lifetime joined the group's
    cutime, though the part before the window was never the group's work in it.
    """
    carried = 0
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
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    seconds = end.wall_s - start.wall_s
    group_delta = (end.group_ticks - start.group_ticks) - _carried_into_group(start, end, end.group)
    busy_minus_group = ((end.busy_ticks - start.busy_ticks) - group_delta) / ticks_per_s / seconds
    strangers = _stranger_cores(start, end, end.group, ticks_per_s, seconds)
    stolen = end.steal_ticks - start.steal_ticks
    interrupts = end.interrupt_ticks - start.interrupt_ticks
    return OtherLoad(other_cores=max(0.0, busy_minus_group, sum(strangers.values())),
                     steal_cores=max(0.0, stolen / ticks_per_s / seconds), seconds=seconds,
                     interrupt_cores=max(0.0, interrupts / ticks_per_s / seconds),
                     top_others=_top_others(strangers))
