"""benchmarks/gpu_summary.py reads GPU-shaped run documents and the hand readings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.run.runner import PROJECT_ROOT

SCRIPT = PROJECT_ROOT / "benchmarks" / "gpu_summary.py"


def gpu_case(batch: int, epoch_s: float, extra: dict, **fields) -> dict:
    return {"case": {"batch_size": batch}, "status": "ok", "samples": [epoch_s] * 3,
            "suspect": fields.pop("suspect", ""), "extra": {"steps_per_call": 100, **extra},
            **fields}


def write_run(folder: Path, name: str, document: dict) -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "run.json").write_text(json.dumps(document))


def test_summary_compares_harness_and_hand_and_names_every_section(tmp_path: Path) -> None:
    energy = {"energy": {"device": {
        "status": "ok", "joules_per_step": 0.11, "joules_per_step_above_idle": 0.05,
        "watts_mean": 200.0, "window_s": 2.0, "idle_watts": 80.0, "source": "the timed samples",
        "counter": "NVML total energy counter", "joules_per_call": 11.0}},
        "gpu_state": {"status": "ok", "before": {"temperature_c": 40}, "after": {},
                      "while_timed": {"polls": 4, "throttle_reasons": {}}, "suspect": ""}}
    graphs = {"cuda_graphs": {"captured": True, "graphs": 4, "skips": [], "graph_breaks": {}}}
    runs = tmp_path / "runs"
    write_run(runs, "energy", {"workload": "mnist-small", "sweep": "batch_size", "started": 1,
                               "cells": [{"cell": {"workload": "mnist-small",
                                                   "framework": "torch", "device": "cuda:0",
                                                   "variant": "preloaded"},
                                          "cases": [gpu_case(32, 0.05, energy)]}]})
    write_run(runs, "graphs", {"workload": "mnist-small", "sweep": "batch_size", "started": 2,
                               "cells": [{"cell": {"workload": "mnist-small", "framework": "torch",
                                                   "device": "cuda:0", "variant": variant},
                                          "cases": [gpu_case(32, seconds, graphs)]}
                                         for variant, seconds in (("reduce-overhead", 0.03),
                                                                  ("cuda-graph", 0.02))]})
    write_run(runs, "jax", {"workload": "mnist-small", "sweep": "batch_size", "started": 3,
                            "cells": [{"cell": {"workload": "mnist-small", "framework": "jax",
                                                "device": "cuda:0", "variant": "as-written"},
                                       "cases": [gpu_case(32, 0.04, {}, other_load={
                                           "other_cores": 0.1, "interrupt_cores": 0.3,
                                           "seconds": 3.0})]}]})
    from harness.workloads import mnist_ddp

    def ddp_case(processes: int, epoch_s: float, busy: float | None) -> dict:
        memory = mnist_ddp.device_memory_summary(
            [{"rank": rank, "allocated": 300 << 20, "reserved": 400 << 20}
             for rank in range(processes)])
        return {"case": {"processes": processes, "net": "small", "batch_size": 512},
                "status": "ok", "samples": [epoch_s] * 3,
                "peak_device_allocated_bytes": memory["allocated"],
                "peak_device_reserved_bytes": memory["reserved"],
                "extra": {"samples_per_call": 60000, "steps_per_call": 118 // processes,
                          "allreduce_share": 0.1, "accuracy": 0.95, "communication": "nccl",
                          "device_busy_share": busy, "device_memory": memory}}

    write_run(runs, "ddp", {"workload": "mnist-ddp", "started": 4,
                            "hints": mnist_ddp.SPEC.report.as_dict(),
                            "cells": [{"cell": {"workload": "mnist-ddp", "framework": "torch",
                                                "device": "cuda:0", "variant": "preloaded"},
                                       "cases": [ddp_case(1, 0.203, 0.2),
                                                 ddp_case(2, 0.0867, None)]}]})
    hand = tmp_path / "hand"
    hand.mkdir()
    for loop, joules in (("harness", 0.1), ("own", 0.125)):
        (hand / f"hand-{loop}-small-32.json").write_text(json.dumps({
            "step_s": 0.0005, "j_per_step": joules, "watts_mean": 190.0,
            "j_per_step_above_idle": 0.05, "idle_w": 80.0}))
    completed = subprocess.run([sys.executable, str(SCRIPT), str(runs), str(hand)],
                               capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120)
    assert completed.returncode == 0, completed.stderr
    text = completed.stdout
    assert "harness 110 mJ/step" in text
    assert "harness +10.0% vs hand, the harness's loop" in text
    assert "harness -12.0% vs hand, own loop" in text
    assert "reduce-overhead 300 us/step, cuda-graph 200 us/step (1.50x" in text
    assert "CUDA graphs captured" in text
    assert "jax cuda:0 as-written batch 32: ok" in text and "SUSPECT: no" in text
    assert "scaling efficiency 117% (a host effect" in text
    assert "device peak allocated 300 MiB (max over ranks; sum 600 MiB" in text
