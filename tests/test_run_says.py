"""What a run says to the user besides its answer: the phase it is in while it runs, why a run
that measured nothing failed, and how to continue a stopped one."""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import api
from harness.commands.epilogue import interrupted_lines
from harness.data.results import CellResult, RunDocument
from harness.run import phases
from harness.spec import Cell, Status
from tests.cli_in_process import run_cli_in_process


def stopped_run(path: Path, statuses: list[Status], planned: int) -> api.RunResult:
    cells = [CellResult(Cell("matmul", "fp32", "torch", f"cpu{index}"), status)
             for index, status in enumerate(statuses)]
    document = RunDocument(planned_cells=[{} for _ in range(planned)], cells=cells)
    return api.RunResult(path, cells, document, signal.SIGTERM)


def test_a_stopped_run_names_the_resume_command_that_runs_the_rest() -> None:
    result = stopped_run(Path("results/my run"), [Status.OK, Status.INTERRUPTED], 3)
    assert interrupted_lines(result) == [
        "interrupted by SIGTERM: 1 of 3 cells finished and saved; to run the rest:",
        "  harness compare --resume 'results/my run'"]
    assert interrupted_lines(stopped_run(Path("r"), [], 2)) == [
        "interrupted by SIGTERM before any cell ran; nothing to keep: run the same command "
        "again"]
    assert interrupted_lines(api.RunResult(Path("r"), [], RunDocument())) == []


def test_a_run_that_measured_nothing_exits_4_with_one_line_saying_why(out_dir: Path) -> None:
    """--device cuda where no GPU is seen exited 0 with "no valid measurement" in its verdict;
    the fake framework has no GPU on any machine."""
    ran = run_cli_in_process("compare", "--workload", "fault", "--framework", "fake",
                             "--device", "cuda:0", "--variant", "ok", "--quick",
                             "--no-ceilings", "--no-report", "--out", str(out_dir))
    assert ran.returncode == api.EXIT_NO_MEASUREMENT == 4, ran.stdout + ran.stderr
    said = [line for line in ran.stderr.splitlines() if "no valid measurement" in line]
    assert said == ["harness: no valid measurement: fake cuda:0: the fake framework has no "
                    "cuda:0"], ran.stderr
    both = run_cli_in_process("compare", "--workload", "fault", "--framework", "fake",
                              "--device", "cpu,cuda:0", "--variant", "ok", "--quick",
                              "--no-ceilings", "--no-report", "--out", str(out_dir))
    assert both.returncode == 0 and "no valid measurement" not in both.stderr, both.stderr


def test_the_line_says_how_every_cell_ended_and_fits_100_columns() -> None:
    cells = [CellResult(Cell("matmul", "fp32", framework, "cuda:0"), Status.UNAVAILABLE,
                        "sees no CUDA device " * 8) for framework in ("numpy", "torch")]
    cells.append(CellResult(Cell("matmul", "fp32", "jax", "cuda:0"), Status.ERROR, "crashed"))
    result = api.RunResult(Path("r"), cells, RunDocument(cells=cells))
    line = api.no_measurement_line(result)
    assert line.startswith("harness: no valid measurement in 3 cells (2 unavailable, 1 error); "
                           "first: numpy cuda:0: sees no") and len(line) <= 100
    assert line.endswith(" ...")
    assert result.exit_code == api.EXIT_FAILED_CELL  # a failed cell's 1 says more than 4


def wait_for(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Until CONDITION holds; a loaded machine only makes this slower, never failing early."""
    deadline = time.monotonic() + timeout_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_log_gets_a_line_naming_the_phase_at_every_interval(tmp_path: Path) -> None:
    """A planted slow phase, told every 0.2 s: each line names it, and the running worker's
    own phase (its file) once there is one."""
    board = phases.PhaseBoard()
    lines: list[str] = []
    with phases.PlainReporter(board, lines.append, interval_s=0.2, settle_s=0.05), \
            board.phase("preparing the shared weights"):
        wait_for(lambda: len(lines) >= 3)
        worker_file = tmp_path / "phase.json"
        worker_file.write_text(json.dumps({"phase": "timing: warm-up", "case": "batch=100",
                                           "since": time.time(), "estimate_s": 40.0}))
        board.worker(worker_file)
        wait_for(lambda: "timing: warm-up" in lines[-1])
    assert len(lines) >= 4
    assert all("preparing the shared weights" in line for line in lines), lines
    assert re.fullmatch(r"\[0:\d\d\] preparing the shared weights, [\d.]+ s: batch=100: "
                        r"timing: warm-up, [\d.]+ s \(~40 s expected\)", lines[-1]), lines[-1]
    assert all(len(line) <= 100 and "\x1b" not in line for line in lines)


def test_a_new_phase_is_said_once_it_lasts_and_a_short_one_is_not() -> None:
    board = phases.PhaseBoard()
    lines: list[str] = []
    with phases.PlainReporter(board, lines.append, interval_s=600, settle_s=0.1):
        with board.phase("ceilings"):
            pass  # over before it settled: not said
        with board.phase("cell 1 of 2: torch cpu as-written"):
            wait_for(lambda: len(lines) >= 1)
    assert len(lines) == 1 and "cell 1 of 2: torch cpu as-written" in lines[0], lines


def test_a_piped_run_names_its_phase_while_a_cell_runs(out_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole path: the runner hands the worker its phase file, the session reports the
    board where stderr is no terminal (CliRunner's is not); the fake 'slow' cell takes
    seconds (0.5 s per call), said line by line."""
    monkeypatch.setattr(phases, "INTERVAL_S", 0.2)
    ran = run_cli_in_process("compare", "--workload", "fault", "--framework", "fake",
                             "--device", "cpu", "--variant", "slow", "--quick",
                             "--no-ceilings", "--no-report", "--out", str(out_dir))
    assert ran.returncode == 0, ran.stderr
    said = [line for line in ran.stderr.splitlines() if re.match(r"\[\d+:\d\d\] ", line)]
    assert said and all("cell 1 of 1: fake cpu slow" in line for line in said[1:]), ran.stderr
    assert any(re.search(r"size=\d \(\d of 2\): timing", line) for line in said), ran.stderr
    assert "\x1b" not in ran.stderr and "ETA" not in ran.stderr


def test_a_piped_run_names_the_ceilings_while_they_are_measured(
        out_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted slow ceilings probe (1 s) is said by name, before any cell."""
    from harness.data.ceilings import Ceilings
    from harness.run import session

    def slow_probe(*args: object, **options: object) -> Ceilings:
        time.sleep(1.0)
        return Ceilings({})

    monkeypatch.setattr(phases, "INTERVAL_S", 0.2)
    monkeypatch.setattr(session, "measure_ceilings", slow_probe)
    ran = run_cli_in_process("compare", "--workload", "fault-rated", "--framework", "fake",
                             "--device", "cpu", "--variant", "ok", "--quick", "--no-report",
                             "--out", str(out_dir))
    assert ran.returncode == 0, ran.stderr
    said = [line for line in ran.stderr.splitlines() if "the machine's ceilings" in line]
    assert len(said) >= 2 and all(line.startswith("[0:0") for line in said), ran.stderr
