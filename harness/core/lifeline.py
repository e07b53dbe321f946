"""No orphans: every child the harness starts dies with the process that started it, and the
scratch folders of a killed run are swept by the next.

Why: workers and warm processes run in sessions of their own (so that a timeout or a stop
kills a worker's whole group, and a Ctrl-C in the terminal reaches the harness alone). A
SIGKILL of the main process, or of its process group (what `timeout -s KILL` and CI runners
send), then reached none of them: a hung worker kept a core busy under PID 1, a big one kept
its memory, and each such kill left its `harness-*` folders in the temp directory.

How, on Linux: each child asks the kernel for SIGKILL when its parent dies
(prctl(PR_SET_PDEATHSIG)) right after it starts, then checks that its parent is still the one
that started it (the parent may have died before the request: then it exits at once). A warm
process dies with the main process; a worker forked from it dies with it; a spawned worker or
helper child dies with the main process. The parent's pid reaches an exec'd child in
PARENT_VARIABLE (harness.run.runner and the warm process's start set it); a forked child is
told by the warm process. Elsewhere (macOS) nothing changes.

The kernel sends the signal when the *thread* that started the child ends, not only the
process: every child is started by a thread that waits for it (the runner's, a probe's pool
thread) or by the main thread (the warm processes), never by a thread that ends first.

Not covered: processes a worker starts itself (a DDP rank, a compiler pool) get no signal from
here; SLURM tasks belong to the scheduler.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Not a HARNESS_* setting (harness.core.settings reads those, a user sets them): a handshake
# between the harness's own processes, set by the parent for the child it starts, never by hand.
PARENT_VARIABLE = "CROSSFRAME_PARENT_PID"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
# The exit code of a child whose parent had gone before it could ask: as if killed by SIGKILL.
PARENT_GONE_EXIT = 128 + signal.SIGKILL
# A scratch folder's name: harness-KIND-pPID-RANDOM, PID its owner's (scratch_folder).
SCRATCH_NAME = re.compile(r"^harness-[a-z]+-p(?P<pid>\d+)-")


def parent_environment() -> dict[str, str]:
    """What a child started from this process is given, so it can tell it still has us."""
    return {PARENT_VARIABLE: str(os.getpid())}


def die_with_parent(parent: int | None = None) -> None:
    """Ask for SIGKILL when the parent dies (Linux), then exit at once if it already has.

    PARENT: the pid that started this process; None: PARENT_VARIABLE's, and nothing is asked
    where it is unset (a worker started by hand, a SLURM task's own process)."""
    if parent is None:
        given = os.environ.get(PARENT_VARIABLE, "")
        if not given.isdigit():
            return
        parent = int(given)
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        asked = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return
    if asked and os.getppid() != parent:  # the parent died before the request
        os._exit(PARENT_GONE_EXIT)


@contextlib.contextmanager
def scratch_folder(kind: str) -> Iterator[Path]:
    """A temporary folder named for this process (harness-KIND-pPID-...), removed after the
    block; one a SIGKILL left behind is removed by the next run (sweep_scratch)."""
    with tempfile.TemporaryDirectory(prefix=f"harness-{kind}-p{os.getpid()}-") as folder:
        yield Path(folder)


def owner_alive(pid: int) -> bool:
    """Whether process PID exists (one of another user's counts: it is not ours to judge)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_scratch(root: Path | None = None) -> list[Path]:
    """Remove this user's scratch folders whose owner process is gone (a killed run's); the
    folders removed. Folders of live processes, of other users, and without an owner in
    their name are left alone."""
    root = Path(tempfile.gettempdir()) if root is None else root
    removed: list[Path] = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return removed
    for entry in entries:
        named = SCRATCH_NAME.match(entry.name)
        if named is None or owner_alive(int(named["pid"])):
            continue
        try:
            if not entry.is_dir() or entry.is_symlink() or entry.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed
