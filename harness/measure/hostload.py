"""CPU time that processes outside this process group used while a case was timed.

Why: a CPU timing is only as good as the cores it had. With the framework's thread pool as wide
as the machine, one busy process elsewhere (an orphaned worker, a compile job) makes every
parallel region wait for a descheduled thread, and a 30 us call reads milliseconds. So the
harness measures the competition (Linux /proc: all cores' busy time minus this process group's,
plus hypervisor steal) instead of assuming an idle machine. Elsewhere it reports nothing.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# Other processes using more than this many cores on average make a cell's timing suspect:
# half a core is more than background daemons use and less than any real competing job.
CONTENDED_CORES = 0.5


@dataclass(frozen=True)
class LoadSnapshot:
    wall_s: float
    busy_ticks: int  # every core's non-idle time, this process group included
    steal_ticks: int  # time the hypervisor gave our vCPUs to someone else
    group_ticks: int  # this process group's own CPU time (worker, its threads and children)


@dataclass(frozen=True)
class OtherLoad:
    """Average cores used by other processes (and stolen by the hypervisor) over a window."""

    other_cores: float
    steal_cores: float
    seconds: float

    @property
    def contended(self) -> bool:
        return self.other_cores + self.steal_cores > CONTENDED_CORES

    def reason(self) -> str:
        cores = os.cpu_count() or 0
        return (f"other processes used {self.other_cores:.1f} of {cores} cores"
                + (f" and the hypervisor stole {self.steal_cores:.1f}" if self.steal_cores >= 0.05
                   else "") + f" during the {self.seconds:.2g} s this case was timed")


def _cpu_line() -> tuple[int, int] | None:
    try:
        fields = (PROC / "stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    values = [int(value) for value in fields[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = values[:7]
    steal = values[7] if len(values) > 7 else 0
    return user + nice + system + irq + softirq, steal


def _group_ticks(group: int) -> int:
    """utime + stime of every process whose process group is `group` (threads included)."""
    total = 0
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue  # it exited while we looked
        fields = text[text.rfind(")") + 2:].split()  # the name may hold spaces
        if int(fields[2]) == group:
            total += int(fields[11]) + int(fields[12])
    return total


def snapshot() -> LoadSnapshot | None:
    """The counters now, or None where /proc is not there."""
    line = _cpu_line()
    if line is None:
        return None
    busy, steal = line
    return LoadSnapshot(time.perf_counter(), busy, steal, _group_ticks(os.getpgrp()))


def other_load(start: LoadSnapshot | None, end: LoadSnapshot | None) -> OtherLoad | None:
    """What ran beside us between two snapshots; None when either is missing."""
    if start is None or end is None or end.wall_s <= start.wall_s:
        return None
    ticks_per_s = os.sysconf("SC_CLK_TCK")
    seconds = end.wall_s - start.wall_s
    others = (end.busy_ticks - start.busy_ticks) - (end.group_ticks - start.group_ticks)
    stolen = end.steal_ticks - start.steal_ticks
    return OtherLoad(other_cores=max(0.0, others / ticks_per_s / seconds),
                     steal_cores=max(0.0, stolen / ticks_per_s / seconds), seconds=seconds)
