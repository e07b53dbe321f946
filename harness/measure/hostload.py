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


@dataclass(frozen=True)
class ProcessTicks:
    """One process's CPU ticks: its own (all threads) and its reaped children's."""

    name: str
    group: int
    own: int  # utime + stime
    children: int  # cutime + cstime: descendants it waited for

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
                children=int(fields[13]) + int(fields[14]))
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


def _top_others(start: LoadSnapshot, end: LoadSnapshot, group: int | None,
                ticks_per_s: float, seconds: float) -> tuple[tuple[str, float], ...]:
    """The largest other users over the window, by their own time (alive at both ends)."""
    used = []
    for pid, after in end.processes.items():
        before = start.processes.get(pid)
        if before is None or after.group == group:
            continue
        cores = (after.own - before.own) / ticks_per_s / seconds
        if cores >= TOP_OTHER_MIN_CORES:
            used.append((f"{after.name} ({pid})", cores))
    return tuple(sorted(used, key=lambda item: -item[1])[:TOP_OTHERS])


def other_load(start: LoadSnapshot | None, end: LoadSnapshot | None) -> OtherLoad | None:
    """What ran beside us between two snapshots; None when either is missing."""
    if start is None or end is None or end.wall_s <= start.wall_s:
        return None
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    seconds = end.wall_s - start.wall_s
    others = (end.busy_ticks - start.busy_ticks) - (end.group_ticks - start.group_ticks)
    stolen = end.steal_ticks - start.steal_ticks
    interrupts = end.interrupt_ticks - start.interrupt_ticks
    return OtherLoad(other_cores=max(0.0, others / ticks_per_s / seconds),
                     steal_cores=max(0.0, stolen / ticks_per_s / seconds), seconds=seconds,
                     interrupt_cores=max(0.0, interrupts / ticks_per_s / seconds),
                     top_others=_top_others(start, end, end.group, ticks_per_s, seconds))
