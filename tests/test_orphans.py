"""No orphans: a SIGKILL of the harness (or of its process group) takes every process of the run
with it, and the scratch folders it left are swept by the next run (harness.core.lifeline).

The run is a real `harness compare` of the fault backend (its workers forked from a warm
process) whose second cell hangs; every process of it carries a marker in its environment, so
the test finds them in /proc whatever their parent or group has become.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path

import pytest

from harness.core import lifeline

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MARKER = "HARNESS_TEST_ORPHAN_MARK"
GONE_WITHIN_S = 20.0  # the kernel delivers the parent-death signal at once; generous under load

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="parent-death signals and /proc are Linux's")


def marked_processes(mark: str) -> list[int]:
    """Live (not zombie) processes whose environment holds MARKER=mark."""
    found = []
    wanted = f"{MARKER}={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if wanted in environ.split(b"\0") and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def wait_for(condition, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


_MARKS: list[str] = []


@pytest.fixture(autouse=True)
def _kill_what_is_left() -> Iterator[None]:
    """A failing test must not leave the processes it found (the bug it looks for) running."""
    yield
    while _MARKS:
        for pid in marked_processes(_MARKS.pop()):
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def start_hanging_run(tmp_path: Path, forked: bool) -> tuple[subprocess.Popen, str, Path]:
    """(the CLI, its marker, its temp folder) once its second cell's worker hangs; FORKED:
    its workers forked from a warm process, else each a new interpreter."""
    mark, scratch = uuid.uuid4().hex, tmp_path / "tmp"
    scratch.mkdir()
    _MARKS.append(mark)
    pid_file = tmp_path / "worker.pid"
    environ = dict(os.environ, **{MARKER: mark}, TMPDIR=str(scratch),
                   HARNESS_CACHE_DIR=str(tmp_path / "cache"),
                   HARNESS_FORK_WORKERS="1" if forked else "0")
    command = [sys.executable, "-m", "harness.cli", "compare", "--workload", "fault",
               "--framework", "fake", "--variant", "ok,hang", "--quick", "--no-report",
               "--no-ceilings", "--param", f"pid_file={pid_file}", "--out",
               str(tmp_path / "results")]
    # Its own session: the group kill below must not reach pytest.
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=environ, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 120,
             "the hanging worker")
    return process, mark, scratch


@pytest.mark.parametrize("whole_group, forked", [(False, True), (True, True), (False, False)],
                         ids=["main", "process-group", "main-spawned-worker"])
def test_sigkill_of_the_harness_leaves_no_process_and_the_next_run_sweeps_its_folders(
        tmp_path: Path, whole_group: bool, forked: bool) -> None:
    process, mark, scratch = start_hanging_run(tmp_path, forked)
    # The main process and the hanging worker (and where forked, its warm process).
    assert len(marked_processes(mark)) >= (3 if forked else 2)
    if whole_group:
        os.killpg(process.pid, signal.SIGKILL)
    else:
        process.kill()
    process.wait()
    wait_for(lambda: not marked_processes(mark), GONE_WITHIN_S,
             "the killed run's workers and warm process to end")
    left = sorted(path.name for path in scratch.glob("harness-*"))
    assert any(name.startswith(f"harness-cell-p{process.pid}-") for name in left), left
    removed = lifeline.sweep_scratch(scratch)
    assert sorted(path.name for path in removed) == left
    assert not list(scratch.glob("harness-*"))


def test_the_sweep_keeps_folders_of_live_processes_and_foreign_names(tmp_path: Path) -> None:
    with lifeline.scratch_folder("cell") as mine:  # this process's: alive
        assert mine.name.startswith(f"harness-cell-p{os.getpid()}-")
    live = tmp_path / f"harness-cell-p{os.getpid()}-abc"
    unowned = tmp_path / "harness-signals-xyz"  # no owner in its name: not ours to judge
    dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True).stdout.strip()
    dead = tmp_path / f"harness-warm-p{dead_pid}-def"
    for folder in (live, unowned, dead):
        folder.mkdir()
        (folder / "stderr.txt").write_text("x")
    assert lifeline.sweep_scratch(tmp_path) == [dead]
    assert live.exists() and unowned.exists() and not dead.exists()


def test_a_child_whose_parent_is_gone_before_it_asks_exits_at_once(tmp_path: Path) -> None:
    """The race: the parent died between starting the child and the child's request."""
    code = ("from harness.core import lifeline; lifeline.die_with_parent(); "
            "print('still here')")
    not_its_parent = str(os.getpid() + 1)
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=60,
                          env=dict(os.environ, **{lifeline.PARENT_VARIABLE: not_its_parent}))
    assert done.returncode == lifeline.PARENT_GONE_EXIT and "still here" not in done.stdout
