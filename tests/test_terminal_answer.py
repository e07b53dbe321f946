"""Issue 50, item 8: a 3-size own-model compare on a GPU reads at a glance in the terminal.

A stored run of the shape that printed ~40 lines after the table (torch on cpu and cuda:0,
batch 8 / 64 / 512, energy on both counters, a memory fit per cell, a predicted crossover) is
drawn and answered the way `harness compare` ends, at COLUMNS=100: every verdict line fits two
terminal lines, the part after the table fits 20, and every figure the long lines carried is
still in summary.md, which `harness check` verifies.
"""

from __future__ import annotations

import io
import math
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness import api
from harness.analysis.memoryfit import REQUIRED_CASE_FIGURE, memory_fits
from harness.core import registry
from harness.data.store import load_run
from harness.report.summary import details_lines
from harness.report.views import energy as energy_view
from harness.reporting import draw_run_report
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn
from tests.synthetic_runs import make_case, make_result, save_predictions, write_run
from tests.terminal_lines import unfolded
from tests.test_report import private_matplotlib  # noqa: F401 - autouse: matplotlib's cache

WIDTH = 100
MiB, GiB = 2**20, 2**30
MACHINE = "gpubox (NVIDIA H100 80GB HBM3)"
HOST = {"machine_label": MACHINE, "hostname": "gpubox", "cpu_model": "Xeon", "cores": 16,
        "memory_bytes": 128 * GiB, "os": "Linux", "python": "3.11",
        "gpus": ["NVIDIA H100 80GB HBM3"], "gpu_memory_bytes": [80 * GiB]}
SIZES = [8, 64, 512]


def energy_record(counter: str, seconds_per_step: float, watts: float,
                  idle_watts: float) -> dict[str, Any]:
    """A counter's record over a 2 s window of one-step calls, as the worker writes it."""
    window = 2.0
    calls = int(window / seconds_per_step)
    joules, idle = watts * window, idle_watts * window
    return {"status": "ok", "counter": counter, "source": "the timed samples",
            "reported": "total (idle included)", "window_s": window, "calls": calls,
            "joules_total": joules, "watts_mean": watts, "joules_per_call": joules / calls,
            "joules_per_step": joules / calls, "steps_per_call": 1, "idle_watts": idle_watts,
            "idle_window_s": 1.0, "idle_settled": True,
            "joules_per_call_above_idle": (joules - idle) / calls,
            "joules_per_step_above_idle": (joules - idle) / calls,
            "idle_remembered_from": "10:42"}


def model_case(device: str, batch: int) -> dict[str, Any]:
    """One training step of a user model: the GPU's time nearly flat, the CPU's linear."""
    gpu = device.startswith("cuda")
    seconds = 2e-4 + batch * 2e-7 if gpu else 1e-4 + batch * 2e-6
    extra: dict[str, Any] = {"steps_per_call": 1, "flops_per_call": 1e6 * batch}
    rapl = energy_record("RAPL package-0 + package-1", seconds, 90.0 if gpu else 150.0, 60.0)
    if gpu:
        extra["energy"] = {"device": energy_record("NVML total energy counter", seconds,
                                                   120.0, 70.0), "host": rapl}
        extra["gpu_state"] = {"status": "ok", "suspect": "", "before": {}, "after": {},
                              "while_timed": {"polls": 3, "throttle_reasons": {}}}
        extra[REQUIRED_CASE_FIGURE] = 300 * MiB + batch * 250 * 1024
    else:
        extra["energy"] = {"host": rapl}
        extra["peak_host_memory_bytes"] = 700 * MiB + batch * 600 * 1024
    case = make_case({"batch": batch}, seconds, extra=extra)
    if gpu:
        case["peak_device_allocated_bytes"] = 350 * MiB + batch * 900 * 1024
        case["peak_device_reserved_bytes"] = 400 * MiB + batch * 1000 * 1024
    return case


@pytest.fixture(scope="module")
def model_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run folder, its predictions stored as a run's end stores them."""
    results = [make_result("model-lstm", "torch", device,
                           [model_case(device, batch) for batch in SIZES], variant="as-written",
                           params={"batch": SIZES, "what": "train"})
               for device in ("cpu", "cuda:0")]
    for result in results:  # the harness's own cost: the overhead line after the table
        result["cost"] = {"wall_s": 12.0, "timed_s": 5.0, "workers": 1,
                          "phases": {"warm-up and calibration": 3.0,
                                     "worker start (python, imports)": 2.0}}
    run_dir = write_run(tmp_path_factory.mktemp("model") / "run", results, HOST,
                        {"batch": SIZES, "what": "train"}, workload="model-lstm", sweep="batch",
                        work=lambda case: {"flops": 1e6 * case["batch"]},
                        started=time.time() - 60, extra_doc={"quick": False})
    save_predictions(run_dir)
    return run_dir


def answer(run_dir: Path, monkeypatch: pytest.MonkeyPatch,
           details: bool = False) -> tuple[list[str], str]:
    """What `harness compare` prints after this run at COLUMNS=100 (its report drawn, its
    self-check run), and the check's line."""
    from harness.commands import epilogue, output

    monkeypatch.setenv("COLUMNS", str(WIDTH))
    written = io.StringIO()
    stdout = Console(file=written, width=WIDTH, force_terminal=False)
    for module in (epilogue, output):  # the tables print through one, the lines the other
        monkeypatch.setattr(module, "console", stdout)
    document = load_run(run_dir)
    result = api.RunResult(run_dir, document.cells, document)
    drawn = draw_run_report(run_dir)
    _, check_line = epilogue.self_check(result)
    epilogue.print_run(registry.load_workload(document.workload), result, drawn, check_line,
                       details)
    return unfolded(written.getvalue().splitlines(), WIDTH), check_line


def rows_on_screen(line: str) -> int:
    """Terminal rows a line takes at WIDTH columns (the terminal folds what rich does not)."""
    return max(1, math.ceil(len(line.rstrip()) / WIDTH))


def test_the_answer_fits_a_glance_at_100_columns(model_run: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    lines, check_line = answer(model_run, monkeypatch)
    assert check_line.endswith(": 0 mismatches, 0 unverifiable"), check_line
    title = next(i for i, line in enumerate(lines)
                 if line.startswith("model-lstm: median per call"))
    verdict = lines[lines.index("verdict:") + 1:title]
    assert verdict[0] == f"model-lstm on {MACHINE}:"
    too_long = [line for line in verdict if len(line) > 2 * WIDTH]
    assert not too_long, "\n".join(verdict)
    rules = [i for i in range(title, len(lines)) if set(lines[i].strip()) == {"─"}]
    after = lines[rules[2] + 1:]
    assert any(line.startswith("harness overhead: ") for line in after), "\n".join(after)
    assert sum(map(rows_on_screen, after)) <= 20, "\n".join(after)
    # One energy line per cell, its three sizes together; one memory line per cell.
    assert [line for line in after if line.startswith("energy, ")] == [
        "energy, torch cpu: 17.4 / 34.2 / 169 mJ per step at batch 8 / 64 / 512",
        "energy, torch cuda:0: 24.2 / 25.5 / 36.3 mJ per step at batch 8 / 64 / 512; "
        "1.39x more / 1.34x less / 4.65x less than cpu"]
    assert [line.split(":")[1] for line in verdict if line.startswith("  memory: ")] == [
        " cpu (torch)", " cuda"]
    assert lines[-1] == f"report: {model_run / 'report.html'}"


def test_every_figure_the_long_lines_carried_is_in_summary_md(model_run: Path) -> None:
    """The per-size energy lines and the memory fits' long lines, the terminal's before this
    change, are summary.md's lines still (and `harness check` verifies them there)."""
    summary = (model_run / "summary.md").read_text()
    document = load_run(model_run)
    table = energy_view.energy_table([document])
    long_lines = [*energy_view.gpu_vs_cpu_sentences(table),
                  *(energy_view.case_line(row) for row in table),
                  *(fit.line() for fit in memory_fits(document))]
    assert len(long_lines) == 3 + 6 + 2
    missing = [line for line in long_lines if line not in summary]
    assert not missing, missing


def test_details_say_how_once_where_every_cell_shares_it(model_run: Path) -> None:
    lines = details_lines([load_run(model_run)])
    assert lines[0] == ("energy, every cell: idle included; from the timed samples; "
                        "windows 2 s")
    assert lines[1].startswith("energy, torch cpu: RAPL package-0 + package-1; 150 W mean; ")
    assert lines[2].startswith("energy, torch cuda:0: NVML total energy counter; 120 W mean; ")
    assert lines[3] == ("memory fits, every cell: fitted over 3 sizes up to 512; largest "
                        "residual 0 B")
    assert [line.split(":")[0] for line in lines[4:]] == ["memory fit, cpu (torch)",
                                                          "memory fit, cuda"]
    assert sum("idle included" in line for line in lines) == 1


def test_compare_details_prints_the_method_lines(model_run: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    short, _ = answer(model_run, monkeypatch)
    detailed, _ = answer(model_run, monkeypatch, details=True)
    method = details_lines([load_run(model_run)])
    assert not set(method) & set(short)
    assert all(line in detailed for line in method)
