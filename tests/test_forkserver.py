"""Workers forked from a warm process (harness.run.forkserver): each cell still gets its own
process, group, streams and environment; only the framework's imports are shared."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.run.forkserver import ForkServer, ForkServers, server_key
from harness.run.runner import PROJECT_ROOT, RunOptions, cell_environment, run_matrix
from harness.spec import Cell, Status

PRELOAD = ("tests.fakes.backend.device",)


def describe(server: ForkServer, tmp_path: Path, env: dict[str, str], name: str) -> dict:
    out, stream = tmp_path / f"{name}.json", tmp_path / f"{name}.txt"
    worker = server.fork("tests.fakes.helper_child", ["describe", str(out)], env, tmp_path,
                         stream)
    code, peak_rss = worker.wait_peak(30)
    assert code == 0 and peak_rss is not None and peak_rss > 1e6
    document = json.loads(out.read_text())
    document["stream"] = stream.read_text()
    return document


def test_each_child_has_its_own_process_group_environment_and_streams(tmp_path: Path) -> None:
    env = cell_environment(Cell("fault", "ok", "fake", "cuda:0"))
    env["CUDA_VISIBLE_DEVICES"] = "0"
    server = ForkServer(PRELOAD, env, PROJECT_ROOT, tmp_path / "warm.log")
    try:
        assert not server.refused and server.import_s >= 0
        gpu = describe(server, tmp_path, env, "gpu")
        cpu = describe(server, tmp_path, {**env, "CUDA_VISIBLE_DEVICES": ""}, "cpu")
    finally:
        server.close()
    assert gpu["pid"] != cpu["pid"] and gpu["pid"] != os.getpid()
    assert gpu["pgid"] == gpu["pid"] and cpu["pgid"] == cpu["pid"]  # a kill reaches its group
    assert gpu["preloaded"] and cpu["preloaded"]  # imported once, by the warm process
    # The warm process saw no GPU; each child gets the cell's own value back.
    assert gpu["env"]["CUDA_VISIBLE_DEVICES"] == "0" and cpu["env"]["CUDA_VISIBLE_DEVICES"] == ""
    assert gpu["cwd"] == str(tmp_path)
    assert gpu["argv"][1:] == ["describe", str(tmp_path / "gpu.json")]
    assert gpu["stream"] == "to the cell's stream\n"


def test_a_preload_that_fails_leaves_workers_spawned(tmp_path: Path) -> None:
    env = cell_environment(Cell("fault", "ok", "fake", "cpu"))
    with ForkServers(tmp_path) as servers:
        server, started_s = servers.get("fake", ("harness_no_such_module",), env, PROJECT_ROOT)
        assert server is None and started_s > 0
        assert servers.get("fake", (), env, PROJECT_ROOT) == (None, 0.0)


def test_cells_share_a_warm_process_only_when_their_environments_match() -> None:
    cpu = cell_environment(Cell("fault", "ok", "fake", "cpu"))
    gpu = cell_environment(Cell("fault", "ok", "fake", "cuda:0"))
    assert server_key("fake", cpu) == server_key("fake", gpu)  # only the GPUs differ
    assert server_key("fake", cpu) != server_key("fake", {**cpu, "OMP_NUM_THREADS": "1"})
    assert server_key("fake", cpu) != server_key("other", cpu)


def test_a_matrix_forks_every_cell_from_one_warm_process_and_counts_its_start_once() -> None:
    cells = [Cell("fault", variant, "fake", "cpu", {"size": [1], "pid_file": ""}, quick=True)
             for variant in ("ok", "error", "ok")]
    results = []
    assert run_matrix(cells, RunOptions(timeout_s=60), lambda cell, result: results.append(result))
    assert [result.status for result in results] == [Status.OK, Status.OK, Status.OK]
    phases = [result.cost.phases for result in results if result.cost is not None]
    assert len(phases) == 3 and all("worker fork" in cell for cell in phases)
    shared = [cell.get("warm process start (python, imports; shared)", 0.0) for cell in phases]
    assert shared[0] > 0 and shared[1:] == [0.0, 0.0]


def test_fork_workers_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_FORK_WORKERS", "0")
    cells = [Cell("fault", "ok", "fake", "cpu", {"size": [1], "pid_file": ""}, quick=True)]
    results = []
    run_matrix(cells, RunOptions(timeout_s=60), lambda cell, result: results.append(result))
    assert results[0].cost is not None
    assert "worker start (python, imports)" in results[0].cost.phases
