"""Test-only plugin (loaded through $HARNESS_PLUGINS): a fault-injection workload and backend,
and a log of the run folders a `harness` child process makes, for the suite's audit."""

import os
from pathlib import Path

from harness.spec import FrameworkSpec

# tests/conftest.py names this file: it audits the runs listed here when each test ends, those
# a child process made too (its monkeypatch of store.new_run_dir sees this process's alone).
RUN_LOG_VARIABLE = "HARNESS_TEST_RUN_LOG"


def log_run_dirs() -> None:
    """Append every run folder this process makes to $HARNESS_TEST_RUN_LOG (once a process)."""
    log = os.environ.get(RUN_LOG_VARIABLE)
    if not log:
        return
    from harness.data import store  # only where a test asked: workers import the plugin too

    made = store.new_run_dir
    if getattr(made, "logged", False):
        return

    def logging_new_run_dir(out: Path, workload: str) -> Path:
        path = made(out, workload)
        with open(log, "a") as stream:
            stream.write(f"{path.resolve()}\n")
        return path

    logging_new_run_dir.logged = True  # type: ignore[attr-defined]
    store.new_run_dir = logging_new_run_dir


log_run_dirs()

WORKLOADS = {"fault": "tests.fakes.workload:SPEC", "fault-rated": "tests.fakes.workload:RATED"}
# "json" stands in for the framework's import name: always installed.
# "fake" declares a preload, so its workers are forked from a warm process as torch's are
# (harness.run.forkserver): every run of the suite's fault backend goes through the fork.
FRAMEWORKS = {"fake": FrameworkSpec(name="fake", import_name="json", package="tests.fakes.backend",
                                    install_hint="pip install 'crossframe-harness[fake]'",
                                    preload=("tests.fakes.backend.device",)),
              "absent": ("tests.fakes.backend", "harness_no_such_package"),
              "fakegpu": ("tests.fakes.gpubackend", "json")}
