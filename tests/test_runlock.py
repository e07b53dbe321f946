"""One writer per run folder: a resume of a run that is still going (or of one another resume
holds) is refused in one line naming the holder, exit 2; a dead holder's lock is taken over."""

from __future__ import annotations

import os
import signal
import sys
from contextlib import suppress
from pathlib import Path

import pytest

from harness.run import runlock
from harness.spec import BadInput
from tests.cli_in_process import run_cli_in_process
from tests.test_orphans import marked_processes, start_hanging_run


def test_a_second_holder_is_refused_naming_the_first_and_takes_over_once_it_is_gone(
        tmp_path: Path) -> None:
    first = runlock.hold(tmp_path)
    assert first is not None
    with pytest.raises(BadInput, match=rf"another harness process \(pid {os.getpid()}\)"):
        runlock.hold(tmp_path)
    first.close()  # what the kernel does when the holder dies
    second = runlock.hold(tmp_path)
    assert second is not None and runlock.holder_pid(second) == str(os.getpid())
    second.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the hanging run needs /proc")
def test_a_resume_of_a_run_still_going_exits_2_naming_its_pid(tmp_path: Path) -> None:
    process, mark, _ = start_hanging_run(tmp_path, forked=True)
    try:
        [run_dir] = (tmp_path / "results").glob("*/run.json")
        ran = run_cli_in_process("compare", "--resume", str(run_dir.parent), "--no-report")
        assert ran.returncode == 2, ran.stdout + ran.stderr
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pid {process.pid}" in lines[0], ran.stderr
    finally:
        process.kill()
        process.wait()
        for pid in marked_processes(mark):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
