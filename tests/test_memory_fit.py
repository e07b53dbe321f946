"""Will a bigger batch fit: peak memory fitted over a batch sweep (harness.analysis.memoryfit),
printed by compare and summary.md, and recomputed by `harness check`.

Synthetic runs carry made-up peaks with known answers (exactly linear, noisy, one size), and
GPU cells the memory each step must hold beside their peaks (the fit prefers it); real CPU
runs go through the workers to show what a run of today records for the host, and that the
memory a torch step must hold is measured exactly (a small MLP, counted by hand).
"""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.analysis.memoryfit import (
    DEVICE_RESERVE_BYTES,
    HOST_CASE_FIGURE,
    REQUIRED_BASIS,
    REQUIRED_CASE_FIGURE,
    largest_batch_that_fits,
    memory_fits,
    shown,
)
from harness.analysis.memoryfit import method_lines as memory_method_lines
from harness.analysis.memoryfit import terminal_lines as memory_terminal_lines
from harness.audit import audit_run
from harness.data.results import RunDocument
from harness.data.store import load_run
from harness.data.upgrade import as_run_document
from tests.cli_in_process import run_cli_in_process
from tests.synthetic_runs import make_case, make_result, write_run

MiB, GiB = 2**20, 2**30
GPU_TOTAL = 80 * GiB
MACHINE = "gpubox (NVIDIA H100 80GB HBM3)"
HOST = {"machine_label": MACHINE, "hostname": "gpubox", "cpu_model": "Synth", "cores": 8,
        "memory_bytes": 64 * GiB, "os": "Linux", "python": "3.11",
        "gpus": ["NVIDIA H100 80GB HBM3"], "gpu_memory_bytes": [GPU_TOTAL]}
BATCHES = [32, 64, 128]


def gpu_case(batch: int, peak: float, reserved: bool = True,
             required: float | None = None) -> dict[str, Any]:
    case = make_case({"batch": batch}, 1e-3 + batch * 1e-6,
                     extra={REQUIRED_CASE_FIGURE: int(required)} if required else None)
    case["peak_device_allocated_bytes"] = int(peak * 0.9)
    case["peak_device_reserved_bytes"] = int(peak) if reserved else None
    if not reserved:
        case["peak_device_allocated_bytes"] = int(peak)
    return case


def cpu_case(batch: int, host_peak: float | None = None) -> dict[str, Any]:
    case = make_case({"batch": batch}, 5e-4 + batch * 2e-5,
                     extra={HOST_CASE_FIGURE: int(host_peak)} if host_peak else None)
    case["peak_device_allocated_bytes"] = None
    return case


def results(peaks: Mapping[int, float], host_peaks: Mapping[int, float] | None = None,
            required: Mapping[int, float] | None = None) -> list[dict[str, Any]]:
    """torch on cuda:0 with these device peaks (and step memory) per batch, and torch on cpu."""
    gpu = make_result("jacobian", "torch", "cuda:0",
                      [gpu_case(batch, peak, required=(required or {}).get(batch))
                       for batch, peak in peaks.items()],
                      variant="as-written")
    cpu = make_result("jacobian", "torch", "cpu",
                      [cpu_case(batch, (host_peaks or {}).get(batch)) for batch in peaks],
                      variant="as-written")
    cpu["peak_host_memory_bytes"] = 900 * MiB
    return [cpu, gpu]


def crossover_record(size: float | None, kind: str = "crossover") -> dict[str, Any]:
    """A predicted crossover as run.json stores it (harness.analysis.crossover)."""
    return {"experiment": "jacobian", "machine": MACHINE, "variant": "as-written",
            "framework": "torch", "sweep": "batch", "kind": kind, "size": size,
            "extrapolated": False, "held_out_error": 0.05, "sizes_used": 3, "caveats": [],
            "measured": "cpu-always", "measured_size": None, "text": "synthetic"}


def document(peaks: Mapping[int, float], predictions: list[dict[str, Any]] | None = None,
             host: dict[str, Any] | None = None,
             host_peaks: Mapping[int, float] | None = None,
             required: Mapping[int, float] | None = None) -> RunDocument:
    return as_run_document({  # the first layout, read as a stored run of it is
        "run_id": "r1", "workload": "jacobian", "sweep": "batch", "host": host or HOST,
        "params": {"batch": list(peaks)}, "cells": results(peaks, host_peaks, required),
        "predictions": predictions or []})


def linear(fixed: float, per_sample: float) -> Mapping[int, float]:
    return {batch: fixed + per_sample * batch for batch in BATCHES}


def gpu_fit(doc: RunDocument, **given: Any) -> Any:
    fit = largest_batch_that_fits(doc, "torch", "cuda:0", "as-written", **given)
    assert fit is not None
    return fit


# --- the fit -----------------------------------------------------------------------------------

def test_exactly_linear_memory_gives_its_parts_and_the_largest_batch_exactly() -> None:
    fit = gpu_fit(document(linear(GiB, 3 * MiB)))
    assert fit.memory == "device" and fit.fit is not None
    assert fit.fit.fixed_bytes == GiB and fit.fit.per_sample_bytes == 3 * MiB
    assert fit.fit.sizes == 3 and fit.fit.max_residual_bytes == 0
    assert fit.capacity_bytes == GPU_TOTAL - DEVICE_RESERVE_BYTES
    # (80 GiB - 1 GiB reserve - 1 GiB fixed) / 3 MiB = 26,624 exactly: that batch fills it.
    assert fit.largest_batch == 26_624
    assert fit.reason == ""


def test_a_per_sample_part_that_does_not_divide_the_room_is_rounded_down() -> None:
    fit = gpu_fit(document(linear(1.5 * GiB, 3_000_000)))
    room = GPU_TOTAL - DEVICE_RESERVE_BYTES - 1.5 * GiB
    assert fit.largest_batch == int(room // 3_000_000)
    assert fit.fit is not None and fit.fit.fixed_bytes + 3_000_000 * (
        fit.largest_batch + 1) > GPU_TOTAL - DEVICE_RESERVE_BYTES


def test_noisy_memory_states_its_residual() -> None:
    noise = {32: 5 * MiB, 64: -9 * MiB, 128: 4 * MiB}
    peaks = {batch: GiB + 3 * MiB * batch + noise[batch] for batch in BATCHES}
    fit = gpu_fit(document(peaks))
    slope, intercept = np.polyfit(BATCHES, [peaks[b] for b in BATCHES], 1)
    expected = max(abs(peaks[b] - (intercept + slope * b)) for b in BATCHES)
    assert fit.fit is not None
    assert fit.fit.per_sample_bytes == pytest.approx(slope, rel=1e-9)
    assert abs(fit.fit.max_residual_bytes) == pytest.approx(expected, rel=1e-9)
    assert expected > MiB  # the noise shows, it is not fitted away
    assert "fitted over 3 sizes up to 128, largest residual" in fit.line()


def test_two_sizes_fit_a_line_but_predict_no_batch_and_say_so() -> None:
    """A line through 2 points passes through both: nothing tests it, so the ~80,000 it would
    extrapolate to (a --quick advise led its answer with ~1,190,000) is no prediction."""
    fit = gpu_fit(document({32: GiB + 32 * MiB, 128: GiB + 128 * MiB}))
    assert fit.fit is not None and fit.fit.max_residual_bytes is None
    assert not fit.fit.predicts and fit.largest_batch is None
    assert fit.line() == ("cuda:0 (torch, as-written): no prediction of the largest batch: a "
                          "line through 2 batch sizes (up to 128) passes through each, so "
                          "nothing tests it; 3 or more sizes make a prediction")
    assert "~" not in fit.line() and "per sample" not in fit.line()


def test_sizes_run_print_exactly_and_the_predicted_batch_rounds_down() -> None:
    fit = gpu_fit(document({1024: GiB + 1024 * MiB, 2048: GiB + 2048 * MiB,
                            4096: GiB + 4096 * MiB}))
    assert fit.largest_batch == 78 * 1024  # 79,872
    assert "is ~79,800 (" in fit.line() and "fitted over 3 sizes up to 4,096," in fit.line()


def test_one_size_gives_no_prediction_and_says_why() -> None:
    fit = gpu_fit(document({64: GiB + 64 * MiB}))
    assert fit.fit is None and fit.largest_batch is None
    assert fit.reason == "one batch size measured (64); a fit needs two or more"
    assert fit.line() == ("cuda:0 (torch, as-written): no memory fit: one batch size measured "
                          "(64); a fit needs two or more")


def test_gpu_cells_without_a_fit_for_one_reason_share_a_terminal_line() -> None:
    """The demo measures one batch size on four frameworks' GPU cells: one line, not four."""
    stored = document({64: GiB + 64 * MiB})
    cells = list(stored.cells)
    for framework, peak in (("jax", 2 * GiB), ("keras-jax", 3 * GiB)):
        cells.append(as_run_document({
            "run_id": "r1", "workload": "jacobian", "sweep": "batch", "host": HOST,
            "params": {"batch": [64]}, "predictions": [],
            "cells": [make_result("jacobian", framework, "cuda:0", [gpu_case(64, peak)],
                                  variant="as-written")]}).cells[0])
    stored.cells = cells
    reason = "one batch size measured (64); a fit needs two or more"
    assert memory_terminal_lines(stored) == [
        f"cuda:0 (torch, jax, keras-jax): no memory fit: {reason}"]
    # A cell with a fit keeps its own line, before the group that came after it.
    fitted = document(linear(GiB, 4 * MiB))
    fitted.cells = [*fitted.cells, cells[-1]]
    assert memory_terminal_lines(fitted) == [
        "cuda:0 (torch): largest batch to fit in 79 GiB: ~19,900 (1 GiB + 4 MiB per sample); "
        "a floor (workspace)", f"cuda:0 (keras-jax): no memory fit: {reason}"]


def test_memory_that_falls_with_the_batch_is_said_to_be_no_prediction() -> None:
    """A negative slope is no per-sample cost: the line says so instead of printing
    'fixed 2 GiB + -10 KiB per sample' as if it were a model."""
    fit = gpu_fit(document({32: 2 * GiB, 64: 2 * GiB - 320 * 1024, 128: 2 * GiB - 960 * 1024}))
    assert fit.fit is not None and fit.fit.per_sample_bytes < 0
    assert fit.largest_batch is None
    assert fit.line() == ("cuda:0 (torch, as-written): no prediction of the largest batch: "
                          "memory did not grow with the batch over the 3 sizes run (up to "
                          "128), so no per-sample cost can be extrapolated")
    assert "+ -" not in fit.line()


def test_without_the_gpus_total_memory_the_fit_is_given_but_no_batch() -> None:
    host = {key: value for key, value in HOST.items() if key != "gpu_memory_bytes"}
    fit = gpu_fit(document(linear(GiB, 3 * MiB), host=host))
    assert fit.largest_batch is None and fit.fit is not None
    assert "not recorded" in fit.reason
    assert fit.line().startswith("cuda:0 (torch, as-written): peak memory fixed 1 GiB + 3 MiB "
                                 "per sample")
    given = gpu_fit(document(linear(GiB, 3 * MiB), host=host), capacity_bytes=40 * GiB)
    assert given.largest_batch == (40 * GiB - GiB) // (3 * MiB)


def test_a_fixed_part_larger_than_the_gpu_fits_no_batch() -> None:
    fit = gpu_fit(document(linear(90 * GiB, MiB)))
    assert fit.largest_batch == 0
    assert "is none: the fixed part alone does not fit" in fit.line()


def test_sizes_run_largest_first_are_a_caveat() -> None:
    peaks = {128: GiB + 128 * MiB, 64: GiB + 64 * MiB, 32: GiB + 32 * MiB}
    fit = gpu_fit(document(peaks))
    assert fit.largest_batch is not None
    assert "did not run smallest first" in fit.line()


def test_only_batch_sweeps_are_fitted_and_unknown_cells_are_none() -> None:
    doc = document(linear(GiB, 3 * MiB))
    assert largest_batch_that_fits(doc, "jax", "cuda:0", "as-written") is None
    doc.sweep = "n"
    assert largest_batch_that_fits(doc, "torch", "cuda:0", "as-written") is None
    assert memory_fits(doc) == []


# --- against the predicted crossover -----------------------------------------------------------

def test_a_crossover_below_the_largest_batch_says_so() -> None:
    fit = gpu_fit(document(linear(GiB, 3 * MiB), [crossover_record(913.4)]))
    assert fit.crossover_below is True
    assert fit.line().endswith("; the predicted crossover (batch ~910) lies below it")


def test_a_crossover_above_the_largest_batch_says_the_gpu_cannot_win() -> None:
    fit = gpu_fit(document(linear(GiB, 3 * MiB), [crossover_record(41_700.0)]))
    assert fit.crossover_below is False
    assert fit.line().endswith("; the predicted crossover (batch ~42,000) lies above it: the GPU "
                               "cannot win below that batch")


def test_no_crossover_up_to_the_searched_batch_is_said_with_its_limit() -> None:
    # The predictor searched to 1000x the largest batch run (128): 128,000 > 26,624.
    fit = gpu_fit(document(linear(GiB, 3 * MiB), [crossover_record(None, "cpu-always")]))
    assert fit.crossover_below is False
    assert fit.line().endswith("; no crossover predicted up to batch 130,000: the GPU cannot win "
                               "below that batch")


def test_the_line_reads_as_the_issue_asks() -> None:
    fit = gpu_fit(document(linear(GiB, 3 * MiB), [crossover_record(913.4)]))
    assert fit.line() == (
        "cuda:0 (torch, as-written): the largest batch predicted to fit in 79 GiB (of 80 GiB) "
        "is ~26,600 (fixed 1 GiB + 3 MiB per sample, fitted over 3 sizes up to 128, largest "
        "residual 0 B); a floor, not the limit, where the framework trades workspace for "
        "memory near it (cuDNN convolutions: docs/methodology.md); the predicted crossover "
        "(batch ~910) lies below it")


# --- the memory the step must hold, preferred to the peak -------------------------------------

def test_the_memory_the_step_must_hold_is_preferred_and_the_peak_is_the_floor() -> None:
    # The peak carries 4x the step's per-sample bytes (a convolution's workspace while memory
    # is free): the prediction comes from the step, the peak's is printed as the floor.
    doc = document(linear(GiB, 4 * MiB), [crossover_record(913.4)],
                   required=linear(GiB // 2, MiB))
    fit = gpu_fit(doc)
    assert fit.basis == "required" and fit.fit is not None and fit.peak_fit is not None
    assert fit.fit.fixed_bytes == GiB // 2 and fit.fit.per_sample_bytes == MiB
    assert fit.peak_fit.per_sample_bytes == 4 * MiB
    room = GPU_TOTAL - DEVICE_RESERVE_BYTES
    assert fit.largest_batch == (room - GiB // 2) // MiB  # 80,384
    assert fit.peak_batch == (room - GiB) // (4 * MiB)  # 19,968
    assert [point.peak_bytes for point in fit.points] == [GiB // 2 + MiB * b for b in BATCHES]
    assert fit.line() == (
        "cuda:0 (torch, as-written): the largest batch predicted to fit in 79 GiB (of 80 GiB) "
        "is ~80,300 (fixed 512 MiB + 1 MiB per sample, fitted over 3 sizes up to 128, largest "
        f"residual 0 B); {REQUIRED_BASIS}; the measured peak, the libraries' workspace "
        "included, gives ~19,900 (fixed 1 GiB + 4 MiB per sample): a floor; the predicted "
        "crossover (batch ~910) lies below it")


def test_one_size_of_step_memory_leaves_the_peak_as_the_prediction() -> None:
    fit = gpu_fit(document(linear(GiB, 3 * MiB), required={128: GiB + 128 * MiB}))
    assert fit.basis == "peak" and fit.largest_batch == 26_624
    assert REQUIRED_BASIS not in fit.line() and "a floor, not the limit" in fit.line()


def test_step_memory_without_the_gpus_total_says_so() -> None:
    host = {key: value for key, value in HOST.items() if key != "gpu_memory_bytes"}
    fit = gpu_fit(document(linear(GiB, 4 * MiB), host=host, required=linear(GiB, MiB)))
    assert fit.largest_batch is None and "not recorded" in fit.reason
    assert fit.line().startswith("cuda:0 (torch, as-written): required memory fixed 1 GiB + "
                                 "1 MiB per sample")


# --- the host ----------------------------------------------------------------------------------

def test_a_host_peak_per_case_is_fitted_against_the_hosts_ram() -> None:
    doc = document(linear(GiB, 3 * MiB), host_peaks=linear(600 * MiB, 2 * MiB))
    fit = largest_batch_that_fits(doc, "torch", "cpu", "as-written")
    assert fit is not None and fit.memory == "host" and fit.fit is not None
    assert fit.fit.per_sample_bytes == 2 * MiB
    assert fit.largest_batch == (64 * GiB - 600 * MiB) // (2 * MiB)
    assert fit.crossover_clause() == ""  # the crossover is the GPU's question


def test_one_rss_per_cell_is_not_fitted_and_cpu_cells_stay_quiet() -> None:
    doc = document(linear(GiB, 3 * MiB))
    fit = largest_batch_that_fits(doc, "torch", "cpu", "as-written")
    assert fit is not None and fit.largest_batch is None
    assert "one figure per cell" in fit.reason
    assert [fit.line().split(":")[0] for fit in memory_fits(doc) if shown(fit)] == ["cuda"]


# --- printed and recomputed --------------------------------------------------------------------

def fitted_run_dir(folder: Path, required: Mapping[int, float] | None = None) -> Path:
    """A run folder whose GPU cell fits exactly, with a stored crossover, and its report."""
    from harness.report import render_report

    run_dir = write_run(folder, results(linear(GiB, 3 * MiB), required=required), HOST,
                        {"batch": BATCHES}, workload="jacobian", sweep="batch",
                        work=lambda case: {},
                        extra_doc={"predictions": [crossover_record(913.4)]})
    render_report([run_dir], run_dir)
    return run_dir


@pytest.fixture
def fitted_run(tmp_path: Path) -> Path:
    return fitted_run_dir(tmp_path / "run")


def fit_mismatches(run_dir: Path) -> tuple[list[str], list[str]]:
    audit = audit_run(run_dir)
    return ([m.line() for m in audit.mismatches if m.figure.startswith("memory fit")],
            [u.line() for u in audit.unverifiable if u.figure.startswith("memory fit")])


def test_summary_and_terminal_print_the_fit_and_check_recomputes_it(fitted_run: Path) -> None:
    from harness.report import verdicts_without_drawing

    summary = (fitted_run / "summary.md").read_text()
    bullet = "- Memory fit (run `run`): cuda:0 (torch): the largest batch predicted to fit"
    assert bullet in summary
    terminal = [line.text for line in verdicts_without_drawing([fitted_run])]
    # The terminal's line: the figures, how they were fitted left to summary.md and --details.
    assert "  memory: cuda:0 (torch): largest batch to fit in 79 GiB: ~26,600 (1 GiB + 3 MiB " \
           "per sample); a floor (workspace); the predicted crossover (batch ~910) lies below " \
           "it" in terminal
    assert fit_mismatches(fitted_run) == ([], [])


def test_the_short_line_keeps_the_figures_and_the_method_is_said_once() -> None:
    doc = document(linear(GiB, 4 * MiB), [crossover_record(913.4)],
                   required=linear(GiB // 2, MiB), host_peaks=linear(600 * MiB, 2 * MiB))
    fit = gpu_fit(doc)
    assert fit.short_line() == (
        "cuda:0 (torch, as-written): largest batch to fit in 79 GiB: ~80,300 (512 MiB + 1 MiB "
        "per sample), the allocator's peak ~19,900: a floor; the predicted crossover (batch "
        "~910) lies below it")
    assert len(fit.short_line()) < len(fit.line()) / 2
    # The run's lines name the cell without its variant (the run has one).
    assert memory_terminal_lines(doc)[1] == fit.short_line().replace(", as-written", "")
    # Both cells were fitted over the same sizes with no residual: said once, then each
    # cell's basis and capacity.
    assert memory_method_lines(doc) == [
        "memory fits, every cell: fitted over 3 sizes up to 128; largest residual 0 B",
        "memory fit, cpu (torch): fitted: the worker's peak RSS per case; against "
        "64 GiB of RAM",
        "memory fit, cuda:0 (torch): fitted: the memory each case's step must "
        "hold (measured tensor by tensor); against 79 GiB (of 80 GiB); the allocator's peak "
        "(the libraries' workspace included): fixed 1 GiB + 4 MiB per sample"]


@pytest.mark.parametrize("printed, changed, figure", [
    ("is ~26,600", "is ~30,000", "memory fit: largest batch"),
    ("+ 3 MiB per sample", "+ 3.5 MiB per sample", "memory fit: per sample"),
    ("(batch ~910) lies below", "(batch ~1,900) lies below", "memory fit: predicted crossover"),
])
def test_a_changed_memory_fit_figure_is_named(fitted_run: Path, printed: str, changed: str,
                                              figure: str) -> None:
    summary = fitted_run / "summary.md"
    text = summary.read_text()
    assert printed in text
    summary.write_text(text.replace(printed, changed))
    mismatches, _ = fit_mismatches(fitted_run)
    assert len(mismatches) == 1 and f": {figure} printed" in mismatches[0]


def test_check_refits_the_step_memory_where_the_line_is_based_on_it(tmp_path: Path) -> None:
    run_dir = fitted_run_dir(tmp_path / "run", required=linear(GiB // 2, MiB))
    summary = run_dir / "summary.md"
    text = summary.read_text()
    assert "is ~80,300 (fixed 512 MiB + 1 MiB per sample" in text and REQUIRED_BASIS in text
    assert fit_mismatches(run_dir) == ([], [])
    # A per-sample figure that is the peak's, not the step's, is named.
    summary.write_text(text.replace("+ 1 MiB per sample, fitted", "+ 3 MiB per sample, fitted"))
    mismatches, _ = fit_mismatches(run_dir)
    assert len(mismatches) == 1 and ": memory fit: per sample printed" in mismatches[0]


# --- a real run through the workers ------------------------------------------------------------

TINY_TORCH = """
    import numpy as np
    import torch.nn as nn

    def model():
        return nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 4))

    def inputs(batch, rng):
        return rng.standard_normal((batch, 64), dtype=np.float32)
"""


def compare_tiny_on_cpu(tmp_path: Path, sizes: str) -> Path:
    """`harness compare` of TINY_TORCH on the CPU (torch, --quick) at SIZES: its run folder."""
    model = tmp_path / "tiny.py"
    model.write_text(textwrap.dedent(TINY_TORCH))
    # In this process: its torch workers fork from the session's warm processes.
    ran = run_cli_in_process("compare", "--model", str(model), "--device", "cpu", "--framework",
                             "torch", "--sizes", sizes, "--quick", "--no-ceilings", "--no-report",
                             "--out", str(tmp_path / "out"), env={"OMP_NUM_THREADS": "1"})
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return next((tmp_path / "out").glob("*/run.json")).parent


@pytest.mark.slow  # real framework workers
def test_a_real_cpu_run_records_what_the_host_fit_can_use(tmp_path: Path) -> None:
    run_dir = compare_tiny_on_cpu(tmp_path, "64,4096,16384")
    doc = load_run(run_dir)
    fit = largest_batch_that_fits(doc, "torch", "cpu", "as-written")
    assert fit is not None and fit.memory == "host"
    assert fit.capacity_bytes == json.loads((run_dir / "run.json").read_text())["host"][
        "memory_bytes"]
    cell = next(cell for cell in doc.cells if cell.device == "cpu")
    # Each case's own host peak (Linux: VmHWM reset before the case), growing with the batch:
    # 16,384 x (64 inputs + 256 + 256 activations and their gradients) floats is tens of MiB.
    per_case = [case.extra.get(HOST_CASE_FIGURE) for case in cell.cases]
    assert all(per_case) and per_case[-1] > per_case[0], per_case
    assert fit.fit is not None and fit.fit.per_sample_bytes > 0
    assert fit.largest_batch is not None and fit.largest_batch > 16384


def test_the_run_records_each_visible_gpus_total_memory(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """host_metadata's gpu_memory_bytes, the fit's capacity: nvidia-smi's memory.total (MiB)
    for each GPU CUDA_VISIBLE_DEVICES leaves visible, in that order."""
    from harness.measure import envinfo

    fake = tmp_path / "nvidia-smi"
    fake.write_text('#!/bin/sh\ncase "$1" in\n'
                    '  --query-gpu=memory.total) printf "81559 MiB\\n143771 MiB\\n" ;;\n'
                    '  --query-gpu=name) printf "NVIDIA H100 80GB HBM3\\nNVIDIA H200\\n" ;;\n'
                    'esac\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert envinfo.host_metadata()["gpu_memory_bytes"] == [81559 * 2**20, 143771 * 2**20]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    host = envinfo.host_metadata()
    assert host["gpus"] == ["NVIDIA H200"] and host["gpu_memory_bytes"] == [143771 * 2**20]


# TINY_TORCH's two-layer MLP: every byte of its step can be counted by hand.
MLP_PARAMETER_BYTES = 4 * (64 * 256 + 256 + 256 * 4 + 4)  # 70,672


@pytest.mark.slow  # real framework workers
def test_a_torch_step_must_hold_what_is_counted_by_hand(tmp_path: Path) -> None:
    run_dir = compare_tiny_on_cpu(tmp_path, "128,256,512")
    cell = next(cell for cell in load_run(run_dir).cells if cell.device == "cpu")
    for case in cell.cases:
        batch = case.case["batch"]
        parts = case.extra["required_device_parts"]
        assert parts == {
            "weights": MLP_PARAMETER_BYTES,
            "gradients": MLP_PARAMETER_BYTES,
            # Adam: exp_avg and exp_avg_sq per parameter, and a float32 step per tensor.
            "optimizer_state": 2 * MLP_PARAMETER_BYTES + 4 * 4,
            # Saved for backward: the input (64), tanh's output (256, also the second layer's
            # input: one storage), the output and the target (4 + 4), float32; the weights a
            # matmul saves are weights already.
            "saved_activations": 4 * (64 + 256 + 4 + 4) * batch,
            # The largest op output: a 256-wide activation (or its gradient), above the
            # largest non-batch one (a 64x256 weight's gradient, 65,536 bytes) from batch 128.
            "largest_transient": 4 * 256 * batch,
        }, (batch, parts)
        assert case.extra[REQUIRED_CASE_FIGURE] == sum(parts.values())
    # Exactly linear in the batch: 2,336 bytes per sample on 282,704 fixed.
    assert [case.extra[REQUIRED_CASE_FIGURE] for case in cell.cases] == [
        282_704 + 2_336 * batch for batch in (128, 256, 512)]


def test_a_reworded_memory_fit_line_has_every_figure_checked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bullet and the fit's sentence in other words: each figure is still checked from its
    record (harness.report.views.memory FIT_FAMILY), the words never read."""
    from harness.analysis import memoryfit
    from harness.core.units import format_bytes
    from harness.report.figure import FIGURES_FILE
    from harness.report.views import memory

    def reworded(fit: memoryfit.MemoryFit) -> str:
        line, place = fit.fit, fit.crossover
        assert line is not None and fit.largest_batch is not None and place is not None
        return (f"{fit.label} holds up to {memoryfit.batch_text(fit.largest_batch)} samples in "
                f"{format_bytes(fit.capacity_bytes or 0)}: "
                f"{format_bytes(line.fixed_bytes)} and {format_bytes(line.per_sample_bytes)} "
                f"a sample over {line.sizes} batches to {int(line.largest_size):,} (off by "
                f"{format_bytes(abs(line.max_residual_bytes or 0))}); GPU wins from "
                f"{memoryfit.two_digits(place.batch)}, "
                f"{'below' if fit.crossover_below else 'above'} that")

    monkeypatch.setattr(memory, "FIT_BULLET", "- Fits, {run}: {line}")
    monkeypatch.setattr(memoryfit.MemoryFit, "line", reworded)
    run_dir = fitted_run_dir(tmp_path / "run")
    text = (run_dir / "summary.md").read_text()
    assert "Memory fit" not in text and "holds up to 26,600 samples in 79 GiB" in text
    assert fit_mismatches(run_dir) == ([], [])
    stored = json.loads((run_dir / FIGURES_FILE).read_text())
    records = [record for record in stored["figures"] if record["family"] == memory.FIT_FAMILY]
    assert {record["name"] for record in records} == {
        memory.SIZES, memory.LARGEST_SIZE, memory.FIXED, memory.PER_SAMPLE, memory.RESIDUAL,
        memory.CAPACITY, memory.LARGEST_BATCH, memory.CROSSOVER, memory.SIDE}
    checked = audit_run(run_dir).checked
    stored["figures"] = [record for record in stored["figures"] if record not in records]
    (run_dir / FIGURES_FILE).write_text(json.dumps(stored))
    assert checked - audit_run(run_dir).checked == len(records)
