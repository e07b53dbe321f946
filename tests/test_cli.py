"""The CLI as a user drives it: list, env, compare, exit codes, bad input, Ctrl-C."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness import api
from harness.cli import app
from harness.data.results import SCHEMA_VERSION, CellResult
from harness.run import plan as run_plan
from harness.run import planner, runner
from harness.run.plan import check_writable
from harness.spec import BadInput, Cell
from harness.workloads import mnist
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


def only_run_dir(out_dir: Path) -> Path:
    runs = [p for p in out_dir.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def test_help_on_every_command() -> None:
    for command in ([], ["compare"], ["list"], ["env"], ["report"]):
        result = invoke(*command, "--help")
        assert result.exit_code == 0 and "Usage" in result.output


def test_list_names_workloads_and_parameters() -> None:
    result = invoke("list")
    assert result.exit_code == 0
    assert "matmul" in result.output and "--sizes sets: n" in result.output


@pytest.mark.slow
def test_env_reports_frameworks_without_importing_them() -> None:
    result = invoke("env", "--json")
    assert result.exit_code == 0
    document = json.loads(result.output)
    by_name = {info["framework"]: info for info in document["frameworks"]}
    assert by_name["torch"]["installed"] and by_name["torch"]["version"].startswith("2.")
    assert by_name["tensorflow"]["installed"]
    assert by_name["torch"]["devices"][0]["name"] == "cpu"
    assert document["host"]["cores"] >= 1
    assert "torch" not in sys.modules and "tensorflow" not in sys.modules
    assert by_name["jax"]["installed"] and by_name["jax"]["devices"][0]["name"] == "cpu"
    assert by_name["keras-jax"]["version"].startswith("keras 3")
    assert "jax" not in sys.modules and "keras" not in sys.modules


@pytest.mark.slow
def test_quick_matmul_runs_every_framework_in_workers_and_marks_cuda_unavailable(
        out_dir: Path) -> None:
    """One real matrix, run by the CLI in a fresh interpreter that must never import a framework
    itself (only its workers do), so the two promises share one run of every framework."""
    # --no-ceilings: nothing here is judged against the machine's ceilings (a probe is ~30 s).
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from harness.cli import app\n"
        "r = CliRunner().invoke(app, ['compare', '--workload', 'matmul', '--quick', '--device', "
        f"'cpu,cuda', '--sizes', '32,64', '--out', {str(out_dir)!r}, '--no-report', "
        "'--no-ceilings'])\n"
        "print(r.output)\n"
        "assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in ('torch', 'tensorflow', 'keras', 'jax') if m in sys.modules))\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert completed.stdout.strip().splitlines()[-1] == "[]"  # the parent imported none
    assert "GFLOP/s" in completed.stdout
    run_dir = only_run_dir(out_dir)
    document = json.loads((run_dir / "run.json").read_text())
    statuses = {(c["cell"]["framework"], c["cell"]["device"]): c["status"]
                for c in document["cells"]}
    assert statuses[("torch", "cpu")] == "ok"
    assert statuses[("tensorflow", "cpu")] == "ok"
    assert statuses[("numpy", "cpu")] == "ok"
    assert statuses[("jax", "cpu")] == "ok"
    assert statuses[("torch", "cuda:0")] == "unavailable"  # CI has no GPU
    assert statuses[("jax", "cuda:0")] == "unavailable"
    frame = pd.read_csv(run_dir / "measurements.csv")
    warm = frame[(frame["phase"] == "warm") & (frame["status"] == "ok")]
    assert set(warm["framework"]) == {"torch", "tensorflow", "jax", "numpy"}
    assert set(warm["size"]) == {32, 64}
    assert warm["check_passed"].all()
    assert document["schema_version"] == SCHEMA_VERSION and document["host"]["cpu_model"]


BAD_INPUTS = [
    (["--workload", "nope"], "unknown workload"),
    (["--workload", ""], "--workload is empty"),
    (["--workload", "  "], "--workload is empty"),
    (["--framework", ""], "--framework is empty"),
    (["--device", ","], "--device is empty"),
    (["--variant", ""], "--variant is empty"),
    (["--framework", "mxnet"], "unknown framework"),
    (["--device", "tpu"], "unknown device"),
    (["--sizes", "0"], ">= 1"),
    (["--sizes", "-5"], ">= 1"),
    (["--sizes", "abc"], "not an integer"),
    (["--sizes", "64,,"], "not an integer"),
    (["--param", "n=0"], "must be >= 1"),
    (["--param", "bogus=3"], "unknown --param"),
    (["--param", "noequals"], "NAME=VALUE"),
    (["--workload", "mnist-small", "--param", "epochs=-1"], "epochs"),
    (["--workload", "mnist-small", "--param", "epochs=two"], "epochs"),
    (["--timeout", "0"], "--timeout"),
    (["--variant", "fp64"], "unknown variant"),
    (["--data", "/nonexistent.npz"], "--data"),
]


@pytest.mark.parametrize("args, message", BAD_INPUTS)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(out_dir: Path, args: list[str],
                                                         message: str) -> None:
    result = invoke("compare", "--workload", "matmul", *args, "--out", str(out_dir))
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.output
    assert "Traceback" not in result.output
    assert not out_dir.exists()


def assert_one_line_bad_input(result, message: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("harness: error: "), result.output
    assert message in lines[0], result.output


def test_out_under_a_file_is_bad_input(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = invoke("compare", "--workload", "matmul", "--out", str(blocker / "sub"))
    assert_one_line_bad_input(result, "not a folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_read_only_out_is_bad_input(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    result = invoke("compare", "--workload", "matmul", "--out", str(locked / "a" / "b"))
    assert_one_line_bad_input(result, "not writable")
    assert list(locked.iterdir()) == []


@pytest.mark.parametrize("command", [["compare", "--workload", "matmul"], ["report"]])
def test_out_on_a_pseudo_filesystem_is_bad_input(tmp_path: Path, command: list[str]) -> None:
    """/proc refuses new folders even to root, who passes os.access there."""
    if command == ["report"]:  # the smallest folder `harness report` accepts as a run
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        (run_dir / "run.json").write_text('{"schema_version": 1}')
        (run_dir / "measurements.csv").write_text("")
        command = ["report", str(run_dir)]
    result = invoke(*command, "--out", "/proc/harness-no-such/out")
    assert_one_line_bad_input(result, "not writable")
    assert not Path("/proc/harness-no-such").exists()


def test_failed_probe_removes_the_folders_it_created(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(run_plan.tempfile, "mkstemp", refuse)
    with pytest.raises(BadInput, match="Read-only file system"):
        check_writable(tmp_path / "new" / "deeper")
    assert list(tmp_path.iterdir()) == []


def test_writable_out_is_created_and_left_empty(tmp_path: Path) -> None:
    check_writable(tmp_path / "new" / "deeper")
    assert list((tmp_path / "new" / "deeper").iterdir()) == []


def test_failed_cell_exits_1_and_the_rest_of_the_matrix_completes(out_dir: Path) -> None:
    result = invoke("compare", "--workload", "fault", "--framework", "fake",
                    "--variant", "error,ok,invalid", "--out", str(out_dir), "--quick",
                    "--no-report")
    assert result.exit_code == 1, result.output
    document = json.loads((only_run_dir(out_dir) / "run.json").read_text())
    assert [c["status"] for c in document["cells"]] == ["error", "ok", "invalid"]
    assert "injected failure" in result.output and "check failed" in result.output


def test_two_runs_at_once_write_separate_folders(out_dir: Path) -> None:
    command = [sys.executable, "-m", "harness.cli", "compare", "--workload", "fault",
               "--framework", "fake", "--variant", "ok", "--quick", "--no-report",
               "--out", str(out_dir)]
    processes = [subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL) for _ in range(2)]
    assert [p.wait(timeout=120) for p in processes] == [0, 0]
    runs = sorted(p for p in out_dir.iterdir() if p.is_dir())
    assert len(runs) == 2
    for run_dir in runs:
        assert json.loads((run_dir / "run.json").read_text())["cells"][0]["status"] == "ok"


def test_ctrl_c_saves_finished_cells_stops_the_worker_and_exits_130(out_dir: Path) -> None:
    command = [sys.executable, "-m", "harness.cli", "compare", "--workload", "fault",
               "--framework", "fake", "--variant", "ok,slow,hang", "--quick", "--no-report",
               "--out", str(out_dir)]
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    run_file = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the first cell is saved
        runs = list(out_dir.glob("*/run.json")) if out_dir.exists() else []
        if runs and json.loads(runs[0].read_text())["cells"]:
            run_file = runs[0]
            break
        time.sleep(0.2)
    assert run_file is not None, "first cell never finished"
    time.sleep(1.0)  # the slow cell's worker is running now
    process.send_signal(signal.SIGINT)
    _stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    document = json.loads(run_file.read_text())
    assert document["interrupted"] is True
    statuses = [c["status"] for c in document["cells"]]
    assert statuses[0] == "ok" and statuses[-1] == "interrupted" and len(statuses) == 2
    assert "Traceback" not in stderr
    frame = pd.read_csv(run_file.parent / "measurements.csv")
    assert (frame[frame["variant"] == "ok"]["phase"] == "warm").any()


def test_missing_framework_is_unavailable_with_its_install_hint(out_dir: Path) -> None:
    result = invoke("compare", "--workload", "fault", "--framework", "absent,fake",
                    "--variant", "ok", "--quick", "--no-report", "--no-ceilings",
                    "--out", str(out_dir))
    assert result.exit_code == 0, result.output
    assert "'crossframe-harness[absent]')" in result.output  # brackets survive the table
    document = json.loads((only_run_dir(out_dir) / "run.json").read_text())
    assert [c["status"] for c in document["cells"]] == ["unavailable", "ok"]


def test_variant_all_starts_no_worker_for_a_refused_cell(out_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: `--variant all` on MNIST. The declarations refuse 24 of the 45 cpu cells
    (torch-only, Keras-only, GPU-only variants; keras-torch's steps_per_execution); those become
    unavailable rows with their reason and no worker, the others reach a worker."""
    started: list[Cell] = []

    def counting_worker(cell: Cell, options: runner.RunOptions, *servers: object) -> CellResult:
        started.append(cell)
        return CellResult(cell)

    monkeypatch.setattr(runner, "run_worker", counting_worker)
    # No warm processes: no worker is started, and importing five frameworks into them to
    # fork nothing was 15 of this test's 16 s on the 2-core VM.
    monkeypatch.setenv("HARNESS_FORK_WORKERS", "0")
    result = invoke("compare", "--workload", "mnist-small", "--variant", "all", "--quick",
                    "--device", "cpu", "--no-ceilings", "--no-report", "--out", str(out_dir))
    # The counting worker measures no case: the run ends as one with no valid measurement.
    assert result.exit_code == api.EXIT_NO_MEASUREMENT, result.output
    cells = json.loads((only_run_dir(out_dir) / "run.json").read_text())["cells"]
    spec = mnist.SMALL
    assert len(cells) == len(spec.variants) * len(spec.frameworks) == 45
    allowed = {(variant, framework) for variant in spec.variants for framework in spec.frameworks
               if planner.cell_refusal(spec, Cell(spec.name, variant, framework, "cpu")) is None}
    assert {(cell.variant, cell.framework) for cell in started} == allowed
    assert len(started) == len(allowed) <= 45 - 24
    refused = [cell for cell in cells if cell.get("worker_started") is False]
    assert len(refused) == 45 - len(started)
    assert all(cell["status"] == "unavailable" and cell["reason"] for cell in refused)
    by_cell = {(c["cell"]["variant"], c["cell"]["framework"]): c["reason"] for c in cells}
    if ("as-written", "keras-torch") in allowed:  # keras installed: the declared reason
        assert "steps_per_execution must be 1" in by_cell[("steps-per-execution",
                                                           "keras-torch")]


def test_list_shows_where_each_variant_runs_and_why_not() -> None:
    """`harness list`: per workload, variant x framework, the device kinds each runs on and
    numbered reasons for the rest, read from the declarations (no worker, no framework)."""
    # Piped without $COLUMNS (a script's view): the matrix header on one line.
    result = CliRunner().invoke(app, ["list"], env={"COLUMNS": None})
    assert result.exit_code == 0
    lines = result.output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("mnist-small:"))
    end = next(i for i, line in enumerate(lines) if line.startswith("mnist-wide:"))
    block = lines[start:end]
    header = next(line for line in block if line.strip().startswith("variant "))
    assert "keras-torch" in header and "tensorflow (on request)" in header
    row = next(line for line in block if line.strip().startswith("steps-per-execution"))
    columns = [part for part in row.split("  ") if part.strip()]
    keras_torch = columns[1:][header.split().index("keras-torch") - 1]
    number = keras_torch.strip().removeprefix("- [").removesuffix("]")
    assert keras_torch.strip().startswith("- [") and number.isdigit(), row
    assert any(line.strip().startswith(f"[{number}]") and "steps_per_execution must be 1" in line
               for line in block)
    cuda_graph = next(line for line in block if line.strip().startswith("cuda-graph"))
    assert cuda_graph.split()[1] == "gpu"  # torch, on a GPU only
    assert "numpy (cpu only)" in result.output
