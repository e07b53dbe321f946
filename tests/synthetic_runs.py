"""Run folders written through harness.data.store from made-up samples, for diff and export tests.

Real timings are noisy; these have known answers (B is 1.5x slower, a version differs, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.data import store

HOST = {"machine_label": "box (cpu only)", "hostname": "box", "cpu_model": "Test CPU 9000",
        "cores": 2, "memory_bytes": 2**33, "python": "3.11.7", "gpus": [], "os": "Linux"}


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


def write_run(run_dir: Path, results: list[dict[str, Any]], host: dict[str, Any] | None = None,
              params: dict[str, Any] | None = None, started: float = 1.8e9) -> Path:
    """A complete run folder (run.json, measurements.csv and .parquet) for these results."""
    run_dir.mkdir(parents=True)
    host = host or HOST
    rows = []
    for result in results:
        work = {index: {"flops": 2.0 * case["case"]["n"] ** 3}
                for index, case in enumerate(result["cases"])}
        rows += store.case_rows(run_dir.name, host["machine_label"], "n", result, work)
    store.write_measurements(run_dir, rows)
    store.write_run(run_dir, {"run_id": run_dir.name, "command": ["harness", "compare"],
                              "started": started, "finished": started + 60,
                              "workload": "matmul", "sweep": "n",
                              "params": params or {"n": [64, 128], "dtype": "float32"},
                              "quick": True, "host": host, "cells": results})
    return run_dir
