"""Peak memory of a worker, measured from outside: the kernel's own account at reaping time.

Why from outside: the worker's in-process figure (getrusage(RUSAGE_SELF)) is lost when the
worker crashes or is killed, and it is taken before the interpreter and framework tear down.
`os.wait4` returns the child's rusage as it is reaped, so ru_maxrss is the whole process's
high-water mark. RUSAGE_CHILDREN deltas would not do: its ru_maxrss is the largest of all
children ever reaped, so a small cell after a large one would read the large one's peak.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from harness.core.units import format_bytes
from harness.data.results import CellResult

POLL_FIRST_S = 0.001
POLL_MAX_S = 0.05  # adds at most this much to a cell's wall time, never to its measurements


def rusage_peak_bytes(maxrss: int) -> int:
    """ru_maxrss in bytes: Linux reports kilobytes, macOS bytes."""
    return int(maxrss) * (1 if sys.platform == "darwin" else 1024)


def wait_with_peak_rss(process: subprocess.Popen, timeout_s: float) -> tuple[int, int | None]:
    """Wait for PROCESS like Popen.wait(timeout); return (returncode, peak RSS in bytes).

    Raises subprocess.TimeoutExpired (child still running) exactly as Popen.wait does, so the
    caller's timeout handling is unchanged. Falls back to Popen.wait where wait4 is missing.
    """
    if not hasattr(os, "wait4"):
        return process.wait(timeout=timeout_s), None
    deadline = time.monotonic() + timeout_s
    pause = POLL_FIRST_S
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid == process.pid:
            # Popen must know the child is gone, or a later wait() would wait for a reused pid.
            process.returncode = os.waitstatus_to_exitcode(status)
            return process.returncode, rusage_peak_bytes(usage.ru_maxrss)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise subprocess.TimeoutExpired(process.args, timeout_s)
        time.sleep(min(pause, remaining))
        pause = min(pause * 2, POLL_MAX_S)


def with_peak_host_memory(result: CellResult, peak_rss: int | None) -> CellResult:
    """Record the outside measurement; keep the worker's own figure when there is none."""
    inside = result.peak_host_memory_bytes
    if peak_rss is not None:
        result.peak_host_memory_bytes = peak_rss
        result.peak_host_memory_source = "wait4 (measured by the runner)"
    elif inside is not None:
        result.peak_host_memory_source = "worker getrusage (in-process)"
    result.peak_host_memory_bytes_worker = inside
    return result


def memory_text(host_bytes: int | None, device_bytes: int | None) -> str:
    """One compact table cell: host peak RSS, and the device peak where there is one."""
    text = format_bytes(host_bytes)
    return text if device_bytes is None else f"{text} / dev {format_bytes(device_bytes)}"


# --- one case's host peak, inside the worker ----------------------------------------------------
# A worker times every size of its cell, so the process's high-water mark above is the largest
# case's. The memory fit (harness.analysis.memoryfit) needs each case's own: Linux resets a
# process's VmHWM to its current RSS when "5" is written to /proc/self/clear_refs (kernel 4.0+),
# so the mark read after a case is that case's peak (what earlier cases left allocated
# included, as the fit's fixed part expects).
CLEAR_REFS = "/proc/self/clear_refs"
STATUS = "/proc/self/status"


def reset_host_peak() -> bool:
    """Start a new high-water mark at the current RSS; False where the kernel refuses."""
    try:
        with open(CLEAR_REFS, "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def host_peak_bytes() -> int | None:
    """VmHWM of this process since the last reset, in bytes; None where /proc has none."""
    try:
        with open(STATUS) as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024  # "VmHWM:  123456 kB"
    except (OSError, ValueError, IndexError):
        return None
    return None
