"""The suite's pool of warm processes (tests/warm_pool.py): runs borrow them, each run still
records its own warm start, and a warm process that cannot serve the next run is not lent."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness
from harness.data import store
from harness.run import forkserver
from harness.run.runner import PROJECT_ROOT, cell_environment, run_matrix, warm_environment
from harness.spec import Cell, Status
from tests.quick_options import quick_options
from tests.warm_pool import PooledRun, WarmProcessPool, lent_warm_processes

PRELOAD = ("tests.fakes.backend.device",)


@pytest.fixture
def pool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[WarmProcessPool]:
    """A pool of this test's own, lent to the runs it makes."""
    own = WarmProcessPool(tmp_path / "pool")
    own.scratch.mkdir()
    monkeypatch.setattr(forkserver, "warm_processes",
                        lambda fork_workers=True: lent_warm_processes(own, fork_workers))
    try:
        yield own
    finally:
        own.close()


def fake_env(**extra: str) -> dict[str, str]:
    return warm_environment("fake", {**cell_environment(Cell("fault", "ok", "fake", "cpu")),
                                     **extra})


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def compare(out: Path) -> harness.RunResult:
    return harness.compare("fault", frameworks="fake", devices="cpu", variants="ok",
                           quick=True, out=out, ceilings=False, report=False, progress=False)


def test_a_second_run_borrows_the_warm_process_and_records_that_it_started_none(
        pool: WarmProcessPool, tmp_path: Path) -> None:
    first, second = compare(tmp_path / "first"), compare(tmp_path / "second")
    assert pool.started == 1 and len(pool.idle_pids()) == 1
    assert [cell.status for cell in (*first.cells, *second.cells)] == [Status.OK, Status.OK]
    for result in (first, second):
        [cell] = result.cells
        assert cell.cost is not None and "worker fork" in cell.cost.phases
    started = store.read_run(first.path)["warm_processes"]
    assert started["prestart_s"] > 0 and started["frameworks"]["fake"]["import_s"] >= 0
    assert store.read_run(second.path)["warm_processes"] == {"prestart_s": 0.0,
                                                             "frameworks": {}}


def test_a_warm_process_that_ended_is_replaced_at_the_next_run(
        pool: WarmProcessPool, tmp_path: Path) -> None:
    compare(tmp_path / "first")
    [ended] = pool.idle_pids()
    os.kill(ended, signal.SIGKILL)
    result = compare(tmp_path / "second")
    [cell] = result.cells
    assert cell.status == Status.OK and cell.cost is not None
    assert "worker fork" in cell.cost.phases  # forked from a new warm process, not spawned
    assert pool.started == 2 and pool.idle_pids() != [ended]
    assert store.read_run(result.path)["warm_processes"]["prestart_s"] > 0


def test_only_the_per_test_variable_may_differ_between_runs_that_share_one(
        pool: WarmProcessPool) -> None:
    for env in (fake_env(), fake_env(PYTEST_CURRENT_TEST="another test"),
                fake_env(OMP_NUM_THREADS="1")):
        with PooledRun(pool) as run:
            server, _ = run.get("fake", PRELOAD, env, PROJECT_ROOT)
            assert server is not None
    assert pool.started == 2 and len(pool.idle_pids()) == 2


def test_the_least_recently_used_are_closed_past_the_bound(tmp_path: Path) -> None:
    pool = WarmProcessPool(tmp_path, most_idle=2)
    try:
        for threads in ("1", "2", "3", "1"):
            with PooledRun(pool) as run:
                run.get("fake", PRELOAD, fake_env(OMP_NUM_THREADS=threads), PROJECT_ROOT)
            if threads == "3":
                first_pids = pool.idle_pids()
        assert pool.started == 4  # "1" was closed when "3" came back, so it started again
        assert len(pool.idle_pids()) == 2 and pool.idle_pids()[0] == first_pids[1]
    finally:
        pool.close()


def test_a_warm_process_that_still_owes_an_answer_is_not_lent_again(tmp_path: Path) -> None:
    """A run that ended while its worker ran never read that worker's exit line: lent again,
    the next run would take that line for its own fork's answer."""
    pool = WarmProcessPool(tmp_path)
    try:
        with PooledRun(pool) as run:
            server, _ = run.get("fake", PRELOAD, fake_env(), PROJECT_ROOT)
            assert server is not None
            running = server.fork("tests.fakes.helper_child",
                                  ["hang", str(tmp_path / "child.json")], fake_env(), tmp_path,
                                  tmp_path / "child.txt")
            os.killpg(running.pid, signal.SIGKILL)  # its exit line is left unread
        assert pool.idle_pids() == []  # closed, not kept
        with PooledRun(pool) as run:
            server, started_now = run.get("fake", PRELOAD, fake_env(), PROJECT_ROOT)
            assert server is not None and started_now > 0 and pool.started == 2
    finally:
        pool.close()


def test_a_refused_warm_process_is_closed_not_kept(tmp_path: Path) -> None:
    pool = WarmProcessPool(tmp_path)
    try:
        with PooledRun(pool) as run:
            server, _ = run.get("fake", ("no_such_module_here",), fake_env(), PROJECT_ROOT)
            assert server is None and "preload failed" in run.refusal("fake", fake_env())
        assert pool.idle_pids() == []
    finally:
        pool.close()


def test_a_matrix_borrows_from_the_sessions_pool(warm_pool: WarmProcessPool) -> None:
    cells = [Cell("fault", "ok", "fake", "cpu", {"size": [1], "pid_file": ""})]
    results: list = []
    run_matrix(cells, quick_options(60), lambda cell, result: results.append(result))
    before = warm_pool.started
    run_matrix(cells, quick_options(60), lambda cell, result: results.append(result))
    assert warm_pool.started == before and len(results) == 2
    assert all("worker fork" in result.cost.phases for result in results)


@pytest.mark.fresh_warm_processes
def test_a_test_marked_fresh_opens_its_own(warm_pool: WarmProcessPool) -> None:
    assert warm_pool.idle_pids() == []
    with forkserver.warm_processes() as servers:
        assert type(servers) is forkserver.ForkServers
