"""Run folders with known answers, written through harness.data.store: the one fixture builder.

Real timings are noisy; these are made up so every verdict is known in advance (B is 1.5x
slower, the GPU overtakes at n=256, one cell is invalid, ...). Two ways to describe the cells:
- `cell_result`: one framework's matmul cell from raw samples per size (diff, export, html);
- `make_result` + `make_case`: any workload's cell from a median and a spread (the report).
Both are written by `write_run`; `write_fixture_run` is `write_run` for a named machine.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.casetable import CaseRow
from harness.analysis.stats import cli_rows
from harness.data import store
from harness.data.results import CellResult, RunDocument
from harness.data.upgrade import as_run_document
from harness.spec import WorkloadSpec

HOST = {"machine_label": "box (cpu only)", "hostname": "box", "cpu_model": "Test CPU 9000",
        "cores": 2, "memory_bytes": 2**33, "python": "3.11.7", "gpus": [], "os": "Linux"}
GPU_MACHINE = "gpubox (NVIDIA H100 80GB HBM3)"
CPU_MACHINE = "laptop (cpu only)"
SIZES = [64, 256, 1024, 4096]


def matmul_work(case: dict[str, Any]) -> dict[str, float]:
    """2 n^3 FLOPs for a square matmul case; nothing for a case without n."""
    return {"flops": 2.0 * case["n"] ** 3} if "n" in case else {}


def write_run(run_dir: Path, results: list[dict[str, Any]], host: dict[str, Any] | None = None,
              params: dict[str, Any] | None = None, started: float = 1.8e9, *,
              workload: str = "matmul", sweep: str = "n",
              work: Callable[[dict[str, Any]], dict[str, float]] | None = None,
              extra_doc: dict[str, Any] | None = None) -> Path:
    """A complete run folder (run.json, measurements.csv and .parquet) for these results."""
    run_dir.mkdir(parents=True)
    host = host or HOST
    work = work or matmul_work
    # The documents here are hand-built in the first layout: typed through the upgrade code.
    document = as_run_document({
        "run_id": run_dir.name, "command": ["harness", "compare"], "started": started,
        "finished": started + 60, "workload": workload, "sweep": sweep,
        "params": params or {"n": [64, 128], "dtype": "float32"}, "quick": True, "host": host,
        "cells": results, **(extra_doc or {})})
    rows = []
    for result in document.cells:
        per_case = {index: work(case.case) for index, case in enumerate(result.cases)}
        rows += store.measurement_rows(run_dir.name, host["machine_label"], sweep, result, per_case)
    store.write_measurements(run_dir, rows)
    store.write_run(run_dir, document)
    return run_dir


def typed_result(result: dict[str, Any]) -> CellResult:
    """A cell result hand-built here (the first layout) typed through the upgrade code, as a
    stored run of that layout is read."""
    return as_run_document({"cells": [result]}).cells[0]


def cli_rows_of(spec: WorkloadSpec, *cells: CellResult) -> list[CaseRow]:
    """The CLI table's rows of a run of CELLS (harness.analysis.stats.cli_rows)."""
    return cli_rows(spec, RunDocument(workload=spec.name, sweep=spec.sweep, cells=list(cells)))


def rated_row(variant: str, device: str, gflops: float | None = None,
              gbps: float | None = None) -> CaseRow:
    """A timed torch case of 1 s per call whose counts give these rates (the CLI's flag)."""
    return CaseRow.of({"variant": variant, "framework": "torch", "device": device,
                       "status": "ok", "samples": 7, "call_median_s": 1.0,
                       "flops": None if gflops is None else gflops * 1e9,
                       "bytes": None if gbps is None else gbps * 1e9})


# --- raw samples per size --------------------------------------------------------------------

def cell_result(framework: str, samples_by_size: dict[int, list[float]], status: str = "ok",
                version: str = "2.13.0", variant: str = "fp32", device: str = "cpu",
                peak_rss: int | None = 200 * 2**20) -> dict[str, Any]:
    """One worker result of the matmul workload with the given warm samples per size."""
    cases = []
    for size, samples in samples_by_size.items():
        case: dict[str, Any] = {"case": {"n": size}, "status": status,
                                "reason": "" if status == "ok" else "injected",
                                "peak_device_allocated_bytes": None}
        if status == "ok":
            case.update(cold_seconds=samples[0] * 10, samples=samples, calls_per_sample=8,
                        check={"passed": True, "metric": "rel_error", "value": 1e-7})
        cases.append(case)
    return {"cell": {"workload": "matmul", "variant": variant, "framework": framework,
                     "device": device, "params": {"n": list(samples_by_size)}},
            "status": status, "reason": "" if status == "ok" else "injected",
            "framework_version": version, "device_name": "Test CPU 9000", "cases": cases,
            "peak_host_memory_bytes": peak_rss}


# --- cells from a median and a spread -------------------------------------------------------

def spread_samples(median: float, spread: float = 0.02) -> list[float]:
    """Five samples whose median is `median` and whose IQR/median is exactly `spread`."""
    return [median * (1 + spread * step) for step in (-1.0, -0.5, 0.0, 0.5, 1.0)]


def cpu_seconds(n: int) -> float:
    return 2.0 * n**3 / 100e9 + 2e-6  # 100 GFLOP/s plus 2 us per call


def gpu_seconds(n: int) -> float:
    return 2.0 * n**3 / 10e12 + 20e-6  # 10 TFLOP/s plus a 20 us launch/sync floor


def make_case(case: dict[str, Any], median: float | None, spread: float = 0.02,
              status: str = "ok", reason: str = "", passed: bool = True,
              extra: dict[str, Any] | None = None, cold: float | None = None,
              suspect: str = "") -> dict[str, Any]:
    if median is None:
        return {"case": case, "status": status, "reason": reason}
    made = {"case": case, "status": status, "reason": reason,
            "cold_seconds": cold if cold is not None else median * 50,
            "samples": spread_samples(median, spread), "calls_per_sample": 10,
            "check": {"passed": passed, "metric": "rel_error", "value": 1e-7 if passed else 0.5,
                      "bound": 1e-5, "detail": "synthetic"},
            "extra": extra or {}, "peak_device_memory_bytes": None}
    if suspect:
        made["suspect"] = suspect
    return made


def make_result(workload: str, framework: str, device: str, cases: list[dict[str, Any]],
                variant: str = "fp32", status: str = "ok", reason: str = "",
                params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"cell": {"workload": workload, "variant": variant, "framework": framework,
                     "device": device, "params": params or {}, "quick": True},
            "status": status, "reason": reason, "framework_version": f"{framework}-9.9",
            "device_name": "Synthetic GPU" if device != "cpu" else "Synthetic CPU",
            "cases": cases}


def write_fixture_run(run_dir: Path, machine: str, results: list[dict[str, Any]],
                      workload: str = "matmul", sweep: str = "n",
                      params: dict[str, Any] | None = None,
                      work: Any = None, extra_doc: dict[str, Any] | None = None) -> Path:
    """A run folder as `harness compare` writes it on MACHINE, from worker-result documents."""
    params = params or {sweep: SIZES}
    for result in results:
        result["cell"]["params"] = params
    host = {"hostname": machine.split()[0], "machine_label": machine, "cpu_model": "Synth",
            "cores": 8, "memory_bytes": 16 * 2**30, "os": "Linux", "python": "3.11",
            "gpus": ["NVIDIA H100 80GB HBM3"] if "H100" in machine else []}
    return write_run(run_dir, results, host, params, started=1.0e9, workload=workload,
                     sweep=sweep, work=work, extra_doc={"interrupted": False, **(extra_doc or {})})


def gpu_machine_results() -> list[dict[str, Any]]:
    """torch and tensorflow on cpu and cuda, numpy on cpu; one noisy, one invalid, one error,
    one unavailable cell. The invalid case (tensorflow cuda:0 at 4096) reads twice as fast as
    the fastest valid one, so a verdict that let it count would change."""
    def sweep_cases(seconds: Any, spread: float = 0.02) -> list[dict[str, Any]]:
        return [make_case({"n": n}, seconds(n), spread) for n in SIZES]

    tensorflow_gpu = sweep_cases(lambda n: gpu_seconds(n) * 1.5)
    tensorflow_gpu[-1] = make_case({"n": 4096}, gpu_seconds(4096) / 2, status="invalid",
                                   reason="check failed: relative error 5e-01", passed=False)
    return [
        make_result("matmul", "torch", "cpu", sweep_cases(cpu_seconds)),
        make_result("matmul", "torch", "cuda:0", sweep_cases(gpu_seconds)),
        make_result("matmul", "tensorflow", "cpu", sweep_cases(cpu_seconds, spread=0.4)),
        make_result("matmul", "tensorflow", "cuda:0", tensorflow_gpu, status="invalid",
                    reason="check failed: relative error 5e-01"),
        make_result("matmul", "numpy", "cpu", [], status="error",
                    reason="RuntimeError: synthetic crash"),
        make_result("matmul", "numpy", "cuda:0", [], status="unavailable",
                    reason="numpy runs on the cpu only, not cuda:0"),
    ]


def cpu_machine_results() -> list[dict[str, Any]]:
    return [
        make_result("matmul", "torch", "cpu",
                    [make_case({"n": n}, cpu_seconds(n) * 3) for n in SIZES]),
        make_result("matmul", "torch", "cuda:0", [], status="unavailable",
                    reason="torch sees no CUDA device (a CPU-only build)"),
        make_result("matmul", "numpy", "cpu",
                    [make_case({"n": n}, cpu_seconds(n) * 2) for n in SIZES]),
    ]


def stats_of(*run_dirs: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-case statistics and per-cell statuses of stored runs, as the report computes them."""
    from harness.analysis import casetable
    from harness.report.load import load_runs

    run_set = load_runs(list(run_dirs))
    runs = casetable.assign_experiments(run_set.runs)
    prepared, _ = casetable.prepare(run_set.measurements, runs)
    return casetable.case_stats(prepared), casetable.cell_status(prepared)


def save_predictions(run_dir: Path) -> list[dict[str, Any]] | None:
    """What every run adds when it ends (harness.api.add_crossover_predictions), for a stored
    folder: run.json written only where they differ from what it holds."""
    from harness.api import add_crossover_predictions
    from harness.data.measurements import read_measurements

    document = store.load_run(run_dir)
    before = list(document.predictions)
    found = add_crossover_predictions(document, read_measurements(run_dir),
                                      document.run_id or run_dir.name)
    if found is not None and found != before:
        store.write_run(run_dir, document)
    return found
