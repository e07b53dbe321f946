"""Stop requests: SIGINT, SIGTERM and SIGHUP end a run cleanly, as Ctrl-C does.

Why explicit handlers rather than Python's KeyboardInterrupt:
- Python turns SIGINT into KeyboardInterrupt only if SIGINT was not ignored when the
  interpreter started. A harness launched from a background job of a script or CI runner
  inherits SIGINT ignored, so `kill -INT` did nothing and the run went on into a long cell.
- KeyboardInterrupt lands at any bytecode: inside subprocess.Popen after the fork (the new
  worker is never killed), or inside Popen.wait between taking and guarding its lock (the
  next wait() then blocks for ever). A handler that only records the signal and kills the
  running child's process group cannot leave either behind: the blocked wait() returns
  because its child died, and the runner sees the request between steps.
- SIGTERM and SIGHUP killed the CLI outright and orphaned the running worker.

A second signal during shutdown exits at once, after killing the running child's group.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# Honoured as ignored when inherited so: `nohup harness compare ...` must survive a hangup.
RESPECT_IGNORED = (signal.SIGHUP,)
EXIT_SIGNAL_BASE = 128  # shells' convention: killed by signal N -> exit code 128 + N


@dataclass
class StopState:
    """What the handlers know: the first stop signal, and the child group running now."""

    signum: int | None = None
    child_group: int | None = None


_STATE = StopState()


def requested() -> signal.Signals | None:
    """The signal that asked the run to stop, or None."""
    return None if _STATE.signum is None else signal.Signals(_STATE.signum)


def describe(signum: signal.Signals) -> str:
    """'SIGINT (Ctrl-C)' or the plain name: the words used in reasons and messages."""
    return f"{signum.name} (Ctrl-C)" if signum == signal.SIGINT else signum.name


def kill_group(pgid: int | None) -> None:
    """SIGKILL a process group; gone already (or never started) is fine."""
    if pgid is None:
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@contextmanager
def child_group(pid: int) -> Iterator[None]:
    """Register a child started with start_new_session=True while the caller waits on it.

    Why check after registering: a signal that arrived while the child was being spawned
    found no group to kill, so the child is killed here instead.
    """
    _STATE.child_group = pid
    try:
        if _STATE.signum is not None:
            kill_group(pid)
        yield
    finally:
        _STATE.child_group = None


def _handle(signum: int, frame: FrameType | None) -> None:
    """Record the request and kill the running child; never raise into the main thread."""
    kill_group(_STATE.child_group)
    if _STATE.signum is not None:  # second signal: the user insists, stop now
        try:
            os.write(2, f"harness: second {signal.Signals(signum).name}, exiting now\n".encode())
        except OSError:
            pass
        os._exit(EXIT_SIGNAL_BASE + signum)
    _STATE.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[StopState]:
    """Route the stop signals to _handle for the duration; restore the old handlers after.

    Outside the main thread signal handlers cannot be set; then nothing changes.
    """
    _STATE.signum, _STATE.child_group = None, None
    if threading.current_thread() is not threading.main_thread():
        yield _STATE
        return
    previous = {}
    for signum in STOP_SIGNALS:
        if signum in RESPECT_IGNORED and signal.getsignal(signum) == signal.SIG_IGN:
            continue
        previous[signum] = signal.signal(signum, _handle)
    try:
        yield _STATE
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _STATE.signum, _STATE.child_group = None, None
