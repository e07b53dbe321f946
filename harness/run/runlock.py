"""One writer per run folder: a run, or a resume, holds an exclusive lock on its folder.

Why: two `--resume` of one folder, or a resume of a run still going, computed the same cells
and overwrote each other's run.json and measurements.csv. The lock is fcntl.flock on LOCK_FILE
in the folder, held by an open file for as long as the session that writes lives; the kernel
drops it when that process ends, however it ends, so a killed run's lock is taken over by the
next writer. The holder's pid is written in the file, so the second writer's one line (exit 2)
names it. Where flock is missing (Windows) nothing is locked.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO

from harness.spec import BadInput

LOCK_FILE = ".harness.lock"


def holder_pid(handle: IO[str]) -> str:
    """The pid the holder wrote into the lock file ('?' where it wrote none yet)."""
    handle.seek(0)
    return handle.read().strip() or "?"


def hold(run_dir: Path) -> IO[str] | None:
    """Take RUN_DIR's lock for this process; the open file that holds it (keep it open as long
    as the folder is written). BadInput naming the holder's pid when another process has it."""
    try:
        import fcntl
    except ImportError:  # no flock here: one writer is the user's care
        return None
    try:
        handle = open(run_dir / LOCK_FILE, "a+")  # noqa: SIM115 - open while the run writes
    except OSError:  # a folder this process cannot write: its writes will say so
        return None
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = holder_pid(handle)
        handle.close()
        raise BadInput(f"{run_dir}: another harness process (pid {holder}) is writing this run "
                       "folder; wait for it to end, or stop it, then --resume") from None
    except OSError:  # a file system without locks (some network mounts): go on unlocked
        return handle
    # Straight to the file, not through the handle's buffer: on a full disk the pid is lost,
    # and no buffered write is left to fail again when the handle closes.
    with contextlib.suppress(OSError):
        os.ftruncate(handle.fileno(), 0)
        os.pwrite(handle.fileno(), str(os.getpid()).encode(), 0)
    return handle
