"""Stop signals end a run cleanly: cells saved, run marked, no process of a worker left alive.

Each test starts the real CLI and looks at the worker's process group through /proc, so an
orphaned worker (the failure these tests guard against) shows up as a live group member.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import suppress
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
GONE_WITHIN_S = 20.0  # a generous bound for the kernel to finish a SIGKILL under load

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, process group) of a live process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[2])


def live_members(pgid: int) -> list[int]:
    """Processes of group pgid that still run (zombies have stopped for good)."""
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = proc_stat(int(entry.name))
            if stat is not None and stat[2] == pgid and stat[0] not in ("Z", "X"):
                members.append(int(entry.name))
    return members


def wait_until(condition: Callable[[], object], timeout_s: float, what: str) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def assert_group_gone(pgid: int) -> None:
    deadline = time.monotonic() + GONE_WITHIN_S
    while live_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert live_members(pgid) == [], f"process group {pgid} outlived the CLI"


# Sets the stop signals' dispositions, then becomes the CLI (same pid, dispositions kept).
LAUNCHER = """
import os, signal, sys
ignored = {int(name) for name in sys.argv[1].split(",") if name}
for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(signum, signal.SIG_IGN if signum in ignored else signal.SIG_DFL)
os.execv(sys.executable, [sys.executable, *sys.argv[2:]])
"""


@pytest.fixture(autouse=True)
def _no_leftovers() -> Iterator[None]:
    """A failed test must not leave its CLI and worker running (the bug it looks for)."""
    yield
    while _STARTED:
        process, group = _STARTED.pop()
        if process.poll() is None:
            process.kill()
            process.wait()
        with suppress(ProcessLookupError, PermissionError):
            if group is not None and group != os.getpgrp():  # never the test run's own group
                os.killpg(group, signal.SIGKILL)


_STARTED: list[tuple[subprocess.Popen, int | None]] = []


def start_cli(out_dir: Path, args: list[str], ignored: tuple[int, ...] = (),
              workload: str = "fault") -> subprocess.Popen:
    """The CLI with the stop signals at their defaults, except those named in `ignored`.

    Why set them: pytest itself may run under nohup or as a background job, and the CLI would
    inherit that; these tests state the starting dispositions they mean.
    """
    command = [sys.executable, "-c", LAUNCHER, ",".join(str(int(s)) for s in ignored),
               "-m", "harness.cli", "compare", "--workload", workload, "--framework", "fake",
               "--quick", "--no-report", "--out", str(out_dir), *args]
    # A cache of its own: --quick reuses ceilings remembered by an earlier test in this
    # process (tests/test_check.py probes), and a run with nothing to probe has no probe child.
    environ = dict(os.environ, HARNESS_CACHE_DIR=tempfile.mkdtemp(prefix="harness-signals-"))
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environ)
    _STARTED.append((process, None))
    return process


def start_hanging_worker(out_dir: Path, tmp_path: Path,
                         ignored: tuple[int, ...] = ()) -> tuple[subprocess.Popen, int]:
    """A run whose second cell's worker hangs with a child of its own; returns (CLI, group)."""
    pid_file = tmp_path / "child.pid"
    process = start_cli(out_dir, ["--variant", "ok,child-hang", "--no-ceilings",
                                  "--param", f"pid_file={pid_file}"], ignored)
    wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 120,
               "the hanging worker's child")
    stat = proc_stat(int(pid_file.read_text()))
    assert stat is not None, "the worker's child died before the signal"
    _STARTED.append((process, stat[2]))
    return process, stat[2]


def run_document(out_dir: Path) -> dict:
    [run_file] = out_dir.glob("*/run.json")
    return json.loads(run_file.read_text())


@pytest.mark.parametrize("signum, ignored", [
    (signal.SIGINT, ()),
    (signal.SIGINT, (signal.SIGINT,)),  # started from a script's background job
    (signal.SIGTERM, ()),
    (signal.SIGHUP, ()),
], ids=["SIGINT", "SIGINT-inherited-ignored", "SIGTERM", "SIGHUP"])
def test_stop_signal_saves_cells_kills_the_worker_group_and_exits_128_plus_n(
        out_dir: Path, tmp_path: Path, signum: signal.Signals, ignored: tuple[int, ...]) -> None:
    process, worker_group = start_hanging_worker(out_dir, tmp_path, ignored)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signum, stderr
    assert "Traceback" not in stderr
    assert_group_gone(worker_group)
    document = run_document(out_dir)
    assert document["interrupted"] is True and document["interrupted_by"] == signum.name
    assert document["finished"] is not None
    [ok, stopped] = document["cells"]
    assert ok["status"] == "ok" and stopped["status"] == "interrupted"
    assert f"interrupted by {signum.name}" in stopped["reason"]
    assert stopped["cases"][0]["status"] == "ok"  # size 1 finished before the hang
    run_dir = next(out_dir.iterdir())
    said = stderr.splitlines()
    assert f"interrupted by {signum.name}" in stderr and "1 of 2 cells finished" in stderr
    assert said[said.index(f"  harness compare --resume {run_dir}") - 1].endswith(
        "to run the rest:"), stderr


def test_sighup_is_ignored_under_nohup(out_dir: Path, tmp_path: Path) -> None:
    process, worker_group = start_hanging_worker(out_dir, tmp_path, ignored=(signal.SIGHUP,))
    process.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    assert process.poll() is None, "SIGHUP stopped a run started under nohup"
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM
    assert run_document(out_dir)["interrupted_by"] == "SIGTERM"
    assert_group_gone(worker_group)


def test_two_quick_signals_still_leave_no_worker(out_dir: Path, tmp_path: Path) -> None:
    process, worker_group = start_hanging_worker(out_dir, tmp_path)
    process.send_signal(signal.SIGTERM)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert "Traceback" not in stderr
    assert_group_gone(worker_group)


def children(parent: int) -> list[tuple[int, bytes]]:
    """(pid, command line) of parent's running children."""
    found = []
    for entry in Path("/proc").iterdir():
        stat = proc_stat(int(entry.name)) if entry.name.isdigit() else None
        if stat is None or stat[1] != parent or stat[0] in ("Z", "X"):
            continue
        try:
            found.append((int(entry.name), Path(f"/proc/{entry.name}/cmdline").read_bytes()))
        except OSError:
            continue
    return found


def ceilings_child(parent: int) -> int | None:
    """The pid of parent's ceilings probe, if it runs now: its `python -m
    harness.measure.ceilings` child, or the probe its warm process forked (the only child of
    that warm process while the ceilings are measured)."""
    for pid, command in children(parent):
        if b"harness.measure.ceilings" in command:
            return pid
        if b"harness.run.forkserver" in command:
            forked = children(pid)
            if forked:
                return forked[0][0]
    return None


def test_signal_while_measuring_ceilings_leaves_no_child(out_dir: Path) -> None:
    process = start_cli(out_dir, ["--variant", "ok"], workload="fault-rated")
    child = wait_until(lambda: ceilings_child(process.pid), 120, "the ceilings child")
    # A forked child is seen between fork and setpgid (both sides set it, the parent before it
    # replies); within a few seconds it must lead its own group, or the group kill misses it.
    wait_until(lambda: (proc_stat(child) or ("", 0, 0))[2] == child, 10,
               "the ceilings child to lead its own process group")
    group = child
    _STARTED.append((process, group))
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert_group_gone(group)
    document = run_document(out_dir)
    assert document["interrupted_by"] == "SIGTERM" and document["cells"] == []
    assert "interrupted by SIGTERM" in document["ceilings"]["cpu"]["error"]


SECOND_SIGNAL_SCRIPT = """
import os, signal, subprocess
from harness.core import interrupt

with interrupt.stop_on_signals():
    first = subprocess.Popen(["sleep", "600"], start_new_session=True)
    with interrupt.child_group(first.pid):
        os.kill(os.getpid(), signal.SIGTERM)
        first.wait()  # returns because the handler killed the group
    print("first stop:", interrupt.requested().name, first.returncode, flush=True)
    # A child the first kill missed (say, spawned as the signal came): the second must get it.
    second = subprocess.Popen(["sleep", "600"], start_new_session=True)
    print(second.pid, flush=True)
    interrupt._STATE.child_group = second.pid
    os.kill(os.getpid(), signal.SIGINT)
    print("still running after the second signal", flush=True)
"""


def test_second_signal_kills_the_child_group_and_exits_at_once() -> None:
    completed = subprocess.run([sys.executable, "-c", SECOND_SIGNAL_SCRIPT], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=60, check=False)
    lines = completed.stdout.splitlines()
    assert completed.returncode == 128 + signal.SIGINT, completed.stderr
    assert lines[0] == f"first stop: SIGTERM {-signal.SIGKILL}"
    assert "second SIGINT, exiting now" in completed.stderr
    assert "still running" not in completed.stdout
    assert_group_gone(int(lines[1]))


def test_a_run_stopped_within_a_round_records_the_order_that_ran(out_dir: Path,
                                                                 tmp_path: Path) -> None:
    """The last round's recorded order holds the cells that got a worker before the stop, in
    the shuffled order, and `harness check` recomputes it from the seed (a stopped run's
    shuffle covers the cells it never reached too)."""
    from harness.audit import audit_run
    from harness.run.rounds import round_orders

    pid_file = tmp_path / "child.pid"
    # Four cells, two rounds; seed 5 puts a hanging cell third in round 1 (asserted below).
    process = start_cli(out_dir, ["--variant", "ok,child-hang", "--framework", "fakegpu",
                                  "--no-ceilings", "--rounds", "2", "--seed", "5",
                                  "--param", f"pid_file={pid_file}"])
    wait_until(lambda: pid_file.exists() and pid_file.read_text().strip(), 120,
               "the hanging worker's child")
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    document = run_document(out_dir)
    planned = [(cell["framework"], cell["variant"]) for cell in document["planned_cells"]]
    shuffled = round_orders(len(planned), 2, 5)[0]
    first_hang = next(at for at, index in enumerate(shuffled)
                      if planned[index][1] == "child-hang")
    assert 0 < first_hang < len(planned) - 1  # some cells ran, some were never reached
    assert document["round_orders"] == [shuffled[:first_hang + 1]]
    run_dir = next(out_dir.glob("*/run.json")).parent
    audit = audit_run(run_dir, round_orders)
    assert not [m.line() for m in audit.mismatches if "round" in m.line()]
