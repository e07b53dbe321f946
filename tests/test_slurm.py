"""The matrix on SLURM: through a real one-node cluster (sbatch, scancel) and through logic alone.

The cluster tests start munged, slurmctld and slurmd for this host (tests/slurm_cluster.py)
and run the CLI as a user would, with the fake backend so each task takes seconds; where
SLURM cannot be started they skip and say why. The logic tests need no SLURM.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.data.results import CellResult, RunDocument
from harness.run.executors import CellState, LocalExecutor, StateTally, executor_from_options
from harness.run.executors.base import ignore_state
from harness.run.executors.slurm import (
    SlurmExecutor,
    cell_id,
    default_time_limit_min,
    parse_sbatch_settings,
)
from harness.run.executors.slurm_rows import ended_result
from harness.run.executors.slurm_state import TaskState, parse_sacct, parse_scontrol
from harness.run.executors.slurm_watch import Task, Watch
from harness.run.executors.task import pin_gpu
from harness.run.resume import cells_to_run, kept_results, planned_cells
from harness.run.runner import RunOptions
from harness.spec import BadInput, Cell
from tests import slurm_cluster

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CLI_TIMEOUT_S = 120.0
WAIT_S = 60.0


# ---------------------------------------------------------------------------------------------
# Logic: no SLURM needed


def test_scontrol_records_expand_to_array_tasks() -> None:
    text = (
        "JobId=12 ArrayJobId=10 ArrayTaskId=2 JobName=harness JobState=CANCELLED Reason=None "
        "NodeList=node7 ExitCode=0:15\n"
        "JobId=10 ArrayJobId=10 ArrayTaskId=3-4,6%2 JobState=PENDING Reason=Resources "
        "NodeList=(null) ExitCode=0:0\n"
        "JobId=9 JobState=TIMEOUT Reason=TimeLimit NodeList=node1 ExitCode=0:0\n")
    states = parse_scontrol(text)
    assert sorted(states) == ["10_2", "10_3", "10_4", "10_6", "9"]
    assert states["10_2"] == TaskState("CANCELLED", "None", "node7", "0:15")
    assert states["10_4"].state == "PENDING" and states["10_4"].node == ""
    assert states["9"].finished and not states["10_6"].finished


def test_sacct_lines_keep_who_cancelled() -> None:
    states = parse_sacct("5_0|CANCELLED by 1000|gpu3|None|0:15\n"
                         "5_[1-2]|PENDING|None assigned|Priority|0:0\n"
                         "6|NODE_FAIL|cpu9|None|0:0\n")
    assert states["5_0"] == TaskState("CANCELLED", "None, by 1000", "gpu3", "0:15")
    assert states["5_2"].state == "PENDING" and states["5_2"].node == ""
    assert states["6"].state == "NODE_FAIL"


def test_a_controller_that_does_not_answer_is_no_news(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.run.executors import slurm_state

    answers = {"forgotten": (1, "", "slurm_load_jobs error: Invalid job id specified\n"),
               "down": (1, "", "slurm_load_jobs error: Unable to contact slurm controller\n")}
    monkeypatch.setattr(slurm_state, "run_command", lambda command: answers[command[-1]] if
                        command[0] == "scontrol" else (1, "", "accounting storage is disabled"))
    assert slurm_state.query(["forgotten_0"]) == {}
    with pytest.raises(slurm_state.SlurmUnreachable, match="Unable to contact"):
        slurm_state.query(["down_0"])


def test_no_answer_ends_no_task_but_a_complete_file_still_counts(tmp_path: Path) -> None:
    watch = Watch(SlurmExecutor(missing_grace_s=0.0), tmp_path, 60.0,
                  lambda cell, result: None, ignore_state)
    task = Task(CELL, job=None, result_path=tmp_path / "cell.json")
    assert watch._ended(task, None, answered=False) is None
    task.result_path.write_text(json.dumps(PARTIAL))  # error: waits for SLURM's word
    assert watch._ended(task, None, answered=False) is None
    task.result_path.write_text(json.dumps({**PARTIAL, "status": "ok"}))
    ended = watch._ended(task, None, answered=False)
    assert ended is not None and ended.status.value == "ok"


CELL = Cell("fault", "ok", "fake", "cpu", {"size": [1, 2]}, True)
PARTIAL = {"cell": CELL.as_dict(), "status": "error", "reason": "killed by SIGTERM",
           "cases": [{"case": {"size": 1}, "status": "ok", "reason": ""}]}


@pytest.mark.parametrize("state, status, words", [
    ("TIMEOUT", "timeout", "time limit"),
    ("CANCELLED", "interrupted", "cancelled"),
    ("PREEMPTED", "interrupted", "preempted"),
    ("NODE_FAIL", "interrupted", "lost with its node: node node4 failed"),
    ("OUT_OF_MEMORY", "error", "out of memory"),
    ("FAILED", "error", "failed"),
])
def test_a_task_slurm_ended_is_a_status_row_with_its_state(state: str, status: str,
                                                           words: str) -> None:
    result = ended_result(CELL, TaskState(state, "JobHeldUser", "node4", "0:9"),
                          CellResult.from_dict(PARTIAL)).to_dict()
    assert result["status"] == status
    assert words in result["reason"] and f"SLURM state {state} on node4" in result["reason"]
    assert "JobHeldUser" in result["reason"] and "killed by SIGTERM" in result["reason"]
    assert [case["case"] for case in result["cases"]] == [{"size": 1}]  # finished case kept


def test_a_task_that_left_no_result_says_what_its_log_said() -> None:
    result = ended_result(CELL, TaskState("FAILED", exit_code="1:0"), None,
                          "Traceback\nModuleNotFoundError: No module named 'x'").to_dict()
    assert result["status"] == "error" and result["cases"] == []
    assert "No module named 'x'" in result["reason"] and "exit code 1:0" in result["reason"]


def test_a_completed_task_is_its_own_document() -> None:
    document = CellResult.from_dict({**PARTIAL, "status": "ok", "reason": ""})
    assert ended_result(CELL, TaskState("COMPLETED"), document) is document


def test_cpu_cells_take_a_whole_node_and_gpu_cells_one_gpu() -> None:
    executor = SlurmExecutor(partition_cpu="cpu", partition_gpu="a100",
                             sbatch={"account": "lab"})
    options = RunOptions(timeout_s=600)
    cpu, gpu = (executor.parameters(kind, options).submitit_parameters()
                for kind in ("cpu", "gpu"))
    assert cpu["slurm_partition"] == "cpu" and cpu["slurm_exclusive"] is True
    assert "slurm_gres" not in cpu
    assert gpu["slurm_partition"] == "a100" and gpu["slurm_gres"] == "gpu:1"
    assert "slurm_exclusive" not in gpu
    assert cpu["timeout_min"] == default_time_limit_min(600) == 15
    assert gpu["slurm_additional_parameters"] == {"account": "lab"}
    assert SlurmExecutor(time_limit_min=3).parameters("cpu", options).timeout_min == 3
    assert executor.parameters("gpu", options).sbatch_flags() == [
        "--time=15", "--job-name=harness", "--partition=a100", "--gres=gpu:1",
        "--account=lab"]


def test_sbatch_settings_and_cli_options_are_checked() -> None:
    assert parse_sbatch_settings(["account=lab", "--requeue", "constraint=a100"]) == {
        "account": "lab", "requeue": True, "constraint": "a100"}
    with pytest.raises(BadInput, match="KEY=VALUE"):
        parse_sbatch_settings(["=x"])
    with pytest.raises(BadInput, match="only with --executor slurm"):
        executor_from_options("local", partition_cpu="cpu")
    with pytest.raises(BadInput, match="valid: local, slurm"):
        executor_from_options("kubernetes")
    assert isinstance(executor_from_options("local"), LocalExecutor)


def test_gpu_cells_are_pinned_to_their_own_gpu() -> None:
    gpu_cell = Cell("matmul", "fp32", "torch", "cuda:1")
    # submitit's local executor: every task sees the same GPUs; the cell's index picks one.
    worker_cell, pinned = pin_gpu(gpu_cell, {"CUDA_VISIBLE_DEVICES": "4,5,6"})
    assert worker_cell.device == "cuda:0" and pinned == {"CUDA_VISIBLE_DEVICES": "5"}
    # SLURM's gres already exposed the task's one GPU: it is cuda:0 there, nothing to set.
    worker_cell, pinned = pin_gpu(gpu_cell, {"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "3",
                                             "CUDA_VISIBLE_DEVICES": "3"})
    assert worker_cell.device == "cuda:0" and pinned == {}
    assert pin_gpu(CELL, {"CUDA_VISIBLE_DEVICES": "0"}) == (CELL, {})


def test_resume_runs_the_cells_without_a_result(tmp_path: Path) -> None:
    cells = [Cell("fault", variant, "fake", "cpu") for variant in ("ok", "error", "slow", "hang")]
    document = RunDocument.from_dict({"planned_cells": [cell.as_dict() for cell in cells],
                                      "cells": [
        {"cell": cells[0].as_dict(), "status": "ok"},
        {"cell": cells[1].as_dict(), "status": "error"},
        {"cell": cells[2].as_dict(), "status": "interrupted"},
    ]})
    # A task finished after the submitting process died: its file is a result too.
    (tmp_path / "cells").mkdir()
    (tmp_path / "cells" / "x.json").write_text(json.dumps({"cell": cells[3].as_dict(),
                                                           "status": "timeout"}))
    kept = kept_results(document, tmp_path)
    assert [result.variant for result in kept] == ["ok", "error", "hang"]
    assert cells_to_run(planned_cells(document), kept) == [cells[2]]
    with pytest.raises(BadInput, match="no planned cells"):
        planned_cells(RunDocument(run_id="old"))


def test_resume_works_for_the_local_executor_too(out_dir: Path) -> None:
    import harness
    from harness import api

    first = harness.compare("fault", frameworks="fake", devices="cpu", variants="ok,invalid",
                            quick=True, out=out_dir, ceilings=False,
                            report=False, progress=False)
    document = json.loads((first.path / "run.json").read_text())
    kept_started = document["cells"][0]["started"]
    # As a Ctrl-C leaves the cell it stopped: its first case kept, the second runs again.
    document["cells"][1]["status"] = "interrupted"
    document["cells"][1]["cases"] = document["cells"][1]["cases"][:1]
    (first.path / "run.json").write_text(json.dumps(document))
    resumed = api.resume_run(first.path, progress=False)
    cells = {cell.variant: cell for cell in resumed.cells}
    assert sorted(cells) == ["invalid", "ok"] and cells["invalid"].status.value == "invalid"
    assert cells["ok"].started == kept_started  # kept, not run again
    stored = json.loads((first.path / "run.json").read_text())
    assert len(stored["cells"]) == 2 and stored["resumed"][0]["cells"] == 1
    assert resumed.exit_code == 1  # the invalid cell still fails the run


def test_cell_ids_are_file_names_unique_in_a_run() -> None:
    names = {cell_id(Cell("m", variant, framework, device)) for variant in ("fp32", "bf16")
             for framework in ("torch", "jax") for device in ("cpu", "cuda:0", "cuda:1")}
    assert len(names) == 12 and all("/" not in name and ":" not in name for name in names)


def test_local_executor_reports_queued_running_done(out_dir: Path) -> None:
    cells = [Cell("fault", variant, "fake", "cpu", {"size": [1], "pid_file": ""}, True)
             for variant in ("ok", "invalid")]
    seen: list[tuple[str, CellState]] = []
    tally = StateTally()

    def on_state(cell: Cell, state: CellState) -> None:
        seen.append((cell.variant, state))
        tally.update(cell, state)

    results: list[dict[str, Any]] = []
    finished = LocalExecutor().run(cells, RunOptions(timeout_s=60), out_dir,
                                   lambda cell, result: results.append(result.to_dict()), on_state)
    assert finished and [result["status"] for result in results] == ["ok", "ok"]
    assert seen == [("ok", CellState.QUEUED), ("invalid", CellState.QUEUED),
                    ("ok", CellState.RUNNING), ("ok", CellState.DONE),
                    ("invalid", CellState.RUNNING), ("invalid", CellState.DONE)]
    assert tally.text() == "0 queued, 0 running, 2 done"


def test_submitit_local_executor_runs_the_matrix_with_pinned_gpus(
        out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole submit/watch/collect path without SLURM: submitit's local executor."""
    import harness

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")  # submitit would give each task "0"
    executor = SlurmExecutor(cluster="local", poll_s=0.2)
    result = harness.compare("fault", frameworks="fakegpu", devices="cpu,cuda:0,cuda:1",
                             variants="ok", quick=True, out=out_dir, ceilings=False,
                             report=False, progress=False, executor=executor)
    by_device = {cell.device: cell for cell in result.cells}
    assert sorted(by_device) == ["cpu", "cuda:0", "cuda:1"]
    assert {cell.status.value for cell in result.cells} == {"ok"}
    assert by_device["cuda:0"].slurm["gpus"] == "5"  # each its own GPU,
    assert by_device["cuda:1"].slurm["gpus"] == "7"  # seen as cuda:0
    assert by_device["cuda:1"].device_name == "fake gpu"
    assert all(cell.host["hostname"] for cell in result.cells)
    assert sorted(path.name for path in (result.path / "cells").iterdir()) == [
        "ok-fakegpu-cpu.json", "ok-fakegpu-cuda0.json", "ok-fakegpu-cuda1.json"]
    assert result.document.executor["name"] == "slurm"
    assert not result.document.ceilings  # the cells' machines are not this one


# ---------------------------------------------------------------------------------------------
# A real one-node SLURM cluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[slurm_cluster.Cluster]:
    """munged, slurmctld and slurmd for this host, stopped by their pid files afterwards."""
    try:
        with slurm_cluster.running() as running:
            yield running
    except slurm_cluster.ClusterUnavailable as exc:
        pytest.skip(f"no SLURM cluster: {exc}")


def cli_environment(cluster: slurm_cluster.Cluster) -> dict[str, str]:
    """The CLI's environment; sbatch exports it to the tasks, so they load the fake plugin."""
    return {**os.environ, **cluster.environment, "HARNESS_PLUGINS": "tests.fakes.plugin",
            "PYTHONPATH": str(PROJECT_ROOT)}


def compare_command(out: Path, variants: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", "compare", "--workload", "fault",
            "--framework", "fake", "--device", "cpu", "--variant", variants, "--quick",
            "--no-report", "--no-ceilings", "--executor", "slurm", "--out", str(out), *extra]


def run_folder(out: Path) -> Path:
    return wait_for(lambda: next(iter(sorted(out.glob("*-fault-*"))), None), "the run folder")


def wait_for(found: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"no {what} within {WAIT_S:g} s")


def cells_by_variant(run_dir: Path) -> dict[str, dict[str, Any]]:
    document = json.loads((run_dir / "run.json").read_text())
    return {result["cell"]["variant"]: result for result in document["cells"]}


def test_matrix_runs_as_slurm_job_arrays(cluster: slurm_cluster.Cluster, out_dir: Path) -> None:
    command = compare_command(out_dir, "ok", "--partition-cpu", cluster.partition,
                              "--partition-gpu", cluster.gpu_partition,
                              "--sbatch", "comment=harness-test")
    command[command.index("fake")], command[command.index("cpu")] = "fakegpu", "cpu,cuda"
    done = subprocess.run(command, env=cli_environment(cluster), capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    typo = subprocess.run(compare_command(out_dir, "ok", "--partition-gpu", "gpus"),
                          env=cli_environment(cluster), capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S, check=False)
    assert typo.returncode == 2 and "--partition-gpu 'gpus': no such partition" in typo.stderr
    run_dir = run_folder(out_dir)
    assert len(list(out_dir.iterdir())) == 1  # the refused command wrote nothing
    document = json.loads((run_dir / "run.json").read_text())
    cells = {result["cell"]["device"]: result for result in document["cells"]}
    assert sorted(cells) == ["cpu", "cuda:0"]
    for result in cells.values():
        assert result["status"] == "ok" and result["slurm"]["node"] == cluster.node
        assert result["host"]["hostname"] and result["host"]["cores"] >= 1
    assert cells["cuda:0"]["slurm"]["gpus"] == "0"  # the GPU SLURM's gres gave the task
    assert cells["cuda:0"]["device_name"] == "fake gpu"
    job_ids = [result["slurm"]["job_id"] for result in cells.values()]
    assert len(set(job_ids)) == 2  # one submission per device kind
    scripts = {job_id: next((run_dir / "slurm").rglob(f"{job_id}_submission.sh")).read_text()
               for job_id in job_ids}
    cpu_script, gpu_script = scripts[cells["cpu"]["slurm"]["job_id"]], \
        scripts[cells["cuda:0"]["slurm"]["job_id"]]
    assert "#SBATCH --exclusive" in cpu_script and "--gres" not in cpu_script
    assert f"#SBATCH --partition={cluster.partition}" in cpu_script
    assert "#SBATCH --gres=gpu:1" in gpu_script and "--exclusive" not in gpu_script
    assert f"#SBATCH --partition={cluster.gpu_partition}" in gpu_script
    assert all("#SBATCH --comment=harness-test" in script for script in scripts.values())
    rows = (run_dir / "measurements.csv").read_text()
    assert f"{cluster.node} (cpu only)" in rows  # each row names the node its cell ran on


def test_a_task_cancelled_with_scancel_is_its_row(cluster: slurm_cluster.Cluster,
                                                  out_dir: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    process = subprocess.Popen(
        compare_command(out_dir, "child-hang,ok", "--param", f"pid_file={pid_file}"),
        env=cli_environment(cluster), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(pid_file.exists, "hanging case (its pid file)")  # size 1 done, size 2 hangs
        running = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%i"],
                                 env=cli_environment(cluster), capture_output=True, text=True,
                                 check=False)
        job_id = running.stdout.split()[0]
        subprocess.run(["scancel", job_id], env=cli_environment(cluster), check=True)
        _, stderr = process.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1, stderr  # a cancelled cell is a failed run
    cells = cells_by_variant(run_folder(out_dir))
    cancelled = cells["child-hang"]
    assert cancelled["status"] == "interrupted" and cancelled["slurm"]["job_id"] == job_id
    assert "SLURM state CANCELLED" in cancelled["reason"]
    assert [case["case"]["size"] for case in cancelled["cases"]] == [1]  # size 1 finished: kept
    assert cells["ok"]["status"] == "ok"  # the other cell still ran and finished


def test_ctrl_c_cancels_the_array_and_resume_runs_the_rest(cluster: slurm_cluster.Cluster,
                                                           out_dir: Path) -> None:
    environment = cli_environment(cluster)
    process = subprocess.Popen(compare_command(out_dir, "ok,slow"), env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        run_dir = run_folder(out_dir)
        # The first task's result is in; the second (slow: seconds) cannot be done yet.
        wait_for(lambda: (run_dir / "cells" / "ok-fake-cpu.json").exists(), "first result")
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signal.SIGINT, stderr
    first = cells_by_variant(run_dir)
    assert first["ok"]["status"] == "ok" and first["slow"]["status"] == "interrupted"
    assert "SIGINT" in first["slow"]["reason"]
    assert "1 of 2 cells finished and saved" in stderr  # the interrupted one is not counted
    assert f"harness compare --resume {run_dir}\n" in stderr
    left = subprocess.run(["squeue", "-h", "-t", "PENDING,RUNNING", "-o", "%i"],
                          env=environment, capture_output=True, text=True, check=True)
    assert left.stdout.split() == []  # cancelled, not left queued

    resumed = subprocess.run([sys.executable, "-m", "harness.cli", "compare", "--resume",
                              str(run_dir), "--executor", "slurm", "--no-report"],
                             env=environment, capture_output=True, text=True,
                             timeout=CLI_TIMEOUT_S, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert "1 cells kept, 1 to run" in resumed.stderr
    second = cells_by_variant(run_dir)
    assert second["slow"]["status"] == "ok"
    assert second["ok"]["slurm"]["job_id"] == first["ok"]["slurm"]["job_id"]  # not re-run
    assert second["slow"]["slurm"]["job_id"] != first["slow"]["slurm"]["job_id"]
    assert json.loads((run_dir / "run.json").read_text())["interrupted"] is False


@pytest.mark.skipif(not os.environ.get("HARNESS_SLOW_TESTS"),
                    reason="takes ~90 s (SLURM's shortest time limit is one minute); set "
                           "HARNESS_SLOW_TESTS=1 to run it")
def test_a_task_past_its_time_limit_is_a_timeout_row(cluster: slurm_cluster.Cluster,
                                                     out_dir: Path) -> None:
    done = subprocess.run(compare_command(out_dir, "hang", "--time-limit", "1"),
                          env=cli_environment(cluster), capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 1, done.stderr
    result = cells_by_variant(run_folder(out_dir))["hang"]
    assert result["status"] == "timeout" and "SLURM state TIMEOUT" in result["reason"]
    assert [case["case"]["size"] for case in result["cases"]] == [1]  # size 1 finished: kept


# ---------------------------------------------------------------------------------------------
# Faults (issue 33): logic


def test_node_states_and_pending_reasons_are_read() -> None:
    from harness.run.executors import slurm_state

    nodes = slurm_state.parse_nodes(
        "NodeName=a State=IDLE+DRAIN CPUTot=2 Reason=disk full [root@2026-11-23T23:05:28]\n"
        "NodeName=b State=DOWN*+NOT_RESPONDING Reason=Not responding [slurm@2026]\n"
        "NodeName=c State=ALLOCATED CPUTot=2\n")
    assert not nodes["a"].lost and nodes["a"].reason == "disk full"
    assert nodes["b"].lost and "node b stopped responding" in nodes["b"].describe()
    assert not nodes["c"].lost
    assert [slurm_state.sinfo_state_usable(state) for state in (
        "idle", "mixed", "allocated", "completing", "idle~", "drained", "draining", "down*",
        "idle*", "fail", "maint")] == [True] * 5 + [False] * 6
    assert slurm_state.cannot_start("Nodes_required_for_job_are_DOWN,_DRAINED_or_reserved")
    assert slurm_state.cannot_start("ReqNodeNotAvail,_UnavailableNodes:vm")
    assert slurm_state.cannot_start("JobHeldUser")
    assert not slurm_state.cannot_start("Priority") and not slurm_state.cannot_start("Resources")
    state = parse_scontrol("JobId=3 ArrayJobId=3 ArrayTaskId=0 JobState=PENDING Reason=BeginTime "
                           "Restarts=2 RunTime=00:00:03 TimeLimit=1-00:01:00 NodeList=")["3_0"]
    assert (state.restarts, state.run_s, state.limit_s) == (2, 3.0, 86460.0)


def test_a_task_lost_with_its_node_is_interrupted_without_submitit_chatter() -> None:
    log = ("submitit WARNING (2026-11-23 22:10:01,123) - Bypassing signal SIGCONT\n"
           "slurmstepd: error: *** JOB 7 ON vm CANCELLED DUE TO NODE FAILURE ***\n")
    early = TaskState("TIMEOUT", "TimeLimit", "vm", "0:0", run_s=3.0, limit_s=60.0)
    result = ended_result(CELL, early, None, log).to_dict()
    assert result["status"] == "interrupted" and "not its time limit" in result["reason"]
    assert "submitit" not in result["reason"] and "NODE FAILURE" in result["reason"]
    seen = "node vm stopped responding (DOWN+NOT_RESPONDING)"
    failed = ended_result(CELL, TaskState("FAILED", node="vm"), None, "", node_trouble=seen)
    assert failed.status.value == "interrupted" and seen in failed.reason
    real = ended_result(CELL, TaskState("TIMEOUT", node="vm", run_s=61.0, limit_s=60.0), None)
    assert real.status.value == "timeout"  # a task that used its whole limit did time out


def test_refused_submissions_run_again_on_resume(tmp_path: Path) -> None:
    cells = [Cell("fault", variant, "fake", "cpu") for variant in ("ok", "slow")]
    document = RunDocument.from_dict({"planned_cells": [cell.as_dict() for cell in cells],
                                      "cells": [
        {"cell": cells[0].as_dict(), "status": "ok", "slurm": {"job_id": "5_0"}},
        {"cell": cells[1].as_dict(), "status": "error", "reason": "sbatch refused",
         "slurm": {"job_id": None, "refused": True}},
    ]})
    (tmp_path / "cells").mkdir()
    # An older task's file for the kept cell is not its result: the row names another job.
    (tmp_path / "cells" / "ok.json").write_text(json.dumps(
        {"cell": cells[0].as_dict(), "status": "invalid", "slurm": {"job_id": "4_0"}}))
    kept = kept_results(document, tmp_path)
    assert [(result.variant, result.status.value) for result in kept] == [("ok", "ok")]
    assert cells_to_run(planned_cells(document), kept) == [cells[1]]


def test_the_progress_line_names_why_cells_wait() -> None:
    tally = StateTally()
    tally.update(CELL, CellState.QUEUED, "ReqNodeNotAvail")
    tally.update(Cell("fault", "slow", "fake", "cpu"), CellState.RUNNING)
    assert tally.text() == "1 queued (1 ReqNodeNotAvail), 1 running, 0 done"


def test_a_resume_reuses_the_runs_slurm_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.run import executors

    monkeypatch.setattr(executors, "check_partitions", lambda wanted: None)
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    stored = {"name": "slurm", "partition_cpu": "short", "time_limit_min": 2,
              "sbatch": {"account": "lab", "requeue": True}, "pending_limit_s": 30.0}
    same = executor_from_options(None, stored=stored)
    assert (same.partition_cpu, same.time_limit_min, same.sbatch, same.pending_limit_s) == (
        "short", 2, {"account": "lab", "requeue": True}, 30.0)
    changed = executor_from_options(None, time_limit_min=9, sbatch=["qos=x"], stored=stored)
    assert (changed.partition_cpu, changed.time_limit_min, changed.sbatch) == (
        "short", 9, {"qos": "x"})
    assert isinstance(executor_from_options(None, stored={"name": "local"}), LocalExecutor)


# ---------------------------------------------------------------------------------------------
# Faults (issue 33): on the one-node cluster


def slurm(cluster: slurm_cluster.Cluster, *command: str) -> str:
    """Run a SLURM client against the test cluster; its stdout."""
    return subprocess.run(list(command), env=cli_environment(cluster), capture_output=True,
                          text=True, check=True, timeout=30).stdout


def set_node(cluster: slurm_cluster.Cluster, state: str, reason: str = "harness test") -> None:
    """drain, down or resume the one node; after resume, wait until it takes tasks again."""
    extra = [] if state == "resume" else [f"reason={reason}"]
    # check=False: resuming a node back already (ReturnToService=2) is refused, harmlessly.
    subprocess.run(["scontrol", "update", f"nodename={cluster.node}", f"state={state}", *extra],
                   env=cli_environment(cluster), capture_output=True, timeout=30,
                   check=state != "resume")
    if state == "resume":
        wait_for(lambda: slurm(cluster, "sinfo", "-h", "-N", "-o", "%T").split() and all(
            word in ("idle", "allocated", "mixed") for word in
            slurm(cluster, "sinfo", "-h", "-N", "-o", "%T").split()), "the node back")


def resume_command(run_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "harness.cli", "compare", "--resume", str(run_dir),
            "--no-report", *extra]


@pytest.fixture
def blocker(cluster: slurm_cluster.Cluster) -> Iterator[str]:
    """A job holding the node (--exclusive) so the harness's tasks queue behind it."""
    job_id = slurm(cluster, "sbatch", "--parsable", "--exclusive", "--job-name=blocker",
                   "--output=/dev/null",
                   "--wrap", "sleep 120").strip()
    wait_for(lambda: "RUNNING" in slurm(cluster, "squeue", "-h", "-j", job_id, "-o", "%T"),
             "the blocking job running")
    yield job_id
    subprocess.run(["scancel", job_id], env=cli_environment(cluster), timeout=30, check=False)


def test_a_drained_node_ends_the_run_and_resume_completes_it(
        cluster: slurm_cluster.Cluster, out_dir: Path, blocker: str) -> None:
    environment = cli_environment(cluster)
    try:
        set_node(cluster, "drain")
        refused = subprocess.run(compare_command(out_dir, "ok"), env=environment,
                                 capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False)
        assert refused.returncode == 2 and "no node can take a task now" in refused.stderr
        assert "drain" in refused.stderr and not list(out_dir.glob("*"))  # nothing written
        set_node(cluster, "resume")
        # The pre-check passes (the node only runs the blocker), then the node drains.
        started = time.monotonic()
        process = subprocess.Popen(compare_command(out_dir, "ok,slow", "--pending-limit", "3"),
                                   env=environment, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        run_dir = run_folder(out_dir)
        wait_for(lambda: (run_dir / "slurm" / "arrays.json").exists(), "the submission")
        set_node(cluster, "drain")
        _, stderr = process.communicate(timeout=CLI_TIMEOUT_S)
        assert process.returncode == 1, stderr
        assert time.monotonic() - started < 30  # the pending limit, not forever
        for result in cells_by_variant(run_dir).values():
            assert result["status"] == "interrupted"
            assert "SLURM could not start the task" in result["reason"]
            assert "DRAINED" in result["reason"] or "ReqNodeNotAvail" in result["reason"]
        assert "pending: " in (run_dir / "slurm" / "watch.log").read_text()
    finally:
        set_node(cluster, "resume")
    subprocess.run(["scancel", blocker], env=environment, check=True)
    resumed = subprocess.run(resume_command(run_dir), env=environment, capture_output=True,
                             text=True, timeout=CLI_TIMEOUT_S, check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert "0 cells kept, 2 to run" in resumed.stderr
    assert {result["status"] for result in cells_by_variant(run_dir).values()} == {"ok"}


def test_a_task_whose_node_goes_down_is_interrupted_and_resumed(
        cluster: slurm_cluster.Cluster, out_dir: Path) -> None:
    environment = cli_environment(cluster)
    # no-requeue: SLURM would otherwise run the task again by itself (see the slow test).
    process = subprocess.Popen(compare_command(out_dir, "slow", "--sbatch", "no-requeue"),
                               env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        wait_for(lambda: "RUNNING" in slurm(cluster, "squeue", "-h", "-n", "harness", "-o",
                                            "%T"), "the task running")
        set_node(cluster, "down", "killed mid-run")
        _, stderr = process.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
        set_node(cluster, "resume")
    assert process.returncode == 1, stderr
    run_dir = run_folder(out_dir)
    lost = cells_by_variant(run_dir)["slow"]
    assert lost["status"] == "interrupted" and "lost with its node" in lost["reason"]
    assert "NODE_FAIL" in lost["reason"] and "submitit" not in lost["reason"]
    resumed = subprocess.run(resume_command(run_dir), env=environment, capture_output=True,
                             text=True, timeout=CLI_TIMEOUT_S, check=False)
    assert resumed.returncode == 0, resumed.stderr
    again = cells_by_variant(run_dir)["slow"]
    assert again["status"] == "ok" and again["slurm"]["job_id"] != lost["slurm"]["job_id"]


def test_a_resume_while_the_old_array_is_queued_is_refused(
        cluster: slurm_cluster.Cluster, out_dir: Path, blocker: str) -> None:
    environment = cli_environment(cluster)
    process = subprocess.Popen(compare_command(out_dir, "ok,slow", "--time-limit", "2"),
                               env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    run_dir = run_folder(out_dir)
    wait_for(lambda: (run_dir / "slurm" / "arrays.json").exists(), "the submission")
    process.kill()  # the submitter dies (SIGKILL: nothing cancels its tasks)
    process.communicate(timeout=CLI_TIMEOUT_S)
    array = json.loads((run_dir / "slurm" / "arrays.json").read_text())[0]["array"]
    refused = subprocess.run(resume_command(run_dir), env=environment, capture_output=True,
                             text=True, timeout=CLI_TIMEOUT_S, check=False)
    assert refused.returncode == 2, refused.stderr
    assert f"array {array} still has tasks queued" in refused.stderr
    assert "--cancel-running" in refused.stderr
    # Cancelled while still queued behind the blocker: none of the old tasks ever runs.
    resumed = subprocess.Popen(resume_command(run_dir, "--cancel-running"), env=environment,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: len(json.loads((run_dir / "slurm" / "arrays.json").read_text())) == 2,
             "the resume's submission")
    subprocess.run(["scancel", blocker], env=environment, check=True)
    stdout, stderr = resumed.communicate(timeout=CLI_TIMEOUT_S)
    assert resumed.returncode == 0, stdout + stderr
    assert "0 cells kept, 2 to run" in stderr
    cells = cells_by_variant(run_dir)
    assert {result["status"] for result in cells.values()} == {"ok"}
    # Each row is its own task's: new job ids, and the file each task wrote says the same id.
    for variant, result in cells.items():
        assert not result["slurm"]["job_id"].startswith(f"{array}_")
        written = json.loads((run_dir / "cells" / f"{variant}-fake-cpu.json").read_text())
        assert written["slurm"]["job_id"] == result["slurm"]["job_id"]
    arrays = json.loads((run_dir / "slurm" / "arrays.json").read_text())
    script = next((run_dir / "slurm").rglob(f"{arrays[-1]['array']}_submission.sh")).read_text()
    assert "#SBATCH --time=2" in script  # the run's own time limit, not the default


def test_a_refused_submission_is_run_by_a_corrected_resume(
        cluster: slurm_cluster.Cluster, out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """sbatch refusing at submission (here past the pre-check on purpose): rows that say so,
    which a resume with corrected options runs; one with the same options is refused."""
    import harness

    class Unchecked(SlurmExecutor):
        def preflight(self, cells: list[Cell], options: RunOptions) -> None:
            pass

    for name, value in cli_environment(cluster).items():
        monkeypatch.setenv(name, value)
    first = harness.compare("fault", frameworks="fake", devices="cpu", variants="ok",
                            quick=True, out=out_dir, ceilings=False, report=False,
                            progress=False, executor=Unchecked(sbatch={"bogus": "1"}))
    row = first.cells[0]
    assert row.status.value == "error" and "sbatch refused" in row.reason
    assert row.slurm == {"job_id": None, "refused": True}
    environment = cli_environment(cluster)
    same = subprocess.run(resume_command(first.path), env=environment, capture_output=True,
                          text=True, timeout=CLI_TIMEOUT_S, check=False)
    assert same.returncode == 2 and "sbatch refuses" in same.stderr  # the run's own --bogus
    fixed = subprocess.run(resume_command(first.path, "--sbatch", "comment=fixed"),
                           env=environment, capture_output=True, text=True,
                           timeout=CLI_TIMEOUT_S, check=False)
    assert fixed.returncode == 0, fixed.stderr
    assert "0 cells kept, 1 to run" in fixed.stderr
    assert cells_by_variant(first.path)["ok"]["status"] == "ok"


@pytest.mark.skipif(not os.environ.get("HARNESS_SLOW_TESTS"),
                    reason="takes ~90 s (SLURM notices a dead slurmd after SlurmdTimeout, and "
                           "the rerun hangs to its timeout); set HARNESS_SLOW_TESTS=1 to run it")
def test_a_task_whose_slurmd_is_killed_is_a_node_failure(cluster: slurm_cluster.Cluster,
                                                         out_dir: Path) -> None:
    environment = cli_environment(cluster)
    process = subprocess.Popen(compare_command(out_dir, "hang", "--timeout", "40", "--sbatch",
                                               "no-requeue"),
                               env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        wait_for(lambda: "RUNNING" in slurm(cluster, "squeue", "-h", "-n", "harness", "-o",
                                            "%T"), "the task running")
        slurm_cluster.kill_slurmd(cluster)
        _, stderr = process.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
        slurm_cluster.start_slurmd(cluster)
        set_node(cluster, "resume")
    print(stderr[-2000:])
    run_dir = run_folder(out_dir)
    print((run_dir / "slurm" / "watch.log").read_text())
    lost = cells_by_variant(run_dir)["hang"]
    print("row:", lost["status"], "|", lost["reason"], "|", lost["slurm"])
    assert process.returncode == 1, stderr
    assert lost["status"] == "interrupted" and "lost with its node" in lost["reason"]
    assert "submitit" not in lost["reason"]
    resumed = subprocess.run(resume_command(run_dir), env=environment, capture_output=True,
                             text=True, timeout=CLI_TIMEOUT_S, check=False)
    again = cells_by_variant(run_dir)["hang"]
    print("resumed:", resumed.returncode, again["status"], "|", again["reason"][:200], "|",
          again["slurm"])
    assert "0 cells kept, 1 to run" in resumed.stderr
    assert again["slurm"]["job_id"] != lost["slurm"]["job_id"]  # it ran again
    assert again["status"] == "timeout"  # hang runs to its --timeout 40 this time


def test_a_requeue_is_recorded_on_the_row(tmp_path: Path) -> None:
    class Scripted(Watch):
        """SLURM's answers in order: running, requeued (pending again), running, completed."""

        def states(self, tasks: list[Task]) -> dict[str, TaskState]:
            return {"9_0": ANSWERS.pop(0)}

    class Job:
        job_id = "9_0"

    ANSWERS = [TaskState("RUNNING", node="vm"),  # read by Scripted above
               TaskState("PENDING", "BeginTime", restarts=1),
               TaskState("RUNNING", node="vm", restarts=1),
               TaskState("COMPLETED", node="vm", restarts=1)]

    seen: list[CellResult] = []
    watch = Scripted(SlurmExecutor(cluster="local"), tmp_path, 60.0,
                     lambda cell, result: seen.append(result), ignore_state)
    task = Task(CELL, Job(), tmp_path / "cell.json")
    pending = [task]
    for _ in range(3):
        pending = watch.collect(pending)
    assert pending == [task] and task.restarts == 1 and not seen
    task.result_path.write_text(json.dumps({**PARTIAL, "status": "ok", "reason": "",
                                            "slurm": {"job_id": "9_0"}}))
    watch.collect(pending)
    assert seen[0].status == "ok" and (seen[0].slurm or {})["restarts"] == 1
    assert "requeued by SLURM" in (tmp_path / "slurm" / "watch.log").read_text()
