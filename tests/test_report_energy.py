"""The report's energy view: energy per step beside time per step, and the two-part verdict.

The sections are read from summary.md of a report drawn from stored run folders, as
`harness report` draws it, so what is checked is what the views show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.data.results import RunDocument
from harness.data.upgrade import as_run_document
from harness.report import render_report
from harness.report.views import energy as view
from tests.lines_only import lines_only  # noqa: F401 - autouse: no figure drawn
from tests.synthetic_runs import write_run
from tests.test_report import private_matplotlib  # noqa: F401 - autouse: matplotlib's cache


def case(device: str, seconds_per_epoch: float, joules_per_step: float | None,
         reason: str = "", steps: int = 100, suspect: str = "") -> dict[str, Any]:
    record: dict[str, Any] = (
        {"status": "ok", "joules_per_step": joules_per_step, "joules_per_call":
         joules_per_step * steps, "joules_per_step_above_idle": joules_per_step / 2,
         "idle_watts": 80.0, "watts_mean": 160.0, "window_s": 2.0, "counter": "counter",
         "source": "the timed samples"}
        if joules_per_step is not None else {"status": "unavailable", "reason": reason})
    kind = "device" if device.startswith("cuda") else "host"
    extra: dict[str, Any] = {"steps_per_call": steps, "energy": {kind: record}}
    if kind == "device":
        extra["gpu_state"] = {"status": "ok", "suspect": suspect, "before": {}, "after": {},
                              "while_timed": {"polls": 3, "throttle_reasons": {}}}
    return {"case": {"batch_size": 32}, "status": "ok", "samples": [seconds_per_epoch] * 3,
            "cold_seconds": seconds_per_epoch, "extra": extra}


def document(cases: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"run_id": "r1", "sweep": "batch_size", "host": {"machine_label": "box"},
            "cells": [{"cell": {"workload": "mnist-small", "framework": "torch",
                                "device": device, "variant": "preloaded"},
                       "cases": [record]} for device, record in cases.items()]}


def typed(runs: list[dict[str, Any]]) -> list[RunDocument]:
    """The hand-built documents as the report reads them: typed by the upgrade code."""
    return [as_run_document(run) for run in runs]


def case_lines(run: dict[str, Any]) -> list[str]:
    """summary.md's energy line of each measured case of RUN (how it was measured included)."""
    table = view.energy_table(typed([run]))
    return [view.case_line(row) for row in table]


def summary(tmp_path: Path, runs: list[dict[str, Any]]) -> str:
    """summary.md of the report drawn from these documents, each stored as a run folder."""
    folders = [write_run(tmp_path / "runs" / f"run{index}", run["cells"], run["host"],
                         {run["sweep"]: [32]}, workload="mnist-small", sweep=run["sweep"],
                         work=lambda case: {})
               for index, run in enumerate(runs)]
    render_report(folders, tmp_path / "report")
    return (tmp_path / "report" / "summary.md").read_text()


def test_verdict_says_time_and_energy_per_step(tmp_path: Path) -> None:
    # GPU: 0.1 s per 100-step epoch and 0.5 J per step; CPU: 0.4 s and 1.0 J per step.
    runs = [document({"cuda:0": case("cuda:0", 0.1, 0.5), "cpu": case("cpu", 0.4, 1.0)})]
    table = view.energy_table(typed(runs))
    assert len(table) == 2
    gpu = next(row for row in table if row.device == "cuda:0")
    assert view.step_s(gpu) == 0.001 and view.joules(gpu) == 0.5
    lines = view.gpu_vs_cpu_sentences(table)
    assert lines == ["mnist-small torch preloaded, size 32 (box): cuda:0 vs cpu: GPU 4x faster "
                     "(beyond the noise (one round: run-to-run drift not measured)); 2x less "
                     "energy per step (500 mJ GPU board vs 1 J CPU packages)"]
    text = summary(tmp_path, runs)
    assert "## Energy per step" in text and "idle included" in text
    assert "250 mJ above the 80 W idle" in text


def test_more_energy_and_slower_are_said_as_such() -> None:
    runs = [document({"cuda:0": case("cuda:0", 0.2, 2.0), "cpu": case("cpu", 0.1, 1.0)})]
    (line,) = view.gpu_vs_cpu_sentences(view.energy_table(typed(runs)))
    assert "GPU 2x slower (beyond the noise" in line and "; 2x more energy per step" in line


def test_missing_cpu_energy_keeps_the_speed_verdict_and_says_why() -> None:
    runs = [document({"cuda:0": case("cuda:0", 0.1, 0.5),
                      "cpu": case("cpu", 0.4, None, reason="no /sys/class/powercap")})]
    (line,) = view.gpu_vs_cpu_sentences(view.energy_table(typed(runs)))
    assert "GPU 4x faster (beyond" in line
    assert "; CPU energy unavailable: no /sys/class/powercap" in line


def test_runs_without_energy_records_add_no_section(tmp_path: Path) -> None:
    bare = document({"cpu": {"case": {"batch_size": 32}, "status": "ok", "samples": [0.1],
                             "extra": {}}})
    assert view.energy_table(typed([bare])) == []
    text = summary(tmp_path, [bare])
    assert "## Energy per step" not in text and "## GPU state per case" not in text
    assert view.energy_console_lines(as_run_document(bare)) == []


def test_gpu_state_suspicion_and_cuda_graph_reasons_reach_the_summary(tmp_path: Path) -> None:
    gpu = case("cuda:0", 0.1, 0.5, suspect="GPU throttled (power cap, sw_power_cap) in 2 of 3 "
               "polls while timed")
    gpu["extra"]["cuda_graphs"] = {"captured": False, "graphs": 2, "skips": [
        "skipping cudagraphs due to mutated inputs (1 instances)"], "graph_breaks": {}}
    text = summary(tmp_path, [document({"cuda:0": gpu})])
    assert "## GPU state per case" in text
    assert "SUSPECT: GPU throttled (power cap" in text
    assert "CUDA graphs NOT captured" in text and "mutated inputs" in text


def test_unmeasured_cases_are_one_line_per_reason(tmp_path: Path) -> None:
    runs = [document({"cpu": case("cpu", 0.4, None, reason="no /sys/class/powercap"),
                      "cpu:1": case("cpu:1", 0.4, None, reason="no /sys/class/powercap")})]
    text = summary(tmp_path, runs)
    assert text.count("no /sys/class/powercap") == 1
    assert "energy unavailable (2 cases: mnist-small torch cpu preloaded, mnist-small torch " \
           "cpu:1 preloaded): no /sys/class/powercap" in text


def test_a_gpu_vs_cpu_speed_inside_the_noise_says_so() -> None:
    # 1.01x apart with IQRs that overlap: the line must not read as a bare win.
    gpu, cpu = case("cuda:0", 0.1, 0.5), case("cpu", 0.101, 1.0)
    gpu["samples"], cpu["samples"] = [0.09, 0.1, 0.11], [0.092, 0.101, 0.112]
    runs = typed([document({"cuda:0": gpu, "cpu": cpu})])
    line = view.gpu_vs_cpu_sentences(view.energy_table(runs))[0]
    assert "GPU 1.01x faster (within the noise" in line


def test_energy_per_step_is_printed_with_the_time_of_its_own_window() -> None:
    # The energy window: 160 W over 2 s and 10 calls of 100 steps = 2 ms per step, 320 mJ
    # per step; the pooled median of the samples (0.1 s per call = 1 ms per step) is another
    # window and is labelled as the timed median, not set beside the joules as their time.
    gpu = case("cuda:0", 0.1, 0.32)
    gpu["extra"]["energy"]["device"].update(calls=10, steps_per_call=100)
    gpu["samples"], gpu["sample_rounds"] = [0.1] * 6, [0, 0, 0, 1, 1, 1]
    gpu["round_medians"] = [0.1, 0.1]
    line = case_lines(document({"cuda:0": gpu}))[0]
    assert "320 mJ per step over the energy window (160 W mean x 2 ms per step" in line
    assert "1 ms per step timed (median of all rounds' samples)" in line


def test_an_idle_power_read_back_from_the_machine_says_from_when() -> None:
    """A remembered idle power (harness.measure.energy, an hour at most) names its time; one
    measured in the run says nothing more."""
    remembered = case("cuda:0", 0.1, 0.32)
    remembered["extra"]["energy"]["device"].update(
        calls=10, steps_per_call=100, idle_remembered_from="14:02")
    measured = case("cuda:0", 0.1, 0.32)
    measured["extra"]["energy"]["device"].update(calls=10, steps_per_call=100)
    lines = [case_lines(document({"cuda:0": record}))[0] for record in (remembered, measured)]
    assert "above the 80 W idle, remembered from 14:02)" in lines[0]
    assert "remembered" not in lines[1] and "above the 80 W idle)" in lines[1]


def swept(device: str, per_size: dict[int, tuple[float, float | None]]) -> dict[str, Any]:
    """One cell of document()'s run at several batch sizes: size -> (seconds per epoch, J per
    step or None for a counter that measured nothing)."""
    cases = []
    for size, (seconds, joules) in per_size.items():
        made = case(device, seconds, joules, reason="no /sys/class/powercap")
        made["case"] = {"batch_size": size}
        cases.append(made)
    return {"cell": {"workload": "mnist-small", "framework": "torch", "device": device,
                     "variant": "preloaded"}, "cases": cases}


def swept_run(cpu_joules: tuple[float | None, ...] = (1.0, 2.0, 8.0)) -> RunDocument:
    """GPU 0.5 / 0.6 / 1.6 J per step and the CPU's CPU_JOULES at batch 8 / 64 / 512."""
    gpu = swept("cuda:0", {8: (0.2, 0.5), 64: (0.2, 0.6), 512: (0.3, 1.6)})
    cpu = swept("cpu", dict(zip((8, 64, 512), ((0.1, cpu_joules[0]), (0.3, cpu_joules[1]),
                                               (1.2, cpu_joules[2])))))
    return as_run_document({"run_id": "r1", "sweep": "batch_size",
                            "host": {"machine_label": "box"}, "cells": [cpu, gpu]})


def test_the_terminal_says_one_energy_line_per_cell_with_its_sizes_together() -> None:
    lines = view.energy_console_lines(swept_run())
    # One unit said once where the figures share it, each figure's own where they do not.
    assert lines == [
        "energy, torch cpu: 1 / 2 / 8 J per step at batch_size 8 / 64 / 512",
        "energy, torch cuda:0: 500 mJ / 600 mJ / 1.6 J per step at batch_size 8 / 64 / 512; "
        "2x less / 3.33x less / 5x less than cpu"]
    # How the figures were measured is not in them: summary.md and --details say it.
    assert not any("idle" in line or "window" in line or "counter" in line for line in lines)


def test_a_counter_that_measured_nothing_is_said_once_and_its_ratios_are_dashes() -> None:
    lines = view.energy_console_lines(swept_run(cpu_joules=(None, None, None)))
    assert lines == [
        "energy, torch cuda:0: 500 mJ / 600 mJ / 1.6 J per step at batch_size 8 / 64 / 512",
        "energy: CPU unavailable: no /sys/class/powercap"]


def test_how_energy_was_measured_is_said_once_where_every_cell_shares_it() -> None:
    lines = view.energy_method_lines(swept_run())
    # Every case of document()'s cells: the same counter name, idle 80 W, 160 W mean, 2 s
    # windows over the timed samples: said once, not per cell or per size.
    assert lines[0] == ("energy, every cell: counter; idle included; from the timed samples; "
                        "windows 2 s; 160 W mean")
    assert lines[1:] == [
        "energy, torch cpu: 500 mJ / 1 J / 4 J per step above the 80 W idle",
        "energy, torch cuda:0: 250 / 300 / 800 mJ per step above the 80 W idle"]
