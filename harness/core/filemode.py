"""The mode a file the harness writes gets: what a plain open() gives under the process's umask.

Every file is written to a temporary name and renamed (harness.data.store), and
tempfile.mkstemp creates that name 0600 whatever the umask: run.json, the CSV, the report and
exports would be readable by their owner only, which breaks a results folder shared by a group
(docs/cluster.md). The writers set this mode on the temporary file before renaming it.
"""

from __future__ import annotations

import os
import threading

_UMASK_LOCK = threading.Lock()


def _umask_from_proc() -> int | None:
    """The umask Linux reports in /proc/self/status ("Umask:\t0022"); None where it cannot."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        return None
    return None


def current_umask() -> int:
    """The process's umask, read without changing it where the system says it (Linux); else
    set and restored at once, under a lock so two of this module's readers never race."""
    found = _umask_from_proc()
    if found is not None:
        return found
    with _UMASK_LOCK:
        previous = os.umask(0o077)
        os.umask(previous)
    return previous


def created_file_mode() -> int:
    """0666 less the umask, read at each write (a small read of /proc, a few writes a cell):
    a program that imports the harness may change its umask between runs."""
    return 0o666 & ~current_umask()


def give_created_mode(descriptor: int) -> None:
    """Set the mode a plain open() would have given on a file mkstemp made 0600."""
    os.fchmod(descriptor, created_file_mode())
