"""Every worker outcome becomes a status, through a real worker (fault-injection backend)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.data.results import CellResult
from harness.run import runner
from harness.run.forkserver import ForkServers
from harness.run.runner import cell_environment, run_worker
from harness.spec import Cell, Status
from tests.quick_options import quick_options


@pytest.fixture(params=["spawned", "forked"])
def servers(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ForkServers | None]:
    """Each outcome through a new interpreter and through a worker forked from a warm process
    (the fake framework declares a preload, as torch does)."""
    if request.param == "spawned":
        yield None
        return
    with ForkServers(tmp_path) as warm:
        yield warm


def fault_cell(variant: str, **params) -> Cell:
    return Cell("fault", variant, "fake", "cpu", {"size": [1, 2], "pid_file": "", **params})


def run(variant: str, timeout_s: float = 60.0, servers: ForkServers | None = None,
        **params) -> CellResult:
    return run_worker(fault_cell(variant, **params), quick_options(timeout_s), servers)


def test_ok_cell_has_samples_and_a_passed_check(servers: ForkServers | None) -> None:
    result = run("ok", servers=servers)
    assert result.status == Status.OK
    assert [case.status for case in result.cases] == [Status.OK, Status.OK]
    assert all(case.check and case.check["passed"] for case in result.cases)
    assert result.framework_version == "0.0-fake"
    assert result.peak_host_memory_source == "wait4 (measured by the runner)"
    assert result.peak_host_memory_bytes and result.peak_host_memory_bytes > 1e6
    assert result.cost is not None
    started = "worker fork" if servers is not None else "worker start (python, imports)"
    assert started in result.cost.phases


@pytest.mark.parametrize("variant, status, reason", [
    ("error", "error", "ValueError: injected failure"),
    ("oom", "error", "out of memory"),
    ("invalid", "invalid", "check failed"),
    ("segfault", "error", "SIGSEGV"),
    ("sigkill", "error", "possibly out of host memory"),
])
def test_failures_become_statuses_and_keep_finished_cases(variant: str, status: str, reason: str,
                                                          servers: ForkServers | None) -> None:
    result = run(variant, servers=servers)
    assert result.status == Status(status)
    assert reason in result.reason
    # Size 1 ran before the fault at size 2: its measurement survives.
    assert result.cases[0].status == Status.OK and result.cases[0].samples


# How long a worker of the fault workload may take to reach its hang (size 1 measured, size 2
# begun): the runner's clock for the worker starts only then (timed_from_the_hang).
REACH_HANG_S = 120.0


def timed_from_the_hang(monkeypatch: pytest.MonkeyPatch, marker: Path) -> list[float]:
    """From here on, the runner waits for its worker's timeout only once the worker has written
    MARKER (the fault backend's hang and child-hang variants do, as they begin to hang).

    Why: the timeout under test is a second, not the 8 s these tests once gave a worker to
    start and measure size 1 first; a loaded machine could still take longer than that, and
    the worker was killed before its first case (issue 50). Now the worker's start-up is
    untimed and the timeout alone decides, whatever the machine's speed. Returns the list the
    clock's start (time.monotonic()) is appended to."""
    wait_for_child = runner._wait_for_child
    clock_started: list[float] = []

    def waiting(process: Any, timeout_s: float,
                **guard: Any) -> tuple[int | None, int | None]:
        deadline = time.monotonic() + REACH_HANG_S
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        clock_started.append(time.monotonic())
        return wait_for_child(process, timeout_s, **guard)

    monkeypatch.setattr(runner, "_wait_for_child", waiting)
    return clock_started


def test_hang_past_timeout_is_killed_and_reported(servers: ForkServers | None, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "hanging.pid"
    clock_started = timed_from_the_hang(monkeypatch, marker)
    result = run("hang", timeout_s=1.0, servers=servers, pid_file=str(marker))
    assert time.monotonic() - clock_started[0] < 30
    assert result.status == Status.TIMEOUT
    assert "--timeout 1 s at size 2" in result.reason  # the size that hung
    assert result.cases[0].status == Status.OK


def test_a_deadline_before_the_timeout_stops_the_worker_with_its_reason(
        servers: ForkServers | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """harness advise's budget: a worker still running when it ends is stopped, its finished
    case kept, and the cell says why (not the --timeout it never reached)."""
    marker = tmp_path / "hanging.pid"
    clock_started = timed_from_the_hang(monkeypatch, marker)
    # The deadline leaves the worker its least, one second (RunOptions.worker_timeout).
    options = quick_options(600.0, deadline=time.monotonic() + 1.0,
                            deadline_reason="the advise budget of 180 s ran out")
    result = run_worker(fault_cell("hang", pid_file=str(marker)), options, servers)
    assert time.monotonic() - clock_started[0] < 30
    assert result.status == Status.TIMEOUT
    assert result.reason == "the advise budget of 180 s ran out; worker killed"
    assert result.cases[0].status == Status.OK
    assert quick_options(5.0, deadline=time.monotonic() + 60).worker_timeout() == \
        (5.0, False)


def test_timeout_kills_the_workers_children_too(tmp_path: Path, servers: ForkServers | None,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pid_file = tmp_path / "child.pid"
    timed_from_the_hang(monkeypatch, pid_file)
    result = run("child-hang", timeout_s=1.0, servers=servers, pid_file=str(pid_file))
    assert result.status == Status.TIMEOUT
    child_pid = int(pid_file.read_text())
    time.sleep(0.2)
    assert not _is_running(child_pid)


def _is_running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan may wait for a reaper that never comes)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_unavailable_device_is_a_status_not_an_error(servers: ForkServers | None) -> None:
    cell = Cell("fault", "ok", "fake", "cuda:0", {"size": [1], "pid_file": ""})
    result = run_worker(cell, quick_options(60), servers)
    assert result.status == Status.UNAVAILABLE
    assert "no cuda:0" in result.reason
    # A GPU a forked worker did not find is looked for again in a new interpreter.
    assert result.cost is not None and "worker start (python, imports)" in result.cost.phases


def test_cpu_cells_hide_gpus_and_keep_tensorflow_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    # conftest sets TF_CPP_MIN_LOG_LEVEL for the suite: unset, the value must come from the
    # tensorflow backend's own defaults, not be read back from the test's environment.
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    cpu_env = cell_environment(Cell("matmul", "fp32", "tensorflow", "cpu"))
    gpu_env = cell_environment(Cell("matmul", "fp32", "tensorflow", "cuda:0"))
    assert cpu_env["CUDA_VISIBLE_DEVICES"] == ""
    assert gpu_env.get("CUDA_VISIBLE_DEVICES") != ""
    assert gpu_env["TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert cpu_env["TF_CPP_MIN_LOG_LEVEL"] in ("2", "3")
    assert gpu_env["TF_CPP_MIN_LOG_LEVEL"] in ("2", "3")
    # A user's own choice wins over the default.
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "0")
    assert cell_environment(Cell("matmul", "fp32", "tensorflow", "cpu"))[
        "TF_CPP_MIN_LOG_LEVEL"] == "0"


# The helper child's limit: only the hang is meant to reach it. The child that answers or
# crashes starts a new interpreter and imports the harness first, which on a loaded 2-core
# machine can itself take seconds, so its limit is one no start-up reaches (issue 50).
HELPER_LIMIT_S = {"answer": 300.0, "crash": 300.0, "hang": 2.0}


@pytest.mark.parametrize("mode, document, why_not", [
    ("answer", {"answer": 42}, ""),
    ("crash", None, "helper child gave up: no document"),
    ("hang", None, "timed out after 2 s"),
])
def test_a_helper_child_answers_crashes_or_times_out(mode: str, document: dict | None,
                                                     why_not: str) -> None:
    """A helper child (probe, inspect) past its limit reads "timed out", never a stderr tail."""
    from harness.run.context import RunContext
    from harness.run.runner import run_json_child

    started = time.monotonic()
    got, reason = run_json_child("tests.fakes.helper_child", [mode], fault_cell("ok"),
                                 timeout_s=HELPER_LIMIT_S[mode],
                                 context=RunContext.from_environment())
    assert (got, reason) == (document, why_not)
    if mode == "hang":
        assert time.monotonic() - started < 60  # the hang was killed, not waited out


def test_each_worker_keeps_its_own_cost_record_and_the_sums_are_theirs(
        servers: ForkServers | None) -> None:
    """A cell's cost sums its workers; per_worker keeps each one's figures (which round paid
    a compile is read there), and merging two workers' costs keeps both records."""
    first = run("ok", servers=servers)
    assert first.cost is not None and len(first.cost.per_worker) == 1
    record = first.cost.per_worker[0]
    assert record["round"] == 0
    assert record["wall_s"] == round(first.cost.wall_s, 3)
    assert set(record["phases"]) <= set(first.cost.phases)
    assert "step setup" in first.cost.phases  # make_task, apart from warm-up
    merged = first.cost.add(first.cost)
    assert merged.workers == 2 and len(merged.per_worker) == 2
    summed = sum(worker["phases"].get("step setup", 0.0) for worker in merged.per_worker)
    assert abs(summed - merged.phases["step setup"]) < 0.002
    stored = type(first.cost).from_dict(merged.to_dict())
    assert stored.per_worker == merged.per_worker
