"""mnist-ddp: sharding and the check (numpy only), the CLI on CPU with gloo and MirroredStrategy,
and a rank killed mid-run that becomes an error row with no process left behind."""

from __future__ import annotations

import json
import os
import re
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.core import registry
from harness.data.results import RunDocument
from harness.run.runner import MULTICAST_OFF, cell_environment, run_worker
from harness.spec import Cell
from harness.workloads import mnist_ddp
from tests.quick_options import quick_options

SMALL_PARAMS = 101_770
RANK_LINE = re.compile(r"rank (\d+) of (\d+) \(pid (\d+),.*process group up")


def case(**changes: Any) -> dict[str, Any]:
    return {**mnist_ddp.SPEC.defaults(quick=True), "processes": 2, **changes}


# --- numpy only -----------------------------------------------------------------------------

def test_ranks_split_each_global_batch_without_overlap() -> None:
    two = case(processes=2, batch_size=32, train_samples=1000)
    assert mnist_ddp.steps_per_epoch(two) == 1000 // 64
    ranks = [mnist_ddp.rank_batches(two, epoch=1, rank=rank) for rank in range(2)]
    assert ranks[0].shape == (15, 32)
    # Global step s is the order's slice [64 s, 64 s + 64): rank 0 its first half, rank 1 the rest.
    together = np.concatenate(ranks, axis=1).reshape(-1)
    assert np.array_equal(together, mnist_ddp.global_order(two, epoch=1))
    assert len(set(together.tolist())) == 15 * 64
    # One process with a doubled batch sees the very same global batches.
    one = case(processes=1, batch_size=64, train_samples=1000)
    assert np.array_equal(mnist_ddp.rank_batches(one, 1, 0).reshape(-1), together)


def test_same_total_data_whatever_the_process_count() -> None:
    for processes in (1, 2, 4):
        assert mnist_ddp.samples_per_epoch(case(processes=processes, train_samples=4096)) == 4096
    assert mnist_ddp.steps_per_epoch(case(processes=2, steps=10, train_samples=4096)) == 10


def test_check_wants_the_chosen_nets_parameter_count() -> None:
    output = {"extra": {"params": SMALL_PARAMS, "accuracy": 0.9}}
    assert mnist_ddp.check(case(net="small"), "preloaded", {}, output).passed
    wrong = mnist_ddp.check(case(net="wide"), "preloaded", {}, output)
    assert not wrong.passed and "1,796,010" in wrong.detail


def test_multicast_stays_off_in_every_cell(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")  # a user's setting must not turn it back on
    env = cell_environment(Cell("mnist-ddp", "preloaded", "torch", "cuda:0"))
    assert {name: env[name] for name in MULTICAST_OFF} == {
        "NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
        "NVSHMEM_DISABLE_NVLS": "1"}


def test_spec_stores_scaling_hints_for_the_report() -> None:
    spec = registry.load_workload("mnist-ddp")
    assert spec.run.timing == "measure" and spec.sweep == "processes"
    assert spec.report.as_dict()["scaling"]["processes"] == "processes"


# --- through the CLI, both frameworks, gloo and logical CPUs ------------------------------

@pytest.mark.slow  # the plugin contract leaves mnist-ddp's cpu cells to this test (RUN_ELSEWHERE)
def test_compare_on_cpu_scales_one_and_two_processes(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [
        "compare", "--workload", "mnist-ddp", "--quick", "--device", "cpu", "--sizes", "1,2",
        "--no-ceilings", "--no-report", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    run_dir = next(tmp_path.iterdir())
    document = json.loads((run_dir / "run.json").read_text())
    assert document["hints"]["scaling"]["processes"] == "processes"
    cells = {cell["cell"]["framework"]: cell for cell in document["cells"]}
    assert set(cells) == {"torch", "tensorflow"}
    for framework, cell in cells.items():
        assert cell["status"] == "ok", (framework, cell["reason"])
        extras = [c["extra"] for c in cell["cases"]]
        assert [extra["processes"] for extra in extras] == [1, 2]
        assert [len(extra["rank_devices"]) for extra in extras] == [1, 2]
        # Same total data per epoch; each process does half the steps at 2.
        assert {extra["samples_per_call"] for extra in extras} == {3200}
        assert [extra["steps_per_call"] for extra in extras] == [100, 50]
        accuracies = [extra["accuracy"] for extra in extras]
        assert abs(accuracies[0] - accuracies[1]) < mnist_ddp.PARITY_POINTS, accuracies
        assert all(sum(len(record["samples"]) for record in c["rounds"]) == 2
                   and c["rounds"][0]["cold_seconds"] > 0 for c in cell["cases"])
        # The declared count is stored as the call's own, as for in-process cells, so
        # `harness check` compares it with the spec's (it was unverifiable: issue 49).
        assert [extra["flops_per_call"] for extra in extras] == [
            mnist_ddp.training_flops(c["case"]) for c in cell["cases"]]
    torch_extras = [c["extra"] for c in cells["torch"]["cases"]]
    assert all(e["communication"].startswith("gloo") for e in torch_extras)
    assert all(0.0 <= e["allreduce_share"] < 1.0 and len(e["no_sync_samples"]) == 2
               for e in torch_extras)
    assert "scaling efficiency" in result.output and "all-reduce" in result.output


# --- a rank that dies mid-run -------------------------------------------------------------

def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name: [state, ppid, ...], or None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _descendants(root: int) -> set[tuple[int, str]]:
    """Every live process below `root` as (pid, start time): pids alone get reused."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in Path("/proc").iterdir():
        fields = _stat_fields(int(entry.name)) if entry.name.isdigit() else None
        if fields:
            children.setdefault(int(fields[1]), []).append((int(entry.name), fields[19]))
    found: set[tuple[int, str]] = set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child[0])
    return found


def _is_running(process: tuple[int, str]) -> bool:
    """The same process (pid and start time) still alive and not a zombie."""
    fields = _stat_fields(process[0])
    return fields is not None and fields[19] == process[1] and fields[0] != "Z"


def _rank_pids(scratch: Path) -> dict[int, int]:
    """rank -> pid from the ranks' 'process group up' lines in the worker's stderr file."""
    pids = {}
    for stderr in scratch.glob("harness-cell-*/stderr.txt"):
        for rank, _, pid in RANK_LINE.findall(stderr.read_text(errors="replace")):
            pids[int(rank)] = int(pid)
    return pids


@pytest.mark.slow
@pytest.mark.fresh_warm_processes  # no warm process of the session's alive
def test_killed_rank_is_an_error_row_and_leaves_no_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The runner's scratch folder (with the worker's stderr) lands here, where the test reads it.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # The worker's own temp folder (a new interpreter: run_worker is given no warm processes),
    # where the launcher's logs and error files would be left if it left any.
    worker_tmp = tmp_path / "worker-tmp"
    worker_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(worker_tmp))
    # Long enough that the kill lands in training: about a minute of epochs if nothing died.
    params = {**mnist_ddp.SPEC.defaults(quick=True), "processes": [2], "net": "wide",
              "train_samples": 60000, "epochs": 20}
    cell = Cell("mnist-ddp", "preloaded", "torch", "cpu", params)
    outcome: dict[str, Any] = {}
    runner = threading.Thread(target=lambda: outcome.update(
        run_worker(cell, quick_options(240)).to_dict()))
    runner.start()
    seen: set[tuple[int, str]] = set()
    pids: dict[int, int] = {}
    while runner.is_alive() and len(pids) < 2:
        seen |= _descendants(os.getpid())
        pids = _rank_pids(tmp_path)
        time.sleep(0.2)
    assert len(pids) == 2, f"ranks never came up: {outcome}"
    time.sleep(1.0)  # into the epochs: both ranks are inside DDP's all-reduces now
    seen |= _descendants(os.getpid())
    os.kill(pids[1], signal.SIGKILL)
    runner.join(timeout=200)
    assert not runner.is_alive()
    assert outcome["status"] == "error", outcome
    assert "rank 1" in outcome["reason"] and "SIGKILL" in outcome["reason"], outcome["reason"]
    assert set(pids.values()) <= {pid for pid, _ in seen}  # ranks ran below the worker
    assert _survivors(seen) == [], "processes left behind"
    left = [path.name for path in worker_tmp.iterdir()
            if path.name.startswith(("torchelastic_", "pytorch-errorfile-"))]
    assert left == [], "the launch left its logs or error files in the temp folder"


def _survivors(processes: set[tuple[int, str]], grace_s: float = 10.0) -> list[str]:
    """Command lines of those still alive after a grace period for helpers exiting on EOF
    (multiprocessing's resource tracker leaves once the worker's pipe closes)."""
    deadline = time.monotonic() + grace_s
    while True:
        alive = [process for process in processes if _is_running(process)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    return [f"{pid}: {_cmdline(pid)}" for pid, _ in alive]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return "?"


# --- the report's scaling table, from synthetic run documents ---------------------------------

def _case(processes: int, epoch_s: float | None, accuracy: float = 0.9,
          status: str = "ok") -> dict[str, Any]:
    extra = {"samples_per_call": 1000, "steps_per_call": 100 // processes,
             "allreduce_share": 0.2, "accuracy": accuracy, "communication": "nccl"}
    return {"case": {"processes": processes, "net": "wide", "batch_size": 512},
            "status": status, "reason": "" if status == "ok" else "needs 4 GPUs; torch sees 2",
            "samples": [epoch_s] * 3 if epoch_s else [], "extra": extra if epoch_s else {}}


def _document(hints: dict[str, Any]) -> RunDocument:
    from harness.data.upgrade import as_run_document


    cases = [_case(1, 1.0), _case(2, 0.625, accuracy=0.88), _case(4, None, status="unavailable")]
    cell = {"workload": "mnist-ddp", "framework": "torch", "device": "cuda:0",
            "variant": "preloaded"}
    return as_run_document({"run_id": "r1", "host": {"machine_label": "h200"},
                            "hints": hints, "cells": [{"cell": cell, "cases": cases}]})


def test_scaling_table_computes_efficiency_and_parity_from_stored_data() -> None:
    from harness.report.views.scaling import scaling_lines, scaling_table

    table = scaling_table([_document(mnist_ddp.SPEC.report.as_dict())]).set_index("processes")
    assert table.loc[1, "samples_per_s"] == pytest.approx(1000)
    assert table.loc[2, "samples_per_s"] == pytest.approx(1600)
    assert table.loc[2, "efficiency"] == pytest.approx(0.8)  # 1600 / (2 x 1000)
    assert table.loc[2, "step_s"] == pytest.approx(0.625 / 50)
    assert table.loc[2, "accuracy_vs_one"] == pytest.approx(-0.02)
    lines = scaling_lines(table.reset_index())
    assert "efficiency 80%" in lines[1] and "all-reduce 20% of the step" in lines[1]
    assert "parity" in lines[1] and "unavailable: needs 4 GPUs" in lines[2]


def test_runs_without_the_scaling_hint_get_no_scaling_section() -> None:
    from harness.report.views.scaling import scaling_table

    assert scaling_table([_document({})]).empty


def test_report_draws_the_scaling_figure_and_section(tmp_path: Path) -> None:
    from harness.report import render_report
    from tests.synthetic_runs import write_run

    stored = _document(mnist_ddp.SPEC.report.as_dict()).to_dict()
    # Stored as `harness compare` stores a run, then drawn as `harness report` draws it.
    run = write_run(tmp_path / "run", stored["cells"], stored["host"],
                    {"processes": [1, 2, 4]}, workload="mnist-ddp", sweep="processes",
                    work=lambda case: {}, extra_doc={"hints": stored["hints"]})
    out = tmp_path / "report"
    figures = [path for path in render_report([run], out) if path.name.endswith("-scaling.png")]
    assert [path.name for path in figures] == ["mnist-ddp-scaling.png"]
    assert figures[0].stat().st_size > 0
    summary = (out / "summary.md").read_text()
    assert "\n## Data-parallel scaling\n" in summary
    section = summary.split("\n## Data-parallel scaling\n")[1].split("\n## ")[0]
    assert "](mnist-ddp-scaling.png)" in section and "efficiency 80%" in section
