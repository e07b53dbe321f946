"""The memory guard: a case too large for the machine is refused before it runs, and a worker
(or helper child) that grows past what the machine had available is stopped, as a row.

Why: `--sizes 45000` for numpy matmul started a worker that reached 19.5 GB of a 24 GB
machine before it was killed by hand, and a model() allocating without bound grew the model
inspection's child to 18 GB. Two guards:

- before a case: the workload's estimate of what it holds at least (WorkloadSpec.host_bytes:
  matmul's three n x n float32 matrices) against the memory available now (Linux's
  MemAvailable). A case that cannot fit is an `error` case "out of memory: ... not run" in
  the worker, before its inputs are made; the cell's other sizes run.
- while a child runs: its parent polls the resident memory of the child and its descendants
  (/proc, every POLL_S) and kills its process group past LIMIT_SHARE of the memory that was
  available when it started. Why RSS and not RLIMIT_AS: CUDA, JAX and TensorFlow reserve
  address space far beyond what they touch (tens of GB of virtual memory on a CPU cell), so an
  address-space limit would refuse them, not a runaway.

Where /proc is missing (macOS, Windows) neither guard acts.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness.core.units import format_bytes

# The share of the memory available at a child's start it may hold: on the 24 GB VM with
# ~22 GB available, a runaway is stopped with ~2 GB still free.
LIMIT_SHARE = 0.9
POLL_S = 0.5  # how often the parent reads the child's memory while it waits for it
MEMINFO = Path("/proc/meminfo")
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class OverMemory(Exception):
    """A child's processes held more than the guard allows (its group is killed)."""

    def __init__(self, held: int, limit: int) -> None:
        self.held, self.limit = held, limit
        super().__init__(self.reason())

    def reason(self, where: str = "") -> str:
        """'out of memory[ at n 1024]: ...' (WHERE: ' at n 1024', the size it was at)."""
        return (f"out of memory{where}: its processes held {format_bytes(self.held)}, past "
                f"the guard's {format_bytes(self.limit)} ({LIMIT_SHARE:.0%} of the memory "
                "available when it started)")


def available_bytes() -> int | None:
    """The memory the machine can give without swapping (MemAvailable); None where unknown."""
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def child_limit() -> int | None:
    """The resident bytes a child started now may hold (None: no guard here)."""
    available = available_bytes()
    return None if available is None else int(available * LIMIT_SHARE)


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (None: gone, or no /proc)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def _children(pid: int) -> list[int]:
    """PID's children (those its main thread started; where the kernel lists them)."""
    try:
        return [int(child) for child in
                Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def held_bytes(pid: int) -> int:
    """The resident memory of PID and its descendants (0 where /proc cannot say)."""
    total, seen, waiting = 0, set(), [pid]
    while waiting:
        current = waiting.pop()
        if current in seen:
            continue
        seen.add(current)
        fields = _stat_fields(current)
        if fields is not None and len(fields) > 21:
            total += int(fields[21]) * PAGE_BYTES  # rss, in pages (proc(5): field 24)
        waiting += _children(current)
    return total


def case_refusal(host_bytes: Callable[..., float | None] | None, case: Mapping[str, Any],
                 variant: str, available: int | None) -> str:
    """Why a case cannot run in the memory AVAILABLE ('' where it can, or nobody can say)."""
    if host_bytes is None or available is None:
        return ""
    needed = host_bytes(case, variant)
    if needed is None or needed <= available:
        return ""
    return (f"out of memory: needs at least {format_bytes(int(needed))} (the workload's "
            f"estimate), {format_bytes(available)} available; not run")


def fits(needed_bytes: float) -> bool:
    """Whether NEEDED_BYTES fit in the guard's share of the memory available now (True where
    unknown)."""
    limit = child_limit()
    return limit is None or needed_bytes <= limit
